"""The Engine's step API: a host that makes its own calls gets what ``run_turn`` gets.

``run_turn`` is built on the public steps (``start_turn``, ``append``, ``prepare``, ``request``,
``sending``, ``accept``, ``recover``, ``add_round``). A host that sends each request itself through its
own transport drives the same steps; on the same scenario, against the same strict local provider
(real tokenizer counts, a window smaller than the profile says, so there are rejections, recoveries,
restarts and folds), it must send the very same requests and leave the same records.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from contextwindow.content import Message, Request, ToolResult, ToolUse
from contextwindow.engine import EngineSettings
from contextwindow.engine.loop import Engine
from contextwindow.errors import ContextOverflow, UsageError
from contextwindow.models import get_profile
from contextwindow.providers import Stop, TextDelta, ThinkingDelta, ToolCall, UsageSample
from contextwindow.replay.simulate import RecordingModel
from contextwindow.store import open_store
from contextwindow.testing import LocalProvider, LocalSettings
from engine_support import local_engine

DECLARED = 40_000
SERVED = 24_000
LEDGER_ID = re.compile(r"\b(?:msg|use|anc|cal|chk|evi|arc|not)_[0-9a-f]{28}\b")


def _script(turns: int) -> list[Message]:
    out: list[Message] = []
    for turn in range(turns):
        out += [
            Message.assistant(ToolUse(id=f"t{turn}a", name="read", input={"n": turn})),
            Message.assistant(ToolUse(id=f"t{turn}b", name="read", input={"n": turn + 100})),
            Message.assistant(f"Done with step {turn}."),
        ]
    return out


async def _read(use: ToolUse) -> ToolResult:
    n = int(use.input["n"])
    text = " ".join(f"line{n}_{i} of the file" for i in range(900))
    return ToolResult(tool_use_id=use.id, content=text)


def _engine(model: RecordingModel, store: Any) -> Engine:
    profile = get_profile("claude-haiku-4-5").with_(context_window=DECLARED)
    return local_engine(
        store.session("agent"), model, profile, _read, reserve=1024, settings=EngineSettings()
    )


async def _by_run_turn(engine: Engine, text: str) -> list[str]:
    """The engine's events of a turn (the stream's own deltas left out: a host shows those itself)."""
    return [
        event.type
        async for event in engine.run_turn(Message.user(text))
        if not isinstance(event, TextDelta | ThinkingDelta | ToolCall)
    ]


async def _by_steps(engine: Engine, provider: LocalProvider, text: str) -> list[str]:
    """A host's own loop over the step API, sending each request itself."""
    kinds: list[str] = []
    engine.start_turn()
    opening = engine.append(Message.user(text))
    kinds += [event.type async for event in engine.prepare(opening.id)]
    while True:
        request = engine.request
        kinds.append(engine.sending().type)
        stop: Stop | None = None
        usage = None
        try:
            async for event in provider.stream(
                request, max_tokens=request.max_tokens or 0, load=engine.session.read_attachment
            ):
                if isinstance(event, Stop):
                    stop = event
                elif isinstance(event, UsageSample):
                    usage = event.usage
        except ContextOverflow as rejection:
            kinds += [event.type async for event in engine.recover(rejection)]
            continue
        assert stop is not None
        kinds += [event.type for event in engine.accept(stop, usage)]
        uses = [b for b in stop.message.content if isinstance(b, ToolUse)]
        if stop.reason != "tool_use" or not uses:
            kinds.append("turn_ended")
            return kinds
        results = Message(role="user", content=tuple([await _read(u) for u in uses]))
        kinds += ["tool_result"] * len(uses)
        kinds += [event.type async for event in engine.add_round(results)]


def _sent(model: RecordingModel) -> list[str]:
    """What the provider received, ledger ids renamed (each store mints its own)."""

    def one(request: Request) -> str:
        text = repr(
            (
                request.system,
                request.tools,
                request.max_tokens,
                [(m.role, m.content) for m in request.messages],
            )
        )
        return LEDGER_ID.sub("<id>", text)

    return [one(call[0]) for call in model.calls]


class TestStepAPI:
    def test_a_host_driving_the_steps_sends_what_run_turn_sends(self) -> None:
        turns = 5
        by_turn = RecordingModel(LocalSettings(window=SERVED), _script(turns))
        by_steps = RecordingModel(LocalSettings(window=SERVED), _script(turns))
        with open_store() as first, open_store() as second:
            engine_a, engine_b = _engine(by_turn, first), _engine(by_steps, second)
            provider = LocalProvider(by_steps)
            kinds_a: list[str] = []
            kinds_b: list[str] = []
            for turn in range(turns):
                kinds_a += asyncio.run(_by_run_turn(engine_a, f"Read the files of step {turn}."))
                kinds_b += asyncio.run(_by_steps(engine_b, provider, f"Read the files of step {turn}."))
            assert by_turn.rejected > 0, "the scenario must exercise recovery"
            assert "stream_restarted" in kinds_a or "compacted" in kinds_a
            assert _sent(by_turn) == _sent(by_steps)
            assert kinds_a == kinds_b
            # The same records in the same order (but the notes of run_turn's own, turn_ended), and the
            # same usage in the books.
            kinds = [
                [e.kind for e in store.session("agent").entries() if e.kind != "note"]
                for store in (first, second)
            ]
            assert kinds[0] == kinds[1] and "checkpoint" in kinds[0]
            usage = [
                [e.payload for e in store.session("agent").entries(["usage"])] for store in (first, second)
            ]
            assert usage[0] == usage[1]

    def test_a_step_before_the_request_is_prepared_is_a_usage_error(self) -> None:
        model = RecordingModel(LocalSettings(window=SERVED), [])
        with open_store() as store:
            engine = _engine(model, store)
            engine.start_turn()
            with pytest.raises(UsageError, match="prepare"):
                engine.sending()
