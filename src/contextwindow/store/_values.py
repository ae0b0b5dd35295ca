"""The values the ledger hands out: stored messages, entries, and the problems ``verify`` finds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..content import Message

__all__ = ["Entry", "Problem", "StoredMessage"]


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the ledger holds it."""

    message: Message
    """The message, with ``id`` (its entry id) and ``created_at`` set."""
    position: int
    """Its place in the session's total order of entries (all kinds), from 0."""
    block_prices: tuple[float, ...] | None
    """The raw (pre-multiplier) price of each top-level block, as pricing gave them at admission."""

    @property
    def id(self) -> str:
        """The message's entry id."""
        assert self.message.id is not None
        return self.message.id


@dataclass(frozen=True, slots=True)
class Entry:
    """Any entry of a session, messages included, with its payload at the current format version."""

    id: str
    session_id: str
    position: int
    kind: str
    version: int
    """The format version the payload is in now (after any upgrade on read)."""
    payload: Mapping[str, Any]
    """A fresh dict per read; changing it changes nothing stored."""
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken invariant found by ``verify()``."""

    code: str
    """Stable short name: ``digest_mismatch``, ``position_gap``, ``blob_hash_mismatch``, ..."""
    detail: str
    session_id: str | None = None
    position: int | None = None
    entry_id: str | None = None
    attachment_id: str | None = None

    def __str__(self) -> str:
        where = " ".join(
            f"{name}={value}"
            for name, value in (
                ("session", self.session_id),
                ("position", self.position),
                ("entry", self.entry_id),
                ("attachment", self.attachment_id),
            )
            if value is not None
        )
        return f"{self.code}: {self.detail}" + (f" ({where})" if where else "")
