"""What the SQLite and PostgreSQL backends share: the queries, the append, the migrations.

Each dialect supplies its transactions (``_write`` and ``_read``, which also map driver errors into
the error tree), its placeholder style and how it locks a session's head row. Appends read the
session's head row under that lock, write the entries with the next positions and chained digests,
and move the head, in one transaction: a crash leaves either all of it or none.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..errors import InvalidInput, SchemaTooNew, SessionMoved, StoreError, UsageError
from ._heads import BatchHeads
from ._lineage import Piece, branches_first, chain_edits, check_fork, compose, lineage, live, pieces_sql
from ._migrations import SCHEMA_VERSION, Migration
from ._rows import GENESIS, AttachmentRow, EntryRow, NewEntry, SessionRow, entry_digest, now_iso

__all__ = ["Cursor", "SqlBackend"]

_ENTRY_COLUMNS = "session_id, position, id, kind, version, payload, created_at, digest"
_ATTACHMENT_COLUMNS = (
    "a.id, a.sha256, a.media_type, a.size_bytes, a.width, a.height, a.duration_seconds, a.pages, "
    "a.token_estimate, a.meta, a.created_at"
)
_LINK_FIELDS = ("media_type", "width", "height", "duration_seconds", "pages", "token_estimate")


def _linked(name: str) -> str:
    # A link made before schema 2 has no metadata of its own (``meta`` NULL): it reads the shared
    # row's, which is what that session was given when it attached the bytes.
    return f"CASE WHEN l.meta IS NULL THEN a.{name} ELSE l.{name} END"


_LINKED_COLUMNS = (
    f"a.id, a.sha256, {_linked('media_type')}, a.size_bytes, {_linked('width')}, {_linked('height')}, "
    f"{_linked('duration_seconds')}, {_linked('pages')}, {_linked('token_estimate')}, "
    "COALESCE(l.meta, a.meta), l.created_at"
)
"""A session's view of an attachment: the bytes' identity (id, hash, size) from the shared row,
everything else from the session's own link."""
_SCHEMA_ONE_COLUMNS = _ATTACHMENT_COLUMNS.replace("a.created_at", "l.created_at")
"""The same view in a schema-1 database opened read-only (links had no metadata of their own)."""
_NOT_A_LEDGER = "not a contextwindow store (no ledger tables in it)"
_BRANCHES = 3
"""The schema version from which sessions may branch (the head rows' ``parent`` and ``forked_at``)."""
_EDITS_BELOW_FORK = (
    "SELECT e.session_id, e.position FROM entries e JOIN sessions s ON s.id = e.session_id "
    "WHERE s.parent IS NOT NULL AND e.position < s.forked_at AND e.session_id IN ({})"
)
"""The edits of a lineage's branches: their rows below their own fork positions (schema 4)."""
_ANCESTORS = (
    "WITH RECURSIVE up(id, parent, forked_at) AS ("
    "SELECT id, parent, forked_at FROM sessions WHERE id = ? "
    "UNION SELECT s.id, s.parent, s.forked_at FROM sessions s JOIN up ON s.id = up.parent) "
    "SELECT id, parent, forked_at FROM up WHERE parent IS NOT NULL"
)
"""The forks on a session's way up to its root, in one read (``UNION``: a damaged cycle ends)."""
_LINEAGES_KEPT = 4096
"""How many branches' lineages a backend keeps in memory before it reads them afresh."""


class Cursor(Protocol):
    """The part of a DB-API cursor both drivers share."""

    def execute(self, query: Any, params: Any = ..., /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


def _entry(row: Sequence[Any]) -> EntryRow:
    # Both drivers return the integer columns as ints, in column order: no per-field conversion.
    return EntryRow(*row)


def _attachment(row: Sequence[Any]) -> AttachmentRow:
    return AttachmentRow(
        id=row[0],
        sha256=row[1],
        media_type=row[2],
        size_bytes=int(row[3]),
        width=row[4],
        height=row[5],
        duration_seconds=row[6],
        pages=row[7],
        token_estimate=row[8],
        meta=row[9],
        created_at=row[10],
    )


class SqlBackend(abc.ABC):
    """Queries written once with ``?`` placeholders; the dialect rewrites them if it must."""

    url: str
    schema_version: int = 0
    writable: bool = True
    _lock_session_sql = "SELECT length, head FROM sessions WHERE id = ?"

    batch_heads: BatchHeads
    """The heads appended to in the current batch (:mod:`._heads`)."""

    @abc.abstractmethod
    def _write(self, *, keeps_heads: bool = False) -> AbstractContextManager[Cursor]:
        """A write transaction: committed on success, rolled back (never committed) on any error.
        Inside a batch, a savepoint of its transaction; one that is not an append (``keeps_heads``)
        forgets the :attr:`batch_heads`."""

    @abc.abstractmethod
    def _read(self) -> AbstractContextManager[Cursor]:
        """A cursor for one consistent read."""

    def _q(self, query: str) -> str:
        return query

    def _lock_migrations(self, cur: Cursor) -> None:  # noqa: B027 - a hook only some dialects need
        """Serialise concurrent migrators (SQLite: ``BEGIN IMMEDIATE`` already does)."""

    read_only: bool = False
    _lineages: dict[tuple[str, str], tuple[list[str], list[Piece]]]
    """Branches' lineages and views as pieces by (session id, head row's creation time): :meth:`_view_of`."""
    _payload_bytes_sql = "OCTET_LENGTH(payload)"
    """The UTF-8 size of a payload in this dialect."""

    @property
    def _view(self) -> str:
        return _LINKED_COLUMNS if self.schema_version >= 2 else _SCHEMA_ONE_COLUMNS

    def _open_read_only(self) -> None:
        """Read the schema version and migrate nothing: looking into a store never changes it."""
        self.read_only, self.writable = True, False
        with self._read() as cur:
            found = self._found_version(cur)
        if found is None:
            raise StoreError(f"{self.url}: {_NOT_A_LEDGER}")
        self.schema_version = found

    def _found_version(self, cur: Cursor) -> int | None:
        """The recorded schema version, or ``None`` when the database has no ledger."""
        if not self._has_table(cur, "schema_migrations"):
            return None
        cur.execute("SELECT MAX(version) FROM schema_migrations")
        found = cur.fetchone()[0]
        return None if found is None else int(found)

    @abc.abstractmethod
    def _has_table(self, cur: Cursor, name: str) -> bool:
        """Whether the database has a table of this name."""

    def _migrate(self, migrations: Sequence[Migration]) -> None:
        with self._write() as cur:
            self._lock_migrations(cur)
            cur.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            cur.execute("SELECT MAX(version) FROM schema_migrations")
            found = cur.fetchone()[0] or 0
            if found > SCHEMA_VERSION:
                # Written by a newer library: readable at our own risk, never written to.
                self.schema_version, self.writable = found, False
                return
            for version in range(found + 1, SCHEMA_VERSION + 1):
                name, statements = migrations[version - 1]
                for statement in statements:
                    cur.execute(statement)
                cur.execute(
                    self._q("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
                    (version, name, now_iso()),
                )
            self.schema_version = SCHEMA_VERSION

    def _check_writable(self) -> None:
        if self.read_only:
            raise UsageError(f"the store {self.url} was opened read-only")
        if not self.writable:
            raise SchemaTooNew(self.schema_version, SCHEMA_VERSION)

    def append(
        self, session_id: str, entries: Sequence[NewEntry], *, expect: int | None = None
    ) -> list[EntryRow]:
        self._check_writable()
        known = self.batch_heads.take(session_id)
        with self._write(keeps_heads=True) as cur:
            if known is None:
                # Insert-or-ignore first, then lock: two writers racing to start a session both get
                # the one row, and the lock orders them (a bare insert would make the loser fail).
                cur.execute(
                    self._q(
                        "INSERT INTO sessions (id, length, head, created_at) VALUES (?, 0, ?, ?) ON CONFLICT DO NOTHING"
                    ),
                    (session_id, GENESIS, now_iso()),
                )
                head_row = self._head(cur, session_id)
                length, head = int(head_row[0]), head_row[1]
            else:
                length, head = known  # appended to earlier in this batch, which holds its lock
            if expect is not None and length != expect:
                # Checked under the session's lock: no other writer can append between this read
                # and the writes below. Raising rolls back the head row inserted above.
                raise SessionMoved(session_id, expected=expect, found=length)
            rows = []
            for entry in entries:
                digest = entry_digest(head, session_id, length, entry)
                fields = (entry.id, entry.kind, entry.version, entry.payload, entry.created_at)
                row = EntryRow(session_id, length, *fields, digest)
                self._insert(cur, row)
                rows.append(row)
                length, head = length + 1, digest
            cur.execute(
                self._q("UPDATE sessions SET length = ?, head = ? WHERE id = ?"), (length, head, session_id)
            )
        self.batch_heads.keep(session_id, length, head)
        return rows

    def _insert(self, cur: Cursor, row: EntryRow) -> None:
        cur.execute(
            self._q(f"INSERT INTO entries ({_ENTRY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"),
            (
                row.session_id,
                row.position,
                row.id,
                row.kind,
                row.version,
                row.payload,
                row.created_at,
                row.digest,
            ),
        )

    def _head(self, cur: Cursor, session_id: str) -> Any:
        """The session's head row, locked for this transaction."""
        cur.execute(self._q(self._lock_session_sql), (session_id,))
        return cur.fetchone()

    def length(self, session_id: str) -> int:
        with self._read() as cur:
            cur.execute(self._q("SELECT length FROM sessions WHERE id = ?"), (session_id,))
            row = cur.fetchone()
        return 0 if row is None else int(row[0])

    def _pieces(self, cur: Cursor, session_id: str, after: int | None = None) -> list[Piece]:
        """The view of ``session_id`` as pieces (:func:`._lineage.compose`) that hold a position after
        ``after``: its own rows, its edits, and each ancestor's rows it reads."""
        return self._view_of(cur, session_id, after)[1]

    def _readers(self, cur: Cursor, session_id: str) -> list[str]:
        """The sessions ``session_id`` reads rows and attachment links from, nearest first."""
        return self._view_of(cur, session_id)[0]

    def _view_of(
        self, cur: Cursor, session_id: str, after: int | None = None
    ) -> tuple[list[str], list[Piece]]:
        """``(lineage's session ids nearest first, pieces)`` of ``session_id``.

        One indexed read of the session's head row decides: a session of its own, or a read past a
        branch's fork position, reads its own rows. A branch's view is composed once (a fork and the
        edits written with it never change) from two reads, the forks up its lineage and their edits,
        and kept by the head row's creation time, so a session removed and made again is read afresh."""
        own = ([session_id], [Piece(session_id, 0, None)])
        if self.schema_version < _BRANCHES:
            return own
        cur.execute(self._q("SELECT parent, forked_at, created_at FROM sessions WHERE id = ?"), (session_id,))
        head = cur.fetchone()
        if head is None or head[0] is None:
            return own
        if after is not None and after + 1 >= int(head[1]):
            return [session_id], own[1]
        key = (session_id, head[2])
        known = self._lineages.get(key)
        if known is None:
            cur.execute(self._q(_ANCESTORS), (session_id,))
            forks = {row[0]: (row[1], int(row[2])) for row in cur.fetchall()}
            segments = lineage(session_id, forks)
            branches = [segment.session_id for segment in segments if segment.session_id in forks]
            cur.execute(self._q(_EDITS_BELOW_FORK.format(", ".join("?" for _ in branches))), branches)
            edits: dict[str, list[int]] = {}
            for sid, position in cur.fetchall():
                edits.setdefault(sid, []).append(int(position))
            known = ([segment.session_id for segment in segments], compose(segments, forks, edits))
            if len(self._lineages) >= _LINEAGES_KEPT:
                self._lineages.clear()
            self._lineages[key] = known
        return known[0], live(known[1], after)

    def entries(
        self, session_id: str, kinds: Sequence[str] | None, *, after: int | None = None
    ) -> list[EntryRow]:
        if kinds is not None and not kinds:
            return []
        with self._read() as cur:
            join, rows, params = pieces_sql(self._pieces(cur, session_id, after), after)
            query = f"SELECT {_ENTRY_COLUMNS} FROM entries{join} WHERE {rows}"
            order = "position"
            if kinds is not None:
                query += f" AND kind IN ({', '.join('?' for _ in kinds)})"
                params.extend(kinds)
                if len(kinds) > 1:
                    # Ordered by an expression: SQLite would otherwise read every entry of the session
                    # in position order to skip all but these kinds (the unique (session, position)
                    # index saves it a sort); this way it reads them by the (session, kind, position)
                    # index and sorts the few it finds.
                    order = "position + 0"
            cur.execute(self._q(f"{query} ORDER BY {order}"), params)
            return [_entry(row) for row in cur.fetchall()]

    def latest(self, session_id: str, kind: str) -> EntryRow | None:
        with self._read() as cur:
            join, rows, params = pieces_sql(self._pieces(cur, session_id))
            query = f"SELECT {_ENTRY_COLUMNS} FROM entries{join} WHERE {rows} AND kind = ? ORDER BY position DESC LIMIT 1"
            cur.execute(self._q(query), [*params, kind])
            row = cur.fetchone()
        return None if row is None else _entry(row)

    def locate(self, session_id: str, entry_ids: Sequence[str]) -> dict[str, tuple[int, str]]:
        if not entry_ids:
            return {}
        marks = ", ".join("?" for _ in entry_ids)
        with self._read() as cur:
            join, rows, params = pieces_sql(self._pieces(cur, session_id))
            cur.execute(
                self._q(f"SELECT id, position, kind FROM entries{join} WHERE {rows} AND id IN ({marks})"),
                [*params, *entry_ids],
            )
            return {row[0]: (int(row[1]), row[2]) for row in cur.fetchall()}

    def fork(
        self, session_id: str, parent_id: str, at: int, edits: Sequence[tuple[int, NewEntry]] = ()
    ) -> None:
        self._check_writable()
        with self._write() as cur:
            head_row = self._head(cur, parent_id)
            if head_row is None:
                raise InvalidInput(f"no session {parent_id!r} to branch from", path="parent")
            check_fork(at, int(head_row[0]), edits)
            owner = parent_id
            while (fork := self._fork_of(cur, owner)) is not None and at <= fork[1]:
                cur.execute(
                    self._q("SELECT 1 FROM entries WHERE session_id = ? AND position < ? LIMIT 1"),
                    (owner, at),
                )
                if cur.fetchone() is not None:
                    break  # its edits are part of the prefix: the branch reads through it
                owner = fork[0]
                self._head(cur, owner)  # locked too: a prune waits for (or precedes) this branch
            wanted = sorted({at - 1} | {p for p, _ in edits} | {p - 1 for p, _ in edits if p > 0})
            join, rows, params = pieces_sql(self._pieces(cur, owner))
            cur.execute(
                self._q(
                    f"SELECT position, kind, digest FROM entries{join} WHERE {rows} "
                    f"AND position IN ({', '.join('?' for _ in wanted)})"
                ),
                [*params, *wanted],
            )
            view = {int(row[0]): (row[1], row[2]) for row in cur.fetchall()}
            head, written = chain_edits(session_id, owner, at, view, edits)
            cur.execute(
                self._q(
                    "INSERT INTO sessions (id, length, head, created_at, parent, forked_at) "
                    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
                ),
                (session_id, at, head, now_iso(), owner, at),
            )
            if not self._rowcount(cur):
                cur.execute(self._q("SELECT length FROM sessions WHERE id = ?"), (session_id,))
                raise SessionMoved(session_id, expected=0, found=int(cur.fetchone()[0]))
            for row in written:
                self._insert(cur, row)

    def _fork_of(self, cur: Cursor, session_id: str) -> tuple[str, int] | None:
        if self.schema_version < _BRANCHES:
            return None
        cur.execute(self._q("SELECT parent, forked_at FROM sessions WHERE id = ?"), (session_id,))
        row = cur.fetchone()
        return None if row is None or row[0] is None else (row[0], int(row[1]))

    def fork_of(self, session_id: str) -> tuple[str, int] | None:
        with self._read() as cur:
            return self._fork_of(cur, session_id)

    def forks(self) -> dict[str, tuple[str, int]]:
        if self.schema_version < _BRANCHES:
            return {}
        with self._read() as cur:
            cur.execute("SELECT id, parent, forked_at FROM sessions WHERE parent IS NOT NULL")
            return {row[0]: (row[1], int(row[2])) for row in cur.fetchall()}

    def put_attachment(self, session_id: str, row: AttachmentRow, data: bytes) -> AttachmentRow:
        self._check_writable()
        with self._write() as cur:
            # The shared row holds the bytes' identity only; whoever stores them first writes it, and
            # its metadata columns stay empty (they describe links made before schema 2).
            cur.execute(
                self._q(
                    "INSERT INTO attachments (id, sha256, media_type, size_bytes, width, height, duration_seconds, "
                    "pages, token_estimate, meta, created_at) VALUES (?, ?, ?, ?, NULL, NULL, NULL, NULL, NULL, "
                    "'{}', ?) ON CONFLICT DO NOTHING"
                ),
                (row.id, row.sha256, row.media_type, row.size_bytes, row.created_at),
            )
            if self._rowcount(cur):
                cur.execute(self._q("INSERT INTO attachment_blobs (id, data) VALUES (?, ?)"), (row.id, data))
            # The session's own metadata goes on its link; a session that attaches the same bytes
            # again keeps what it first attached them with.
            cur.execute(
                self._q(
                    "INSERT INTO session_attachments (session_id, attachment_id, created_at, "
                    f"{', '.join(_LINK_FIELDS)}, meta) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT DO NOTHING"
                ),
                (
                    session_id,
                    row.id,
                    now_iso(),
                    row.media_type,
                    row.width,
                    row.height,
                    row.duration_seconds,
                    row.pages,
                    row.token_estimate,
                    row.meta,
                ),
            )
            cur.execute(
                self._q(
                    f"SELECT {self._view} FROM attachments a JOIN session_attachments l "
                    "ON l.attachment_id = a.id WHERE l.session_id = ? AND a.id = ?"
                ),
                (session_id, row.id),
            )
            return _attachment(cur.fetchone())

    @staticmethod
    def _rowcount(cur: Cursor) -> int:
        return int(getattr(cur, "rowcount", 0))

    def _linked(self, cur: Cursor, session_id: str, attachment_id: str | None) -> list[AttachmentRow]:
        """The attachments ``session_id`` may read (one, or all): those linked to it or to an
        ancestor of its lineage, each with the nearest link's metadata, in the order first linked."""
        order = self._readers(cur, session_id)
        query = (
            f"SELECT {self._view}, l.session_id FROM attachments a JOIN session_attachments l "
            f"ON l.attachment_id = a.id WHERE l.session_id IN ({', '.join('?' for _ in order)})"
        )
        params: list[Any] = list(order)
        if attachment_id is not None:
            query += " AND a.id = ?"
            params.append(attachment_id)
        cur.execute(self._q(query), params)
        nearest: dict[str, tuple[int, AttachmentRow]] = {}
        for row in cur.fetchall():
            depth = order.index(row[-1])
            if row[0] not in nearest or depth < nearest[row[0]][0]:
                nearest[row[0]] = (depth, _attachment(row))
        return sorted((row for _, row in nearest.values()), key=lambda row: (row.created_at, row.id))

    def attachment(self, session_id: str, attachment_id: str) -> AttachmentRow | None:
        with self._read() as cur:
            found = self._linked(cur, session_id, attachment_id)
        return found[0] if found else None

    def attachments(self, session_id: str) -> list[AttachmentRow]:
        with self._read() as cur:
            return self._linked(cur, session_id, None)

    def read_blob(self, session_id: str, attachment_id: str) -> bytes | None:
        with self._read() as cur:
            readers = self._readers(cur, session_id)
            cur.execute(
                self._q(
                    "SELECT b.data FROM attachment_blobs b JOIN session_attachments l ON l.attachment_id = b.id "
                    f"WHERE l.session_id IN ({', '.join('?' for _ in readers)}) AND b.id = ? LIMIT 1"
                ),
                [*readers, attachment_id],
            )
            row = cur.fetchone()
        return None if row is None else bytes(row[0])

    def sessions(self, prefix: str = "") -> list[str]:
        with self._read() as cur:
            if prefix:
                # Every append writes the session's head row first, so the head rows name every
                # session written since schema 1; substr compares characters, whatever the collation.
                cur.execute(
                    self._q("SELECT id FROM sessions WHERE substr(id, 1, ?) = ?"), (len(prefix), prefix)
                )
                return sorted(row[0] for row in cur.fetchall())
            cur.execute("SELECT id FROM sessions UNION SELECT DISTINCT session_id FROM entries ORDER BY 1")
            return [row[0] for row in cur.fetchall()]

    def heads(self) -> dict[str, tuple[int, str]]:
        with self._read() as cur:
            cur.execute("SELECT id, length, head FROM sessions")
            return {row[0]: (int(row[1]), row[2]) for row in cur.fetchall()}

    def all_attachments(self) -> list[AttachmentRow]:
        with self._read() as cur:
            cur.execute(f"SELECT {_ATTACHMENT_COLUMNS} FROM attachments a ORDER BY a.id")
            return [_attachment(row) for row in cur.fetchall()]

    def links(self) -> list[tuple[str, str]]:
        with self._read() as cur:
            cur.execute("SELECT session_id, attachment_id FROM session_attachments")
            return [(row[0], row[1]) for row in cur.fetchall()]

    def blob_ids(self) -> list[str]:
        with self._read() as cur:
            cur.execute("SELECT id FROM attachment_blobs")
            return [row[0] for row in cur.fetchall()]

    def blob(self, attachment_id: str) -> bytes | None:
        with self._read() as cur:
            cur.execute(self._q("SELECT data FROM attachment_blobs WHERE id = ?"), (attachment_id,))
            row = cur.fetchone()
        return None if row is None else bytes(row[0])

    def session_rows(self) -> list[SessionRow]:
        with self._read() as cur:
            cur.execute(
                "SELECT e.session_id, e.kind, COUNT(*), MIN(e.created_at), MAX(e.created_at), "
                f"SUM({self._payload_bytes_sql}), MAX(s.length) FROM entries e "
                "LEFT JOIN sessions s ON s.id = e.session_id GROUP BY e.session_id, e.kind ORDER BY 1, 2"
            )
            grouped = cur.fetchall()
            bare: list[Any] = []
            if self.schema_version >= _BRANCHES:
                # A branch that has added nothing yet holds no entry of its own, only its head row.
                cur.execute(
                    "SELECT s.id, s.length, s.created_at FROM sessions s WHERE s.parent IS NOT NULL "
                    "AND NOT EXISTS (SELECT 1 FROM entries e WHERE e.session_id = s.id)"
                )
                bare = cur.fetchall()
        forks = self.forks()
        out: dict[str, SessionRow] = {}
        for session_id, kind, count, first_at, last_at, size, length in grouped:
            seen = out.get(session_id)
            kinds = {**(seen.kinds if seen else {}), kind: int(count)}
            out[session_id] = SessionRow(
                session_id=session_id,
                length=0 if length is None else int(length),
                kinds=kinds,
                first_at=min(seen.first_at, first_at) if seen else first_at,
                last_at=max(seen.last_at, last_at) if seen else last_at,
                payload_bytes=(seen.payload_bytes if seen else 0) + int(size or 0),
                parent=forks.get(session_id, (None, 0))[0],
            )
        for session_id, length, created_at in bare:
            out[session_id] = SessionRow(
                session_id, int(length), {}, created_at, created_at, 0, forks[session_id][0]
            )
        return sorted(out.values(), key=lambda row: row.session_id)

    def delete_sessions(self, lengths: dict[str, int]) -> tuple[list[str], list[str]]:
        self._check_writable()
        removed: list[str] = []
        with self._write() as cur:
            for session_id in branches_first(lengths, self.forks()):
                # The head row is the session's lock: deleting it only at the length read means an
                # append that came in between keeps the session (and waits for, or follows, this).
                # A session another one still branches from is kept: that branch reads its prefix.
                # (A writable store is at the current schema: its head rows say their parent.)
                cur.execute(
                    self._q(
                        "DELETE FROM sessions WHERE id = ? AND length = ? "
                        "AND NOT EXISTS (SELECT 1 FROM sessions c WHERE c.parent = ?)"
                    ),
                    (session_id, lengths[session_id], session_id),
                )
                if not self._rowcount(cur):
                    continue
                cur.execute(self._q("DELETE FROM entries WHERE session_id = ?"), (session_id,))
                cur.execute(self._q("DELETE FROM session_attachments WHERE session_id = ?"), (session_id,))
                removed.append(session_id)
            if not removed:
                return [], []
            unlinked = (
                "SELECT id FROM attachments WHERE id NOT IN (SELECT attachment_id FROM session_attachments)"
            )
            cur.execute(unlinked + " ORDER BY id")
            gone = [row[0] for row in cur.fetchall()]
            cur.execute(
                "DELETE FROM attachment_blobs WHERE id NOT IN (SELECT attachment_id FROM session_attachments)"
            )
            cur.execute(
                "DELETE FROM attachments WHERE id NOT IN (SELECT attachment_id FROM session_attachments)"
            )
        return sorted(removed), gone

    def reclaim(self) -> None:  # noqa: B027 - PostgreSQL's autovacuum reclaims on its own
        """Nothing to do by default (PostgreSQL's autovacuum reuses the space)."""

    def file_bytes(self) -> int | None:
        return None
