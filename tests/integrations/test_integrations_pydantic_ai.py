"""The pydantic-ai adapter: a real ``Agent`` over ``OpenAIChatModel`` against the local provider."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from _shared import LazyModule
from contextwindow.testing import LocalServer
from integrations_support import TURNS, WINDOW, ObservedModel, close_the_loop_left_open, notes, png

if TYPE_CHECKING:
    from pydantic_ai import Agent

# pydantic-ai and the SDK take a second or more to import: the tests import them, collecting does not.
pydantic_ai = LazyModule("pydantic_ai")
adapter = LazyModule("contextwindow.integrations.pydantic_ai")
openai = LazyModule("openai")


@pytest.fixture(autouse=True)
def _pydantic_ai() -> None:
    pytest.importorskip("pydantic_ai")


close_the_loop = pytest.fixture(autouse=True)(close_the_loop_left_open)  # run_sync keeps one open


@cache
def recorder_class() -> type[Any]:
    from pydantic_ai.capabilities import AbstractCapability

    @dataclass
    class Recorder(AbstractCapability[Any]):
        """After the guard: sees the messages each attempt sends."""

        seen: list[list[Any]] = field(default_factory=list)

        async def prepare_model_request(self, ctx: Any, request_context: Any) -> Any:
            self.seen.append(list(request_context.messages))
            return request_context

    return Recorder


def agent(server: LocalServer, *capabilities: Any, tools: bool = True) -> Agent[None, str]:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    # No kept-alive connections: run_sync opens an event loop per run, and a pooled connection
    # would outlive its loop.
    client = openai.AsyncOpenAI(
        base_url=server.url + "/v1",
        api_key="local",
        max_retries=0,
        http_client=httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0)),
    )
    chat = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
    made: Agent[None, str] = pydantic_ai.Agent(
        chat, instructions="You search notes.", capabilities=list(capabilities)
    )
    if tools:

        @made.tool_plain
        def search(query: str) -> str:
            """Search the notes."""
            return notes(query)

    return made


def tool_pairs(messages: list[Any]) -> tuple[list[str], list[str]]:
    calls = [
        p.tool_call_id
        for m in messages
        if isinstance(m, pydantic_ai.ModelResponse)
        for p in m.parts
        if isinstance(p, pydantic_ai.ToolCallPart)
    ]
    results = [
        p.tool_call_id
        for m in messages
        if isinstance(m, pydantic_ai.ModelRequest)
        for p in m.parts
        if isinstance(p, pydantic_ai.ToolReturnPart)
    ]
    return calls, results


class TestPydanticAIAgent:
    def test_a_tool_agent_runs_forty_turns_on_a_16k_window_without_an_error(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindow(store=":memory:", context_window=WINDOW)
        running = agent(server, guard)
        history: list[Any] = []
        for turn in range(TURNS):
            history = running.run_sync(
                f"Turn {turn}: notes on topic {turn}.", message_history=history
            ).all_messages()
        calls, results = tool_pairs(history)
        assert len(calls) == TURNS and calls == results
        assert model.rejections == []
        assert WINDOW * 0.6 < model.largest <= WINDOW
        assert guard.last_exchange is not None
        session = guard.bridge.store.session(guard.last_exchange.session_id)
        assert session.latest("checkpoint") is not None

    def test_the_first_rejection_is_recovered_by_compacting_and_retrying_once(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindow(store=":memory:")  # gpt-4o's profile says 128k; 16k is served
        running = agent(server, guard)
        history: list[Any] = []
        for turn in range(10):
            history = running.run_sync(f"Turn {turn}.", message_history=history).all_messages()
        assert len(model.rejections) == 1
        assert sum(isinstance(m, pydantic_ai.ModelResponse) for m in history) == 20  # no failed turn

    def test_streaming_and_async_runs_are_guarded(self, server: LocalServer, model: ObservedModel) -> None:
        guard = adapter.ContextWindow(store=":memory:", context_window=WINDOW)
        running = agent(server, guard)

        async def go() -> list[Any]:
            history: list[Any] = []
            for turn in range(8):
                if turn % 2:
                    history = (await running.run(f"Turn {turn}.", message_history=history)).all_messages()
                    continue
                async with running.run_stream(f"Turn {turn}.", message_history=history) as stream:
                    text = await stream.get_output()
                    assert text
                history = stream.all_messages()
            return history

        history = asyncio.run(go())
        calls, results = tool_pairs(history)
        assert len(calls) == 8 and calls == results
        assert model.rejections == []
        assert guard.last_exchange is not None and guard.last_exchange.session_id
        session = guard.bridge.store.session(guard.last_exchange.session_id)
        assert len(session.messages()) >= 8 * 3

    def test_parts_the_guard_kept_are_the_agents_own_objects(self, server: LocalServer) -> None:
        recorder = recorder_class()()
        running = agent(server, adapter.ContextWindow(store=":memory:", context_window=WINDOW), recorder)
        history = running.run_sync("Turn 0.").all_messages()
        history = running.run_sync("Turn 1.", message_history=history).all_messages()
        sent = recorder.seen[-1]
        assert len(sent) == len(history) - 1
        assert all(a is b for a, b in zip(sent, history, strict=False))

    def test_an_image_is_stored_with_its_dimensions(self, server: LocalServer) -> None:
        guard = adapter.ContextWindow(store=":memory:", context_window=WINDOW)
        running = agent(server, guard, tools=False)
        running.run_sync(
            ["What is in this photo?", pydantic_ai.BinaryContent(data=png(800, 600), media_type="image/png")]
        )
        assert guard.last_exchange is not None
        session = guard.bridge.store.session(guard.last_exchange.session_id)
        [stored] = [m.message for m in session.messages() if m.message.role == "user"]
        [image] = [b for b in stored.content if b.type == "image"]
        assert (image.ref.width, image.ref.height) == (800, 600)

    def test_any_other_error_is_pydantic_ais_own(self, server: LocalServer, model: ObservedModel) -> None:
        running = agent(server, adapter.ContextWindow(store=":memory:", context_window=WINDOW), tools=False)
        model.fail_next(5)
        with pytest.raises(pydantic_ai.ModelHTTPError) as raised:
            running.run_sync("hello")
        assert raised.value.status_code >= 500


def claude_agent(server: LocalServer, *capabilities: Any) -> Agent[None, str]:
    import anthropic
    import httpx2  # the Anthropic SDK's own HTTP client package
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    client = anthropic.AsyncAnthropic(
        base_url=server.url,
        api_key="local",
        max_retries=0,
        http_client=httpx2.AsyncClient(limits=httpx2.Limits(max_keepalive_connections=0)),
    )
    model = AnthropicModel("claude-haiku-4-5", provider=AnthropicProvider(anthropic_client=client))
    made: Agent[None, str] = pydantic_ai.Agent(
        model, instructions="You search notes.", capabilities=list(capabilities)
    )

    @made.tool_plain
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query)

    return made


class TestPydanticAIOutputBound:
    def test_the_anthropic_models_own_max_tokens_is_lowered_to_fit_the_served_window(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        pytest.importorskip("anthropic")
        # No max_tokens given: pydantic-ai sends the model's whole output (64,000) on a 16k window.
        guard = adapter.ContextWindow(store=":memory:")
        running = claude_agent(server, guard)
        history: list[Any] = []
        for turn in range(6):
            history = running.run_sync(f"Turn {turn}.", message_history=history).all_messages()
        calls, results = tool_pairs(history)
        assert calls == results
        # one search a turn; where the guard archived an old result instead of folding (which one
        # it does depends on the estimate), the local model also reads it again through read_archived
        names = [
            p.tool_name
            for m in history
            if isinstance(m, pydantic_ai.ModelResponse)
            for p in m.parts
            if isinstance(p, pydantic_ai.ToolCallPart)
        ]
        assert names.count("search") == 6 and set(names) <= {"search", "read_archived"}
        assert len(model.rejections) == 1  # the first call, which taught the window
        assert guard.last_exchange is not None
        lowered = [e for e in guard.last_exchange.events if e.type == "max_tokens_lowered"]
        assert lowered and lowered[0].asked == 64_000 and lowered[0].lowered < WINDOW // 2


def long_search_agent(server: LocalServer, guard: Any) -> Agent[None, str]:
    made = agent(server, guard, tools=False)

    @made.tool_plain
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query, 250)  # over the size past which an older result is archived

    return made


class TestPydanticAIRereads:
    def test_the_model_reads_an_archived_result_again_through_the_capabilitys_toolset(self) -> None:
        from integrations_support import RereadingModel

        model = RereadingModel()
        with LocalServer(model) as server:
            guard = adapter.ContextWindow(store=":memory:", context_window=WINDOW)
            running = long_search_agent(server, guard)
            history: list[Any] = []
            for turn in range(14):
                history = running.run_sync(f"Turn {turn}.", message_history=history).all_messages()
        assert model.rejections == []
        assert model.rereads, "no archived result was named to the model"
        returns = [
            p
            for m in history
            if isinstance(m, pydantic_ai.ModelRequest)
            for p in m.parts
            if isinstance(p, pydantic_ai.ToolReturnPart)
        ]
        rereads = [p for p in returns if p.tool_name == "read_archived"]
        assert rereads and all(str(p.content).startswith("note on ") for p in rereads)
        assert sum(p.tool_name == "search" for p in returns) == 14

    def test_without_a_placeholder_the_model_is_not_offered_the_tool(self, server: LocalServer) -> None:
        guard = adapter.ContextWindow(store=":memory:", context_window=WINDOW)
        running = agent(server, guard)
        running.run_sync("Turn 0.")
        assert guard.last_exchange is not None
        assert [t["function"]["name"] for t in guard.last_exchange.body["tools"]] == ["search"]
