"""The interface a storage backend implements: rows in, rows out, atomically.

A backend knows nothing of messages, budgets or payload formats; :mod:`._ledger` does all of that
once, above every backend, as httpx's client sits above its transports. What a backend must
guarantee:

- ``append`` is atomic and serialised per session: the entries get the next dense positions and
  their chained digests, all or none, even with many processes appending at once. With ``expect``,
  it is conditional: when the session does not hold exactly ``expect`` entries at the moment the
  append holds the session's lock, it writes nothing and raises
  :class:`~contextwindow.errors.SessionMoved`. Entries are never removed from a session (only
  ``delete_sessions`` removes whole ones), so the length is the session's sequence number: equal
  lengths mean no other writer appended in between.
- ``batch`` makes every write inside it one transaction: committed together when the block ends,
  or none of them when it raises. A write inside that raises undoes only itself (a savepoint), so
  the block may catch it and go on. Batches nest (an inner one is part of the outer).
- ``length`` is one indexed read of the session's head row: how many entries it holds (0 for a
  session never written).
- ``put_attachment`` stores the bytes insert-or-ignore by attachment id (the content hash settles
  who won) and, in the same transaction, links them to the session with the row's metadata
  (insert-or-ignore per session); it returns the session's view. Metadata lives on the link, never
  on the shared bytes, so one session's stamp or figures never reach another.
- Reads that take a ``session_id`` see only that session's entries and linked attachments, with
  that session's own metadata.
- ``delete_sessions`` is the one removal: whole sessions, each only while it still holds the length
  the caller read (a session appended to since is kept), with their entries, head rows and
  attachment links, and then every attachment (row and bytes) no session links any more, all in one
  transaction. A session removed and written again starts afresh at position 0.
- ``fork`` starts a new session as a branch of another one (:mod:`._lineage`): its head row says
  the parent and how many of its entries it shares, its length and head digest are the parent's
  at that position, and nothing is copied. With ``edits`` it also stores, in the same transaction,
  rows below the fork position that stand in for the prefix's entries of the same kind there
  (:mod:`._lineage`). Every read that takes a ``session_id`` then sees the
  session's lineage: its own rows and its ancestors' below the fork positions, and the attachments
  linked to any of them (the nearest link's metadata). ``delete_sessions`` never removes a session
  another remaining session branches from.
- Every driver error that escapes is a :class:`~contextwindow.errors.StoreError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from ._rows import AttachmentRow, EntryRow, NewEntry, SessionRow

__all__ = ["Backend"]


class Backend(Protocol):
    """Storage for entries and attachments; see the module docstring for the guarantees."""

    url: str
    """Where the store lives, with any password removed."""
    schema_version: int
    """The schema version found in (or migrated into) the database."""
    writable: bool
    """False when the database was written by a newer library (writes raise ``SchemaTooNew``)."""

    def append(
        self, session_id: str, entries: Sequence[NewEntry], *, expect: int | None = None
    ) -> list[EntryRow]: ...

    def length(self, session_id: str) -> int: ...

    def fork(
        self, session_id: str, parent_id: str, at: int, edits: Sequence[tuple[int, NewEntry]] = ()
    ) -> None:
        """Start ``session_id`` (which must not exist: else ``SessionMoved``) as the first ``at``
        entries of ``parent_id`` (``0 < at <=`` its length, else ``InvalidInput``), with ``edits``
        (``(position, entry)``, each below ``at`` and of the kind the prefix holds there, else
        ``InvalidInput``) in place of the prefix's entries, in one transaction. The fork is recorded
        on the nearest ancestor that stores entry ``at - 1`` and has no edit below ``at``."""
        ...

    def fork_of(self, session_id: str) -> tuple[str, int] | None:
        """``(parent, fork position)`` of a branch; ``None`` for a session of its own."""
        ...

    def forks(self) -> dict[str, tuple[str, int]]:
        """Every branch: ``{session: (parent, fork position)}``."""
        ...

    def batch(self) -> AbstractContextManager[None]: ...

    def entries(
        self, session_id: str, kinds: Sequence[str] | None, *, after: int | None = None
    ) -> list[EntryRow]: ...

    def latest(self, session_id: str, kind: str) -> EntryRow | None: ...

    def locate(self, session_id: str, entry_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        """``{entry id: (position, kind)}`` for those ids that are entries of this session."""
        ...

    def put_attachment(self, session_id: str, row: AttachmentRow, data: bytes) -> AttachmentRow: ...

    def attachment(self, session_id: str, attachment_id: str) -> AttachmentRow | None: ...

    def attachments(self, session_id: str) -> list[AttachmentRow]: ...

    def read_blob(self, session_id: str, attachment_id: str) -> bytes | None: ...

    def sessions(self, prefix: str = "") -> list[str]:
        """Every session that has a head or an entry, sorted; with ``prefix``, only the ids that
        start with it, read from the sessions' head rows alone (no pass over the entries)."""
        ...

    def heads(self) -> dict[str, tuple[int, str]]:
        """``{session: (length, head digest)}`` as recorded in the sessions table."""
        ...

    def all_attachments(self) -> list[AttachmentRow]: ...

    def links(self) -> list[tuple[str, str]]:
        """Every ``(session_id, attachment_id)`` link."""
        ...

    def blob_ids(self) -> list[str]: ...

    def blob(self, attachment_id: str) -> bytes | None:
        """The bytes of any attachment, unscoped; only ``verify`` uses it, one blob at a time."""
        ...

    def session_rows(self) -> list[SessionRow]:
        """Every session with an entry: its length, entries per kind, first and last entry times and
        payload size, from one grouped read (no payload is decoded)."""
        ...

    def delete_sessions(self, lengths: dict[str, int]) -> tuple[list[str], list[str]]:
        """Remove each session of ``lengths`` that still holds exactly that many entries, then the
        attachments no session links any more; ``(sessions removed, attachment ids removed)``."""
        ...

    def reclaim(self) -> None:
        """Give the space freed by a delete back to the file system where the backend keeps it
        (SQLite's ``VACUUM``); nothing elsewhere. Never inside a batch."""
        ...

    def file_bytes(self) -> int | None:
        """The size on disk (SQLite: the file and its write-ahead log), or ``None`` where there is no
        file of the store's own (memory, PostgreSQL)."""
        ...

    def close(self) -> None: ...
