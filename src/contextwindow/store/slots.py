"""A state slot: one small persisted record (calibration, the request anchor) and where it lives.

Calibration and anchors persist one JSON-like record each per (model, connection). They talk to a
:class:`StateSlot`, not to a store, so the ledger can back them (its ``session.record(kind, payload)``
/ ``session.latest(kind)`` fit this protocol through a thin adapter) and tests can use
:class:`MemorySlot`. ``load`` returns the newest saved record or ``None``; ``save`` replaces it.
Records are plain mappings of JSON values; a slot stores a copy so later changes by the caller do
not leak in.

:class:`LedgerSlot` keeps a record as entries of one kind in the session's append-only ledger
(``session.record(kind, payload)``, read back with ``session.latest(kind)``), so a reopened session —
or a new engine on it — finds the newest one, and every earlier record stays for inspection. With
``match``, a record is written with those keys and only the newest entry carrying them is read
(calibration is kept per model and connection); without it the newest entry of the kind decides.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ._ledger import Session

__all__ = ["LedgerSlot", "MemorySlot", "StateSlot"]


@runtime_checkable
class StateSlot(Protocol):
    """Where one persisted record lives. ``save`` may raise ``StoreError``; callers decide if that is fatal."""

    def load(self) -> Mapping[str, Any] | None:
        """The newest saved record, or ``None`` when nothing was saved."""
        ...

    def save(self, record: Mapping[str, Any]) -> None:
        """Persist ``record`` as the newest; earlier records may be kept as history."""
        ...


class MemorySlot:
    """An in-memory :class:`StateSlot` that keeps every saved record, newest last, in ``history``."""

    def __init__(self, initial: Mapping[str, Any] | None = None) -> None:
        self.history: list[dict[str, Any]] = []
        if initial is not None:
            self.history.append(copy.deepcopy(dict(initial)))

    def load(self) -> Mapping[str, Any] | None:
        return copy.deepcopy(self.history[-1]) if self.history else None

    def save(self, record: Mapping[str, Any]) -> None:
        self.history.append(copy.deepcopy(dict(record)))


_MATCH_KEY = "slot"


class LedgerSlot:
    """``LedgerSlot(session, "calibration", match={"model": m, "connection": c})``."""

    def __init__(self, session: Session, kind: str, *, match: Mapping[str, str] | None = None) -> None:
        self.session = session
        self.kind = kind
        self.match = dict(match) if match else None

    def load(self) -> Mapping[str, Any] | None:
        if self.match is None:
            entry = self.session.latest(self.kind)
            return None if entry is None else dict(entry.payload)
        for entry in reversed(self.session.entries([self.kind])):
            if entry.payload.get(_MATCH_KEY) == self.match:
                record = dict(entry.payload)
                record.pop(_MATCH_KEY)
                return record
        return None

    def save(self, record: Mapping[str, Any]) -> None:
        payload = dict(record)
        if self.match is not None:
            payload[_MATCH_KEY] = self.match
        self.session.record(self.kind, payload)
