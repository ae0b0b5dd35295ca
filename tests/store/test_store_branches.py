"""Branches over every backend: a session that shares its parent's prefix reads as the whole conversation
and stores only what it adds (``Session.branch_from``)."""

from __future__ import annotations

import io
import sqlite3

import pytest
from PIL import Image as PILImage

from conftest import Target
from contextwindow.content import Image, Message, Text
from contextwindow.errors import InvalidInput, SessionMoved
from contextwindow.store import SCHEMA_VERSION, Store, open_store


def png(side: int) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (side, side), (10, 200, 30)).save(out, "PNG")
    return out.getvalue()


def conversation(store: Store, session_id: str = "root", turns: int = 5) -> list[str]:
    """``turns`` exchanges, each followed by a usage record; the message ids in order."""
    session = store.session(session_id)
    ids = []
    for turn in range(turns):
        ids.append(session.append(Message.user(f"question {turn}")).id)
        ids.append(session.append(Message.assistant(f"answer {turn}")).id)
        session.record("usage", {"input_tokens": 100 * turn, "output_tokens": 5})
    return ids


def texts(store: Store, session_id: str) -> list[str]:
    return [
        "".join(b.text for b in s.message.content if isinstance(b, Text))
        for s in store.session(session_id).messages()
    ]


class TestABranchReadsAsTheWholeConversation:
    def test_length_messages_and_entries_are_the_prefix_then_its_own(self, store: Store) -> None:
        conversation(store)
        root = store.session("root")
        at = root.position_of(root.messages()[5].id)  # the third exchange's answer
        assert at == 7
        branch = store.session("root.1")
        branch.branch_from("root", at)
        assert branch.length() == at
        branch.append(Message.assistant("answer 2, edited"))
        branch.record("usage", {"input_tokens": 7, "output_tokens": 1})
        assert texts(store, "root.1") == [*texts(store, "root")[:5], "answer 2, edited"]
        positions = [entry.position for entry in branch.entries()]
        assert positions == list(range(at + 2))
        assert [s.position for s in branch.messages()] == [0, 1, 3, 4, 6, 7]
        assert [s.position for s in branch.message_log()] == [0, 1, 3, 4, 6, 7]
        assert branch.latest("usage").payload["input_tokens"] == 7
        assert branch.parent == ("root", at)
        assert root.parent is None and texts(store, "root")[5] == "answer 2"

    def test_incremental_reads_after_the_fork_read_only_what_the_branch_added(self, store: Store) -> None:
        conversation(store)
        branch = store.session("root.1")
        branch.branch_from("root", 4)
        stored = branch.append(Message.user("new question"))
        assert [m.message.content[0].text for m in branch.messages(after=3)] == ["new question"]  # type: ignore[union-attr]
        assert [m.message.content[0].text for m in branch.messages(after=2)] == ["question 1", "new question"]  # type: ignore[union-attr]
        log = branch.message_log(after=2)
        assert [s.position for s in log] == [3, 4] and log.index_of(stored.id) == 1

    def test_a_read_after_any_position_holds_exactly_the_entries_past_it(self, store: Store) -> None:
        conversation(store)
        root = store.session("root")
        branch = store.session("root.1")
        branch.branch_from("root", 4)
        branch.append(Message.user("new question"))
        branch.record("usage", {"input_tokens": 7, "output_tokens": 1})
        for session in (root, branch):
            everything = [(e.position, e.id) for e in session.entries()]
            for after in range(-1, len(everything) + 1):
                wanted = [(p, i) for p, i in everything if p > after]
                assert [(e.position, e.id) for e in session.entries(after=after)] == wanted, (session, after)

    def test_the_newest_entry_of_a_kind_may_be_the_parents(self, store: Store) -> None:
        conversation(store, turns=2)
        store.session("root").record("checkpoint", self._checkpoint(store))
        branch = store.session("b")
        branch.branch_from("root", store.session("root").length())
        assert branch.latest("checkpoint") == store.session("root").latest("checkpoint")
        store.session("root").record("usage", {"input_tokens": 999})
        assert branch.latest("usage").payload["input_tokens"] == 100  # the parent's later entries are not its

    @staticmethod
    def _checkpoint(store: Store) -> dict[str, str]:
        messages = store.session("root").messages()
        return {"summary": "s", "first_id": messages[0].id, "last_id": messages[1].id}

    def test_a_checkpoint_of_a_branch_may_cover_the_shared_prefix(self, store: Store) -> None:
        conversation(store)
        branch = store.session("b")
        branch.branch_from("root", 6)
        first, last = (m.id for m in store.session("root").messages()[:2])
        branch.append(Message.user("more"))
        entry = branch.record_checkpoint("the start", first_id=first, last_id=last)
        assert branch.latest("checkpoint") == entry
        with pytest.raises(InvalidInput, match="not a message"):
            later = store.session("root").messages()[-1].id
            branch.record_checkpoint("later", first_id=first, last_id=later)
        assert store.verify() == []

    def test_a_branch_of_a_branch_reads_through_both(self, store: Store) -> None:
        conversation(store)
        one = store.session("one")
        one.branch_from("root", 6)
        one.append(Message.user("one's own"))
        two = store.session("two")
        two.branch_from("one", 7)
        two.append(Message.assistant("two's own"))
        assert texts(store, "two") == [*texts(store, "root")[:4], "one's own", "two's own"]
        # Forked below "one"'s own entries: recorded on "root", the session that stores them.
        three = store.session("three")
        three.branch_from("one", 3)
        assert three.parent == ("root", 3) and texts(store, "three") == texts(store, "root")[:2]
        assert store.verify() == []

    def test_media_the_parent_attached_are_read_through_the_branch(self, store: Store) -> None:
        root = store.session("root")
        ref = root.attach(png(8), "image/png")
        root.append(Message.user("look", Image(ref=ref)))
        branch = store.session("b")
        branch.branch_from(root, 1)
        assert branch.attachments() == [ref] and branch.attachment(ref.id) == ref
        assert branch.read_attachment(ref) == png(8)
        branch.append(Message.user("again", Image(ref=ref)))  # the parent's link is the branch's too
        assert store.session("other").attachments() == []
        assert store.verify() == []


class TestABranchStoresOnlyWhatItAdds:
    def test_size_counts_the_prefix_once(self, store: Store) -> None:
        conversation(store, turns=20)
        before = store.size()
        for n in range(10):
            branch = store.session(f"root.{n + 1}")
            branch.branch_from("root", 59)
            branch.append(Message.assistant(f"edit {n}"))
        after = store.size()
        assert after.entries - before.entries == 10
        assert after.sessions == before.sessions + 10
        assert [info.entries for info in store.session_infos() if info.id == "root.3"] == [60]
        assert {info.parent for info in store.session_infos()} == {None, "root"}

    def test_a_conditional_append_counts_the_prefix(self, store: Store) -> None:
        conversation(store)
        branch = store.session("b")
        branch.branch_from("root", 4)
        branch.extend([Message.user("x")], expect=4)
        with pytest.raises(SessionMoved):
            branch.extend([Message.user("y")], expect=4)
        assert branch.length() == 5


class TestBadBranches:
    def test_an_existing_session_or_a_position_outside_the_parent_writes_nothing(self, store: Store) -> None:
        conversation(store, turns=2)
        store.session("b").append(Message.user("mine"))
        before = store.size()
        with pytest.raises(SessionMoved):
            store.session("b").branch_from("root", 2)
        for at in (0, -1, 7):
            with pytest.raises(InvalidInput, match="parent's length"):
                store.session("c").branch_from("root", at)
        with pytest.raises(InvalidInput, match="no session"):
            store.session("c").branch_from("nobody", 1)
        with pytest.raises(InvalidInput):
            store.session("c").branch_from("c", 1)
        with pytest.raises(InvalidInput):
            store.session("c").branch_from("root", True)
        assert store.size() == before and "c" not in store.sessions()

    def test_a_branch_made_in_a_batch_that_raises_is_not_made(self, store: Store) -> None:
        conversation(store, turns=2)
        with pytest.raises(RuntimeError), store.batch():
            store.session("b").branch_from("root", 3)
            store.session("b").append(Message.user("x"))
            raise RuntimeError
        assert store.sessions() == ["root"] and store.session("b").length() == 0
        store.session("b").branch_from("root", 3)
        assert store.session("b").length() == 3


class TestPruneKeepsWhatABranchReads:
    def test_a_parent_is_kept_while_its_branch_is(self, store: Store) -> None:
        conversation(store)
        branch = store.session("b")
        branch.branch_from("root", 6)
        branch.append(Message.user("newer"))
        pruned = store.prune(max_bytes=0, dry_run=True)
        assert pruned.sessions == ("b", "root")  # together, the branch first
        removed = store.prune(max_bytes=0)
        assert removed.sessions == ("b", "root") and store.sessions() == []
        assert store.verify() == []

    def test_an_old_parent_of_a_live_branch_stays_and_the_branch_reads_whole(self, store: Store) -> None:
        from datetime import UTC, datetime

        conversation(store)
        expected = texts(store, "root")[:3]
        store.session("b").branch_from("root", 4)
        store.session("b").append(Message.user("kept"))
        moment = datetime.now(UTC)
        store.session("b").append(Message.user("newer than the moment"))
        pruned = store.prune(last_before=moment)
        assert pruned.sessions == () and store.sessions() == ["b", "root"]
        assert texts(store, "b") == [*expected, "kept", "newer than the moment"]

    def test_a_branch_made_after_the_plan_keeps_its_parent(self, target: Target) -> None:
        store = target.open()
        conversation(store)
        backend = store._backend()
        lengths = {row.session_id: row.length for row in backend.session_rows()}
        store.session("late").branch_from("root", 2)
        assert backend.delete_sessions(lengths) == ([], [])
        assert texts(store, "late") == texts(store, "root")[:2]


class TestVerifyChecksTheFork:
    def test_a_branch_verifies_and_a_changed_prefix_entry_shows(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        path = tmp_path / "ledger.db"
        with open_store(path) as store:
            conversation(store)
            store.session("b").branch_from("root", 5)
            store.session("b").append(Message.user("x"))
            assert store.verify() == []
        db = sqlite3.connect(path)
        db.execute("UPDATE entries SET digest = ? WHERE session_id = 'root' AND position = 4", ("0" * 64,))
        db.commit()
        db.close()
        with open_store(path) as store:
            codes = {(p.code, p.session_id) for p in store.verify()}
        assert ("digest_mismatch", "root") in codes and ("digest_mismatch", "b") in codes

    def test_a_branch_whose_parent_is_gone_is_a_problem(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        path = tmp_path / "ledger.db"
        with open_store(path) as store:
            conversation(store)
            store.session("b").branch_from("root", 5)
        db = sqlite3.connect(path)
        db.execute("DELETE FROM entries WHERE session_id = 'root'")
        db.execute("DELETE FROM sessions WHERE id = 'root'")
        db.commit()
        db.close()
        with open_store(path) as store:
            assert [p.code for p in store.verify()] == ["missing_parent"]


class TestSchemaTwoStores:
    def test_a_schema_two_file_migrates_and_its_sessions_read_as_before(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        from contextwindow.store import _migrations

        path = tmp_path / "old.db"
        db = sqlite3.connect(path, isolation_level=None)
        db.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        for version, (name, statements) in enumerate(_migrations.SQLITE[:2], start=1):
            for statement in statements:
                db.execute(statement)
            db.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (version, name, "2026-01-01"))
        db.close()
        with open_store(path, read_only=True) as looked:
            assert looked.schema_version == 2 and looked.sessions() == []
            assert looked.session("x").messages() == [] and looked.size().entries == 0
        with open_store(path) as store:
            assert store.schema_version == SCHEMA_VERSION >= 3
            conversation(store, turns=1)
        with open_store(path, read_only=True) as looked:
            assert texts(looked, "root") == ["question 0", "answer 0"] and looked.verify() == []


class TestABranchMadeAgain:
    def test_a_removed_branch_made_again_from_another_parent_reads_the_new_one(self, store: Store) -> None:
        conversation(store, "first", turns=2)
        store.session("second").append(Message.user("another start"))
        branch = store.session("b")
        branch.branch_from("first", 3)
        assert texts(store, "b") == ["question 0", "answer 0"]
        assert store._backend().delete_sessions({"b": 3}) == (["b"], [])
        branch.branch_from("second", 1)
        assert texts(store, "b") == ["another start"] and branch.parent == ("second", 1)
