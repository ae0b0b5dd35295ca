"""A :class:`~contextwindow.state.StateSlot` kept in a session's ledger.

Calibration and anchors persist one small record each; :class:`LedgerSlot` keeps it as entries of one
kind in the session's append-only ledger (``session.record(kind, payload)``, read back with
``session.latest(kind)``), so a reopened session — or a new engine on it — finds the newest one, and
the history of every earlier record stays for inspection. With ``match``, a record is written with
those keys and only the newest entry carrying them is read (calibration is kept per model and
connection); without it the newest entry of the kind decides (an anchor: "the newest decides", with
no fallback to an older one, seed 002).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .store import Session

__all__ = ["LedgerSlot"]

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
