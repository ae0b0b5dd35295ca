"""Every adapter's ``reread=False``, and an Agents SDK agent without ``guard.tools``: the compiled
request names what was left out and tells the model to call no tool; with the re-read tool offered,
the placeholders name it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.testing import LocalServer
from integrations_support import WINDOW as AGENTS_WINDOW
from integrations_support import ObservedModel
from reread_support import POLICY, WINDOW, sent_through, told

CALL = "call read_archived with"

langchain = LazyModule("contextwindow.integrations.langchain")
pydantic_ai = LazyModule("contextwindow.integrations.pydantic_ai")
litellm = LazyModule("contextwindow.integrations.litellm")
openai_agents = LazyModule("contextwindow.integrations.openai_agents")
agents = LazyModule("agents")
openai = LazyModule("openai")

OPTIONS: dict[str, Any] = {"store": ":memory:", "context_window": WINDOW, "policy": POLICY}


def _adapter(kind: str, reread: bool) -> Any:
    # The adapter first: it keeps litellm offline (its local cost map) when imported before it.
    pytest.importorskip(f"contextwindow.integrations.{kind}")
    if kind == "langchain":
        return langchain.ContextWindowMiddleware(summarizer=False, reread=reread, **OPTIONS)
    if kind == "pydantic_ai":
        return pydantic_ai.ContextWindow(summarizer=False, reread=reread, **OPTIONS)
    return litellm.GuardedLiteLLM(summarize=False, reread=reread, **OPTIONS)


@pytest.mark.parametrize("kind", ["langchain", "pydantic_ai", "litellm"])
class TestAdaptersRereadText:
    def test_reread_off_names_no_tool(self, kind: str) -> None:
        text, tools = told(sent_through(_adapter(kind, reread=False).bridge.core))
        assert "read_archived" not in text and "read_archived" not in tools
        assert "call " not in text

    def test_reread_on_names_the_tool(self, kind: str) -> None:
        text, _ = told(sent_through(_adapter(kind, reread=True).bridge.core))
        assert CALL in text


class _Seen(ObservedModel):
    """The observed provider, keeping each request's text."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def handle(self, request: Any, **kwargs: Any) -> Any:
        self.texts.append(repr(request.messages))
        return super().handle(request, **kwargs)


def _long_search() -> Any:
    from integrations_support import notes

    @agents.function_tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query, 250)  # over the size past which an older result is archived

    return search


async def _run(server: LocalServer, guard: Any, tools: list[Any], turns: int) -> None:
    async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="local", max_retries=0) as client:
        agent = agents.Agent(
            name="notes",
            instructions="You search notes.",
            tools=tools,
            model=guard.wrap(agents.OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client)),
        )
        session = openai_agents.LedgerSession("run", store=guard.store)
        for turn in range(turns):
            await agents.Runner.run(
                agent,
                f"Turn {turn}: notes on topic {turn}.",
                session=session,
                run_config=agents.RunConfig(call_model_input_filter=guard),
                hooks=guard.hooks,
            )


@pytest.mark.parametrize("offered", [False, True], ids=["without-guard-tools", "with-guard-tools"])
def test_an_agents_sdk_agent_is_told_of_the_tool_only_when_it_holds_it(offered: bool) -> None:
    pytest.importorskip("agents")
    agents.set_tracing_disabled(True)
    model = _Seen()
    with LocalServer(model) as server:
        guard = openai_agents.ContextWindowFilter(store=":memory:", context_window=AGENTS_WINDOW)
        tools = [_long_search(), *guard.tools] if offered else [_long_search()]
        asyncio.run(_run(server, guard, tools, 10))
    text = "".join(model.texts)
    assert "tool result archived as tool-result-archive-" in text
    assert ("read_archived" in text) is offered
