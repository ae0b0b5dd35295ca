"""The OpenAI Agents SDK adapter: a real ``Runner.run`` agent over ``OpenAIChatCompletionsModel`` (and
the SDK's default ``OpenAIResponsesModel``) against the local provider, its history in contextwindow's
store."""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from _shared import LazyModule
from contextwindow.testing import LocalServer
from integrations_support import TURNS, WINDOW, ObservedModel, notes

if TYPE_CHECKING:
    from contextwindow.integrations.openai_agents import ContextWindowFilter

# The SDK takes a second or more to import: the tests import it, collecting the suite does not.
agents = LazyModule("agents")
adapter = LazyModule("contextwindow.integrations.openai_agents")
openai = LazyModule("openai")


@pytest.fixture(autouse=True)
def _agents() -> None:
    pytest.importorskip("agents")
    agents.set_tracing_disabled(True)


@cache
def search_tool() -> Any:
    @agents.function_tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query)

    return search


async def run(
    server: LocalServer,
    guard: ContextWindowFilter,
    session: Any,
    turns: int,
    hooks: bool = True,
    responses: bool = False,
    wrap: bool = False,
    tools: list[Any] | None = None,
    settings: Any = None,
) -> None:
    async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="local", max_retries=0) as client:
        kind = agents.OpenAIResponsesModel if responses else agents.OpenAIChatCompletionsModel
        agent = agents.Agent(
            name="notes",
            instructions="You search notes.",
            tools=tools or [search_tool()],
            model_settings=settings or agents.ModelSettings(),
            model=guard.wrap(kind(model="gpt-4o", openai_client=client))
            if wrap
            else kind(model="gpt-4o", openai_client=client),
        )
        for turn in range(turns):
            await agents.Runner.run(
                agent,
                f"Turn {turn}: notes on topic {turn}.",
                session=session,
                run_config=agents.RunConfig(call_model_input_filter=guard),
                hooks=guard.hooks if hooks else None,
            )


class TestAgentsSDK:
    def test_a_runner_agent_runs_forty_turns_on_a_16k_window_without_an_error(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowFilter(store=":memory:", context_window=WINDOW)
        session = adapter.LedgerSession("run-1", store=guard.store)
        asyncio.run(run(server, guard, session, TURNS))
        items = asyncio.run(session.get_items())
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert len(calls) == TURNS and calls == outputs
        assert model.rejections == []
        assert WINDOW * 0.6 < model.largest <= WINDOW
        assert guard.last_exchange is not None
        ledger = guard.store.session(guard.last_exchange.session_id)
        assert ledger.latest("checkpoint") is not None
        assert any(e.type == "usage" and e.reported for e in guard.last_exchange.events)  # via the hooks

    def test_the_sdks_default_responses_model_runs_on_a_16k_window_too(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowFilter(store=":memory:", context_window=WINDOW)
        session = adapter.LedgerSession("run-responses", store=guard.store)
        asyncio.run(run(server, guard, session, 16, responses=True))
        items = asyncio.run(session.get_items())
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert len(calls) == 16 and calls == outputs
        assert model.rejections == []
        assert WINDOW * 0.6 < model.largest <= WINDOW

    @pytest.mark.parametrize("responses", [False, True], ids=["chat-completions", "responses"])
    def test_the_wrapped_model_learns_the_window_from_the_first_rejection(
        self, server: LocalServer, model: ObservedModel, responses: bool
    ) -> None:
        guard = adapter.ContextWindowFilter(store=":memory:")  # gpt-4o's profile says 128k; 16k is served
        session = adapter.LedgerSession("run-learns", store=guard.store)
        asyncio.run(run(server, guard, session, 14, responses=responses, wrap=True))
        items = asyncio.run(session.get_items())
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        assert len(calls) == 14 and calls == outputs  # each tool run once, the run never saw the rejection
        assert len(model.rejections) == 1
        assert "maximum context length" in model.rejections[0].message
        assert model.largest <= WINDOW

    def test_the_wrapped_model_learns_the_window_when_streamed_too(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowFilter(store=":memory:")
        session = adapter.LedgerSession("run-streamed", store=guard.store)

        async def go() -> None:
            async with openai.AsyncOpenAI(
                base_url=server.url + "/v1", api_key="local", max_retries=0
            ) as client:
                agent = agents.Agent(
                    name="notes",
                    instructions="You search notes.",
                    tools=[search_tool()],
                    model=guard.wrap(agents.OpenAIResponsesModel(model="gpt-4o", openai_client=client)),
                )
                for turn in range(14):
                    result = agents.Runner.run_streamed(
                        agent,
                        f"Turn {turn}: notes on topic {turn}.",
                        session=session,
                        run_config=agents.RunConfig(call_model_input_filter=guard),
                        hooks=guard.hooks,
                    )
                    async for _ in result.stream_events():
                        pass

        asyncio.run(go())
        items = asyncio.run(session.get_items())
        calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
        assert len(calls) == 14 and calls == [
            i["call_id"] for i in items if i.get("type") == "function_call_output"
        ]
        assert len(model.rejections) == 1
        assert model.largest <= WINDOW

    def test_without_hooks_the_filter_still_fits_every_call(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        guard = adapter.ContextWindowFilter(store=":memory:", context_window=WINDOW)
        asyncio.run(run(server, guard, adapter.LedgerSession("run-2", store=guard.store), 14, hooks=False))
        assert model.rejections == []
        assert model.largest <= WINDOW

    def test_the_session_resumes_from_the_store_in_a_new_process(
        self, server: LocalServer, tmp_path: Path
    ) -> None:
        path = tmp_path / "agents.sqlite"
        first = adapter.ContextWindowFilter(store=path, context_window=WINDOW)
        asyncio.run(run(server, first, adapter.LedgerSession("run-3", store=first.store), 2))
        before = asyncio.run(adapter.LedgerSession("run-3", store=first.store).get_items())
        first.store.close()
        again = adapter.LedgerSession("run-3", store=path)
        assert asyncio.run(again.get_items()) == before
        assert asyncio.run(again.get_items(limit=2)) == before[-2:]
        again.store.close()

    def test_pop_and_clear_are_records_and_the_items_stay_in_the_ledger(self) -> None:
        session = adapter.LedgerSession("run-4", store=":memory:")

        async def go() -> tuple[Any, list[Any], list[Any]]:
            await session.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
            popped = await session.pop_item()
            kept = await session.get_items()
            await session.clear_session()
            return popped, kept, await session.get_items()

        popped, kept, cleared = asyncio.run(go())
        assert popped == {"role": "user", "content": "b"}
        assert kept == [{"role": "user", "content": "a"}]
        assert cleared == []
        assert len(session.store.session("run-4.items").entries(["note"])) == 4

    def test_items_the_guard_kept_are_the_runs_own(self, server: LocalServer) -> None:
        guard = adapter.ContextWindowFilter(store=":memory:", context_window=WINDOW)
        seen: list[Any] = []

        async def recording(data: Any) -> Any:
            result = await guard(data)
            seen.append((list(data.model_data.input), list(result.input)))
            return result

        async def go() -> None:
            async with openai.AsyncOpenAI(
                base_url=server.url + "/v1", api_key="local", max_retries=0
            ) as client:
                agent = agents.Agent(
                    name="notes",
                    tools=[search_tool()],
                    model=agents.OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client),
                )
                await agents.Runner.run(
                    agent, "Find notes.", run_config=agents.RunConfig(call_model_input_filter=recording)
                )

        asyncio.run(go())
        given, sent = seen[-1]
        assert sent[0] is given[0]
        assert [i.get("type") for i in sent] == [i.get("type") for i in given]


@cache
def long_search_tool() -> Any:
    @agents.function_tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query, 250)  # over the size past which an older result is archived

    return search


def outputs_of(items: list[Any]) -> dict[str, list[Any]]:
    """The run's tool outputs by the tool that made them."""
    names = {i["call_id"]: i["name"] for i in items if i.get("type") == "function_call"}
    out: dict[str, list[Any]] = {}
    for item in items:
        if item.get("type") == "function_call_output":
            out.setdefault(names[item["call_id"]], []).append(item["output"])
    return out


class TestAgentsSDKOutputBoundAndRereads:
    @pytest.mark.parametrize("responses", [False, True], ids=["chat-completions", "responses"])
    def test_a_max_tokens_that_cannot_fit_the_served_window_is_lowered_on_the_wrapped_models_call(
        self, server: LocalServer, model: ObservedModel, responses: bool
    ) -> None:
        guard = adapter.ContextWindowFilter(store=":memory:")  # 128k in the profile; 16k served
        session = adapter.LedgerSession("run-bound", store=guard.store)
        bound = agents.ModelSettings(max_tokens=16_000)
        asyncio.run(run(server, guard, session, 6, responses=responses, wrap=True, settings=bound))
        items = asyncio.run(session.get_items())
        assert len(outputs_of(items)["search"]) == 6
        assert len(model.rejections) == 1  # the first call, which taught the window
        assert guard.last_exchange is not None
        lowered = [e for e in guard.last_exchange.events if e.type == "max_tokens_lowered"]
        assert lowered and lowered[0].asked == 16_000 and lowered[0].lowered < WINDOW // 2

    @pytest.mark.parametrize("responses", [False, True], ids=["chat-completions", "responses"])
    def test_the_model_reads_an_archived_result_again_through_the_guards_tool(self, responses: bool) -> None:
        from integrations_support import RereadingModel

        model = RereadingModel()
        with LocalServer(model) as server:
            guard = adapter.ContextWindowFilter(store=":memory:", context_window=WINDOW)
            session = adapter.LedgerSession("run-rereads", store=guard.store)
            tools = [long_search_tool(), *guard.tools]
            asyncio.run(run(server, guard, session, 14, responses=responses, wrap=True, tools=tools))
        items = asyncio.run(session.get_items())
        assert model.rejections == []
        assert model.rereads, "no archived result was named to the model"
        outputs = outputs_of(items)
        assert outputs.get("read_archived") and all(
            o.startswith("note on ") for o in outputs["read_archived"]
        )
        assert len(outputs["search"]) == 14
