"""Several guards on one ledger: nothing lost, nothing duplicated, nothing mixed.

Two ``contextwindow proxy`` processes share a store (PostgreSQL, or one SQLite file): conversations
kept apart when each stays on one worker, and one conversation whose calls alternate between the
workers (each process sees the ledger move under it and reads what the other appended). In-process
cores on two store handles cover the race itself: another writer appending between a core's match
and its append.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextwindow.content import Message, Text
from contextwindow.guard import GuardCore, GuardOptions, Reply, Send, run_sync
from contextwindow.store import Store, open_store
from server_support import running

CONVERSATIONS = 20  # per worker
TURNS = 3
ALTERNATING = 6  # conversations whose calls alternate between the two workers
ALTERNATING_TURNS = 8


@pytest.fixture
def fresh_database() -> Iterator[str]:
    url = os.environ.get("CONTEXTWINDOW_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("CONTEXTWINDOW_TEST_POSTGRES_URL is not set; CI must run the PostgreSQL tests")
        pytest.skip("CONTEXTWINDOW_TEST_POSTGRES_URL is not set")
    import psycopg

    name = f"cw_proxy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base, _, query = url.partition("?")
    fresh = base.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")
    try:
        yield fresh
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["postgres", "sqlite"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "proxy.sqlite")
    return str(request.getfixturevalue("fresh_database"))


def _say(client: httpx.Client, api: str, history: list[dict[str, str]]) -> str:
    """One agent call on ``api`` with the whole history; the assistant's text."""
    if api == "anthropic":
        body = {"model": "claude-haiku-4-5", "max_tokens": 32, "messages": history}
        answered = client.post("/v1/messages", json=body, headers={"x-api-key": "k"})
        assert answered.status_code == 200, answered.text[:300]
        return str(answered.json()["content"][0]["text"])
    body = {"model": "gpt-4o", "max_tokens": 32, "messages": history}
    answered = client.post("/v1/chat/completions", json=body, headers={"authorization": "Bearer k"})
    assert answered.status_code == 200, answered.text[:300]
    return str(answered.json()["choices"][0]["message"]["content"])


def _stored(ledger: Store, sid: str) -> list[tuple[str, str]]:
    return [
        (m.message.role, "".join(b.text for b in m.message.content if isinstance(b, Text)))
        for m in ledger.session(sid).messages()
    ]


def _run(threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert not any(thread.is_alive() for thread in threads)


@pytest.mark.postgres
class TestTwoWorkersOneLedger:
    def test_twenty_conversations_each_are_stored_whole_and_apart(self, fresh_database: str) -> None:
        with (
            running("serve", "--window", "200000") as local,
            running("proxy", "--upstream", local, "--store", fresh_database) as first,
            running("proxy", "--upstream", local, "--store", fresh_database) as second,
        ):
            failures: list[str] = []

            def conversation(worker: str, n: int) -> None:
                history: list[dict[str, str]] = []
                with httpx.Client(base_url=worker, timeout=60) as client:
                    for turn in range(TURNS):
                        history.append(
                            {"role": "user", "content": f"conversation {worker[-5:]}/{n} turn {turn}"}
                        )
                        try:
                            history.append(
                                {"role": "assistant", "content": _say(client, "anthropic", history)}
                            )
                        except AssertionError as failed:
                            failures.append(f"{n}/{turn}: {failed}")
                            return

            _run(
                [
                    threading.Thread(target=conversation, args=(worker, n))
                    for n in range(CONVERSATIONS)
                    for worker in (first, second)
                ]
            )
            assert not failures
        with open_store(fresh_database) as ledger:
            sessions = ledger.sessions()
            assert len(sessions) == 2 * CONVERSATIONS
            seen: set[str] = set()
            for sid in sessions:
                stored = [m.message for m in ledger.session(sid).messages()]
                assert [m.role for m in stored] == ["user", "assistant"] * TURNS
                users = [b.text for m in stored if m.role == "user" for b in m.content if isinstance(b, Text)]
                prefix = users[0].rsplit(" turn ", 1)[0]
                assert users == [f"{prefix} turn {t}" for t in range(TURNS)]  # one conversation, in order
                seen.add(prefix)
            assert len(seen) == 2 * CONVERSATIONS  # none mixed into another


class TestOneConversationAlternatingBetweenWorkers:
    def test_each_call_on_the_other_worker_stores_the_history_once_and_in_order(
        self, shared_store: str
    ) -> None:
        with (
            running("serve", "--window", "200000") as local,
            running("proxy", "--upstream", local, "--store", shared_store) as first,
            running("proxy", "--upstream", local, "--store", shared_store) as second,
        ):
            histories: dict[int, list[dict[str, str]]] = {}
            failures: list[str] = []

            def conversation(n: int) -> None:
                api = "anthropic" if n % 2 == 0 else "openai"
                history = histories[n] = []
                clients = [httpx.Client(base_url=w, timeout=60) for w in (first, second)]
                try:
                    for turn in range(ALTERNATING_TURNS):
                        history.append({"role": "user", "content": f"alternating {n} turn {turn}"})
                        # Turn t goes to worker t % 2 (conversation 1 starts on the second one).
                        client = clients[(turn + n) % 2]
                        history.append({"role": "assistant", "content": _say(client, api, history)})
                except AssertionError as failed:
                    failures.append(f"conversation {n}: {failed}")
                finally:
                    for client in clients:
                        client.close()

            _run([threading.Thread(target=conversation, args=(n,)) for n in range(ALTERNATING)])
            assert not failures
        with open_store(shared_store) as ledger:
            assert ledger.verify() == []
            sessions = ledger.sessions()
            assert len(sessions) == ALTERNATING  # one session per conversation: no fork, no stray copy
            by_first = {_stored(ledger, sid)[0][1]: sid for sid in sessions}
            for n, history in histories.items():
                sid = by_first[f"alternating {n} turn 0"]
                assert _stored(ledger, sid) == [(h["role"], h["content"]) for h in history]


def _perform(step: Send) -> Any:
    return {"answered": True}


def _call(core: GuardCore, history: list[Message]) -> Reply:
    body = {
        "model": "claude-haiku-4-5",
        "max_tokens": 32,
        "messages": [
            {"role": m.role, "content": "".join(b.text for b in m.content if isinstance(b, Text))}
            for m in history
        ],
    }
    exchange = run_sync(core.request(body), _perform)
    reply = Reply(message=Message.assistant(f"reply {len(history)}"), stop_reason="end_turn")
    exchange.finish(reply)
    return reply


class TestCoresOnTwoHandles:
    """Two cores, each on its own connection to one SQLite file: two processes, in one."""

    @staticmethod
    def _cores(tmp_path: Path) -> tuple[GuardCore, GuardCore, Store]:
        path = tmp_path / "ledger.sqlite"
        overflow = lambda exc: None  # noqa: E731
        no_summaries = GuardOptions(summarizer=False)
        first = GuardCore(open_store(path), "anthropic", overflow=overflow, options=no_summaries)
        second = GuardCore(open_store(path), "anthropic", overflow=overflow, options=no_summaries)
        return first, second, open_store(path)

    def test_alternating_calls_leave_one_session_holding_the_history_once(self, tmp_path: Path) -> None:
        first, second, ledger = self._cores(tmp_path)
        history: list[Message] = []
        for turn in range(6):
            history.append(Message.user(f"turn {turn}"))
            history.append(_call((first, second)[turn % 2], history).message)
        [sid] = ledger.sessions()
        assert _stored(ledger, sid) == [
            (m.role, "".join(b.text for b in m.content if isinstance(b, Text))) for m in history
        ]

    def test_a_writer_that_appends_between_the_match_and_the_append_is_not_duplicated(
        self, tmp_path: Path
    ) -> None:
        # The other worker answers this very history after this core matched it and before it
        # appended: the conditional append refuses, the core matches again and finds the history
        # already answered, so the call becomes a new session, exactly as when the two calls come
        # one after the other. Without the condition, "turn 1" would be stored twice in one session.
        first, second, ledger = self._cores(tmp_path)
        history = [Message.user("turn 0")]
        history.append(_call(first, history).message)
        history.append(Message.user("turn 1"))
        real_match = first.match
        raced: list[Reply] = []

        def match_then_lose_the_race(hashes: Any, messages: Any = None) -> Any:
            found = real_match(hashes, messages)
            if not raced:
                raced.append(_call(second, history))
            return found

        first.match = match_then_lose_the_race  # type: ignore[method-assign]
        _call(first, history)
        answered = ["turn 0", "reply 1", "turn 1", "reply 3"]
        root, fork = ledger.sessions()
        assert fork == root + ".1"
        assert [text for _, text in _stored(ledger, root)] == answered
        assert [text for _, text in _stored(ledger, fork)] == answered

    def test_a_session_another_writer_started_first_is_continued_later_not_forked_again(
        self, tmp_path: Path
    ) -> None:
        # Both cores take the first call of one conversation at once; the other one stores it first,
        # so this one's call becomes the fork ".1". The agent goes on with the other's reply: this
        # core must find that session (which it had only ever seen empty) and continue it.
        first, second, ledger = self._cores(tmp_path)
        opening = [Message.user("turn 0")]
        real_match = first.match
        raced: list[Reply] = []

        def match_then_lose_the_race(hashes: Any, messages: Any = None) -> Any:
            found = real_match(hashes, messages)
            if not raced:
                raced.append(_call(second, opening))
            return found

        first.match = match_then_lose_the_race  # type: ignore[method-assign]
        _call(first, opening)
        first.match = real_match  # type: ignore[method-assign]
        history = [*opening, raced[0].message, Message.user("turn 1")]
        _call(first, history)
        root, fork = ledger.sessions()
        assert fork == root + ".1"
        assert [text for _, text in _stored(ledger, root)] == ["turn 0", "reply 1", "turn 1", "reply 3"]
        assert [text for _, text in _stored(ledger, fork)] == ["turn 0", "reply 1"]
