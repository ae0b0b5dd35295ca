"""``compaction=`` on the framework adapters: on an Anthropic model the framework's own call carries
Anthropic's context editing (pydantic-ai's ``AnthropicModel``, litellm's Anthropic route), served by
the strict local provider; where the call speaks Chat Completions, ``"provider"`` folds locally and
says so once."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from test_integrations_litellm import TOOLS

from _shared import LazyModule
from contextwindow.compaction import ANTHROPIC_CONTEXT_BETA, CLEAR_TOOL_USES
from contextwindow.engine import observe
from contextwindow.testing import LocalServer, LocalSettings
from integrations_support import WINDOW, ObservedModel, close_the_loop_left_open, notes

pydantic_ai = LazyModule("pydantic_ai")
pydantic_adapter = LazyModule("contextwindow.integrations.pydantic_ai")
litellm_adapter = LazyModule("contextwindow.integrations.litellm")
langchain_adapter = LazyModule("contextwindow.integrations.langchain")

close_the_loop = pytest.fixture(autouse=True)(close_the_loop_left_open)
SONNET = "claude-sonnet-4-6"


class EditingModel(ObservedModel):
    """The observed provider, recording what ``context_management`` each call carried and what the
    provider's edits cleared."""

    def __init__(self) -> None:
        super().__init__(LocalSettings(window=WINDOW, call_tools=True))
        self.managed: list[tuple[Any, tuple[str, ...]]] = []
        self.cleared: list[int] = []

    def handle(self, request: Any, **kwargs: Any) -> Any:
        answer = super().handle(request, **kwargs)
        management = request.params.get("context_management")
        if management is not None:
            betas = tuple(kwargs.get("betas") or request.params.get("betas") or ())
            self.managed.append((management, betas))
            self.cleared.extend(e.cleared for e in getattr(answer, "applied_edits", None) or ())
        return answer


@pytest.fixture
def editing() -> EditingModel:
    return EditingModel()


@pytest.fixture
def editing_server(editing: EditingModel) -> Any:
    with LocalServer(editing) as running:
        yield running


def claude_agent(server: LocalServer, guard: Any) -> Any:
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
    model = AnthropicModel(SONNET, provider=AnthropicProvider(anthropic_client=client))
    made = pydantic_ai.Agent(model, instructions="You search notes.", capabilities=[guard])

    @made.tool_plain
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query)

    return made


def run_claude(server: LocalServer, compaction: str, turns: int = 12) -> Any:
    guard = pydantic_adapter.ContextWindow(store=":memory:", context_window=WINDOW, compaction=compaction)
    running = claude_agent(server, guard)
    history: list[Any] = []
    for turn in range(turns):
        result = running.run_sync(
            f"Turn {turn}.", message_history=history, model_settings={"max_tokens": 500}
        )
        history = result.all_messages()
    return history


class TestPydanticAI:
    def test_provider_compaction_rides_on_the_anthropic_models_own_request(
        self, editing_server: LocalServer, editing: EditingModel
    ) -> None:
        pytest.importorskip("pydantic_ai")
        history = run_claude(editing_server, "provider")
        assert editing.managed, "no request carried Anthropic's context editing"
        management, betas = editing.managed[-1]
        assert management["edits"][0]["type"] == CLEAR_TOOL_USES
        assert ANTHROPIC_CONTEXT_BETA in betas
        assert sum(editing.cleared) > 0  # the provider cleared old results: the agent's history kept them
        assert editing.rejections == [] and editing.largest <= WINDOW
        calls = [p for m in history for p in getattr(m, "parts", ()) if type(p).__name__ == "ToolCallPart"]
        assert len(calls) >= 12

    def test_local_compaction_sends_no_context_editing(
        self, editing_server: LocalServer, editing: EditingModel
    ) -> None:
        pytest.importorskip("pydantic_ai")
        run_claude(editing_server, "local", turns=8)
        assert editing.managed == []

    def test_provider_on_a_chat_completions_model_folds_locally_and_says_so_once(
        self, server: LocalServer, model: ObservedModel, caplog: pytest.LogCaptureFixture
    ) -> None:
        pytest.importorskip("pydantic_ai")
        import httpx
        import openai
        from pydantic_ai.models.openai import OpenAIChatModel
        from pydantic_ai.providers.openai import OpenAIProvider

        client = openai.AsyncOpenAI(
            base_url=server.url + "/v1",
            api_key="local",
            max_retries=0,
            http_client=httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0)),
        )
        chat = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
        guard = pydantic_adapter.ContextWindow(store=":memory:", context_window=WINDOW, compaction="provider")
        running = pydantic_ai.Agent(chat, instructions="You search notes.", capabilities=[guard])

        @running.tool_plain
        def search(query: str) -> str:
            """Search the notes."""
            return notes(query)

        history: list[Any] = []
        observe._warned.clear()  # said once per process: this test's own
        with caplog.at_level(logging.WARNING, logger="contextwindow.guard"):
            for turn in range(10):
                history = running.run_sync(f"Turn {turn}.", message_history=history).all_messages()
        said = [r for r in caplog.records if "compaction='provider'" in r.getMessage()]
        assert len(said) == 1 and "folded locally" in said[0].getMessage()
        assert model.largest <= WINDOW


class TestLangChain:
    def test_provider_on_chat_completions_folds_locally_and_says_so_once(
        self, server: LocalServer, model: ObservedModel, caplog: pytest.LogCaptureFixture
    ) -> None:
        pytest.importorskip("langchain")
        from langchain.agents import create_agent
        from langchain_core.messages import HumanMessage, ToolMessage
        from langchain_core.tools import tool
        from langchain_openai import ChatOpenAI

        @tool
        def search(query: str) -> str:
            """Search the notes."""
            return notes(query)

        guard = langchain_adapter.ContextWindowMiddleware(
            store=":memory:", context_window=WINDOW, compaction="provider"
        )
        chat = ChatOpenAI(model="gpt-4o", base_url=server.url + "/v1", api_key="local", max_retries=0)
        agent = create_agent(chat, [search], middleware=[guard], system_prompt="You search notes.")
        messages: list[Any] = []
        observe._warned.clear()
        with caplog.at_level(logging.WARNING, logger="contextwindow.guard"):
            for turn in range(10):
                state = agent.invoke(
                    {"messages": [*messages, HumanMessage(f"Turn {turn}: notes on {turn}.")]}
                )
                messages = state["messages"]
        said = [r for r in caplog.records if "compaction='provider'" in r.getMessage()]
        assert len(said) == 1 and "folded locally" in said[0].getMessage()
        assert sum(isinstance(m, ToolMessage) for m in messages) == 10
        assert model.rejections[1:] == [] and model.largest <= WINDOW


def routing(server: LocalServer) -> dict[str, Any]:
    return {"model": f"anthropic/{SONNET}", "api_base": server.url, "api_key": "local", "num_retries": 0}


def litellm_loop(llm: Any, server: LocalServer, turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You search notes."}]
    for turn in range(turns):
        history.append({"role": "user", "content": f"Turn {turn}: notes on topic {turn}."})
        while True:
            response = llm.completion(**routing(server), messages=history, tools=TOOLS, max_tokens=500)
            message = response.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                history.append({"role": "tool", "tool_call_id": call.id, "content": notes(f"t{turn}")})
    return history


class TestLiteLLM:
    @pytest.fixture(autouse=True)
    def _litellm(self) -> None:
        pytest.importorskip("litellm")
        litellm_adapter.GuardedLiteLLM  # noqa: B018 (the adapter's import sets litellm's model map up)

    def test_provider_compaction_rides_on_litellms_anthropic_call(
        self, editing_server: LocalServer, editing: EditingModel
    ) -> None:
        llm = litellm_adapter.GuardedLiteLLM(store=":memory:", context_window=WINDOW, compaction="provider")
        history = litellm_loop(llm, editing_server, 12)
        assert editing.managed, "no request carried Anthropic's context editing"
        management, betas = editing.managed[-1]
        assert management["edits"][0]["type"] == CLEAR_TOOL_USES
        assert ANTHROPIC_CONTEXT_BETA in betas
        assert sum(editing.cleared) > 0
        assert editing.rejections == [] and editing.largest <= WINDOW
        assert sum(1 for m in history if m["role"] == "tool") >= 12

    def test_local_compaction_sends_none(self, editing_server: LocalServer, editing: EditingModel) -> None:
        llm = litellm_adapter.GuardedLiteLLM(store=":memory:", context_window=WINDOW)
        litellm_loop(llm, editing_server, 8)
        assert editing.managed == []
