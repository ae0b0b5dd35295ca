"""The schema, as an append-only list of migrations per SQL dialect; position + 1 is the version.

Migrations are applied on open, each in the same write transaction that records it in
``schema_migrations`` (SQLite under ``BEGIN IMMEDIATE``; PostgreSQL under a transaction-scoped
advisory lock), so two processes opening a fresh database at once apply each migration exactly once
and a crash mid-migration leaves the previous version intact. Never edit or reorder an entry: add
one (a no-op placeholder rather than a renumber, as langgraph does).
"""

from __future__ import annotations

from typing import Final

__all__ = ["POSTGRES", "SCHEMA_VERSION", "SQLITE", "Migration"]

Migration = tuple[str, tuple[str, ...]]
"""``(name, statements)``."""

SQLITE: Final[tuple[Migration, ...]] = (
    (
        "initial ledger: sessions, entries, attachments, blobs, links",
        (
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                length INTEGER NOT NULL,
                head TEXT NOT NULL,
                created_at TEXT NOT NULL)""",
            """CREATE TABLE entries (
                session_id TEXT NOT NULL,
                position INTEGER NOT NULL,
                id TEXT NOT NULL UNIQUE,
                kind TEXT NOT NULL,
                version INTEGER NOT NULL,
                payload TEXT NOT NULL,
                created_at TEXT NOT NULL,
                digest TEXT NOT NULL,
                UNIQUE (session_id, position))""",
            "CREATE INDEX entries_by_kind ON entries (session_id, kind, position)",
            """CREATE TABLE attachments (
                id TEXT PRIMARY KEY,
                sha256 TEXT NOT NULL UNIQUE,
                media_type TEXT NOT NULL,
                size_bytes INTEGER NOT NULL,
                width INTEGER,
                height INTEGER,
                duration_seconds REAL,
                pages INTEGER,
                token_estimate REAL,
                meta TEXT NOT NULL,
                created_at TEXT NOT NULL)""",
            """CREATE TABLE attachment_blobs (
                id TEXT PRIMARY KEY REFERENCES attachments (id),
                data BLOB NOT NULL)""",
            """CREATE TABLE session_attachments (
                session_id TEXT NOT NULL,
                attachment_id TEXT NOT NULL REFERENCES attachments (id),
                created_at TEXT NOT NULL,
                PRIMARY KEY (session_id, attachment_id))""",
        ),
    ),
    (
        "per-session attachment metadata: each link carries the media type, figures, stamp and meta "
        "the session attached the bytes with (NULL meta: a link made before, read from the shared row)",
        tuple(
            f"ALTER TABLE session_attachments ADD COLUMN {column}"
            for column in (
                "media_type TEXT",
                "width INTEGER",
                "height INTEGER",
                "duration_seconds REAL",
                "pages INTEGER",
                "token_estimate REAL",
                "meta TEXT",
            )
        ),
    ),
    (
        "branches: a session may start as the first forked_at entries of its parent session "
        "(NULL parent: a session of its own from position 0)",
        (
            "ALTER TABLE sessions ADD COLUMN parent TEXT",
            "ALTER TABLE sessions ADD COLUMN forked_at INTEGER",
            "CREATE INDEX sessions_by_parent ON sessions (parent)",
        ),
    ),
    (
        "branch edits: a branch may hold rows below its forked_at, each in place of its prefix's entry "
        "of the same kind there (no new column; older libraries must not read such views as plain branches)",
        (),
    ),
)

POSTGRES: Final[tuple[Migration, ...]] = (
    (
        "initial ledger: sessions, entries, attachments, blobs, links",
        (
            """CREATE TABLE sessions (
                id TEXT PRIMARY KEY,
                length BIGINT NOT NULL,
                head TEXT NOT NULL,
                created_at TEXT NOT NULL)""",
            """CREATE TABLE entries (
                session_id TEXT NOT NULL,
                position BIGINT NOT NULL,
                id TEXT NOT NULL UNIQUE,
                kind TEXT NOT NULL,
                version INTEGER NOT NULL,
                payload TEXT NOT NULL,
                created_at TEXT NOT NULL,
                digest TEXT NOT NULL,
                UNIQUE (session_id, position))""",
            "CREATE INDEX entries_by_kind ON entries (session_id, kind, position)",
            """CREATE TABLE attachments (
                id TEXT PRIMARY KEY,
                sha256 TEXT NOT NULL UNIQUE,
                media_type TEXT NOT NULL,
                size_bytes BIGINT NOT NULL,
                width INTEGER,
                height INTEGER,
                duration_seconds DOUBLE PRECISION,
                pages INTEGER,
                token_estimate DOUBLE PRECISION,
                meta TEXT NOT NULL,
                created_at TEXT NOT NULL)""",
            """CREATE TABLE attachment_blobs (
                id TEXT PRIMARY KEY REFERENCES attachments (id),
                data BYTEA NOT NULL)""",
            """CREATE TABLE session_attachments (
                session_id TEXT NOT NULL,
                attachment_id TEXT NOT NULL REFERENCES attachments (id),
                created_at TEXT NOT NULL,
                PRIMARY KEY (session_id, attachment_id))""",
        ),
    ),
    (
        "per-session attachment metadata: each link carries the media type, figures, stamp and meta "
        "the session attached the bytes with (NULL meta: a link made before, read from the shared row)",
        (
            "ALTER TABLE session_attachments ADD COLUMN media_type TEXT, ADD COLUMN width INTEGER, "
            "ADD COLUMN height INTEGER, ADD COLUMN duration_seconds DOUBLE PRECISION, "
            "ADD COLUMN pages INTEGER, ADD COLUMN token_estimate DOUBLE PRECISION, ADD COLUMN meta TEXT",
        ),
    ),
    (
        "branches: a session may start as the first forked_at entries of its parent session "
        "(NULL parent: a session of its own from position 0)",
        (
            "ALTER TABLE sessions ADD COLUMN parent TEXT, ADD COLUMN forked_at BIGINT",
            "CREATE INDEX sessions_by_parent ON sessions (parent)",
        ),
    ),
    (
        "branch edits: a branch may hold rows below its forked_at, each in place of its prefix's entry "
        "of the same kind there (no new column; older libraries must not read such views as plain branches)",
        (),
    ),
)

SCHEMA_VERSION: Final[int] = len(SQLITE)
"""The schema version this library writes; both dialects move in step."""

assert len(POSTGRES) == SCHEMA_VERSION, "SQLite and PostgreSQL migrations must move in step"
