"""Request anchors: the provider's real count of the last accepted request, and estimates made from it.

An :class:`Anchor` is ``{input_tokens, output_tokens, payload_estimate}`` of the last request the
provider accepted, for one (model, connection). The next request's size is then the anchor's real
input plus the *signed* change of the local estimate since (``docs/concepts.md``, "Usage anchor"):
only what changed is estimated, so the estimator's error applies to the delta, not to the whole
window.

Cold start (the plain estimate, with the reason) when there is no anchor, when the newest anchor is
for another model or connection (no fallback to an older anchor: the newest anchor decides), when
the anchor has no payload estimate (half an anchor, e.g. a record in maka's retired ``payloadChars``
shape), when the delta is wider than the whole payload now (a compaction or a
restart changed what is sent, not appended to it), or when the anchored figure would be negative.

Record validation follows maka's ``isLastRequestAnchor``:
``input_tokens > 0`` is required, ``output_tokens ≥ 0`` if present, the retired
``payloadChars`` still decodes (and is dropped), and any unknown key makes the whole record invalid.
maka's camelCase spellings (``inputTokens``, ``outputTokens``, ``modelId``, ``connectionId``) decode
as aliases of the snake_case fields.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput
from ..limits import check_count
from ..store.slots import StateSlot

__all__ = ["Anchor", "AnchorBook", "AnchoredEstimate", "anchored_estimate", "newest_anchor"]

ANCHOR_RECORD_VERSION = 1
"""Version of the persisted anchor record; a newer one is refused as written by a newer library."""

# canonical key -> accepted spellings (maka's record shape is the alias)
_FIELDS: dict[str, tuple[str, ...]] = {
    "model": ("model", "modelId"),
    "connection": ("connection", "connectionId"),
    "input_tokens": ("input_tokens", "inputTokens"),
    "output_tokens": ("output_tokens", "outputTokens"),
    "payload_estimate": ("payload_estimate",),
    "version": ("version",),
}
_RETIRED = ("payloadChars",)
"""maka's first anchor field ``payloadChars`` (a character count): accepted and dropped, as maka's
second anchor shape does."""


def _int(value: Any, path: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"must be an integer, got {type(value).__name__}", path=path)
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise InvalidInput(f"must be a whole number, got {value!r}", path=path)
    if value < minimum:
        raise InvalidInput(f"must be ≥ {minimum}, got {value}", path=path)
    return check_count(value, path=path)  # and within limits.MAX_TOKENS


def _name(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput("must be a non-empty string", path=path)
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Anchor:
    """The provider's counts of the last accepted request, with the local estimate of its payload."""

    model: str
    connection: str
    input_tokens: int
    """The request's whole prompt as the provider counted it (``Usage.prompt``); > 0."""
    output_tokens: int | None = None
    """The reply's output as counted, ≥ 0, when known."""
    payload_estimate: int | None = None
    """The local estimate of that same request, in the units ``estimate_now`` will be given in.
    ``None`` is half an anchor: it still gives a baseline, never an anchored estimate."""

    def __post_init__(self) -> None:
        _name(self.model, "anchor.model")
        _name(self.connection, "anchor.connection")
        _int(self.input_tokens, "anchor.input_tokens", minimum=1)
        if self.output_tokens is not None:
            _int(self.output_tokens, "anchor.output_tokens", minimum=0)
        if self.payload_estimate is not None:
            _int(self.payload_estimate, "anchor.payload_estimate", minimum=0)

    @property
    def baseline(self) -> int:
        """Input + output of the anchored request: the size the next request starts from (the baseline)."""
        return self.input_tokens + (self.output_tokens or 0)

    def to_record(self) -> dict[str, Any]:
        """The persisted shape (snake_case, versioned); :meth:`from_record` reads it back."""
        record: dict[str, Any] = {
            "version": ANCHOR_RECORD_VERSION,
            "model": self.model,
            "connection": self.connection,
            "input_tokens": self.input_tokens,
        }
        if self.output_tokens is not None:
            record["output_tokens"] = self.output_tokens
        if self.payload_estimate is not None:
            record["payload_estimate"] = self.payload_estimate
        return record

    @classmethod
    def from_record(
        cls,
        record: Mapping[str, Any],
        *,
        model: str | None = None,
        connection: str | None = None,
        path: str = "anchor",
    ) -> Anchor:
        """Decode a persisted anchor; any invalid part makes the whole record ``InvalidInput``.

        ``model`` and ``connection`` fill in for a record that does not carry them (maka's anchors
        ride on a usage row that does).
        """
        if not isinstance(record, Mapping):
            raise InvalidInput(f"an anchor record must be a mapping, got {type(record).__name__}", path=path)
        alias = {spelling: canon for canon, spellings in _FIELDS.items() for spelling in spellings}
        values: dict[str, Any] = {}
        where: dict[str, str] = {}  # canonical field -> the path of the key as the record spells it
        for key, value in record.items():
            if key in _RETIRED:
                _int(value, f"{path}.{key}", minimum=0)
                continue
            canon = alias.get(key)
            if canon is None:
                raise InvalidInput(
                    f"unknown anchor key {key!r}; the whole record is invalid", path=f"{path}.{key}"
                )
            if canon in values:
                raise InvalidInput(f"{canon} is given twice (as {key!r} too)", path=f"{path}.{key}")
            values[canon], where[canon] = value, f"{path}.{key}"
        version = values.pop("version", ANCHOR_RECORD_VERSION)
        if _int(version, f"{path}.version", minimum=1) > ANCHOR_RECORD_VERSION:
            raise InvalidInput(
                f"anchor record version {version} is newer than this library reads ({ANCHOR_RECORD_VERSION})",
                path=f"{path}.version",
            )
        if "input_tokens" not in values:
            raise InvalidInput("input_tokens is required", path=f"{path}.input_tokens")
        out = values.get("output_tokens")
        payload = values.get("payload_estimate")
        return cls(
            model=_name(values.get("model", model), where.get("model", f"{path}.model")),
            connection=_name(
                values.get("connection", connection), where.get("connection", f"{path}.connection")
            ),
            input_tokens=_int(values["input_tokens"], where["input_tokens"], minimum=1),
            output_tokens=None if out is None else _int(out, where["output_tokens"], minimum=0),
            payload_estimate=None if payload is None else _int(payload, where["payload_estimate"], minimum=0),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class AnchoredEstimate:
    """An estimate of the next request: anchored on real usage, or cold with the reason why."""

    value: int
    cold: bool
    reason: str | None = None
    """Why the estimate is cold; ``None`` when anchored."""
    delta: int | None = None
    """``estimate_now − payload_estimate`` when anchored."""


def anchored_estimate(
    anchor: Anchor | None, *, model: str, connection: str, estimate_now: int
) -> AnchoredEstimate:
    """``anchor.input_tokens + (estimate_now − anchor.payload_estimate)``, or ``estimate_now`` when cold;
    a shrunk request (negative delta) at least ``estimate_now``.

    ``estimate_now`` must be in the same units as the anchor's ``payload_estimate`` (the same
    estimator at the same multiplier), or the delta carries the change of units over the whole payload.
    """
    now = _int(estimate_now, "estimate_now", minimum=0)

    def cold(reason: str) -> AnchoredEstimate:
        return AnchoredEstimate(value=now, cold=True, reason=reason)

    if anchor is None:
        return cold("no anchor: no request has been accepted yet on this route")
    if anchor.model != model:
        return cold(f"the newest anchor is for model {anchor.model!r}, not {model!r}")
    if anchor.connection != connection:
        return cold(f"the newest anchor is for connection {anchor.connection!r}, not {connection!r}")
    if anchor.payload_estimate is None:
        return cold("half an anchor: it has no payload estimate")
    delta = now - anchor.payload_estimate
    if abs(delta) > now:
        return cold(
            f"the delta ({delta:+d}) is wider than the whole payload ({now}); the request was rebuilt"
        )
    value = anchor.input_tokens + delta
    if value < 0:
        return cold(f"the anchored figure would be negative ({value})")
    if delta < 0:
        # What was taken out is priced by the estimator, whose units are not the provider's: where it
        # prices high (a tokenizer the rule overcounts, a document's flat rate, thinking priced by its
        # signature), subtracting it leaves the figure under the real count (-48% after folds, -18%
        # after an evicted document, on real and generated sessions). A shrunk request is never put
        # below its own estimate. (Its estimate at the anchor's ratio is no floor: under 1, the part
        # that erred high may be the part taken out, and the counts alone cannot tell that from a
        # payload that erred high throughout; over 1, the anchored figure is already above it.)
        value = max(value, now)
    return AnchoredEstimate(value=value, cold=False, delta=delta)


def newest_anchor(anchors: Iterable[Anchor | None]) -> Anchor | None:
    """The newest anchor in a history oldest-first; entries without one (``None``) are skipped.

    No fallback: the newest anchor decides even when it is for another model (as maka's reverse scan
    does), so a caller comparing it with its route gets a cold start rather than a stale anchor.
    """
    found: Anchor | None = None
    for anchor in anchors:
        if anchor is not None:
            found = anchor
    return found


class AnchorBook:
    """The newest anchor for a session, persisted through a :class:`~contextwindow.store.slots.StateSlot`.

    The newest anchor decides for every (model, connection): a request on another route is a cold
    start, not a lookup of an older anchor. Overflow recovery :meth:`clear`\\ s it. A stored record that
    does not decode is not fatal: the book starts cold and says why in :attr:`load_error`.
    """

    def __init__(self, slot: StateSlot | None = None) -> None:
        self._slot = slot
        self.latest: Anchor | None = None
        self.load_error: str | None = None
        self.cleared: str | None = None
        saved = slot.load() if slot is not None else None
        if saved is not None:
            try:
                inner = saved.get("anchor") if isinstance(saved, Mapping) else None
                if isinstance(saved, Mapping) and saved.get("cleared") is not None:
                    self.cleared = str(saved["cleared"])
                self.latest = None if inner is None else Anchor.from_record(inner)
            except InvalidInput as err:
                self.load_error = str(err)

    def record(self, anchor: Anchor) -> None:
        """Make ``anchor`` the newest (after the provider accepted its request) and persist it."""
        self.latest = anchor
        self.cleared = None
        self.load_error = None
        if self._slot is not None:
            self._slot.save({"version": ANCHOR_RECORD_VERSION, "anchor": anchor.to_record()})

    def clear(self, reason: str) -> None:
        """Drop the anchor (e.g. after an overflow recovery rebuilt the request) and persist that."""
        self.latest = None
        self.cleared = reason
        if self._slot is not None:
            self._slot.save({"version": ANCHOR_RECORD_VERSION, "anchor": None, "cleared": reason})

    def estimate(self, *, model: str, connection: str, estimate_now: int) -> AnchoredEstimate:
        """:func:`anchored_estimate` on the newest anchor, with the book's own reason when it has none."""
        result = anchored_estimate(self.latest, model=model, connection=connection, estimate_now=estimate_now)
        if self.latest is None and (self.load_error or self.cleared):
            why = (
                f"stored anchor invalid: {self.load_error}"
                if self.load_error
                else f"anchor cleared: {self.cleared}"
            )
            return AnchoredEstimate(value=result.value, cold=True, reason=why)
        return result
