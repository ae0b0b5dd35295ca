"""Branches with edits over every backend: a branch that replaces a few messages of its prefix stores
those and what it adds, and reads everything else from its parent (``branch_from(..., edits=)``)."""

from __future__ import annotations

import sqlite3

import pytest
from test_store_branches import conversation, texts

from contextwindow.content import Message, ToolResult, ToolUse
from contextwindow.errors import InvalidInput
from contextwindow.store import Store, open_store


def own_rows(store: Store, session_id: str) -> int:
    """How many rows the session stores itself (a branch's prefix is its parent's)."""
    return sum(next(i for i in store.session_infos() if i.id == session_id).kinds.values())


class TestEditsStandInForThePrefixsMessages:
    def test_the_view_holds_the_edits_in_place_and_the_parents_rows_around_them(self, store: Store) -> None:
        conversation(store)
        root = store.session("root")
        length = root.length()
        branch = store.session("root.1")
        branch.branch_from(
            "root", length, edits={1: Message.assistant("answer 0, cleared"), 6: Message.user("q2!")}
        )
        expected = texts(store, "root")
        expected[1], expected[4] = "answer 0, cleared", "q2!"
        assert texts(store, "root.1") == expected
        assert texts(store, "root")[1] == "answer 0" and branch.length() == length
        assert [e.position for e in branch.entries()] == list(range(length))
        edited = branch.messages()[1]
        assert edited.position == 1 and edited.message.id != root.messages()[1].message.id
        assert branch.position_of(str(edited.message.id)) == 1
        assert root.position_of(str(edited.message.id)) is None
        assert branch.position_of(str(root.messages()[1].message.id)) is None
        branch.append(Message.user("question 5"))
        assert texts(store, "root.1")[-1] == "question 5" and texts(store, "root")[-1] == "answer 4"
        assert [s.position for s in branch.messages(after=length - 1)] == [length]
        assert [s.position for s in branch.messages(after=0)][:2] == [1, 3]
        assert own_rows(store, "root.1") == 3  # two edits and what it added: nothing copied
        assert store.verify() == []

    def test_an_edit_before_the_fork_position_is_the_branchs_head(self, store: Store) -> None:
        conversation(store, turns=2)
        root = store.session("root")
        at = root.position_of(str(root.messages()[3].message.id))
        assert at is not None
        branch = store.session("b")
        branch.branch_from("root", at + 1, edits={at: Message.assistant("answer 1, edited")})
        branch.append(Message.user("next"))
        assert texts(store, "b")[-2:] == ["answer 1, edited", "next"]
        assert store.verify() == []

    def test_a_record_naming_an_edited_message_is_stored_again_naming_the_edit(self, store: Store) -> None:
        ids = conversation(store)
        root = store.session("root")
        root.record_checkpoint("the first two exchanges", first_id=ids[0], last_id=ids[3])
        root.record("archive", {"message_id": ids[3], "tool_use_id": "t", "artifact_id": "a"})
        root.record("note", {"about": ids[5]})
        branch = store.session("b")
        branch.branch_from("root", root.length(), edits={4: Message.assistant("answer 1, cleared")})
        edit_id = branch.messages()[3].message.id
        checkpoint = branch.latest("checkpoint")
        assert checkpoint is not None and checkpoint.payload["last_id"] == edit_id
        assert (
            checkpoint.payload["first_id"] == ids[0]
            and checkpoint.position == root.latest("checkpoint").position
        )  # type: ignore[union-attr]
        assert branch.latest("archive").payload["message_id"] == edit_id  # type: ignore[union-attr]
        assert branch.latest("note").payload["about"] == ids[5]  # type: ignore[union-attr]
        assert root.latest("checkpoint").payload["last_id"] == ids[3]  # type: ignore[union-attr]
        assert own_rows(store, "b") == 3
        assert store.verify() == []

    def test_a_branch_of_a_branch_reads_the_nearer_edits(self, store: Store) -> None:
        conversation(store)
        length = store.session("root").length()
        store.session("b").branch_from(
            "root", length, edits={0: Message.user("q0 b"), 3: Message.user("q1 b")}
        )
        # Forked below b's own fork position: b's edits are part of the prefix, so it reads through b.
        store.session("c").branch_from("b", length - 3, edits={3: Message.user("q1 c")})
        assert store.session("c").parent == ("b", length - 3)
        assert texts(store, "c")[:3] == ["q0 b", "answer 0", "q1 c"]
        assert texts(store, "b")[:3] == ["q0 b", "answer 0", "q1 b"]
        assert store.verify() == []

    def test_a_branch_with_many_edits_reads_whole(self, store: Store) -> None:
        conversation(store, turns=30)
        root = store.session("root")
        messages = root.messages()
        answers = [m for m in messages if m.message.role == "assistant"]
        edits = {m.position: Message.assistant(f"edited {i}") for i, m in enumerate(answers)}
        store.session("b").branch_from("root", root.length(), edits=edits)  # 30 edits: more than 32 pieces
        got = texts(store, "b")
        assert got[1::2] == [f"edited {i}" for i in range(30)] and got[0::2] == texts(store, "root")[0::2]
        assert store.session("b").latest("usage").payload["input_tokens"] == 2900  # type: ignore[union-attr]
        assert store.verify() == []


class TestBadEdits:
    @pytest.mark.parametrize(
        ("edits", "path"),
        [
            ({15: Message.user("past the fork")}, "edits"),
            ({-1: Message.user("before the start")}, "edits"),
            ({2: Message.user("where a usage record is")}, "edits"),
            ({1: "not a message"}, "message"),
        ],
    )
    def test_an_edit_that_stands_for_nothing_writes_nothing(
        self, store: Store, edits: dict, path: str
    ) -> None:  # type: ignore[type-arg]
        conversation(store)
        with pytest.raises(InvalidInput) as caught:
            store.session("b").branch_from("root", 14, edits=edits)
        assert caught.value.path == path
        assert store.session("b").length() == 0 and "b" not in store.sessions()

    def test_a_tool_result_edit_keeps_its_pairing(self, store: Store) -> None:
        session = store.session("root")
        session.append(Message.user("go"))
        session.append(Message(role="assistant", content=[ToolUse(id="t1", name="read", input={})]))
        session.append(Message(role="user", content=[ToolResult(tool_use_id="t1", content="x" * 500)]))
        session.append(Message.assistant("done"))
        cleared = Message(role="user", content=[ToolResult(tool_use_id="t1", content="[cleared]")])
        store.session("b").branch_from("root", 4, edits={2: cleared})
        result = store.session("b").messages()[2].message.content[0]
        assert isinstance(result, ToolResult) and result.content == "[cleared]"


class TestVerifyChecksEdits:
    def test_a_changed_edit_shows(self, tmp_path) -> None:  # type: ignore[no-untyped-def]
        path = tmp_path / "ledger.db"
        with open_store(path) as store:
            conversation(store)
            store.session("b").branch_from("root", 15, edits={4: Message.user("edited")})
            assert store.verify() == []
        db = sqlite3.connect(path)
        db.execute("UPDATE entries SET digest = ? WHERE session_id = 'b' AND position = 4", ("0" * 64,))
        db.commit()
        db.close()
        with open_store(path) as store:
            assert ("digest_mismatch", "b", 4) in {(p.code, p.session_id, p.position) for p in store.verify()}
