"""The PostgreSQL backend (psycopg 3), for sessions shared by many workers or machines.

- Appends lock the session's head row (``SELECT … FOR UPDATE``), so appends to one session are
  serialised while appends to different sessions run in parallel.
- ``busy_timeout`` becomes ``lock_timeout``: contention beyond it is
  :class:`~contextwindow.errors.StoreBusy`.
- Migrations run under a transaction-scoped advisory lock (``pg_advisory_xact_lock``) keyed by the
  schema, so concurrent openers apply each one once.
- ``schema=`` keeps the ledger in its own PostgreSQL schema (created if missing).
- Durability: ``"full"`` (default) leaves ``synchronous_commit`` as the server has it (on by default:
  an acknowledged append survives a server crash); ``"normal"`` sets it ``off`` for this connection,
  which survives a client crash but may lose the last commits if the server crashes — the same
  trade as SQLite's ``normal``.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidInput, UsageError
from ._driver_errors import from_psycopg
from ._heads import BatchHeads
from ._migrations import POSTGRES
from ._sql import Cursor, SqlBackend

__all__ = ["PostgresBackend"]

_PASSWORD = re.compile(r"(://[^:/@]*):[^@/]*@")


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise UsageError("the PostgreSQL store needs psycopg: pip install 'contextwindow[postgres]'") from exc
    return psycopg


class PostgresBackend(SqlBackend):
    """One autocommit connection per store; each write is an explicit transaction."""

    _lock_session_sql = "SELECT length, head FROM sessions WHERE id = ? FOR UPDATE"

    def __init__(
        self,
        url: str,
        *,
        busy_timeout: float = 5.0,
        durability: str = "full",
        schema: str | None = None,
        connect_timeout: float = 10.0,
        read_only: bool = False,
    ) -> None:
        if durability not in ("full", "normal"):
            raise InvalidInput(f"must be one of ['full', 'normal'], got {durability!r}", path="durability")
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not busy_timeout >= 0
        ):
            raise InvalidInput(f"must be a number of seconds ≥ 0, got {busy_timeout!r}", path="busy_timeout")
        if schema is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", schema):
            raise InvalidInput(f"must be a plain identifier, got {schema!r}", path="schema")
        self._pg = _psycopg()
        self.url = _PASSWORD.sub(r"\1:***@", url)
        self.schema = schema
        self.durability = durability
        self._lock = threading.RLock()
        self._lineages = {}
        self.batch_heads = BatchHeads()
        self._closed = False
        try:
            self._db = self._pg.connect(url, autocommit=True, connect_timeout=max(1, int(connect_timeout)))
        except self._pg.Error as exc:
            raise from_psycopg(exc, self.url) from exc
        try:
            if schema is not None:
                ident = self._pg.sql.Identifier(schema)
                self._db.execute(self._pg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(ident))
                self._db.execute(self._pg.sql.SQL("SET search_path TO {}").format(ident))
            self._db.execute(f"SET lock_timeout = {int(busy_timeout * 1000)}")
            if durability == "normal":
                self._db.execute("SET synchronous_commit TO off")
            if read_only:
                self._db.execute("SET default_transaction_read_only = on")
                self._open_read_only()
            else:
                self._migrate(POSTGRES)
        except self._pg.Error as exc:
            self._db.close()
            raise from_psycopg(exc, self.url) from exc
        except BaseException:
            self._db.close()
            raise

    def _q(self, query: str) -> str:
        return query.replace("?", "%s")

    def _lock_migrations(self, cur: Cursor) -> None:
        key = int.from_bytes(
            hashlib.sha256(f"contextwindow:{self.schema}".encode()).digest()[:8], "big", signed=True
        )
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (key,))

    def _has_table(self, cur: Cursor, name: str) -> bool:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (name,))
        return bool(cur.fetchone()[0])

    def _connection(self) -> Any:
        if self._closed:
            raise UsageError(f"the store {self.url} is closed")
        return self._db

    @contextmanager
    def _write(self, *, keeps_heads: bool = False) -> Iterator[Cursor]:
        with self._lock:
            db = self._connection()
            if not keeps_heads:
                self.batch_heads.forget()
            try:
                # psycopg rolls the transaction back, never commits it, when the block raises.
                with db.transaction(), db.cursor() as cur:
                    yield cur
            except BaseException as exc:
                self.batch_heads.forget()  # a savepoint undone: what it appended is gone
                if isinstance(exc, self._pg.Error):
                    raise from_psycopg(exc, self.url) from exc
                raise

    @contextmanager
    def batch(self) -> Iterator[None]:
        with self._lock:
            db = self._connection()
            outermost = not self.batch_heads.open
            if outermost:
                self.batch_heads.begin()
            try:
                # Writes inside are psycopg's nested transactions: savepoints of this one.
                with db.transaction():
                    yield
            except BaseException as exc:
                self.batch_heads.forget()
                if isinstance(exc, self._pg.Error):
                    raise from_psycopg(exc, self.url) from exc
                raise
            finally:
                if outermost:
                    self.batch_heads.end()

    @contextmanager
    def _read(self) -> Iterator[Cursor]:
        with self._lock:
            db = self._connection()
            try:
                with db.cursor() as cur:
                    yield cur
            except self._pg.Error as exc:
                raise from_psycopg(exc, self.url) from exc

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._db.close()
                except self._pg.Error as exc:
                    raise from_psycopg(exc, self.url) from exc
