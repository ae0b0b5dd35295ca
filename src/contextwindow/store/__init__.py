"""The ledger: a durable, append-only session store (memory, SQLite by default, PostgreSQL).

Everything the agent saw and every record about it lives here, in one total order per session; it
is the source of truth that compile reads. ::

    from contextwindow.store import open_store

    with open_store("agent.db") as store:          # SQLite (WAL); "postgresql://..." for PostgreSQL
        session = store.session("run-42")
        ref = session.attach(png_bytes, "image/png")   # stored once by sha256, dimensions sniffed
        session.append(Message.user("look", Image(ref=ref)), block_prices=[1.0, 1600.0])
        session.record("usage", {"input_tokens": 1234, "output_tokens": 56})
        for stored in session.messages(): ...

**Entry kinds** (a closed set; payload format versions in :data:`FORMAT_VERSIONS`): ``message``
(through :meth:`Session.append`), ``usage``, ``anchor``, ``calibration``, ``checkpoint`` (needs
``summary``, ``first_id``, ``last_id``), ``eviction``, ``archive``, ``note``. Payloads are JSON
objects; NaN and infinities are refused. Old payload formats are upgraded when read.

**Guarantees**: a call that raises wrote nothing; appends are atomic and totally ordered even
across processes; attachment metadata reads never touch bytes, bytes are read one attachment at a
time and only by sessions that attached them; bytes are stored once, but the metadata and stamps of an
attachment belong to each session's link to them; :meth:`Store.verify` lists any broken invariant.
**Branches**: :meth:`Session.branch_from` starts a session as the first entries of another one,
stored as the parent and the fork position (nothing copied); every read sees the whole conversation.
**Retention**: entries are never removed from a session; :meth:`Store.prune` removes whole sessions
(older than a time, or oldest first down to a size) and the attachments no other session links, and
:meth:`Store.size` says how much the store holds. Every driver error is mapped into :mod:`contextwindow.errors` (``StoreError``, ``StoreBusy``,
``SchemaTooNew``); bad input is ``InvalidInput`` naming the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError
from ._backend import Backend
from ._budgets import DEFAULT_MEDIA_TYPES, Budgets
from ._kinds import ENTRY_KINDS, FORMAT_VERSIONS, RECORD_KINDS
from ._lazy import MessageLog
from ._ledger import STORE_SESSIONS, Session, Store
from ._migrations import SCHEMA_VERSION
from ._values import Entry, Problem, Pruned, SessionInfo, StoredMessage, StoreSize
from .slots import LedgerSlot, MemorySlot, StateSlot

__all__ = [
    "DEFAULT_MEDIA_TYPES",
    "ENTRY_KINDS",
    "FORMAT_VERSIONS",
    "MEMORY_NAMES",
    "RECORD_KINDS",
    "SCHEMA_VERSION",
    "STORE_SESSIONS",
    "Budgets",
    "Entry",
    "LedgerSlot",
    "MemorySlot",
    "MessageLog",
    "Problem",
    "Pruned",
    "Session",
    "SessionInfo",
    "StateSlot",
    "Store",
    "StoreSize",
    "StoredMessage",
    "in_memory",
    "open_store",
]

_SQLITE_OPTIONS = frozenset({"busy_timeout", "durability", "read_only"})
_POSTGRES_OPTIONS = frozenset({"busy_timeout", "durability", "schema", "connect_timeout", "read_only"})


def open_store(url_or_path: str | Path | None = None, **options: Any) -> Store:
    """Open (creating and migrating if needed) the store a URL or path names.

    - ``None``, ``":memory:"`` or ``"memory://"``: an in-memory store, gone with the process.
    - a path, or ``"sqlite:///path"`` (``sqlite:////abs/path`` for an absolute one, as SQLAlchemy
      spells it): SQLite. Options: ``busy_timeout`` (seconds, default 5), ``durability``
      (``"full"``, the default, or ``"normal"``; see :mod:`contextwindow.store._sqlite`).
    - ``"postgresql://..."``: PostgreSQL through psycopg 3. Options: ``busy_timeout``,
      ``durability``, ``schema``, ``connect_timeout``.

    Every backend takes ``budgets=Budgets(...)`` (admission limits). A database written by a newer
    library opens read-only: writes raise ``SchemaTooNew``. ``read_only=True`` (SQLite and
    PostgreSQL) looks into an existing store without creating or changing anything: no migration,
    no new file; a path that is not a store (missing, empty, a text file, another SQLite database) is
    a ``StoreError`` saying so, and writes are a ``UsageError``.
    """
    budgets = options.pop("budgets", None)
    if budgets is not None and not isinstance(budgets, Budgets):
        raise UsageError(f"budgets must be a contextwindow.store.Budgets, got {type(budgets).__name__}")
    backend = _backend(url_or_path, options)
    return Store(backend, budgets=budgets)


MEMORY_NAMES = (":memory:", "memory://", "memory:")
"""What names the in-memory store (besides ``None``)."""


def in_memory(url_or_path: object) -> bool:
    """Whether :func:`open_store` opens ``url_or_path`` as the in-memory store (which takes no options)."""
    return url_or_path is None or (isinstance(url_or_path, str) and url_or_path in MEMORY_NAMES)


def _backend(url_or_path: str | Path | None, options: dict[str, Any]) -> Backend:
    if in_memory(url_or_path):
        _no_options(options, frozenset(), "memory")
        from ._memory import MemoryBackend

        return MemoryBackend()
    if isinstance(url_or_path, Path):
        return _open_sqlite(url_or_path, options)
    if not isinstance(url_or_path, str):
        raise UsageError(f"a store is named by a path or URL string, got {type(url_or_path).__name__}")
    if url_or_path.startswith(("postgresql://", "postgres://")):
        _no_options(options, _POSTGRES_OPTIONS, "PostgreSQL")
        from ._postgres import PostgresBackend

        return PostgresBackend(url_or_path, **options)
    if url_or_path.startswith("sqlite:///"):
        return _open_sqlite(url_or_path.removeprefix("sqlite:///"), options)
    if "://" in url_or_path:
        raise UsageError(
            f"unsupported store URL {url_or_path.split('://')[0]}://…; use a path, sqlite:///…, "
            "postgresql://… or memory://"
        )
    return _open_sqlite(url_or_path, options)


def _open_sqlite(path: str | Path, options: dict[str, Any]) -> Backend:
    _no_options(options, _SQLITE_OPTIONS, "SQLite")
    from ._sqlite import SqliteBackend

    return SqliteBackend(path, **options)


def _no_options(options: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise UsageError(
            f"unknown {what} store option(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed)) or 'none'}"
        )
