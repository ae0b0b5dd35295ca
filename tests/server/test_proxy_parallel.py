"""Many conversations through one proxy at once: none waits for another, none outlives its agent,
and what the proxy holds of them stays within its bound.

The upstream is a fake provider that takes its time (:mod:`proxy_support`): a conversation's call
is in flight while the others' are.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextwindow.content import Text
from contextwindow.server import BackgroundServer
from contextwindow.server.conversations import BYTES_PER_BODY_BYTE, Conversations
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import Transform, passthrough, proxy_app
from contextwindow.store import Store, open_store
from memory_support import collector_off
from proxy_support import FakeUpstream, fake_upstream

CLAUDE = "claude-haiku-4-5"
DELAY = 1.0
CONVERSATIONS = 8


@pytest.fixture
def slow() -> Iterator[tuple[FakeUpstream, str]]:
    with fake_upstream(delay=DELAY) as (fake, running):
        yield fake, running.url


def _say(url: str, history: list[dict[str, str]], *, key: str = "k", timeout: float = 30) -> str:
    body = {"model": CLAUDE, "max_tokens": 64, "messages": history}
    answered = httpx.post(url + "/v1/messages", json=body, headers={"x-api-key": key}, timeout=timeout)
    assert answered.status_code == 200, answered.text[:300]
    return str(answered.json()["content"][0]["text"])


def _together(work: Callable[[int], Any], n: int) -> float:
    """Run ``work(0..n-1)`` in threads at once; the seconds until the last is done."""
    failures: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as failed:  # reported below
            failures.append(failed)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    return time.monotonic() - started


def _texts(store: Store, sid: str) -> list[str]:
    return [
        "".join(b.text for b in m.message.content if isinstance(b, Text))
        for m in store.session(sid).messages()
    ]


class TestConversationsInParallel:
    def test_independent_conversations_over_a_slow_upstream_take_about_the_time_of_one(
        self, slow: tuple[FakeUpstream, str]
    ) -> None:
        upstream, url = slow
        transform = GuardTransform(open_store(":memory:"))
        with BackgroundServer(proxy_app(url, transform=transform)) as proxy:
            _say(proxy.url, [{"role": "user", "content": "warm-up"}])  # the guard's first-use loading
            seconds = _together(
                lambda i: _say(proxy.url, [{"role": "user", "content": f"conversation {i}"}]), CONVERSATIONS
            )
        assert upstream.peak == CONVERSATIONS  # every conversation's call was upstream at once
        assert seconds < CONVERSATIONS * DELAY / 2.5  # one at a time would take 8 s
        assert len(transform.store.sessions()) == CONVERSATIONS + 1

    def test_a_stalled_upstream_call_holds_up_nobody_else(self, slow: tuple[FakeUpstream, str]) -> None:
        _, url = slow
        transform = GuardTransform(open_store(":memory:"))
        with BackgroundServer(proxy_app(url, transform=transform)) as proxy:

            def stall() -> None:
                with pytest.raises(httpx.ReadTimeout):
                    _say(proxy.url, [{"role": "user", "content": "STALL"}], timeout=6)

            _say(proxy.url, [{"role": "user", "content": "warm-up"}])
            stalled = threading.Thread(target=stall, daemon=True)
            stalled.start()
            time.sleep(0.3)  # the stalled call is upstream first
            seconds = _together(
                lambda i: _say(proxy.url, [{"role": "user", "content": f"other {i}"}]), CONVERSATIONS
            )
            stalled.join()
        assert seconds < 3 * DELAY

    def test_two_calls_of_one_conversation_still_go_one_at_a_time(
        self, slow: tuple[FakeUpstream, str]
    ) -> None:
        # An agent that retries while its first call still runs: the second call waits for the first
        # to be recorded, then becomes a session of its own (the ledger keeps both replies apart).
        upstream, url = slow
        transform = GuardTransform(open_store(":memory:"))
        with BackgroundServer(proxy_app(url, transform=transform)) as proxy:
            _together(lambda i: _say(proxy.url, [{"role": "user", "content": "the same task"}]), 2)
        assert upstream.peak == 1
        root, fork = sorted(transform.store.sessions())
        assert fork == root + ".1"


class TestTheAgentLeaving:
    @pytest.mark.parametrize("guarded", [True, False], ids=["guard", "pass-through"])
    def test_closes_the_upstream_connection_of_its_call(
        self, slow: tuple[FakeUpstream, str], guarded: bool
    ) -> None:
        upstream, url = slow
        transform: Transform = GuardTransform(open_store(":memory:")) if guarded else passthrough
        with BackgroundServer(proxy_app(url, transform=transform)) as proxy:
            with pytest.raises(httpx.ReadTimeout):
                _say(proxy.url, [{"role": "user", "content": "STALL, then leave"}], timeout=0.5)
            left = time.monotonic()
            deadline = left + 5
            while not upstream.left and time.monotonic() < deadline:
                time.sleep(0.05)
            assert upstream.left, "the upstream call outlived the agent"
            assert upstream.left[0] - left < 2.0
            if guarded:
                # The conversation is free again: its next call is answered.
                assert _say(proxy.url, [{"role": "user", "content": "STALL, then leave"}, *_after()])

    def test_mid_stream_closes_the_upstream_stream_and_frees_the_conversation(
        self, slow: tuple[FakeUpstream, str]
    ) -> None:
        upstream, url = slow
        transform = GuardTransform(open_store(":memory:"))
        opening = [{"role": "user", "content": "STALL mid-stream"}]
        with BackgroundServer(proxy_app(url, transform=transform)) as proxy:
            body = {"model": CLAUDE, "max_tokens": 64, "messages": opening, "stream": True}
            with httpx.stream(
                "POST", proxy.url + "/v1/messages", json=body, headers={"x-api-key": "k"}
            ) as streamed:
                assert streamed.status_code == 200
                assert "message_start" in next(streamed.iter_lines())
            left = time.monotonic()
            deadline = left + 5
            while not upstream.left and time.monotonic() < deadline:
                time.sleep(0.05)
            assert upstream.left, "the upstream stream outlived the agent"
            assert upstream.left[0] - left < 2.0
            assert _say(proxy.url, [*opening, *_after()], timeout=10)  # the conversation is free again


def _after() -> list[dict[str, str]]:
    return [{"role": "assistant", "content": "(no answer)"}, {"role": "user", "content": "RESUME"}]


class TestBoundedMemory:
    def test_the_conversations_held_stay_under_the_bound_and_an_evicted_one_continues(self) -> None:
        with fake_upstream() as (_, running):
            transform = GuardTransform(open_store(":memory:"), cache_bytes=400_000)
            histories: list[list[dict[str, str]]] = []
            with BackgroundServer(proxy_app(running.url, transform=transform)) as proxy:
                for n in range(30):
                    history = [{"role": "user", "content": f"conversation {n}: " + "context " * 2_000}]
                    history.append({"role": "assistant", "content": _say(proxy.url, history)})
                    histories.append(history)
                    assert transform.conversations.bytes <= transform.conversations.capacity
                assert transform.conversations.evicted > 0
                assert len(transform.conversations) < 30
                first = histories[0]
                first.append({"role": "user", "content": "conversation 0 goes on"})
                first.append({"role": "assistant", "content": _say(proxy.url, first)})
                health = httpx.get(proxy.url + "/health").json()
            assert health["conversations"] == len(transform.conversations) < 30
            assert 0 < health["conversation_bytes"] <= health["conversation_capacity_bytes"] == 400_000
            assert health["conversations_evicted"] == transform.conversations.evicted > 0
            store = transform.store
            assert len(store.sessions()) == 30  # continued, not forked
            [sid] = [sid for sid in store.sessions() if _texts(store, sid)[0].startswith("conversation 0:")]
            assert _texts(store, sid) == [h["content"] for h in first]

    def test_an_evicted_conversation_is_freed_at_once_not_at_the_collectors_next_pass(self) -> None:
        # A serving process runs the collector's full pass rarely (tune_gc): what an evicted
        # conversation held must go with it, or the proxy's RSS grows with every eviction.
        with fake_upstream() as (_, running):
            transform = GuardTransform(open_store(":memory:"), cache_bytes=400_000)
            with (
                BackgroundServer(proxy_app(running.url, transform=transform)) as proxy,
                collector_off() as cyclic,
            ):
                for n in range(20):
                    history = [{"role": "user", "content": f"conversation {n}: " + "context " * 2_000}]
                    for turn in range(3):
                        history.append({"role": "assistant", "content": _say(proxy.url, history)})
                        history.append({"role": "user", "content": f"turn {turn}"})
                assert transform.conversations.evicted > 10
                assert cyclic() == {}


@contextmanager
def _proxy_process(*args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``python -m contextwindow proxy ARGS --port 0``: its base URL and its process."""
    process = subprocess.Popen(
        [sys.executable, "-m", "contextwindow", "proxy", *args, "--port", "0", "--quiet"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert " on http://" in line, line + (process.stderr.read() if process.stderr else "")
        yield line.split(" on ", 1)[1].split()[0], process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, read from each ``/proc/N/stat`` (the ``children`` file
    is not on every kernel, and lists only what one thread forked)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # the field after the state is the parent
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the workers from /proc")
class TestWorkers:
    def test_several_processes_serve_one_port_on_one_store_and_stop_together(self, tmp_path: Path) -> None:
        store = str(tmp_path / "proxy.sqlite")
        with (
            fake_upstream() as (_, upstream),
            _proxy_process("--upstream", upstream.url, "--store", store, "--workers", "2") as (url, process),
        ):
            deadline = time.monotonic() + 20
            while len(_children(process.pid)) < 2 and time.monotonic() < deadline:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                time.sleep(0.1)
            workers = _children(process.pid)
            assert len(workers) == 2

            def conversation(n: int) -> None:
                history: list[dict[str, str]] = []
                for turn in range(3):
                    history.append({"role": "user", "content": f"conversation {n} turn {turn}"})
                    history.append({"role": "assistant", "content": _say(url, history)})

            _together(conversation, 6)
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=15) == 0
            assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
        with open_store(store) as ledger:
            assert ledger.verify() == []
            sessions = ledger.sessions()
            assert len(sessions) == 6
            assert all(len(_texts(ledger, sid)) == 6 for sid in sessions)


class TestTheConversationCache:
    def test_the_least_recently_used_idle_conversation_goes_first(self) -> None:
        cache = Conversations(3 * 100_000)
        for key in ("a", "b", "c"):
            cache.give_back(cache.take(("t", key), object), body_bytes=100_000 // BYTES_PER_BODY_BYTE)
        cache.give_back(cache.take(("t", "a"), object))  # "a" used again: "b" is now the oldest
        cache.give_back(cache.take(("t", "d"), object), body_bytes=100_000 // BYTES_PER_BODY_BYTE)
        assert ("t", "b") not in cache and ("t", "a") in cache and ("t", "d") in cache
        assert cache.bytes <= cache.capacity

    def test_a_conversation_in_use_is_not_dropped_until_it_is_given_back(self) -> None:
        cache = Conversations(100_000)
        busy = cache.take(("t", "busy"), object)
        cache.give_back(cache.take(("t", "other"), object), body_bytes=200_000)
        assert ("t", "busy") in cache  # over the bound, but in use
        cache.give_back(busy, body_bytes=200_000)
        assert ("t", "busy") not in cache and cache.bytes <= cache.capacity
