"""A hypothesis state machine: SQLite, through reopens, a second handle and prunes, behaves as the memory
model."""

from __future__ import annotations

import tempfile
from pathlib import Path

from _strategies import json_objects, messages
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from contextwindow.content import Message
from contextwindow.store import Store, open_store


def _plain(message: Message) -> Message:
    return Message(role=message.role, content=message.content, metadata=message.metadata)


class LedgerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.path = Path(self._dir.name) / "m.db"
        self.model = open_store(None)
        self.handles: list[Store] = [open_store(self.path)]

    def _handle(self, which: int) -> Store:
        return self.handles[which % len(self.handles)]

    @rule(which=st.integers(0, 1), session=st.sampled_from(["a", "b"]), message=messages)
    def append(self, which: int, session: str, message: Message) -> None:
        real = self._handle(which).session(session).append(message)
        model = self.model.session(session).append(message)
        assert real.position == model.position and _plain(real.message) == _plain(model.message)

    @rule(which=st.integers(0, 1), session=st.sampled_from(["a", "b"]), payload=json_objects)
    def record(self, which: int, session: str, payload: dict[str, object]) -> None:
        assert self._handle(which).session(session).record("note", payload).payload == payload
        self.model.session(session).record("note", payload)

    @rule(which=st.integers(0, 1), data=st.binary(min_size=1, max_size=64))
    def attach(self, which: int, data: bytes) -> None:
        real = self._handle(which).session("a").attach(data, "text/plain")
        assert real == self.model.session("a").attach(data, "text/plain")

    @rule(which=st.integers(0, 1), session=st.sampled_from(["a", "b"]))
    def prune_down_to(self, which: int, session: str) -> None:
        """Prune to what one session holds: the other goes when its newest entry is the older."""
        limit = next((i.payload_bytes for i in self.model.session_infos() if i.id == session), 0)
        real = self._handle(which).prune(max_bytes=limit, reclaim=which == 0)
        model = self.model.prune(max_bytes=limit)
        assert real.sessions == model.sessions and real.attachments == model.attachments

    @rule()
    def reopen(self) -> None:
        for handle in self.handles:
            handle.close()
        self.handles = [open_store(self.path)]

    @precondition(lambda self: len(self.handles) == 1)
    @rule()
    def second_handle(self) -> None:
        self.handles.append(open_store(self.path))

    @invariant()
    def reads_agree_with_the_model(self) -> None:
        for session in ("a", "b"):
            for handle in self.handles:
                real = handle.session(session).entries()
                model = self.model.session(session).entries()
                assert [(e.position, e.kind) for e in real] == [(e.position, e.kind) for e in model]
                assert [e.payload for e in real if e.kind == "note"] == [
                    e.payload for e in model if e.kind == "note"
                ]
                got = [_plain(m.message) for m in handle.session(session).messages()]
                assert got == [_plain(m.message) for m in self.model.session(session).messages()]
            assert self.handles[0].session(session).attachments() == self.model.session(session).attachments()

    def teardown(self) -> None:
        assert self.handles[0].verify() == []
        for handle in self.handles:
            handle.close()
        self._dir.cleanup()


TestLedgerStateMachine = LedgerMachine.TestCase
TestLedgerStateMachine.settings = settings(max_examples=10, stateful_step_count=12, deadline=None)
