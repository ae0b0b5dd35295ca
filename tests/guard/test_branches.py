"""A history the agent edited is a branch that shares the stored conversation's prefix: the ledger
stores what is new, and what was learned of the prefix (checkpoints, calibration) stays.

The guard is stepped by hand (no client, no server) except where a provider's window must be met."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow import Message
from contextwindow.content import Text
from contextwindow.guard import GuardCore, Reply, Send, run_sync
from contextwindow.store import Store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

CLAUDE = "claude-sonnet-4-6"


def _call(core: GuardCore, history: list[dict[str, Any]], reply: str) -> None:
    def perform(step: Send) -> Any:
        return {}

    body = {"model": CLAUDE, "max_tokens": 100, "messages": history}
    exchange = run_sync(core.request(body), perform)
    exchange.finish(Reply(message=Message.assistant(reply), stop_reason="end_turn"))


def _texts(store: Store, session_id: str) -> list[str]:
    return [
        "".join(b.text for b in s.message.content if isinstance(b, Text))
        for s in store.session(session_id).messages()
    ]


def _agent(store: Store, turns: int, *, edits: bool) -> list[dict[str, Any]]:
    """An agent that resends its history; with ``edits``, every reply sent back with a note of its own."""
    core = GuardCore(store, "anthropic", overflow=lambda exc: None)
    history: list[dict[str, Any]] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"question {turn}"})
        _call(core, history, f"answer {turn}")
        reply = f"answer {turn}" + (" [checked]" if edits else "")
        history.append({"role": "assistant", "content": reply})
    return history


class TestAnEditedHistoryIsABranchOfTheStoredOne:
    def test_each_edit_stores_what_is_new_and_reads_as_the_whole_conversation(self) -> None:
        plain, edited = contextwindow.open_store(), contextwindow.open_store()
        _agent(plain, 12, edits=False)
        history = _agent(edited, 12, edits=True)
        sessions = edited.sessions()
        assert len(sessions) == 12  # every edit is a branch...
        assert edited.size().entries <= 1.5 * plain.size().entries  # ...of what was stored, not a copy
        newest = max(sessions, key=lambda sid: edited.session(sid).length())
        assert edited.session(newest).parent is not None
        assert _texts(edited, newest) == [*(m["content"] for m in history[:-1]), "answer 11"]
        assert edited.verify() == []

    def test_an_agent_clearing_its_old_replies_stores_only_what_it_cleared(self) -> None:
        plain, clearing = contextwindow.open_store(), contextwindow.open_store()
        _agent(plain, 16, edits=False)
        core = GuardCore(clearing, "anthropic", overflow=lambda exc: None)
        history: list[dict[str, Any]] = []
        for turn in range(16):
            history.append({"role": "user", "content": f"question {turn}"})
            sent = list(history)
            _call(core, history, f"answer {turn}")
            history.append({"role": "assistant", "content": f"answer {turn}"})
            if turn >= 4:  # the reply four turns back is cleared: an edit far from the end
                history[2 * (turn - 4) + 1] = {"role": "assistant", "content": "[cleared]"}
        # Each clearing is an edit of one message, not a copy of everything after it (2.4x before).
        assert clearing.size().entries <= 1.35 * plain.size().entries
        newest = max(clearing.sessions(), key=lambda sid: len(clearing.session(sid).messages()))
        assert _texts(clearing, newest) == [*(m["content"] for m in sent), "answer 15"]
        assert clearing.verify() == []

    def test_a_rewound_history_branches_where_it_was_cut(self) -> None:
        store = contextwindow.open_store()
        core = GuardCore(store, "anthropic", overflow=lambda exc: None)
        history = _agent(store, 6, edits=False)
        root = store.sessions()[0]
        rewound = [*history[:6], {"role": "user", "content": "something else"}]
        _call(core, rewound, "another answer")
        [branch] = [sid for sid in store.sessions() if sid != root]
        parent, at = store.session(branch).parent or ("", 0)
        assert parent == root and 0 < at < store.session(root).length()
        assert _texts(store, branch) == [*(m["content"] for m in rewound), "another answer"]
        own = next(info for info in store.session_infos() if info.id == branch)
        assert own.kinds["message"] == 2  # the new question and its answer; the prefix is the parent's

    def test_a_checkpoint_of_the_shared_prefix_recorded_later_stays_with_the_branch(self) -> None:
        store = contextwindow.open_store()
        core = GuardCore(store, "anthropic", overflow=lambda exc: None)
        history = _agent(store, 6, edits=False)
        root = store.session(store.sessions()[0])
        first, second = (s.message.id for s in root.messages()[:2])
        assert first is not None and second is not None
        root.record_checkpoint("the first exchange", first_id=first, last_id=second)
        _call(core, [*history[:6], {"role": "user", "content": "something else"}], "ok")
        [branch] = [sid for sid in store.sessions() if sid != root.id]
        kept = store.session(branch).latest("checkpoint")
        assert kept is not None and kept.session_id == branch
        assert (kept.payload["summary"], kept.payload["first_id"]) == ("the first exchange", first)

    def test_a_checkpoint_of_an_edited_message_does_not(self) -> None:
        store = contextwindow.open_store()
        core = GuardCore(store, "anthropic", overflow=lambda exc: None)
        history = _agent(store, 6, edits=False)
        root = store.session(store.sessions()[0])
        ids = [s.message.id for s in root.messages()]
        root.record_checkpoint("five exchanges", first_id=str(ids[0]), last_id=str(ids[9]))
        _call(core, [*history[:6], {"role": "user", "content": "something else"}], "ok")
        [branch] = [sid for sid in store.sessions() if sid != root.id]
        assert store.session(branch).latest("checkpoint") is None


@pytest.fixture
def server() -> Iterator[LocalServer]:
    # A provider serving 16,000 tokens where the profile says 200,000: the conversation folds.
    with LocalServer(LocalModel(LocalSettings(effective_window=16_000))) as running:
        yield running


def _summaries(server: LocalServer, turns: int, *, edits: bool) -> int:
    """How many summary calls an agent's ``turns`` make (``edits``: every reply sent back edited)."""
    calls = 0
    with anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw:
        client = contextwindow.guard(raw, store=":memory:")
        history: list[dict[str, Any]] = []
        for turn in range(turns):
            history.append(
                {"role": "user", "content": f"Turn {turn}: " + " ".join(f"w{turn}_{i}" for i in range(400))}
            )
            response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
            calls += sum(e.type == "compacted" for e in client.last_exchange.events)
            text = "".join(b.text for b in response.content if b.type == "text")
            history.append({"role": "assistant", "content": text + (" [checked]" if edits else "")})
        client.store.close()
    return calls


class TestABranchKeepsWhatWasLearned:
    def test_an_agent_that_edits_every_reply_folds_no_more_than_one_that_does_not(
        self, server: LocalServer
    ) -> None:
        plain = _summaries(server, 14, edits=False)
        edited = _summaries(server, 14, edits=True)
        assert plain > 0  # the window is met: the conversation folds
        assert edited <= plain + 1  # the branches start from the folds of the prefix they share


class TestARemovedThinkingBlock:
    def test_is_a_branch_that_stores_the_reply_without_it(self) -> None:
        from contextwindow.content import Thinking

        store = contextwindow.open_store()
        core = GuardCore(store, "anthropic", overflow=lambda exc: None)
        history: list[dict[str, Any]] = [{"role": "user", "content": "question 0"}]
        exchange = run_sync(
            core.request({"model": CLAUDE, "max_tokens": 100, "messages": history}), lambda step: {}
        )
        thought = Message.assistant(Thinking(thinking="let me see", signature="sig"), Text(text="answer 0"))
        exchange.finish(Reply(message=thought, stop_reason="end_turn"))
        root = store.sessions()[0]
        history += [{"role": "assistant", "content": "answer 0"}, {"role": "user", "content": "question 1"}]
        _call(core, history, "answer 1")
        [branch] = [sid for sid in store.sessions() if sid != root]
        parent, at = store.session(branch).parent or ("", 0)
        assert parent == root and at == store.session(root).length()  # forked after all it shares
        assert _texts(store, branch) == ["question 0", "answer 0", "question 1", "answer 1"]
        reply = store.session(branch).messages()[1]
        assert reply.message.content == (Text(text="answer 0"),)  # the reply as sent, in its place
        assert reply.position == store.session(root).messages()[1].position
        own = next(info for info in store.session_infos() if info.id == branch)
        assert own.kinds["message"] == 3  # the edited reply, the new question and its answer
        assert store.verify() == []
