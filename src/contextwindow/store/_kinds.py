"""The closed set of entry kinds, each payload's format version, and upgrades applied on read.

Every entry in a session is one of these kinds, appended in one total order:

=============  ======  ==========================================================================
kind           format  payload
=============  ======  ==========================================================================
``message``    1       ``{"message": <message_to_dict>, "block_prices": [float, ...] | null}``
                       (written only by ``Session.append``)
``usage``      1       a provider usage record (any JSON object)
``anchor``     1       the last accepted request's ``{input_tokens, output_tokens, ...}``
``calibration`` 1      a calibration record ``{multiplier, pricing, ...}``
``checkpoint`` 1       a compaction checkpoint: ``summary`` (str) and the covered range
                       ``first_id``/``last_id`` (message ids of this session, first not after
                       last), plus anything else the compactor keeps
``eviction``   1       an attachment-eviction record
``archive``    1       a tool-result archive record
``note``       1       a note for the host (any JSON object)
=============  ======  ==========================================================================

Payloads are JSON objects with string keys; numbers must be finite (NaN and infinities are refused
at the boundary, never stored). A payload written at an older format version is upgraded when read
by the functions in :data:`UPGRADES` (``UPGRADES[kind][v]`` turns format ``v`` into ``v + 1``); one
written by a newer library is refused with :class:`~contextwindow.errors.SchemaTooNew`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..errors import InvalidInput, SchemaTooNew
from ..limits import MAX_DOCUMENT_DEPTH, check_depth, shown

__all__ = [
    "ENTRY_KINDS",
    "FORMAT_VERSIONS",
    "ID_PREFIXES",
    "RECORD_KINDS",
    "UPGRADES",
    "canonical_json",
    "check_payload",
    "upgrade",
]

FORMAT_VERSIONS: Final[Mapping[str, int]] = {
    "message": 1,
    "usage": 1,
    "anchor": 1,
    "calibration": 1,
    "checkpoint": 1,
    "eviction": 1,
    "archive": 1,
    "note": 1,
}
"""Current format version of each kind's payload."""

ENTRY_KINDS: Final[frozenset[str]] = frozenset(FORMAT_VERSIONS)
"""Every kind an entry can have."""

RECORD_KINDS: Final[frozenset[str]] = ENTRY_KINDS - {"message"}
"""Kinds ``Session.record`` accepts (messages go through ``Session.append``)."""

ID_PREFIXES: Final[Mapping[str, str]] = {
    "message": "msg",
    "usage": "use",
    "anchor": "anc",
    "calibration": "cal",
    "checkpoint": "chk",
    "eviction": "evi",
    "archive": "arc",
    "note": "not",
}

Upgrade = Callable[[dict[str, Any]], dict[str, Any]]

UPGRADES: dict[str, dict[int, Upgrade]] = {kind: {} for kind in ENTRY_KINDS}
"""``UPGRADES[kind][v]`` upgrades a format-``v`` payload to ``v + 1``; append-only, like migrations."""


def upgrade(kind: str, version: int, payload: dict[str, Any]) -> dict[str, Any]:
    """A stored payload brought to the current format of its kind."""
    current = FORMAT_VERSIONS[kind]
    if version > current:
        raise SchemaTooNew(version, current)
    while version < current:
        payload = UPGRADES[kind][version](payload)
        version += 1
    return payload


def canonical_json(value: Any, *, path: str = "payload", sort_keys: bool = True) -> str:
    """Compact JSON with sorted keys (``sort_keys=False``: each object's keys in their own order); refuses
    NaN, infinities, non-string keys, non-JSON values, text that is not valid Unicode (a lone surrogate)
    and nesting past ``limits.MAX_DOCUMENT_DEPTH``, naming the field (``path`` is the prefix; ``""`` for
    none)."""
    if not _plain(value, MAX_DOCUMENT_DEPTH):
        # Not plainly JSON data of the builtin types: the walks that name the bad field (or accept a
        # Mapping, or a subclass of a JSON type, that the fast test does not vouch for).
        check_depth(value, path=path, limit=MAX_DOCUMENT_DEPTH)
        _check_json(value, path)
    text = json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # A lone surrogate cannot be stored as UTF-8 by any backend; refuse it at the door, at the
        # string that holds it (found only now, so valid text pays for one encode, not a walk).
        raise InvalidInput(
            f"contains text that is not valid Unicode ({exc.reason})", path=_bad_text(value, path) or None
        ) from None
    return text


def _child(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _bad_text(value: Any, path: str) -> str:
    """The path of the first string (or key) in ``value`` that does not encode as UTF-8."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return where
        elif isinstance(node, Mapping):
            for key, item in reversed(list(node.items())):
                stack.append((item, _child(where, key)))
                stack.append((key, where))
        elif isinstance(node, list | tuple):
            stack.extend((item, _child(where, i)) for i, item in reversed(list(enumerate(node))))
    return path


_LEAVES = (str, int, bool, type(None))


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` is JSON data of the builtin types alone (dicts with string keys, lists,
    tuples, strings, ints, booleans, ``None``, finite floats), nesting at most ``depth`` containers:
    what :func:`check_depth` and :func:`_check_json` accept, tested without making a path per field
    (they run only when this says no, to name the bad field). Recursion stops at ``depth``, so a
    value that contains itself is left to the iterative depth check."""
    kind = type(value)
    if kind in _LEAVES:
        return True
    if kind is float:
        return math.isfinite(value)
    if depth <= 0:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or (type(item) not in _LEAVES and not _plain(item, depth - 1)):
                return False
        return True
    if kind is list or kind is tuple:
        return all(type(item) in _LEAVES or _plain(item, depth - 1) for item in value)
    return False


def _check_json(value: Any, path: str) -> None:
    # Walk once to name the bad field; json.dumps alone would only say "not serializable". The depth
    # was checked first, so this recursion is bounded by limits.MAX_DEPTH.
    if value is None or isinstance(value, bool | str | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(f"must be a finite number, got {value!r}", path=path or None)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(f"keys must be strings, got {key!r}", path=path or None)
            _check_json(item, _child(path, key))
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_json(item, _child(path, index))
        return
    raise InvalidInput(f"is not JSON data: {type(value).__name__}", path=path or None)


def check_payload(kind: str, payload: object) -> dict[str, Any]:
    """A record payload checked for its kind: a JSON object (checkpoint: with summary and range)."""
    if not isinstance(kind, str) or kind not in RECORD_KINDS:
        allowed = ", ".join(sorted(RECORD_KINDS))
        hint = " (append messages with session.append)" if kind == "message" else ""
        raise InvalidInput(f"unknown entry kind {shown(kind)}; one of {allowed}{hint}", path="kind")
    if not isinstance(payload, Mapping):
        raise InvalidInput(f"must be a JSON object, got {type(payload).__name__}", path="payload")
    data = dict(payload)
    if kind == "checkpoint":
        if not isinstance(data.get("summary"), str):
            raise InvalidInput("a checkpoint needs a string summary", path="payload.summary")
        for key in ("first_id", "last_id"):
            if not isinstance(data.get(key), str):
                raise InvalidInput(
                    "a checkpoint needs the covered range as message ids", path=f"payload.{key}"
                )
    return data
