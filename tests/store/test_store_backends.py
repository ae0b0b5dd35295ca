"""Backend specifics: SQLite settings, busy contention, versioning, verify, and the error mapping."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import Target
from contextwindow.content import Message
from contextwindow.errors import SchemaTooNew, StoreBusy, StoreError
from contextwindow.store import SCHEMA_VERSION, open_store
from contextwindow.store import _kinds as kinds
from contextwindow.store._driver_errors import from_psycopg, from_sqlite


class TestSqliteSettings:
    @pytest.mark.parametrize(
        ("durability", "synchronous"), [("full", 2), ("normal", 1)], ids=["full", "normal"]
    )
    def test_wal_and_the_durability_setting(self, tmp_path: Path, durability: str, synchronous: int) -> None:
        with open_store(tmp_path / "a.db", durability=durability) as store:
            db = store._backend()._db  # type: ignore[attr-defined]
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert db.execute("PRAGMA synchronous").fetchone()[0] == synchronous

    def test_entries_of_several_kinds_are_read_by_the_kind_index(self, tmp_path: Path) -> None:
        # A compile reads a session's archives, checkpoints and evictions on every request: read in
        # position order, SQLite walked every entry of the session to find none (O(history)).
        with open_store(tmp_path / "k.db") as store:
            session = store.session("s")
            for i in range(50):
                session.append(Message.user(f"m{i}"))
            session.note("a note")
            db = store._backend()._db  # type: ignore[attr-defined]
            run: list[str] = []
            db.set_trace_callback(run.append)
            assert [e.kind for e in session.entries(["note", "checkpoint"])] == ["note"]
            db.set_trace_callback(None)
            [query] = [q for q in run if q.lstrip().upper().startswith("SELECT") and "kind IN" in q]
            plan = " ".join(str(row[3]) for row in db.execute(f"EXPLAIN QUERY PLAN {query}"))
            assert "entries_by_kind" in plan, plan

    def test_a_batch_reads_a_sessions_head_once_however_often_it_appends(self, tmp_path: Path) -> None:
        # A guarded call records its reply in one batch of several appends to one session (usage,
        # anchor, calibration, notes, the message): each read the head row and inserted-or-ignored
        # the session row again, two statements of every six.
        with open_store(tmp_path / "h.db") as store:
            session = store.session("s")
            session.note("before")  # outside a batch: a transaction of its own
            db = store._backend()._db  # type: ignore[attr-defined]
            run: list[str] = []
            db.set_trace_callback(run.append)
            with store.batch():
                session.record("usage", {"n": 1})
                session.append(Message.user("a"))
                session.note("after")
                store.session("t").note("another session: its own head")
            db.set_trace_callback(None)
            heads = [q for q in run if q.startswith("SELECT length, head FROM sessions")]
            starts = [q for q in run if q.startswith("INSERT INTO sessions")]
            assert (len(heads), len(starts)) == (2, 2)
            assert [e.position for e in session.entries()] == [0, 1, 2, 3] and store.verify() == []

    def test_sqlite_url_and_path_name_the_same_file(self, tmp_path: Path) -> None:
        with open_store(f"sqlite:///{tmp_path}/b.db") as store:
            store.session("s").note("x")
        with open_store(str(tmp_path / "b.db")) as store:
            assert len(store.session("s").entries()) == 1

    def test_contention_past_the_busy_timeout_is_store_busy_and_writes_nothing(self, tmp_path: Path) -> None:
        path = tmp_path / "busy.db"
        with open_store(path, busy_timeout=0.05) as store:
            blocker = sqlite3.connect(path, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreBusy):
                store.session("s").append(Message.user("x"))
            blocker.execute("ROLLBACK")
            blocker.close()
            assert store.session("s").entries() == []
            store.session("s").append(Message.user("x"))

    def test_a_failure_mid_append_rolls_back(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        with open_store(tmp_path / "c.db") as store:
            session = store.session("s")
            session.note("first")
            import contextwindow.store._sql as sql

            def broken(*args: Any) -> str:
                raise RuntimeError("disk on fire")

            monkeypatch.setattr(sql, "entry_digest", broken)
            with pytest.raises(RuntimeError):
                session.note("second")
            monkeypatch.undo()
            assert [e.payload["text"] for e in session.entries()] == ["first"]
            assert store.verify() == []

    def test_a_file_that_is_not_a_database_is_a_store_error(self, tmp_path: Path) -> None:
        path = tmp_path / "junk.db"
        path.write_bytes(b"not a database at all" * 100)
        with pytest.raises(StoreError):
            open_store(path)

    def test_an_unreachable_path_is_a_store_error(self, tmp_path: Path) -> None:
        with pytest.raises(StoreError):
            open_store(tmp_path / "no" / "such" / "dir.db")


class TestVersioning:
    def _bump(self, target: Target) -> None:
        with target.open() as store:
            backend = store._backend()
            with backend._write() as cur:  # type: ignore[attr-defined]
                cur.execute(
                    backend._q("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),  # type: ignore[attr-defined]
                    (SCHEMA_VERSION + 1, "from the future", "2099-01-01"),
                )

    def test_migrations_are_recorded_once(self, durable_target: Target) -> None:
        for _ in range(2):
            with durable_target.open() as store:
                assert store.schema_version == SCHEMA_VERSION and store.writable
        with durable_target.open() as store, store._backend()._read() as cur:  # type: ignore[attr-defined]
            cur.execute("SELECT version FROM schema_migrations")
            assert [row[0] for row in cur.fetchall()] == list(range(1, SCHEMA_VERSION + 1))

    def test_a_newer_database_is_readable_but_refused_for_writing(self, durable_target: Target) -> None:
        with durable_target.open() as store:
            store.session("s").note("old")
        self._bump(durable_target)
        with durable_target.open() as store:
            assert not store.writable and store.schema_version == SCHEMA_VERSION + 1
            assert len(store.session("s").entries()) == 1
            with pytest.raises(SchemaTooNew):
                store.session("s").note("new")

    def test_old_payloads_are_upgraded_when_read(
        self, target: Target, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = target.open()
        store.session("s").record("usage", {"prompt": 7})
        monkeypatch.setitem(kinds.FORMAT_VERSIONS, "usage", 2)
        monkeypatch.setitem(kinds.UPGRADES["usage"], 1, lambda p: {"input_tokens": p.pop("prompt"), **p})
        [entry] = store.session("s").entries()
        assert (entry.version, entry.payload) == (2, {"input_tokens": 7})

    def test_a_payload_from_a_newer_library_is_schema_too_new(
        self, target: Target, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = target.open()
        store.session("s").record("usage", {"x": 1})
        monkeypatch.setitem(kinds.FORMAT_VERSIONS, "usage", 0)
        with pytest.raises(SchemaTooNew):
            store.session("s").entries()


class TestUpgradeFromSchemaOne:
    """A database written before attachment metadata moved onto the session's link."""

    def _schema_one(self, target: Target) -> None:
        from contextwindow.store import _migrations

        migrations = _migrations.SQLITE if target.kind == "sqlite" else _migrations.POSTGRES
        if target.kind == "sqlite":
            db: Any = sqlite3.connect(target.url or "", isolation_level=None)
            q = lambda sql: sql  # noqa: E731
        else:
            db = psycopg.connect(target.url or "", autocommit=True)
            schema = target.options["schema"]
            db.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            db.execute(f'SET search_path TO "{schema}"')
            q = lambda sql: sql.replace("?", "%s")  # noqa: E731
        db.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        for statement in migrations[0][1]:
            db.execute(statement)
        db.execute(q("INSERT INTO schema_migrations VALUES (?, ?, ?)"), (1, migrations[0][0], "2026-01-01"))
        digest = hashlib.sha256(b"old bytes").hexdigest()
        att = f"att_{digest[:32]}"
        db.execute(
            q("INSERT INTO attachments VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
            (
                att,
                digest,
                "text/plain",
                9,
                None,
                None,
                None,
                None,
                42.0,
                '{"filename": "old.txt"}',
                "2026-01-01",
            ),
        )
        db.execute(q("INSERT INTO attachment_blobs VALUES (?, ?)"), (att, b"old bytes"))
        db.execute(q("INSERT INTO session_attachments VALUES (?, ?, ?)"), ("old", att, "2026-01-01"))
        db.close()

    def test_links_made_before_read_the_metadata_they_were_given(self, durable_target: Target) -> None:
        self._schema_one(durable_target)
        with durable_target.open() as store:
            assert store.schema_version == SCHEMA_VERSION
            old = store.session("old")
            [ref] = old.attachments()
            assert (ref.token_estimate, old.attachment_meta(ref)) == (42.0, {"filename": "old.txt"})
            assert old.read_attachment(ref) == b"old bytes"
            fresh = store.session("new").attach(b"old bytes", "text/plain")
            assert fresh.token_estimate is None and store.session("new").attachment_meta(fresh) == {}
            assert old.attachment(ref.id) == ref
            assert store.verify() == []


class TestVerify:
    def test_the_chain_is_sha256_over_each_field_and_a_nul_as_ledgers_already_written_hold_it(self) -> None:
        from contextwindow.store._rows import GENESIS, NewEntry, entry_digest

        entry = NewEntry(
            id="not_0192",
            kind="note",
            version=1,
            payload='{"text":"é ✓"}',
            created_at="2026-12-08T02:00:00+00:00",
        )
        h = hashlib.sha256()
        for part in ("cw1", GENESIS, "s", "7", entry.id, "note", "1", entry.created_at, entry.payload):
            h.update(part.encode("utf-8") + b"\x00")
        assert entry_digest(GENESIS, "s", 7, entry) == h.hexdigest()

    def _tamper(self, target: Target, sql: str) -> list[str]:
        with target.open() as store:
            session = store.session("s")
            ref = session.attach(b"some bytes", "text/plain")
            first = session.append(Message.user("one"))
            session.append(Message.user("two"))
            session.record_checkpoint("s", first_id=first.id, last_id=first.id)
            assert store.verify() == []
            with store._backend()._write() as cur:  # type: ignore[attr-defined]
                cur.execute(sql.replace("ATT", ref.id))
            return sorted({p.code for p in store.verify()})

    @pytest.mark.parametrize(
        ("sql", "codes"),
        [
            ("UPDATE entries SET payload = replace(payload, 'one', 'uno')", ["digest_mismatch"]),
            ("DELETE FROM entries WHERE position = 1", ["digest_mismatch", "head_mismatch", "position_gap"]),
            (
                "UPDATE entries SET payload = '{\"message\": 3}' WHERE position = 1",
                ["digest_mismatch", "unreadable_entry"],
            ),
            (
                "UPDATE entries SET payload = '" + "[" * 5000 + "]" * 5000 + "' WHERE position = 1",
                ["digest_mismatch", "unreadable_entry"],
            ),
            ("UPDATE sessions SET length = 99", ["head_mismatch"]),
            ("UPDATE attachments SET size_bytes = 3 WHERE id = 'ATT'", ["size_mismatch"]),
            ("DELETE FROM attachment_blobs", ["missing_blob"]),
            ("UPDATE session_attachments SET width = -4", ["bad_attachment_meta"]),
            ("UPDATE session_attachments SET meta = '[1]'", ["bad_attachment_meta"]),
        ],
        ids=[
            "edited",
            "dropped",
            "unparseable",
            "too-deep",
            "head",
            "size",
            "bytes-gone",
            "link-figure",
            "link-meta",
        ],
    )
    def test_each_broken_invariant_is_listed(
        self, durable_target: Target, sql: str, codes: list[str]
    ) -> None:
        assert self._tamper(durable_target, sql) == codes

    def test_a_link_that_disagrees_with_the_sessions_messages_is_listed(self, durable_target: Target) -> None:
        from contextwindow.content import Document

        with durable_target.open() as store:
            session = store.session("s")
            session.append(Message.user(Document(ref=session.attach(b"some bytes", "text/plain"))))
            store.session("t").attach(b"some bytes", "text/plain")
            with store._backend()._write() as cur:  # type: ignore[attr-defined]
                cur.execute("UPDATE session_attachments SET media_type = 'text/html' WHERE session_id = 's'")
            assert [(p.code, p.session_id) for p in store.verify()] == [("attachment_mismatch", "s")]

    def test_changed_bytes_are_found_and_never_served(self, durable_target: Target) -> None:
        with durable_target.open() as store:
            session = store.session("s")
            ref = session.attach(b"original", "text/plain")
            with store._backend()._write() as cur:  # type: ignore[attr-defined]
                cur.execute(store._backend()._q("UPDATE attachment_blobs SET data = ?"), (b"tampered",))  # type: ignore[attr-defined]
            assert [p.code for p in store.verify()] == ["blob_hash_mismatch"]
            with pytest.raises(StoreError):
                session.read_attachment(ref)


def _all_subclasses(root: type[BaseException]) -> list[type[BaseException]]:
    out, stack = [], [root]
    while stack:
        cls = stack.pop()
        out.append(cls)
        stack.extend(cls.__subclasses__())
    return out


class TestDriverErrorsAreMapped:
    @pytest.mark.parametrize("cls", _all_subclasses(sqlite3.Error), ids=lambda c: c.__name__)
    def test_every_sqlite3_error_becomes_a_store_error(self, cls: type[sqlite3.Error]) -> None:
        assert isinstance(from_sqlite(cls("boom"), "x"), StoreError)

    def test_sqlite_busy_and_locked_are_store_busy(self) -> None:
        assert isinstance(from_sqlite(sqlite3.OperationalError("database is locked"), "x"), StoreBusy)
        assert not isinstance(from_sqlite(sqlite3.OperationalError("no such table: x"), "x"), StoreBusy)

    @pytest.mark.parametrize(
        "cls", _all_subclasses(psycopg.Error), ids=lambda c: f"{c.__module__}.{c.__name__}"
    )
    def test_every_psycopg_error_becomes_a_store_error(self, cls: type[psycopg.Error]) -> None:
        assert isinstance(from_psycopg(cls("boom"), "x"), StoreError)

    @pytest.mark.parametrize(
        "cls",
        [
            psycopg.errors.LockNotAvailable,
            psycopg.errors.QueryCanceled,
            psycopg.errors.SerializationFailure,
            psycopg.errors.DeadlockDetected,
        ],
    )
    def test_postgres_contention_is_store_busy(self, cls: type[psycopg.Error]) -> None:
        assert isinstance(from_psycopg(cls("boom"), "x"), StoreBusy)

    @pytest.mark.parametrize("cls", _all_subclasses(sqlite3.Error), ids=lambda c: c.__name__)
    def test_a_driver_error_inside_a_real_call_arrives_mapped(
        self, tmp_path: Path, cls: type[sqlite3.Error]
    ) -> None:
        with open_store(tmp_path / "e.db") as store:
            backend = store._backend()
            real = backend._db  # type: ignore[attr-defined]

            class Failing:
                in_transaction = False

                def execute(self, sql: str, *args: Any) -> Any:
                    if sql.startswith("BEGIN"):
                        raise cls("injected")
                    return real.execute(sql, *args)

                def cursor(self) -> Any:
                    raise cls("injected")

            backend._db = Failing()  # type: ignore[attr-defined]
            with pytest.raises(StoreError):
                store.session("s").note("x")
            with pytest.raises(StoreError):
                store.session("s").entries()
            backend._db = real  # type: ignore[attr-defined]

    def test_an_unreachable_postgres_is_a_store_error(self) -> None:
        with pytest.raises(StoreError):
            open_store("postgresql://postgres@127.0.0.1:1/nowhere", connect_timeout=1)

    def test_postgres_lock_timeout_is_store_busy(self) -> None:
        from conftest import postgres_url

        url = postgres_url()
        with open_store(url, schema="cwtest_busy", busy_timeout=0.05) as store:
            store.session("s").note("x")
            with psycopg.connect(url) as blocker:
                blocker.execute("SET search_path TO cwtest_busy")
                blocker.execute("SELECT * FROM sessions WHERE id = 's' FOR UPDATE")
                with pytest.raises(StoreBusy):
                    store.session("s").note("y")
            assert len(store.session("s").entries()) == 1
        with psycopg.connect(url, autocommit=True) as db:
            db.execute("DROP SCHEMA cwtest_busy CASCADE")
