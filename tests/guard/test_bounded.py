"""The guard keeps at most ``cache_mb`` of conversation state in memory: the least recently used
conversations are forgotten, and a request that continues one reads it back from the ledger and
sends what a guard that never forgot it sends, byte for byte."""

from __future__ import annotations

import json
from typing import Any

import contextwindow
from contextwindow import Message
from contextwindow.guard import GuardCore, GuardOptions, Reply, Send, run_sync
from memory_support import collector_off

CLAUDE = "claude-sonnet-4-6"


def _drive(core: GuardCore, conversations: int, turns: int) -> list[str]:
    """Run ``conversations`` agents a turn each in turn; every body the core sent, as JSON, and the
    session each call was kept in."""
    sent: list[str] = []

    def perform(step: Send) -> Any:
        sent.append(json.dumps(step.body, sort_keys=True))
        return {}

    histories: list[list[dict[str, Any]]] = [[] for _ in range(conversations)]
    for turn in range(turns):
        for c, history in enumerate(histories):
            history.append({"role": "user", "content": f"agent {c} turn {turn}: " + "why? " * 200})
            body = {"model": CLAUDE, "max_tokens": 100, "system": "be brief", "messages": history}
            exchange = run_sync(core.request(body), perform)
            sent.append(exchange.session_id)  # the same session, not a new one
            text = f"agent {c} answer {turn}"
            exchange.finish(Reply(message=Message.assistant(text), stop_reason="end_turn"))
            history.append({"role": "assistant", "content": text})
    return sent


def _core(cache_mb: float | None) -> GuardCore:
    options = GuardOptions(summarizer=False, cache_mb=cache_mb)
    return GuardCore(contextwindow.open_store(), "anthropic", overflow=lambda exc: None, options=options)


class TestBoundedState:
    def test_a_forgotten_conversation_is_read_back_and_sends_the_same_requests(self) -> None:
        bounded, unbounded = _core(0.05), _core(None)
        assert _drive(bounded, 6, 5) == _drive(unbounded, 6, 5)
        assert bounded.conversations.bound.evicted > 0
        assert unbounded.conversations.bound.evicted == 0

    def test_what_is_held_stays_within_the_bound(self) -> None:
        core = _core(0.05)
        _drive(core, 8, 4)
        bound = core.conversations.bound
        assert len(bound) < 8
        # Never more than the bound, but for the one conversation in use.
        assert bound.bytes <= 0.05 * 1024 * 1024 or len(bound) == 1
        assert len(core.conversations._conversations) <= len(bound) + 1

    def test_a_dropped_core_is_freed_by_reference_counting_alone(self) -> None:
        # The proxy drops a whole core when it evicts a conversation: nothing of it may wait in a
        # reference cycle for the collector's next full pass (the proxy's RSS grew by it).
        with collector_off() as cyclic:
            core = _core(0.05)
            _drive(core, 8, 4)
            assert core.conversations.bound.evicted > 0
            del core
            assert cyclic() == {}
