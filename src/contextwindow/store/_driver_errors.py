"""Driver errors mapped into the error tree, so no sqlite3 or psycopg exception escapes the store.

Contention that outlasted the busy timeout (SQLite ``SQLITE_BUSY``/``SQLITE_LOCKED``; PostgreSQL
``lock_not_available``, a cancelled statement after ``lock_timeout``, serialization failures and
deadlocks) is :class:`~contextwindow.errors.StoreBusy`: the caller may retry. Everything else is
:class:`~contextwindow.errors.StoreError` naming the store and the driver's own message. The original
is kept as ``__cause__``.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ..errors import StoreBusy, StoreError

__all__ = ["from_psycopg", "from_sqlite"]

# SQLite primary result codes (https://www.sqlite.org/rescode.html): SQLITE_BUSY 5, SQLITE_LOCKED 6.
_SQLITE_BUSY_CODES = frozenset({5, 6})
# PostgreSQL SQLSTATEs (appendix A): lock_not_available, query_canceled (lock_timeout),
# serialization_failure, deadlock_detected.
_PG_BUSY_STATES = frozenset({"55P03", "57014", "40001", "40P01"})


def from_sqlite(exc: sqlite3.Error, where: str) -> StoreError:
    """The store error for a sqlite3 exception."""
    code = getattr(exc, "sqlite_errorcode", None)
    text = str(exc)
    busy = (code is not None and code & 0xFF in _SQLITE_BUSY_CODES) or (
        code is None and isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)
    )
    if busy:
        return StoreBusy(f"{where}: the database stayed locked past the busy timeout ({text})")
    return StoreError(f"{where}: {type(exc).__name__}: {text}")


def from_psycopg(exc: Any, where: str) -> StoreError:
    """The store error for a psycopg exception (``psycopg.Error`` or a subclass)."""
    state = getattr(exc, "sqlstate", None)
    text = str(exc).strip() or type(exc).__name__
    if state in _PG_BUSY_STATES:
        return StoreBusy(f"{where}: contention outlasted the lock timeout ({state}: {text})")
    return StoreError(f"{where}: {type(exc).__name__}: {text}")
