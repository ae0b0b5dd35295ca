"""Every request the guard sends with its incremental compile is, byte for byte, the request a cold
compile of the same ledger gives (compile's memo dropped before each call), whether the history fits
or is cut to a small window."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import contextwindow
from contextwindow import Message, ToolUse
from contextwindow.compile import CompileCache, SessionCompiler
from contextwindow.guard import GuardCore, GuardOptions, Reply, Send, run_sync
from contextwindow.store import _ledger

CLAUDE = "claude-sonnet-4-6"


def _drive(core: GuardCore, turns: list[tuple[int, bool]]) -> list[str]:
    """One agent: each turn a user message of ``n`` words and, when asked, a tool round first."""
    sent: list[str] = []

    def perform(step: Send) -> Any:
        # Message ids are the ledger's own (two ledgers here): a cut note names them.
        sent.append(re.sub(r"msg_[0-9a-f]+", "msg", json.dumps(step.body, sort_keys=True)))
        return {}

    history: list[dict[str, Any]] = []

    def call(reply: Message) -> None:
        body = {"model": CLAUDE, "max_tokens": 200, "system": "be brief", "messages": history}
        exchange = run_sync(core.request(body), perform)
        exchange.finish(Reply(message=reply, stop_reason="end_turn"))

    for turn, (n, tool) in enumerate(turns):
        history.append(
            {"role": "user", "content": f"turn {turn}: " + " ".join(f"w{turn}_{i}" for i in range(n))}
        )
        if tool:
            use = ToolUse(id=f"t{turn}", name="read", input={"turn": turn})
            call(Message.assistant(use))
            history.append(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": use.id, "name": "read", "input": {"turn": turn}}],
                }
            )
            history.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": use.id, "content": "row " * (n // 2 + 1)}
                    ],
                }
            )
        call(Message.assistant(f"answer {turn}"))
        history.append({"role": "assistant", "content": f"answer {turn}"})
    return sent


@contextmanager
def _counted_ids() -> Iterator[None]:
    """The ledger's ids from a counter, of the real ids' shape: a note that names ids (a cut) then
    prices the same in both ledgers (random hex tokenizes to a few tokens more or less, which moves a
    fit at its margin: the two drives would differ for that alone)."""
    numbers = itertools.count()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_ledger, "new_id", lambda prefix: f"{prefix}_{next(numbers):028x}")
        yield


def _core(window: int | None) -> GuardCore:
    options = GuardOptions(summarizer=False, context_window=window)
    return GuardCore(contextwindow.open_store(), "anthropic", overflow=lambda exc: None, options=options)


class TestIncrementalIsCold:
    @settings(max_examples=12, deadline=None)
    @given(
        turns=st.lists(st.tuples(st.integers(1, 150), st.booleans()), min_size=2, max_size=14),
        window=st.sampled_from([None, 3_000, 6_000]),
    )
    def test_each_request_is_what_a_cold_compile_sends(
        self, turns: list[tuple[int, bool]], window: int | None
    ) -> None:
        with _counted_ids():
            incremental = _drive(_core(window), turns)
        compile_once = SessionCompiler.compile

        def compile_cold(self: SessionCompiler, **kwargs: Any) -> Any:
            self.cache = CompileCache()
            return compile_once(self, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(SessionCompiler, "compile", compile_cold)
            with _counted_ids():
                cold = _drive(_core(window), turns)
        assert incremental == cold
