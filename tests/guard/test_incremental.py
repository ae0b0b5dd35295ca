"""Every request the guard sends with its incremental compile is, byte for byte, the request a cold
compile of the same ledger gives (compile's memo dropped before each call), whether the history fits
or is cut to a small window."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import contextwindow
from contextwindow import Message, ToolUse
from contextwindow.compile import CompileCache, SessionCompiler
from contextwindow.errors import OverBudget
from contextwindow.guard import GuardCore, GuardOptions, Reply, Send, run_sync
from contextwindow.store import _ledger
from contextwindow.usage import Usage

CLAUDE = "claude-sonnet-4-6"


def _drive(core: GuardCore, turns: list[tuple[int, bool]], ratios: Sequence[float] = ()) -> list[str]:
    """One agent: each turn a user message of ``n`` words and, when asked, a tool round first. With
    ``ratios``, each call reports input tokens of its body's characters / 4 times the next ratio, so
    the guard's calibration multiplier moves between calls."""
    sent: list[str] = []

    def perform(step: Send) -> Any:
        # Message ids are the ledger's own (two ledgers here): a cut note names them.
        sent.append(re.sub(r"msg_[0-9a-f]+", "msg", json.dumps(step.body, sort_keys=True)))
        return {}

    history: list[dict[str, Any]] = []

    def call(reply: Message) -> None:
        body = {"model": CLAUDE, "max_tokens": 200, "system": "be brief", "messages": history}
        try:
            exchange = run_sync(core.request(body), perform)
        except OverBudget as exc:  # a learned window too small for the newest message: both alike
            sent.append(f"over budget: {exc}")
            return
        usage = None
        if ratios:
            ratio = ratios[len(sent) % len(ratios)]
            usage = Usage(fresh_input=max(1, int(len(sent[-1]) / 4 * ratio)), output=5)
        exchange.finish(Reply(message=reply, usage=usage, stop_reason="end_turn"))

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
        with pytest.MonkeyPatch.context() as patch, _counted_ids():
            patch.setattr(SessionCompiler, "compile", _compile_cold(SessionCompiler.compile))
            cold = _drive(_core(window), turns)
        assert incremental == cold


def _compile_cold(compile_once: Any) -> Any:
    def compile_cold(self: SessionCompiler, **kwargs: Any) -> Any:
        self.cache = CompileCache()
        return compile_once(self, **kwargs)

    return compile_cold


class TestIncrementalIsColdAcrossCalibration:
    """The provider's counts move the calibration multiplier between calls: compile's memo calibrates
    its prices again rather than being dropped, and every body is still a cold compile's."""

    @settings(max_examples=10, deadline=None)
    @given(
        turns=st.lists(st.tuples(st.integers(1, 150), st.booleans()), min_size=3, max_size=12),
        window=st.sampled_from([None, 3_000, 6_000]),
        ratios=st.lists(st.sampled_from([0.8, 0.9, 1.0, 1.15, 1.3]), min_size=1, max_size=4),
    )
    def test_each_request_is_what_a_cold_compile_sends(
        self, turns: list[tuple[int, bool]], window: int | None, ratios: list[float]
    ) -> None:
        with _counted_ids():
            incremental = _drive(_core(window), turns, ratios)
        with pytest.MonkeyPatch.context() as patch, _counted_ids():
            patch.setattr(SessionCompiler, "compile", _compile_cold(SessionCompiler.compile))
            cold = _drive(_core(window), turns, ratios)
        assert incremental == cold

    def test_the_multiplier_does_move_in_these_conversations(self) -> None:
        multipliers: list[float] = []
        compile_once = SessionCompiler.compile

        def spy(self: SessionCompiler, **kwargs: Any) -> Any:
            multipliers.append(kwargs.get("multiplier", 1.0))
            return compile_once(self, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(SessionCompiler, "compile", spy)
            _drive(_core(None), [(40, True)] * 6, [1.3, 0.8])
        assert len(set(multipliers)) > 2
