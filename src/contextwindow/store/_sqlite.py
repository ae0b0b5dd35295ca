"""The SQLite backend, the embedded default: one file, WAL, ``BEGIN IMMEDIATE`` for every write.

- **WAL** lets readers go on while one writer writes, and makes a commit one append to the log.
- **``BEGIN IMMEDIATE``** takes the write lock before reading the session head, so two processes
  can never both read position *n* and both write it; the second waits up to ``busy_timeout``
  seconds and then gets :class:`~contextwindow.errors.StoreBusy`.
- **Rollback, never commit, on error**: a failed or interrupted append leaves the file as it was.
- **Batches** (``store.batch()``) are one ``BEGIN IMMEDIATE`` transaction; each write inside is a
  savepoint, so one that fails undoes only itself.
- **Durability** (``durability=``):

  ``"full"`` (default): ``synchronous=FULL``. The log is fsynced at every commit, so an acknowledged
  append survives a process crash, an OS crash and a power loss.

  ``"normal"``: ``synchronous=NORMAL``. An acknowledged append survives a process crash (the
  ``SIGKILL`` test covers it); an OS crash or power loss may roll back the last few commits, but the
  file is never corrupt. Faster where fsync is slow.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ..errors import InvalidInput, StoreError, UsageError
from ._driver_errors import from_sqlite
from ._heads import BatchHeads
from ._migrations import SQLITE
from ._sql import Cursor, SqlBackend

__all__ = ["DURABILITY", "SqliteBackend"]

DURABILITY = {"full": "FULL", "normal": "NORMAL"}


class SqliteBackend(SqlBackend):
    """A SQLite file (or ``:memory:``); one connection per store, guarded by a lock."""

    def __init__(
        self,
        path: str | Path,
        *,
        busy_timeout: float = 5.0,
        durability: str = "full",
        read_only: bool = False,
    ) -> None:
        if durability not in DURABILITY:
            raise InvalidInput(f"must be one of {sorted(DURABILITY)}, got {durability!r}", path="durability")
        if (
            isinstance(busy_timeout, bool)
            or not isinstance(busy_timeout, int | float)
            or not busy_timeout >= 0
        ):
            raise InvalidInput(f"must be a number of seconds ≥ 0, got {busy_timeout!r}", path="busy_timeout")
        self.path = str(path)
        self.url = f"sqlite:///{self.path}"
        self.durability = durability
        self._lock = threading.RLock()
        self._lineages = {}
        self.batch_heads = BatchHeads()
        self._batches = 0
        """How deep in :meth:`batch` this connection is (0: each write is its own transaction)."""
        self._closed = False
        if read_only:
            self._connect_read_only(float(busy_timeout))
            return
        try:
            self._db = sqlite3.connect(
                self.path, timeout=float(busy_timeout), isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.url) from exc
        with self._closed_on_failure():
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
            _journal_in_wal(self._db, float(busy_timeout))
            self._db.execute(f"PRAGMA synchronous = {DURABILITY[durability]}")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate(SQLITE)

    @contextmanager
    def _closed_on_failure(self) -> Iterator[None]:
        """Close the connection just opened when setting it up fails, SQLite's errors mapped."""
        try:
            yield
        except BaseException as exc:
            self._db.close()
            if isinstance(exc, sqlite3.Error):
                raise from_sqlite(exc, self.url) from exc
            raise

    def _connect_read_only(self, busy_timeout: float) -> None:
        """Open without creating or changing a file: the path must be an SQLite file with a ledger.

        With no ``-wal`` file beside it (no writer has it open), the database is opened
        ``immutable``, so SQLite creates no ``-wal``/``-shm`` files either; with one, read-only
        (``mode=ro``) through the files the writer already made, so its uncommitted-to-the-main-file
        appends are seen.
        """
        path = Path(self.path)
        try:
            with path.open("rb") as f:
                header = f.read(16)
        except FileNotFoundError:
            raise StoreError(f"{self.path}: no such store") from None
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        if not header:
            raise StoreError(f"{self.path}: not a contextwindow store (the file is empty)")
        if header != b"SQLite format 3\x00":
            raise StoreError(f"{self.path}: not a contextwindow store (not an SQLite database)")
        mode = "mode=ro" if Path(f"{self.path}-wal").exists() else "immutable=1"
        try:
            self._db = sqlite3.connect(
                f"{path.resolve().as_uri()}?{mode}",
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.url) from exc
        with self._closed_on_failure():
            self._open_read_only()

    _payload_bytes_sql = "LENGTH(CAST(payload AS BLOB))"

    def reclaim(self) -> None:
        """``VACUUM``, then a truncating checkpoint: rewrite the file without the pages a delete freed
        and empty the write-ahead log the rewrite went through (outside any batch)."""
        self._check_writable()
        with self._lock:
            if self._batches:
                raise UsageError("reclaim() cannot run inside a batch")
            db = self._connection()
            try:
                db.execute("VACUUM")
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise from_sqlite(exc, self.url) from exc

    def file_bytes(self) -> int | None:
        if self.path in ("", ":memory:") or self.path.startswith("file:"):
            return None
        total = 0
        for suffix in ("", "-wal"):
            with suppress(OSError):
                total += Path(f"{self.path}{suffix}").stat().st_size
        return total

    def _has_table(self, cur: Cursor, name: str) -> bool:
        cur.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        return cur.fetchone() is not None

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise UsageError(f"the store {self.url} is closed")
        return self._db

    @contextmanager
    def _write(self, *, keeps_heads: bool = False) -> Iterator[Cursor]:
        with self._lock:
            db = self._connection()
            if not keeps_heads:
                self.batch_heads.forget()
            if self._batches:
                # Inside a batch: a savepoint, so a write that fails undoes only itself.
                with self._savepoint(db):
                    yield db.cursor()
                return
            try:
                db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise from_sqlite(exc, self.url) from exc
            try:
                yield db.cursor()
                db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback(db)
                raise from_sqlite(exc, self.url) from exc
            except BaseException:
                self._rollback(db)
                raise

    @contextmanager
    def batch(self) -> Iterator[None]:
        with self._lock:
            if self._batches:
                self._batches += 1
                try:
                    with self._savepoint(self._connection()):
                        yield
                finally:
                    self._batches -= 1
                return
            with self._write():
                self._batches = 1
                self.batch_heads.begin()
                try:
                    yield
                finally:
                    self._batches = 0
                    self.batch_heads.end()

    @contextmanager
    def _savepoint(self, db: sqlite3.Connection) -> Iterator[None]:
        try:
            db.execute("SAVEPOINT cw_write")
        except sqlite3.Error as exc:
            raise from_sqlite(exc, self.url) from exc
        try:
            yield
            db.execute("RELEASE cw_write")
        except sqlite3.Error as exc:
            self.batch_heads.forget()
            self._undo(db)
            raise from_sqlite(exc, self.url) from exc
        except BaseException:
            self.batch_heads.forget()
            self._undo(db)
            raise

    @staticmethod
    def _undo(db: sqlite3.Connection) -> None:
        with suppress(sqlite3.Error):
            db.execute("ROLLBACK TO cw_write")
            db.execute("RELEASE cw_write")

    @staticmethod
    def _rollback(db: sqlite3.Connection) -> None:
        # The transaction may already be gone (SQLite rolls back by itself on some errors).
        if db.in_transaction:
            with suppress(sqlite3.Error):
                db.execute("ROLLBACK")

    @contextmanager
    def _read(self) -> Iterator[Cursor]:
        with self._lock:
            db = self._connection()
            try:
                yield db.cursor()
            except sqlite3.Error as exc:
                raise from_sqlite(exc, self.url) from exc

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._db.close()
                except sqlite3.Error as exc:
                    raise from_sqlite(exc, self.url) from exc


def _journal_in_wal(db: sqlite3.Connection, busy_timeout: float) -> None:
    """``PRAGMA journal_mode = WAL``, waiting out another process that is doing the same.

    Switching a new file to WAL takes an exclusive lock and SQLite answers "database is locked" at
    once, without its busy handler, when another connection holds it: two workers opening one new
    store together would see one of them fail. So it is retried until ``busy_timeout`` has passed.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
