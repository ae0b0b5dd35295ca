"""A state slot: one small persisted record (calibration, the request anchor) and where it lives.

Calibration and anchors persist one JSON-like record each per (model, connection). They talk to a
:class:`StateSlot`, not to a store, so the ledger can back them (its ``session.record(kind, payload)``
/ ``session.latest(kind)`` fit this protocol through a thin adapter) and tests can use
:class:`MemorySlot`. ``load`` returns the newest saved record or ``None``; ``save`` replaces it.
Records are plain mappings of JSON values; a slot stores a copy so later changes by the caller do
not leak in.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["MemorySlot", "StateSlot"]


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
