"""The LangChain adapter: a real ``create_agent`` agent over ``ChatOpenAI`` against the local provider."""

from __future__ import annotations

import asyncio
from functools import cache
from typing import TYPE_CHECKING, Any

import pytest

from _shared import LazyModule
from contextwindow.testing import LocalServer
from integrations_support import TURNS, WINDOW, ObservedModel, notes, png_data_url

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

# LangChain and the SDK take seconds to import: the tests import them, collecting the suite does not.
langchain_agents = LazyModule("langchain.agents")
langchain_messages = LazyModule("langchain_core.messages")
adapter = LazyModule("contextwindow.integrations.langchain")
openai = LazyModule("openai")


@pytest.fixture(autouse=True)
def _langchain() -> None:
    pytest.importorskip("langchain")


@cache
def search_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query)

    return search


@cache
def long_search_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query, 250)  # over the size past which an older result is archived

    return search


def chat(server: LocalServer) -> ChatOpenAI:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="gpt-4o", base_url=server.url + "/v1", api_key="local", max_retries=0)


@cache
def recorder_class() -> type[Any]:
    from langchain.agents.middleware import AgentMiddleware

    class Recorder(AgentMiddleware):  # type: ignore[type-arg]
        """Inside the guard: sees the request the model gets."""

        def __init__(self) -> None:
            super().__init__()
            self.requests: list[Any] = []

        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            self.requests.append(request)
            return handler(request)

    return Recorder


def run(agent: Any, turns: int, start: list[Any] | None = None) -> list[Any]:
    messages: list[Any] = list(start or [])
    for turn in range(turns):
        state = agent.invoke(
            {"messages": [*messages, langchain_messages.HumanMessage(f"Turn {turn}: notes on topic {turn}.")]}
        )
        messages = state["messages"]
    return messages


class TestLangChainAgent:
    def test_a_tool_agent_runs_forty_turns_on_a_16k_window_without_an_error(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(
            chat(server), [search_tool()], middleware=[guard], system_prompt="You search notes."
        )
        messages = run(agent, TURNS)
        assert (
            sum(isinstance(m, langchain_messages.ToolMessage) for m in messages) == TURNS
        )  # every turn used its tool
        assert model.rejections == []
        assert model.largest <= WINDOW
        assert model.largest > 0.6 * WINDOW  # the window is used once full
        session = guard.bridge.store.session(guard.last_exchange.session_id)
        assert len(session.messages()) == len(messages)  # one session, every message kept
        assert session.latest("checkpoint") is not None  # older history folded, not dropped

    def test_the_first_rejection_teaches_the_window_and_the_agent_never_sees_it(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowMiddleware(store=":memory:")  # gpt-4o's profile says 128k; 16k is served
        agent = langchain_agents.create_agent(chat(server), [search_tool()], middleware=[guard])
        run(agent, 12)
        assert len(model.rejections) == 1
        assert "maximum context length" in model.rejections[0].message

    def test_the_async_agent_shares_the_core(self, server: LocalServer, model: ObservedModel) -> None:
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(chat(server), [search_tool()], middleware=[guard])

        async def go() -> list[Any]:
            messages: list[Any] = []
            for turn in range(12):
                state = await agent.ainvoke(
                    {"messages": [*messages, langchain_messages.HumanMessage(f"Turn {turn}.")]}
                )
                messages = state["messages"]
            return messages

        messages = asyncio.run(go())
        assert len(messages) == 12 * 4
        assert model.rejections == []
        assert guard.last_exchange is not None
        assert any(e.type == "compacted" for e in guard.last_exchange.events) or model.largest > 0.6 * WINDOW

    def test_messages_the_guard_kept_are_the_agents_own_objects(self, server: LocalServer) -> None:
        recorder = recorder_class()()
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(chat(server), [search_tool()], middleware=[guard, recorder])
        messages = run(agent, 2)
        sent = recorder.requests[-1].messages
        assert [type(m) for m in sent] == [type(m) for m in messages[:-1]]
        assert all(a is b for a, b in zip(sent, messages, strict=False))
        calls = [m for m in messages if isinstance(m, langchain_messages.AIMessage) and m.tool_calls]
        results = [m for m in messages if isinstance(m, langchain_messages.ToolMessage)]
        assert [c.tool_calls[0]["id"] for c in calls] == [r.tool_call_id for r in results]

    def test_an_image_reaches_the_model_and_is_priced_by_its_dimensions(self, server: LocalServer) -> None:
        recorder = recorder_class()()
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(chat(server), [], middleware=[guard, recorder])
        photo = langchain_messages.HumanMessage(
            content=[
                {"type": "text", "text": "What is in this photo?"},
                {"type": "image_url", "image_url": {"url": png_data_url(800, 600)}},
            ]
        )
        agent.invoke({"messages": [photo]})
        assert recorder.requests[-1].messages[0] is photo
        session = guard.bridge.store.session(guard.last_exchange.session_id)
        [stored] = [m.message for m in session.messages() if m.message.role == "user"]
        [image] = [b for b in stored.content if b.type == "image"]
        assert (image.ref.width, image.ref.height) == (800, 600)

    def test_a_message_larger_than_the_window_is_cut_with_a_marker_after_the_first_rejection(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowMiddleware(store=":memory:")
        agent = langchain_agents.create_agent(chat(server), [], middleware=[guard])
        state = agent.invoke({"messages": [langchain_messages.HumanMessage(notes("everything", 3000))]})
        assert isinstance(state["messages"][-1], langchain_messages.AIMessage)
        assert [c.status for c in model.calls] == [400, None]
        assert "[truncated" in guard.last_exchange.body["messages"][-1]["content"]
        kinds = [e.type for e in guard.last_exchange.events]
        assert kinds.index("overflow_recovered") < kinds.index("usage")
        assert kinds.count("request_sent") == 2  # the rejected call and its retry

    def test_any_other_error_reaches_the_agent_as_the_sdks_own(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(chat(server), [], middleware=[guard])
        model.fail_next(1)
        with pytest.raises(openai.APIStatusError) as raised:
            agent.invoke({"messages": [langchain_messages.HumanMessage("hello")]})
        assert raised.value.status_code >= 500  # the provider's own answer, not a rejection for size


class TestLangChainOutputBound:
    def test_a_max_tokens_that_cannot_fit_the_served_window_is_lowered_on_the_models_own_call(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        from langchain_openai import ChatOpenAI

        # gpt-4o's profile says 128k; 16k is served: 16,000 output tokens can never fit beside a request.
        llm = ChatOpenAI(
            model="gpt-4o", base_url=server.url + "/v1", api_key="local", max_retries=0, max_tokens=16_000
        )
        guard = adapter.ContextWindowMiddleware(store=":memory:")
        agent = langchain_agents.create_agent(llm, [search_tool()], middleware=[guard])
        messages = run(agent, 6)
        assert sum(isinstance(m, langchain_messages.ToolMessage) for m in messages) == 6
        assert len(model.rejections) == 1  # the first call, which taught the window
        lowered = [e for e in guard.last_exchange.events if e.type == "max_tokens_lowered"]
        assert lowered and lowered[0].asked == 16_000 and lowered[0].lowered < WINDOW // 2
        assert guard.last_exchange.body["max_tokens"] == lowered[0].lowered


class TestLangChainRereads:
    def test_the_model_reads_an_archived_result_again_through_the_middlewares_tool(self) -> None:
        from integrations_support import RereadingModel

        model = RereadingModel()
        with LocalServer(model) as server:
            guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
            agent = langchain_agents.create_agent(chat(server), [long_search_tool()], middleware=[guard])
            messages = run(agent, 14)
        assert model.rejections == []
        assert model.rereads, "no archived result was named to the model"
        rereads = [
            m for m in messages if isinstance(m, langchain_messages.ToolMessage) and m.name == "read_archived"
        ]
        assert rereads and all(r.content.startswith("note on ") for r in rereads)  # the original results
        searches = [
            m for m in messages if isinstance(m, langchain_messages.ToolMessage) and m.name == "search"
        ]
        assert len(searches) == 14  # the agent's own tool ran once per turn

    def test_without_a_placeholder_the_model_is_not_offered_the_tool(self, server: LocalServer) -> None:
        recorder = recorder_class()()
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(chat(server), [search_tool()], middleware=[guard, recorder])
        run(agent, 1)
        assert [t.name for t in recorder.requests[-1].tools] == ["search"]

    def test_the_tool_returns_an_attachment_as_its_bytes_and_an_unknown_id_as_an_error(
        self, server: LocalServer
    ) -> None:
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(chat(server), [], middleware=[guard])
        photo = langchain_messages.HumanMessage(
            content=[
                {"type": "text", "text": "What is in this photo?"},
                {"type": "image_url", "image_url": {"url": png_data_url(800, 600)}},
            ]
        )
        agent.invoke({"messages": [photo]})
        session = guard.bridge.store.session(guard.last_exchange.session_id)
        [stored] = [m.message for m in session.messages() if m.message.role == "user"]
        [image] = [b for b in stored.content if b.type == "image"]
        [tool] = guard.tools
        blocks = tool.invoke({"id": image.ref.id})
        assert [b["type"] for b in blocks] == ["text", "image"]
        assert blocks[1]["mime_type"] == "image/png"
        assert blocks[1]["base64"] == png_data_url(800, 600).split(",", 1)[1]  # the bytes the agent sent
        missing = guard.bridge.reread("tool-result-archive-0000")
        assert missing.error and "no archived result" in missing.text
