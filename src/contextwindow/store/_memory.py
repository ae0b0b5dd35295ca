"""The in-memory backend: the reference model, and a store for tests and short-lived agents.

It keeps the same rows the SQL backends keep (JSON text, chained digests), so it behaves exactly as
they do, and the conformance suite and the state-machine test compare the others against it. It
lives and dies with its process.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from ..errors import InvalidInput, SessionMoved
from ._lineage import Piece, chain_edits, check_fork, compose, lineage, live
from ._rows import GENESIS, AttachmentRow, EntryRow, NewEntry, SessionRow, entry_digest, now_iso

__all__ = ["MemoryBackend"]

_POSITION = operator.attrgetter("position")


class MemoryBackend:
    """Rows in dictionaries, one lock around every call (appends are serialised per store)."""

    def __init__(self) -> None:
        self.url = "memory://"
        self.schema_version = 0
        self.writable = True
        self._lock = threading.RLock()
        self._entries: dict[str, list[EntryRow]] = {}
        self._heads: dict[str, tuple[int, str]] = {}
        self._attachments: dict[str, AttachmentRow] = {}
        self._blobs: dict[str, bytes] = {}
        self._links: dict[str, dict[str, AttachmentRow]] = {}
        """``{session: {attachment id: the session's own view}}``: metadata lives on the link."""
        self._forks: dict[str, tuple[str, int]] = {}
        """``{branch: (parent, fork position)}`` (:mod:`._lineage`)."""
        self._created: dict[str, str] = {}
        """When each branch was made (its head row's time)."""

    def append(
        self, session_id: str, entries: Sequence[NewEntry], *, expect: int | None = None
    ) -> list[EntryRow]:
        with self._lock:
            length, head = self._heads.get(session_id, (0, GENESIS))
            if expect is not None and length != expect:
                raise SessionMoved(session_id, expected=expect, found=length)
            rows = []
            for entry in entries:
                digest = entry_digest(head, session_id, length, entry)
                rows.append(
                    EntryRow(
                        session_id=session_id,
                        position=length,
                        id=entry.id,
                        kind=entry.kind,
                        version=entry.version,
                        payload=entry.payload,
                        created_at=entry.created_at,
                        digest=digest,
                    )
                )
                length, head = length + 1, digest
            self._entries.setdefault(session_id, []).extend(rows)
            self._heads[session_id] = (length, head)
            return rows

    @contextmanager
    def batch(self) -> Iterator[None]:
        # What a transaction would undo: the rows are only ever added, so remembering how much of
        # each table there was is enough to put it back.
        with self._lock:
            heads, forks, created = dict(self._heads), dict(self._forks), dict(self._created)
            # The lists themselves, not copies: appends only extend them, and a delete drops the
            # dictionary's reference, so the lists and their lengths then are what to put back.
            entries = dict(self._entries)
            lengths = {sid: len(rows) for sid, rows in entries.items()}
            attachments, blobs = dict(self._attachments), dict(self._blobs)
            links = {sid: dict(linked) for sid, linked in self._links.items()}
            try:
                yield
            except BaseException:
                self._heads, self._forks, self._created = heads, forks, created
                self._entries = {sid: rows[: lengths[sid]] for sid, rows in entries.items()}
                self._attachments, self._blobs, self._links = attachments, blobs, links
                raise

    def length(self, session_id: str) -> int:
        with self._lock:
            return self._heads.get(session_id, (0, GENESIS))[0]

    def _pieces(self, session_id: str) -> list[Piece]:
        """The view of ``session_id`` as pieces (:func:`._lineage.compose`), under the lock."""
        if session_id not in self._forks:
            return [Piece(session_id, 0, None)]
        segments = lineage(session_id, self._forks)
        edits = {}  # a branch's rows below its fork position; rows are in position order
        for segment in segments:
            if (fork := self._forks.get(segment.session_id)) is not None:
                rows = self._entries.get(segment.session_id, [])
                below = bisect.bisect_left(rows, fork[1], key=_POSITION)
                edits[segment.session_id] = [row.position for row in rows[:below]]
        return compose(segments, self._forks, edits)

    def _newest_first(self, session_id: str) -> Iterator[EntryRow]:
        """The rows of ``session_id``'s view from its newest back (under the lock), a piece at a time."""
        return itertools.chain.from_iterable(
            reversed(self._slice(piece)) for piece in reversed(self._pieces(session_id))
        )

    def _slice(self, piece: Piece, start: int = 0) -> list[EntryRow]:
        """The rows of ``piece`` from position ``start`` on (under the lock), found by bisection."""
        rows = self._entries.get(piece.session_id, [])
        lo = bisect.bisect_left(rows, max(piece.lo, start), key=_POSITION)
        hi = len(rows) if piece.hi is None else bisect.bisect_left(rows, piece.hi, key=_POSITION)
        return rows[lo:hi]

    def _rows(self, session_id: str, after: int | None = None) -> list[EntryRow]:
        """The rows of ``session_id``'s view after ``after``, in position order (under the lock).
        Each session's rows are in position order (edits are written with the fork, before any
        append), so each piece is a slice found by bisection."""
        out: list[EntryRow] = []
        start = 0 if after is None else after + 1
        for piece in live(self._pieces(session_id), after):
            out.extend(self._slice(piece, start))
        return out

    def entries(
        self, session_id: str, kinds: Sequence[str] | None, *, after: int | None = None
    ) -> list[EntryRow]:
        with self._lock:
            rows = self._rows(session_id, after)
        if kinds is None:
            return rows
        wanted = set(kinds)
        return [row for row in rows if row.kind in wanted]

    def latest(self, session_id: str, kind: str) -> EntryRow | None:
        with self._lock:
            return next((row for row in self._newest_first(session_id) if row.kind == kind), None)

    def locate(self, session_id: str, entry_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        wanted = set(entry_ids)
        with self._lock:
            rows = self._rows(session_id)
            return {row.id: (row.position, row.kind) for row in rows if row.id in wanted}

    def fork(
        self, session_id: str, parent_id: str, at: int, edits: Sequence[tuple[int, NewEntry]] = ()
    ) -> None:
        with self._lock:
            if parent_id not in self._heads:
                raise InvalidInput(f"no session {parent_id!r} to branch from", path="parent")
            check_fork(at, self._heads[parent_id][0], edits)
            if session_id in self._heads:
                raise SessionMoved(session_id, expected=0, found=self._heads[session_id][0])
            owner = parent_id
            while (fork := self._forks.get(owner)) is not None and at <= fork[1]:
                if any(row.position < at for row in self._entries.get(owner, ())):
                    break  # its edits are part of the prefix: the branch reads through it
                owner = fork[0]
            wanted = {at - 1} | {p for p, _ in edits} | {p - 1 for p, _ in edits}
            view = {r.position: (r.kind, r.digest) for r in self._rows(owner) if r.position in wanted}
            head, written = chain_edits(session_id, owner, at, view, edits)
            self._heads[session_id] = (at, head)
            self._forks[session_id] = (owner, at)
            self._created[session_id] = now_iso()
            if written:
                self._entries[session_id] = written

    def fork_of(self, session_id: str) -> tuple[str, int] | None:
        with self._lock:
            return self._forks.get(session_id)

    def forks(self) -> dict[str, tuple[str, int]]:
        with self._lock:
            return dict(self._forks)

    def _readers(self, session_id: str) -> list[str]:
        return [segment.session_id for segment in lineage(session_id, self._forks)]

    def put_attachment(self, session_id: str, row: AttachmentRow, data: bytes) -> AttachmentRow:
        with self._lock:
            # The shared row is the bytes' identity only, as in the SQL backends.
            self._attachments.setdefault(
                row.id,
                replace(
                    row,
                    width=None,
                    height=None,
                    duration_seconds=None,
                    pages=None,
                    token_estimate=None,
                    meta="{}",
                ),
            )
            self._blobs.setdefault(row.id, bytes(data))
            return self._links.setdefault(session_id, {}).setdefault(
                row.id, replace(row, created_at=now_iso())
            )

    def attachment(self, session_id: str, attachment_id: str) -> AttachmentRow | None:
        with self._lock:
            if attachment_id not in self._attachments:
                return None
            for reader in self._readers(session_id):
                found = self._links.get(reader, {}).get(attachment_id)
                if found is not None:
                    return found
            return None

    def attachments(self, session_id: str) -> list[AttachmentRow]:
        with self._lock:
            nearest: dict[str, AttachmentRow] = {}
            for reader in self._readers(session_id):
                for att, row in self._links.get(reader, {}).items():
                    nearest.setdefault(att, row)
            ordered = sorted(nearest.values(), key=lambda row: (row.created_at, row.id))
            return [row for row in ordered if row.id in self._attachments]

    def read_blob(self, session_id: str, attachment_id: str) -> bytes | None:
        with self._lock:
            if not any(attachment_id in self._links.get(r, {}) for r in self._readers(session_id)):
                return None
            return self._blobs.get(attachment_id)

    def sessions(self, prefix: str = "") -> list[str]:
        with self._lock:
            return sorted(s for s in set(self._heads) | set(self._entries) if s.startswith(prefix))

    def heads(self) -> dict[str, tuple[int, str]]:
        with self._lock:
            return dict(self._heads)

    def all_attachments(self) -> list[AttachmentRow]:
        with self._lock:
            return list(self._attachments.values())

    def links(self) -> list[tuple[str, str]]:
        with self._lock:
            return [(sid, att) for sid, atts in self._links.items() for att in atts]

    def blob_ids(self) -> list[str]:
        with self._lock:
            return list(self._blobs)

    def blob(self, attachment_id: str) -> bytes | None:
        with self._lock:
            return self._blobs.get(attachment_id)

    def session_rows(self) -> list[SessionRow]:
        with self._lock:
            out = []
            for session_id in sorted(set(self._entries) | set(self._forks)):
                rows = self._entries.get(session_id, [])
                parent = self._forks.get(session_id, (None, 0))[0]
                if not rows and parent is None:
                    continue
                kinds: dict[str, int] = {}
                for row in rows:
                    kinds[row.kind] = kinds.get(row.kind, 0) + 1
                made = self._created.get(session_id)
                times = [row.created_at for row in rows] or [made or now_iso()]
                out.append(
                    SessionRow(
                        session_id=session_id,
                        length=self._heads.get(session_id, (len(rows), GENESIS))[0],
                        kinds=kinds,
                        first_at=min(times),
                        last_at=max(times),
                        payload_bytes=sum(len(row.payload.encode()) for row in rows),
                        parent=parent,
                    )
                )
            return out

    def delete_sessions(self, lengths: dict[str, int]) -> tuple[list[str], list[str]]:
        with self._lock:
            removed = []
            for sid in sorted(lengths, key=lambda s: (-len(lineage(s, self._forks)), s)):
                held = any(parent == sid for parent, _ in self._forks.values())
                if sid not in self._heads or self._heads[sid][0] != lengths[sid] or held:
                    continue
                removed.append(sid)
                del self._heads[sid]
                self._entries.pop(sid, None)
                self._links.pop(sid, None)
                self._forks.pop(sid, None)
                self._created.pop(sid, None)
            removed.sort()
            linked = {att for atts in self._links.values() for att in atts}
            gone = sorted(att for att in self._attachments if att not in linked)
            for att in gone:
                del self._attachments[att]
                self._blobs.pop(att, None)
            return removed, gone

    def reclaim(self) -> None:
        pass

    def file_bytes(self) -> int | None:
        return None

    def close(self) -> None:
        pass
