"""The LangChain adapter over ``ChatAnthropic`` (langchain-anthropic): a real ``create_agent`` tool agent
against the local provider's Anthropic Messages endpoint."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.testing import LocalServer
from integrations_support import TURNS, WINDOW, ObservedModel, notes

langchain_agents = LazyModule("langchain.agents")
langchain_messages = LazyModule("langchain_core.messages")
adapter = LazyModule("contextwindow.integrations.langchain")

SONNET = "claude-sonnet-4-6"


@pytest.fixture(autouse=True)
def _langchain_anthropic() -> None:
    pytest.importorskip("langchain")
    pytest.importorskip("langchain_anthropic")


def claude(server: LocalServer) -> Any:
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model=SONNET, base_url=server.url, api_key="local", max_retries=0, max_tokens=1_024)


def search_tool() -> Any:
    from langchain_core.tools import tool

    @tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query)

    return search


def run(agent: Any, turns: int) -> list[Any]:
    messages: list[Any] = []
    for turn in range(turns):
        state = agent.invoke(
            {"messages": [*messages, langchain_messages.HumanMessage(f"Turn {turn}: notes on topic {turn}.")]}
        )
        messages = state["messages"]
    return messages


def parallel_results(messages: list[Any]) -> int:
    """The tool messages that follow another tool message (one Anthropic user turn with theirs)."""
    tool = langchain_messages.ToolMessage
    return sum(isinstance(a, tool) and isinstance(b, tool) for a, b in pairwise(messages))


class TestLangChainOverChatAnthropic:
    def test_a_tool_agent_runs_forty_turns_on_a_16k_window_without_an_error(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        agent = langchain_agents.create_agent(
            claude(server), [search_tool()], middleware=[guard], system_prompt="You search notes."
        )
        messages = run(agent, TURNS)
        # Every turn used its tool (the local model may call it again after a result on this wire).
        assert sum(isinstance(m, langchain_messages.ToolMessage) for m in messages) >= TURNS
        assert model.rejections == []
        assert 0.6 * WINDOW < model.largest <= WINDOW  # the window is used once full, never over it
        session = guard.bridge.store.session(guard.last_exchange.session_id)
        # One session, every message kept: the results of one call's parallel tool uses are one message.
        assert len(session.messages()) == len(messages) - parallel_results(messages)
        assert session.latest("checkpoint") is not None  # older history folded, not dropped

    def test_without_the_guard_the_same_agent_overflows_the_window(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        anthropic = pytest.importorskip("anthropic")
        agent = langchain_agents.create_agent(
            claude(server), [search_tool()], system_prompt="You search notes."
        )
        with pytest.raises(anthropic.BadRequestError):
            run(agent, TURNS)
