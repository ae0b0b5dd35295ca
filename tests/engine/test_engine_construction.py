"""The Engine as people build it: the default compiler from a model name, a system prompt and tools in
any form, and the tool runners people write (sync or async; a result, an outcome or a string; a tool
that raises)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from contextwindow.compile import Policy
from contextwindow.content import Message, Request, Text, ToolResult, ToolSpec, ToolUse
from contextwindow.engine import Engine, EngineCompiler, Event, ToolOutcome, ToolResultReady, TurnEnded
from contextwindow.errors import InvalidInput, UsageError
from contextwindow.formats import AttachmentLoader
from contextwindow.providers import ProviderEvent
from contextwindow.store import open_store
from contextwindow.testing import LocalProvider, LocalSettings

READ = {"name": "read", "description": "read a file", "input_schema": {"type": "object", "properties": {}}}
OPENAI_CHAT = {"type": "function", "function": {"name": "grep", "description": "search", "parameters": {}}}
OPENAI_RESPONSES = {"type": "function", "name": "ls", "description": "list", "parameters": {}}


def local(*replies: Message) -> LocalProvider:
    return LocalProvider(settings=LocalSettings(window=200_000), script=replies)


class Recording:
    """A provider that keeps each request it is sent and answers through another."""

    def __init__(self, inner: LocalProvider) -> None:
        self.inner, self.name, self.requests = inner, inner.name, []  # type: ignore[var-annotated]

    def stream(
        self, request: Request, *, max_tokens: int, load: AttachmentLoader
    ) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        return self.inner.stream(request, max_tokens=max_tokens, load=load)


def run(engine: Engine, text: str = "go") -> list[Event]:
    async def go() -> list[Event]:
        return [event async for event in engine.run_turn(Message.user(text))]

    return asyncio.run(go())


def calls(*names: str) -> Message:
    return Message.assistant(*(ToolUse(id=f"c{i}", name=n, input={}) for i, n in enumerate(names)))


class TestTheDefaultCompiler:
    def test_a_model_name_a_system_string_and_wire_tools_make_the_request(self) -> None:
        provider = Recording(local(Message.assistant("hello")))
        engine = Engine(
            open_store().session("s"),
            provider,
            "claude-sonnet-4-5",
            system="You are terse.",
            tools=[READ, OPENAI_CHAT, OPENAI_RESPONSES, ToolSpec(name="edit")],
        )
        events = run(engine)
        assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
        assert engine.profile.name == "claude-sonnet-4-5"
        [request] = provider.requests
        assert request.system == (Text(text="You are terse."),)
        assert [t.name for t in request.tools] == ["read", "grep", "ls", "edit"]
        assert request.tools[0].description == "read a file" and request.tools[1].description == "search"

    def test_system_blocks_are_taken_as_they_are(self) -> None:
        blocks = (Text(text="one"), Text(text="two"))
        assert EngineCompiler(system=blocks).system == blocks

    def test_a_tool_that_is_neither_a_spec_nor_a_dict_is_invalid_input(self) -> None:
        with pytest.raises(InvalidInput, match=r"tools\[0\]"):
            EngineCompiler(tools=["read"])  # type: ignore[list-item]

    def test_system_and_tools_beside_a_compiler_of_ones_own_is_a_usage_error(self) -> None:
        with pytest.raises(UsageError, match="compiler"):
            Engine(
                open_store().session("s"), local(), "gpt-4o", system="x", compiler=EngineCompiler(Policy())
            )

    def test_the_policy_reaches_the_default_compiler(self) -> None:
        provider = local(Message.assistant("ok"))
        engine = Engine(open_store().session("s"), provider, "gpt-4o", policy=Policy(output_reserve=1_234))
        events = run(engine)
        sent = [e for e in events if e.type == "request_sent"]
        assert sent and sent[0].max_tokens == 1_234


class TestToolRunners:
    def _engine(self, runner: Any, *replies: Message) -> Engine:
        script = replies or (calls("read"), Message.assistant("done"))
        return Engine(open_store().session("s"), local(*script), "gpt-4o", tools=[READ], tool_runner=runner)

    def _result(self, engine: Engine) -> ToolResult:
        [message] = [s.message for s in engine.session.messages() if s.message.role == "user"][1:2]
        block = message.content[0]
        assert isinstance(block, ToolResult)
        return block

    def test_a_sync_runner_returning_a_string(self) -> None:
        engine = self._engine(lambda use: f"contents of {use.name}")
        events = run(engine)
        assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
        assert self._result(engine) == ToolResult(tool_use_id="c0", content="contents of read")

    def test_an_async_runner_returning_a_string(self) -> None:
        async def runner(use: ToolUse) -> str:
            return "async contents"

        engine = self._engine(runner)
        run(engine)
        assert self._result(engine).content == "async contents"

    def test_a_sync_runner_returning_a_tool_result(self) -> None:
        engine = self._engine(lambda use: ToolResult(tool_use_id=use.id, content="r"))
        run(engine)
        assert self._result(engine).content == "r"

    def test_a_sync_runner_returning_an_outcome_that_ends_the_turn(self) -> None:
        engine = self._engine(
            lambda use: ToolOutcome(result=ToolResult(tool_use_id=use.id, content="r"), end_turn=True)
        )
        events = run(engine)
        assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn_by_tool"

    def test_a_tool_that_raises_becomes_an_error_result_and_the_turn_goes_on(self) -> None:
        def runner(use: ToolUse) -> str:
            raise FileNotFoundError("no such file: notes.txt")

        engine = self._engine(runner)
        events = run(engine)
        assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
        result = self._result(engine)
        assert result.is_error and result.content == "FileNotFoundError: no such file: notes.txt"
        assert any(isinstance(e, ToolResultReady) and e.tool_use_id == "c0" for e in events)

    def test_an_async_tool_that_raises_becomes_an_error_result(self) -> None:
        async def runner(use: ToolUse) -> str:
            raise ValueError("bad part")

        engine = self._engine(runner)
        run(engine)
        assert self._result(engine) == ToolResult(
            tool_use_id="c0", content="ValueError: bad part", is_error=True
        )

    def test_a_runner_returning_something_else_is_a_usage_error_naming_it(self) -> None:
        engine = self._engine(lambda use: {"content": "x"})
        with pytest.raises(UsageError, match=r"returned dict for 'read'"):
            run(engine)

    def test_a_cancelled_tool_is_not_a_result(self) -> None:
        async def runner(use: ToolUse) -> str:
            raise asyncio.CancelledError

        engine = self._engine(runner)
        with pytest.raises(asyncio.CancelledError):
            run(engine)
