"""The values the ledger hands out: stored messages, entries, and the problems ``verify`` finds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..content import Message

__all__ = ["Entry", "Problem", "Pruned", "SessionInfo", "StoreSize", "StoredMessage"]


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


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What a store knows of one session without reading its payloads (:meth:`Store.session_infos`)."""

    id: str
    entries: int
    """How many entries it holds, every kind (a branch: its shared prefix included, as
    :meth:`Session.length` says)."""
    kinds: Mapping[str, int]
    """How many of each kind (``message``, ``usage``, ``note``, …) it stores itself (a branch's
    shared prefix is counted in the session it branches from)."""
    created_at: datetime
    """When its first entry was written (the ledger's clock, UTC)."""
    last_at: datetime
    """When its newest entry was written."""
    payload_bytes: int
    """The size of its entries' payloads (attachments not included; its own, for a branch)."""
    parent: str | None = None
    """The session it branches from (:meth:`Session.branch_from`); ``None`` for one of its own."""

    @property
    def messages(self) -> int:
        """How many messages it holds."""
        return self.kinds.get("message", 0)


@dataclass(frozen=True, slots=True)
class StoreSize:
    """How much a store holds (:meth:`Store.size`)."""

    sessions: int
    entries: int
    payload_bytes: int
    """The entries' payloads."""
    attachments: int
    attachment_bytes: int
    """Each attachment's bytes once, however many sessions link them."""
    file_bytes: int | None
    """The size on disk (SQLite: the file and its write-ahead log); ``None`` for memory and PostgreSQL."""

    @property
    def bytes(self) -> int:
        """What the store holds: payloads plus attachment bytes (what ``prune(max_bytes=)`` bounds)."""
        return self.payload_bytes + self.attachment_bytes


@dataclass(frozen=True, slots=True)
class Pruned:
    """What :meth:`Store.prune` removed (or, with ``dry_run``, would remove)."""

    sessions: tuple[str, ...]
    """The sessions removed, oldest last entry first."""
    attachments: tuple[str, ...]
    """The attachments no remaining session linked, removed with their bytes."""
    before: StoreSize
    after: StoreSize
    """The store's size afterwards (with ``dry_run``: as it would be)."""
    dry_run: bool = False
