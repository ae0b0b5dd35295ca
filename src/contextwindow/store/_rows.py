"""The rows every backend persists, and the digest that chains a session's entries.

Backends only move these rows in and out of storage; everything that decides what a row holds
(validation, encoding, budgets, upgrades) lives above them in :mod:`._ledger`, once, so the three
backends cannot disagree. The shapes mirror the SQL tables:

- ``entries``: one row per entry, ``(session_id, position)`` unique and dense from 0; ``id`` is a
  random, globally unique string (not derived from the position) so a later branch can point at any
  entry as its parent without renumbering.
- ``attachments``: the bytes' identity by content hash (id, sha256, size); ``attachment_blobs``: the
  bytes, in a separate table so a metadata read never pages them in; ``session_attachments``: which
  session may read what, and what that session attached the bytes with (media type, figures, stamp,
  extra meta). Metadata belongs to the link: one session's stamp never prices another's request.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = [
    "DIGEST_PREFIX",
    "GENESIS",
    "AttachmentRow",
    "EntryRow",
    "NewEntry",
    "SessionRow",
    "entry_digest",
    "new_id",
    "now_iso",
]

DIGEST_PREFIX = "cw1"
"""Version prefix of the entry digest, so a change of digest format is detectable (as llm does)."""

GENESIS = "0" * 64
"""The digest a session's first entry chains from."""


@dataclass(frozen=True, slots=True)
class NewEntry:
    """An entry about to be appended: everything but its position and chained digest."""

    id: str
    kind: str
    version: int
    payload: str
    """Compact JSON text, no NaN: canonical (sorted keys) for a record, a message's in its own key order
    (:mod:`._codec`)."""
    created_at: str


@dataclass(frozen=True, slots=True)
class EntryRow:
    """A stored entry exactly as persisted."""

    session_id: str
    position: int
    id: str
    kind: str
    version: int
    payload: str
    created_at: str
    digest: str


@dataclass(frozen=True, slots=True)
class AttachmentRow:
    """One session's view of an attachment (never the bytes): identity from the shared row,
    metadata from the session's link. ``created_at`` is when the session linked it."""

    id: str
    sha256: str
    media_type: str
    size_bytes: int
    width: int | None
    height: int | None
    duration_seconds: float | None
    pages: int | None
    token_estimate: float | None
    meta: str
    """Extra caller metadata as canonical JSON text (``{}`` when none)."""
    created_at: str


def entry_digest(prev: str, session_id: str, position: int, entry: NewEntry) -> str:
    """SHA-256 over the previous digest and this entry's stored fields: a hash chain per session.

    ``verify()`` recomputes it, so a changed, dropped, reordered or half-written entry shows up.
    """
    # Each field's UTF-8 followed by a NUL byte, hashed in one update (the same bytes as one per field).
    fields = (
        DIGEST_PREFIX,
        prev,
        session_id,
        str(position),
        entry.id,
        entry.kind,
        str(entry.version),
        entry.created_at,
        entry.payload,
        "",
    )
    return hashlib.sha256("\x00".join(fields).encode("utf-8")).hexdigest()


def new_id(prefix: str) -> str:
    """A time-ordered random id (``msg_`` + 12 hex ms + 16 hex random): unique without coordination."""
    return f"{prefix}_{time.time_ns() // 1_000_000:012x}{os.urandom(8).hex()}"


@dataclass(frozen=True, slots=True)
class SessionRow:
    """What one grouped read of the entries says of a session, without reading a payload."""

    session_id: str
    length: int
    """How many entries it holds (its head row's length: what a delete checks it against)."""
    kinds: dict[str, int]
    """How many entries of each kind."""
    first_at: str
    """The ledger time (ISO 8601, UTC) of its first entry."""
    last_at: str
    """The ledger time of its newest entry."""
    payload_bytes: int
    """The UTF-8 size of its entries' payloads (its own: a branch's prefix is its parent's)."""
    parent: str | None = None
    """The session it branches from (``None``: a session of its own from position 0)."""

    @property
    def stored(self) -> int:
        """How many entries it stores itself (a branch's shared prefix is stored once, in its parent)."""
        return sum(self.kinds.values())


def now_iso() -> str:
    """The ledger's clock: UTC, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")
