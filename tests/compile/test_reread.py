"""Re-reads: an archived result's placeholder names a tool the Engine offers and answers from the ledger."""

from __future__ import annotations

import asyncio
from typing import Any

from contextwindow import Engine, Message, Policy, ToolResult, ToolUse, open_store
from contextwindow.compile.reread import READ_ARCHIVED, read_archived
from contextwindow.engine import EngineSettings
from contextwindow.errors import InvalidInput
from contextwindow.models import get_profile
from contextwindow.testing import LocalModel, LocalProvider, LocalSettings

TOOLS = [{"name": "read_file", "input_schema": {"type": "object", "properties": {}}}]


WINDOW = 12_000
"""Small enough that four results (~4,200 tokens each) do not fit without archiving: stale results
are archived under pressure only, so the history must really not fit."""


def _engine(settings: EngineSettings | None = None) -> tuple[Engine, LocalModel, list[ToolUse]]:
    model = LocalModel(LocalSettings(window=WINDOW))
    seen: list[ToolUse] = []

    def read_file(use: ToolUse) -> str:
        seen.append(use)
        return f"ORIGINAL {use.id} " + "a line of the file\\n" * 700

    session = open_store().session("s")
    engine = Engine(
        session,
        LocalProvider(model),
        get_profile("claude-haiku-4-5").with_(context_window=WINDOW),
        tools=TOOLS,
        policy=Policy(output_reserve=512),
        tool_runner=read_file,
        settings=settings,
    )
    return engine, model, seen


def _turn(engine: Engine, text: str) -> list[Any]:
    async def run() -> list[Any]:
        return [event async for event in engine.run_turn(Message.user(text))]

    return asyncio.run(run())


class TestEngineRereads:
    def _history(self, engine: Engine, model: LocalModel) -> str:
        for turn in range(4):
            model.enqueue(
                Message.assistant(ToolUse(id=f"r{turn}", name="read_file", input={})),
                Message.assistant(f"ok {turn}"),
            )
            _turn(engine, f"read file {turn}")
        return str(engine.session.entries(["archive"])[0].payload["artifact_id"])

    def test_the_model_reads_an_archived_result_again_without_the_hosts_runner(self) -> None:
        engine, model, seen = _engine()
        artifact = self._history(engine, model)
        calls_before = len(seen)
        model.enqueue(
            Message.assistant(ToolUse(id="again", name=READ_ARCHIVED, input={"id": artifact})),
            Message.assistant("seen it again"),
        )
        _turn(engine, "look at the first file again")
        assert len(seen) == calls_before  # the host's runner never saw the re-read
        stored = [m.message for m in engine.session.messages()]
        answer = next(
            b for m in stored for b in m.content if isinstance(b, ToolResult) and b.tool_use_id == "again"
        )
        assert "ORIGINAL r0" in str(answer.content) and not answer.is_error

    def test_it_is_offered_only_when_a_placeholder_names_it_and_can_be_turned_off(self) -> None:
        engine, model, _ = _engine()
        model.enqueue(Message.assistant("hi"))
        _turn(engine, "hello")
        assert all(t.name != READ_ARCHIVED for t in engine._current().tools)
        self._history(engine, model)
        assert any(t.name == READ_ARCHIVED for t in engine._current().tools)
        off, model_off, _ = _engine(EngineSettings(reread=False))
        self._history(off, model_off)
        assert all(t.name != READ_ARCHIVED for t in off._current().tools)

    def test_turned_off_its_placeholders_name_no_tool(self) -> None:
        off, model_off, _ = _engine(EngineSettings(reread=False))
        self._history(off, model_off)
        sent = " ".join(str(m.content) for m in off._current().messages)
        assert "archived" in sent or "left out" in sent  # a placeholder is there
        assert READ_ARCHIVED not in sent  # and names no tool the model was not offered

    def test_an_unknown_id_is_refused_by_name(self) -> None:
        session = open_store().session("s")
        session.append(Message.user("hi"))
        try:
            read_archived(session, "tool-result-archive-nope")
        except InvalidInput as exc:
            assert "tool-result-archive-nope" in str(exc)
        else:
            raise AssertionError("an unknown id must be refused")
