"""Compile policy: every knob that decides what the next request holds, with its default and source.

A :class:`Policy` is a frozen value, part of what makes a compile reproducible: the same ledger state,
profile, policy and calibration give a byte-identical request. ``0`` switches a limit off wherever the
projects the defaults come from use that convention (``maxLiveImages: 0`` = unlimited,
``imageStripDepthTokens: 0`` = off).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from ..errors import InvalidInput
from ..limits import MAX_BYTES, finite, shown

__all__ = ["MiB", "Policy"]

MiB = 1024 * 1024


def _check_int(name: str, value: object, *, minimum: int = 0, optional: bool = False) -> None:
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= MAX_BYTES:
        raise InvalidInput(
            f"must be an integer between {minimum} and {MAX_BYTES}, got {shown(value)}", path=f"policy.{name}"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """What compile may do to fit a request, and how far.

    Defaults come from the public projects each field names: context-manager
    (https://github.com/anima-research/context-manager), membrane (https://github.com/antra-tess/membrane),
    maka (https://github.com/apache/maka), flue (https://github.com/withastro/flue) and connectome-host
    (https://github.com/anima-research/connectome-host); the changes they came from are in
    ``docs/concepts.md``, "Sources".
    """

    output_reserve: int | None = None
    """Tokens kept free for the reply. ``None`` derives flue's reserve:
    ``min(20_000, profile.max_output_tokens)``, or ``max(1024, window // 3)`` when twice that would
    reach the window."""

    max_message_tokens: int | None = None
    """Per-message cap in context-manager's text-only chars/4 units (``maxMessageTokens``). ``0`` = no
    cap (context-manager's default); ``None`` derives half the budget, so one message can never crowd out the
    rest and the newest message always fits beside the head. connectome-host uses 10,000."""

    max_inline_images: int = 6
    """Images (and generated images) sent inline, newest first (context-manager ``maxLiveImages`` =
    6); 0 = no cap."""

    image_depth_tokens: int = 30_000
    """Media in messages deeper than this many tokens from the newest are not inline
    (context-manager ``imageStripDepthTokens`` = 30,000); 0 = off."""

    inline_media_bytes: int = 20 * MiB
    """Encoded (base64) bytes of inline media, decided from stored sizes before any byte is read
    (context-manager ``maxLiveImageBytes`` = 20 MiB of base64 characters; the byte budget withastro/flue
    asks for)."""

    media_hysteresis_ratio: float | None = None
    """When a media limit binds, trim to ``ratio × limit`` and persist a watermark, so the cached
    prefix survives several more images (context-manager ``imageStripHysteresisRatio``; off by default)."""

    cut_to_fill_below: float = 0.6
    """When the next-older unit does not fit the room left and the tail so far fills less than this
    share of the budget, that unit is cut to the room left (its messages under a lower per-message
    cap, marked and priced as they render) instead of being left out: one large message just past
    the newest ones would otherwise leave the request a sliver of the window, every message older
    than it left out too. Our own rule (``docs/concepts.md``, "Cut to fill"); 0 = off."""

    recent_turns_full: int = 2
    """The newest turns whose tool results are never archived (maka ``minRecentTurnsFull`` = 2)."""

    archive_text_over_tokens: int = 2048
    """An older text-only tool result over this price becomes an archive placeholder; one carrying
    media always does (maka ``maxResultEstimatedTokens`` = 2048; media always, as in maka's archive)."""

    archive_stale_results: bool = True
    """Archive stale tool results at all."""

    archive_as_needed: bool = False
    """Archive a stale result only where the tail walk needs the room: a unit whose stale results fit
    whole is taken whole, and one that does not fit has them archived (newest pressure first); the
    archives already recorded stay in force. Off: every stale candidate is archived (maka's rule).
    The engine's compiler turns it on (archive under pressure only)."""

    transport_max_bytes: int = 28 * MiB
    """The serialized request's byte wall (membrane ``DEFAULT_MAX_REQUEST_BYTES`` = 28 MiB); 0 = off."""

    shed_media_over_wall: bool = False
    """Over the byte wall, shed inline media oldest first instead of raising (membrane
    ``shedOversizeImages``)."""

    over_budget_grace_ratio: float = 0.02
    """Slack before the reserved head is declared over budget (context-manager
    ``overBudgetGraceRatio`` = 0.02)."""

    manifest_max_entries: int = 100
    """How many not-inline attachments the manifest lists by id (newest first); the rest are counted."""

    reread_tool: bool = True
    """The host offers the model the re-read tool (``read_archived``): the archive and media
    placeholders and the manifest tell it to call the tool with the id they name. ``False``: no tool
    can be offered, so they say what was left out (what it was, its size, its id) and name no tool."""

    def __post_init__(self) -> None:
        _check_int("output_reserve", self.output_reserve, optional=True)
        _check_int("max_message_tokens", self.max_message_tokens, optional=True)
        for name in (
            "max_inline_images",
            "image_depth_tokens",
            "inline_media_bytes",
            "recent_turns_full",
            "archive_text_over_tokens",
            "transport_max_bytes",
            "manifest_max_entries",
        ):
            _check_int(name, getattr(self, name))
        ratio = self.media_hysteresis_ratio
        if ratio is not None and (
            isinstance(ratio, bool)
            or not isinstance(ratio, int | float)
            or finite(ratio) is None
            or not 0 < ratio < 1
        ):
            raise InvalidInput(
                f"must be a number between 0 and 1 (exclusive), got {ratio!r}",
                path="policy.media_hysteresis_ratio",
            )
        share = self.cut_to_fill_below
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share < 1:
            raise InvalidInput(f"must be a number in [0, 1), got {share!r}", path="policy.cut_to_fill_below")
        grace = self.over_budget_grace_ratio
        if (
            isinstance(grace, bool)
            or not isinstance(grace, int | float)
            or finite(grace) is None
            or not 0 <= grace < 1
        ):
            raise InvalidInput(
                f"must be a number in [0, 1), got {grace!r}", path="policy.over_budget_grace_ratio"
            )

    def reserve_for(self, window: int, max_output_tokens: int) -> int:
        """The output reserve for a model: the policy's, or flue's derived reserve (``output_reserve``)."""
        if self.output_reserve is not None:
            return self.output_reserve
        reserve = min(20_000, max_output_tokens if max_output_tokens > 0 else 20_000)
        if reserve * 2 >= window:
            reserve = max(1024, window // 3)
        return reserve

    def message_cap_for(self, budget: int) -> int:
        """The per-message cap in chars/4 units; 0 = none."""
        if self.max_message_tokens is not None:
            return self.max_message_tokens
        return max(1, budget // 2)

    def with_(self, **changes: Any) -> Policy:
        """A copy with some fields changed (the same copy again for the same changes: the guard derives
        its policy this way on every call, and a policy is a value)."""
        try:
            # Each value's type is in the key: ``True == 1`` must not answer for a change to ``1``.
            return _changed(self, tuple((k, type(v), v) for k, v in changes.items()))
        except TypeError:  # a field (or a change) that cannot be hashed: made afresh
            return replace(self, **changes)


@lru_cache(maxsize=64)
def _changed(policy: Policy, changes: tuple[tuple[str, type, Any], ...]) -> Policy:
    return replace(policy, **{name: value for name, _, value in changes})
