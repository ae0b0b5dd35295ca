"""What an engine tells its host besides the events it yields: ``on_event``, log lines, call records."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from contextwindow.content import Message, ToolResult, ToolUse
from contextwindow.engine import EngineSettings
from contextwindow.engine.events import Event
from contextwindow.engine.loop import Engine
from contextwindow.engine.observe import CallSummary, add_tracer, remove_tracer
from contextwindow.models import get_profile
from contextwindow.providers import TextDelta, ThinkingDelta
from contextwindow.replay.simulate import RecordingModel
from contextwindow.store import open_store
from contextwindow.testing import FunctionProvider, FunctionReply, LocalSettings
from contextwindow.usage.tracker import Usage
from engine_support import local_engine

DECLARED = 40_000
SERVED = 24_000


def _script(turns: int) -> list[Message]:
    out: list[Message] = []
    for turn in range(turns):
        out += [
            Message.assistant(ToolUse(id=f"t{turn}a", name="read", input={"n": turn})),
            Message.assistant(f"Done with step {turn}."),
        ]
    return out


async def _read(use: ToolUse) -> ToolResult:
    n = int(use.input["n"])
    return ToolResult(tool_use_id=use.id, content=" ".join(f"line{n}_{i} of the file" for i in range(1_500)))


def _engine(store: Any, turns: int) -> tuple[Engine, RecordingModel]:
    model = RecordingModel(LocalSettings(window=SERVED), _script(turns))
    profile = get_profile("claude-haiku-4-5").with_(context_window=DECLARED)
    engine = local_engine(
        store.session("agent"), model, profile, _read, reserve=1024, settings=EngineSettings()
    )
    return engine, model


async def _turn(engine: Engine, text: str) -> list[Event]:
    return [event async for event in engine.run_turn(Message.user(text))]


class _Records:
    def __init__(self) -> None:
        self.calls: list[CallSummary] = []

    def record(self, call: CallSummary) -> None:
        self.calls.append(call)


class TestOnEvent:
    def test_the_host_gets_every_event_run_turn_yields_but_the_deltas_once_and_in_order(self) -> None:
        turns = 4
        with open_store() as store:
            engine, model = _engine(store, turns)
            seen: list[Event] = []
            engine.observer.on_event = seen.append
            yielded: list[Event] = []
            for turn in range(turns):
                yielded += asyncio.run(_turn(engine, f"Read the files of step {turn}."))
            assert model.rejected > 0, "the scenario must exercise recovery"
            expected = [e for e in yielded if not isinstance(e, TextDelta | ThinkingDelta)]
            assert [id(e) for e in seen] == [id(e) for e in expected]
            kinds = {e.type for e in seen}
            assert {"request_sent", "usage", "tool_result", "turn_ended", "window_learned"} <= kinds

    def test_an_engine_takes_on_event_when_it_is_made(self) -> None:
        seen: list[Event] = []
        with open_store() as store:
            engine = Engine(
                store.session("s"),
                FunctionProvider(lambda request, max_tokens: "Hello."),
                "claude-haiku-4-5",
                on_event=seen.append,
            )
            asyncio.run(_turn(engine, "Hi"))
        assert [e.type for e in seen] == ["request_sent", "usage", "turn_ended"]


class TestCallSummaries:
    def test_each_provider_call_gives_one_record_and_one_info_line(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        turns = 4
        records = _Records()
        add_tracer(records)
        try:
            with open_store() as store, caplog.at_level(logging.INFO, logger="contextwindow.engine"):
                engine, model = _engine(store, turns)
                for turn in range(turns):
                    asyncio.run(_turn(engine, f"Read the files of step {turn}."))
        finally:
            remove_tracer(records)
        agent_calls = len(model.calls)
        assert len(records.calls) == agent_calls == engine.observer.calls
        assert [r.call for r in records.calls] == list(range(1, agent_calls + 1))
        refused = [r for r in records.calls if r.refused is not None]
        assert len(refused) == model.rejected
        assert all(r.usage is None for r in refused)
        after = records.calls[records.calls.index(refused[0]) + 1]
        assert after.recovered and after.learned_window == SERVED
        lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
        assert len(lines) == agent_calls
        assert sum("refused for size" in line for line in lines) == model.rejected

    def test_nothing_is_logged_per_token(self, caplog: pytest.LogCaptureFixture) -> None:
        def long_reply(request: Any, max_tokens: int) -> str:
            return " ".join(f"w{i}" for i in range(2_000))

        with open_store() as store, caplog.at_level(logging.DEBUG, logger="contextwindow"):
            engine = Engine(store.session("s"), FunctionProvider(long_reply), "claude-haiku-4-5")
            events = asyncio.run(_turn(engine, "Hi"))
        assert sum(isinstance(e, TextDelta) for e in events) >= 1
        assert len(caplog.records) <= 4  # the sending line, the call's line, no line per delta


class TestCost:
    def test_the_engine_sums_what_its_calls_cost(self) -> None:
        pytest.importorskip("genai_prices")

        def reply(request: Any, max_tokens: int) -> FunctionReply:
            usage = Usage(fresh_input=1_000, cache_read=4_000, cache_write=2_000, output=100)
            return FunctionReply(message=Message.assistant("Hello."), usage=usage)

        with open_store() as store:
            engine = Engine(store.session("s"), FunctionProvider(reply), "claude-haiku-4-5")
            costs = []
            for text in ("Hi", "Again"):
                costs += [e.cost for e in asyncio.run(_turn(engine, text)) if e.type == "usage"]
        assert len(costs) == 2 and all(c is not None and c.total > 0 for c in costs)
        assert engine.cost is not None
        assert engine.cost.total == sum(c.total for c in costs if c is not None)
        # Claude Haiku 4.5: $1 per million fresh input, $0.10 cache reads, $1.25 cache writes (5 min),
        # $5 output (https://docs.claude.com/en/docs/about-claude/pricing).
        one = (1_000 * 1 + 4_000 * 0.10 + 2_000 * 1.25 + 100 * 5) / 1_000_000
        assert float(engine.cost.total) == pytest.approx(2 * one, rel=1e-9)
