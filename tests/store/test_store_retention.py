"""Retention over every backend: session_infos(), size() and prune() keep the ledger consistent."""

from __future__ import annotations

import io
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PIL import Image as PILImage

from conftest import Target
from contextwindow.content import Image, Message
from contextwindow.errors import UsageError
from contextwindow.store import Store, open_store


def png(side: int, color: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (side, side), color).save(out, "PNG")
    return out.getvalue()


def written(store: Store, session_id: str, *, messages: int = 2, text: str = "hello") -> None:
    session = store.session(session_id)
    for index in range(messages):
        session.append(Message.user(f"{text} {index}"))
    session.record("usage", {"fresh_input": 10, "output": 2})


def a_moment() -> datetime:
    """A time strictly between what was written before and what is written after."""
    time.sleep(0.002)
    moment = datetime.now(UTC)
    time.sleep(0.002)
    return moment


class TestSessionInfos:
    def test_an_empty_store_has_none(self, store: Store) -> None:
        assert store.session_infos() == []
        assert store.size().sessions == 0 and store.size().bytes == 0

    def test_counts_each_kind_and_the_first_and_newest_entry_times(self, store: Store) -> None:
        started = datetime.now(UTC)
        written(store, "b", messages=3)
        store.session("b").note("done")
        written(store, "a", messages=1)
        infos = store.session_infos()
        assert [info.id for info in infos] == ["a", "b"]
        b = infos[1]
        assert b.entries == 5 and b.messages == 3
        assert dict(b.kinds) == {"message": 3, "usage": 1, "note": 1}
        assert started <= b.created_at <= b.last_at <= infos[0].created_at
        rows = store._backend().entries("b", None)
        assert b.payload_bytes == sum(len(row.payload.encode()) for row in rows) > 0

    def test_size_counts_an_attachment_once_however_many_sessions_link_it(self, store: Store) -> None:
        data = png(8, (1, 2, 3))
        for session_id in ("a", "b"):
            ref = store.session(session_id).attach(data, "image/png")
            store.session(session_id).append(Message.user("look", Image(ref=ref)))
        size = store.size()
        assert (size.sessions, size.entries, size.attachments) == (2, 2, 1)
        assert size.attachment_bytes == len(data)
        assert size.bytes == size.payload_bytes + len(data)


class TestPrune:
    def test_removes_the_sessions_older_than_the_cutoff_and_nothing_else(self, store: Store) -> None:
        written(store, "old-1")
        written(store, "old-2")
        cutoff = a_moment()
        written(store, "new")
        kept = store.session("new").messages()
        pruned = store.prune(last_before=cutoff)
        assert pruned.sessions == ("old-1", "old-2")
        assert store.sessions() == ["new"]
        assert store.session("new").messages() == kept
        assert store.session("old-1").entries() == [] and store.session("old-1").length() == 0
        assert store.verify() == []
        assert (pruned.before.sessions, pruned.after.sessions) == (3, 1)

    def test_a_session_written_after_the_cutoff_is_kept_however_old_its_start(self, store: Store) -> None:
        written(store, "long-running")
        cutoff = a_moment()
        store.session("long-running").note("still going")
        assert store.prune(last_before=cutoff).sessions == ()
        assert store.sessions() == ["long-running"]

    def test_an_attachment_goes_only_when_no_remaining_session_links_it(self, store: Store) -> None:
        shared, own = png(8, (9, 9, 9)), png(9, (5, 5, 5))
        old = store.session("old")
        shared_ref, own_ref = old.attach(shared, "image/png"), old.attach(own, "image/png")
        old.append(Message.user("both", Image(ref=shared_ref), Image(ref=own_ref)))
        cutoff = a_moment()
        new = store.session("new")
        new_ref = new.attach(shared, "image/png")
        new.append(Message.user("shared", Image(ref=new_ref)))
        pruned = store.prune(last_before=cutoff)
        assert pruned.sessions == ("old",)
        assert pruned.attachments == (own_ref.id,)
        assert new.read_attachment(new_ref) == shared
        assert store.size().attachments == 1 and store.size().attachment_bytes == len(shared)
        assert store.verify() == []

    def test_max_bytes_removes_the_oldest_first_until_the_rest_fit(self, store: Store) -> None:
        for index in range(5):
            written(store, f"s{index}", messages=3, text="x" * 2000)
            time.sleep(0.002)
        whole = store.size().bytes
        one = whole // 5
        pruned = store.prune(max_bytes=whole - 2 * one)
        assert pruned.sessions == ("s0", "s1")
        assert store.sessions() == ["s2", "s3", "s4"]
        assert store.size().bytes <= whole - 2 * one
        assert store.verify() == []
        assert store.prune(max_bytes=0).sessions == ("s2", "s3", "s4")
        assert store.size().bytes == 0 and store.sessions() == []

    def test_a_store_already_under_max_bytes_is_left_as_it_is(self, store: Store) -> None:
        written(store, "a")
        assert store.prune(max_bytes=10**9).sessions == ()
        assert store.sessions() == ["a"]

    def test_dry_run_removes_nothing_and_says_what_would_go(self, store: Store) -> None:
        ref = store.session("old").attach(png(8, (7, 7, 7)), "image/png")
        store.session("old").append(Message.user("look", Image(ref=ref)))
        cutoff = a_moment()
        written(store, "new")
        before = store.size()
        planned = store.prune(last_before=cutoff, dry_run=True)
        assert planned.dry_run and planned.sessions == ("old",) and planned.attachments == (ref.id,)
        assert store.size() == before and store.sessions() == ["new", "old"]
        done = store.prune(last_before=cutoff)
        assert done.sessions == planned.sessions and done.attachments == planned.attachments
        assert store.size().bytes == planned.after.bytes

    def test_a_session_appended_to_since_the_plan_was_read_is_kept(self, store: Store) -> None:
        written(store, "busy")
        written(store, "idle")
        stale = store.session("busy").length()
        store.session("busy").note("appended between the plan and the delete")
        backend = store._backend()
        removed, _ = backend.delete_sessions({"busy": stale, "idle": store.session("idle").length()})
        assert removed == ["idle"]
        assert store.sessions() == ["busy"] and store.verify() == []

    def test_a_pruned_session_written_again_starts_afresh_and_verifies(self, store: Store) -> None:
        written(store, "again")
        store.prune(max_bytes=0)
        stored = store.session("again").append(Message.user("new start"))
        assert stored.position == 0
        assert [m.message.content for m in store.session("again").messages()] == [
            Message.user("new start").content
        ]
        assert store.verify() == []

    def test_a_prune_inside_a_batch_that_fails_removes_nothing(self, store: Store) -> None:
        written(store, "a")
        before = store.session("a").entries()
        with pytest.raises(RuntimeError), store.batch():
            assert store.prune(max_bytes=0, reclaim=False).sessions == ("a",)
            raise RuntimeError("undo")
        assert store.session("a").entries() == before
        assert store.verify() == []

    @pytest.mark.parametrize(
        "bad",
        [
            {},
            {"last_before": datetime(2020, 1, 1)},  # naive: whose midnight?
            {"max_bytes": -1},
            {"max_bytes": True},
            {"max_bytes": 1.5},
        ],
        ids=["nothing", "naive-datetime", "negative", "bool", "float"],
    )
    def test_bad_arguments_are_a_usage_error_and_remove_nothing(
        self, store: Store, bad: dict[str, object]
    ) -> None:
        written(store, "a")
        with pytest.raises(UsageError):
            store.prune(**bad)  # type: ignore[arg-type]
        assert store.sessions() == ["a"]

    def test_a_read_only_store_refuses_to_prune(self, durable_target: Target) -> None:
        writer = durable_target.open()
        written(writer, "a")
        reader = durable_target.open(read_only=True)
        with pytest.raises(UsageError):
            reader.prune(max_bytes=0)
        assert writer.sessions() == ["a"]


class TestSqliteReclaim:
    def test_the_file_shrinks_after_a_prune(self, tmp_path: Path) -> None:
        path = tmp_path / "big.db"
        with open_store(path) as store:
            for index in range(20):
                written(store, f"s{index}", messages=5, text="y" * 5000)
            grown = store.size().file_bytes
            assert grown is not None and grown > 400_000
            store.prune(max_bytes=0)
            shrunk = store.size().file_bytes
            assert shrunk is not None and shrunk < grown / 4
        with open_store(path) as store:
            assert store.verify() == [] and store.sessions() == []

    def test_memory_and_a_file_store_say_where_the_bytes_are(self, tmp_path: Path) -> None:
        with open_store(None) as memory:
            assert memory.size().file_bytes is None
        with open_store(tmp_path / "f.db") as sqlite:
            assert (sqlite.size().file_bytes or 0) > 0
