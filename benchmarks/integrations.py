"""The same tool-using agent in four frameworks, with each framework's own context mechanism and with
contextwindow's adapter, on the same long task against the local provider (16,000-token window).

The task: ``TURNS`` turns; each asks for notes on a topic, the model (the local provider, calling the
tools it is offered) calls ``search``, whose answer is about 2,000 tokens, then answers in prose; every
``IMAGE_EVERY``-th question carries an 800×600 photo. Within a few turns the history passes the window.

The frameworks' own mechanisms (the peers), each set up as their documentation suggests:

- pydantic-ai: a history processor keeping the last ``KEEP`` messages (``ProcessHistory``);
- LangChain: ``SummarizationMiddleware`` triggered at 75% of the window, keeping ``KEEP`` messages,
  with its own token counter (``count_tokens_approximately``);
- OpenAI Agents SDK: a ``SQLiteSession`` whose ``SessionSettings(limit=KEEP)`` replays the last items
  (``OpenAIResponsesCompactionSession`` needs the Responses API's compaction endpoint, which a Chat
  Completions provider does not serve);
- litellm: ``litellm.trim_messages`` to the window before each call (``context_window_fallbacks`` only
  helps when a larger model is configured; here every model is served with the same window).

Columns, per row, from one run:

- turns completed of ``TURNS`` (a turn whose call failed is counted as not completed; the agent goes on);
- length errors: the provider's rejections for size;
- tool pairs broken: requests the provider refused because a tool result had lost its call (or the
  reverse);
- window use once full: the provider's input count over the window, mean over accepted calls from turn
  ``FULL_FROM`` on (the history is larger than the window by then);
- image priced: what the framework's own counter (or contextwindow's estimator) says the photo costs,
  and the provider's count (the local provider prices it by OpenAI's published tile rule);
- time per model call: the agent's wall time over the calls the provider answered (median over turns),
  framework and provider included: the difference between the two rows of a framework is the
  adapter's cost (its summary calls included).

Prints a markdown table and writes ``benchmarks/results/integrations.md``. Never fails on a timing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks._agents import WINDOW, ObservedModel, notes, png, png_data_url
from benchmarks._paths import RESULTS

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: nothing fetched at run time

TURNS = 40
IMAGE_EVERY = 4
KEEP = 20
FULL_FROM = 10
MODEL = "gpt-4o"
SYSTEM = "You search notes and report."
SEARCH_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
PHOTO = (800, 600)
MAX_TOKENS = 1024
"""Every agent asks for at most this many output tokens (the guard keeps that much of the window free)."""


def _question(turn: int) -> str:
    return f"Turn {turn}: find the notes on topic {turn}."


def _with_photo(turn: int) -> bool:
    return turn % IMAGE_EVERY == IMAGE_EVERY - 1


# -- one runner per framework: (server url, use contextwindow) -> per-turn (ok, seconds) ---------------


def _langchain(url: str, guarded: bool, mark: Callable[[], None]) -> tuple[list[tuple[bool, float]], str]:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import HumanMessage
    from langchain_core.messages.utils import count_tokens_approximately
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from contextwindow.integrations.langchain import ContextWindowMiddleware

    @tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query)

    chat = ChatOpenAI(model=MODEL, base_url=url, api_key="local", max_retries=0, max_tokens=MAX_TOKENS)
    middleware: Any = (
        ContextWindowMiddleware(store=":memory:", context_window=WINDOW)
        if guarded
        else SummarizationMiddleware(chat, trigger=("tokens", int(0.75 * WINDOW)), keep=("messages", KEEP))
    )
    agent = create_agent(chat, [search], system_prompt=SYSTEM, middleware=[middleware])
    messages: list[Any] = []
    turns = []
    for turn in range(TURNS):
        content: Any = _question(turn)
        if _with_photo(turn):
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": png_data_url(*PHOTO)}},
            ]
        started = time.perf_counter()
        try:
            messages = agent.invoke({"messages": [*messages, HumanMessage(content=content)]})["messages"]
            turns.append((True, time.perf_counter() - started))
        except Exception:
            turns.append((False, time.perf_counter() - started))
        mark()
    photo = HumanMessage(
        content=[
            {"type": "text", "text": "x"},
            {"type": "image_url", "image_url": {"url": png_data_url(*PHOTO)}},
        ]
    )
    own = count_tokens_approximately([photo]) - count_tokens_approximately([HumanMessage(content="x")])
    return turns, f"{own:,}"


def _pydantic_ai(url: str, guarded: bool, mark: Callable[[], None]) -> tuple[list[tuple[bool, float]], str]:
    import httpx
    import openai
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from contextwindow.integrations.pydantic_ai import ContextWindow

    def keep_last(messages: list[Any]) -> list[Any]:
        return messages[-KEEP:]

    async def run() -> list[tuple[bool, float]]:
        client = openai.AsyncOpenAI(
            base_url=url,
            api_key="local",
            max_retries=0,
            http_client=httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0)),
        )
        capability: Any = (
            ContextWindow(store=":memory:", context_window=WINDOW) if guarded else ProcessHistory(keep_last)
        )
        agent: Agent[None, str] = Agent(
            OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client)),
            instructions=SYSTEM,
            capabilities=[capability],
            model_settings={"max_tokens": MAX_TOKENS},
        )

        @agent.tool_plain
        def search(query: str) -> str:
            """Search the notes."""
            return notes(query)

        history: list[Any] = []
        turns = []
        for turn in range(TURNS):
            prompt: Any = _question(turn)
            if _with_photo(turn):
                prompt = [prompt, BinaryContent(data=png(*PHOTO), media_type="image/png")]
            started = time.perf_counter()
            try:
                history = (await agent.run(prompt, message_history=history)).all_messages()
                turns.append((True, time.perf_counter() - started))
            except Exception:
                turns.append((False, time.perf_counter() - started))
            mark()
        await client.close()
        return turns

    return asyncio.run(run()), "not counted"


def _openai_agents(url: str, guarded: bool, mark: Callable[[], None]) -> tuple[list[tuple[bool, float]], str]:
    import openai
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        SQLiteSession,
        function_tool,
        set_tracing_disabled,
    )
    from agents.memory import SessionSettings

    from contextwindow.integrations.openai_agents import ContextWindowFilter, LedgerSession

    set_tracing_disabled(True)

    @function_tool
    def search(query: str) -> str:
        """Search the notes."""
        return notes(query)

    async def run() -> list[tuple[bool, float]]:
        async with openai.AsyncOpenAI(base_url=url, api_key="local", max_retries=0) as client:
            agent = Agent(
                name="notes",
                instructions=SYSTEM,
                tools=[search],
                model=OpenAIChatCompletionsModel(model=MODEL, openai_client=client),
                model_settings=ModelSettings(max_tokens=MAX_TOKENS),
            )
            guard = ContextWindowFilter(store=":memory:", context_window=WINDOW)
            session: Any = (
                LedgerSession("bench", store=guard.store)
                if guarded
                else SQLiteSession("bench", session_settings=SessionSettings(limit=KEEP))
            )
            config = RunConfig(call_model_input_filter=guard) if guarded else RunConfig()
            turns = []
            for turn in range(TURNS):
                prompt: Any = _question(turn)
                if _with_photo(turn):
                    prompt = [
                        {
                            "role": "user",
                            "content": [
                                {"type": "input_text", "text": prompt},
                                {"type": "input_image", "image_url": png_data_url(*PHOTO), "detail": "auto"},
                            ],
                        }
                    ]
                started = time.perf_counter()
                try:
                    await Runner.run(
                        agent,
                        prompt,
                        session=session,
                        run_config=config,
                        hooks=guard.hooks if guarded else None,
                    )
                    turns.append((True, time.perf_counter() - started))
                except Exception:
                    turns.append((False, time.perf_counter() - started))
                mark()
            return turns

    return asyncio.run(run()), "not counted"


def _litellm(url: str, guarded: bool, mark: Callable[[], None]) -> tuple[list[tuple[bool, float]], str]:
    import litellm

    from contextwindow.integrations.litellm import GuardedLiteLLM

    litellm.suppress_debug_info = True
    # trim_messages logs each multimodal message it cannot trim (and sends it untrimmed); the table counts it
    logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)
    tools = [
        {
            "type": "function",
            "function": {"name": "search", "description": "Search the notes.", "parameters": SEARCH_SCHEMA},
        }
    ]
    route = {
        "model": f"openai/{MODEL}",
        "api_base": url,
        "api_key": "local",
        "num_retries": 0,
        "max_tokens": MAX_TOKENS,
    }
    llm = GuardedLiteLLM(store=":memory:", context_window=WINDOW)

    def call(history: list[dict[str, Any]]) -> Any:
        if guarded:
            return llm.completion(**route, messages=history, tools=tools)
        trimmed = litellm.utils.trim_messages(history, model=MODEL, max_tokens=WINDOW - MAX_TOKENS)
        return litellm.completion(**route, messages=trimmed, tools=tools)

    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    turns = []
    for turn in range(TURNS):
        content: Any = _question(turn)
        if _with_photo(turn):
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": png_data_url(*PHOTO)}},
            ]
        kept = len(history)
        history.append({"role": "user", "content": content})
        started = time.perf_counter()
        try:
            while True:
                message = call(history).choices[0].message
                history.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    break
                for tool_call in message.tool_calls:
                    history.append(
                        {"role": "tool", "tool_call_id": tool_call.id, "content": notes(str(turn))}
                    )
            turns.append((True, time.perf_counter() - started))
        except Exception:
            del history[kept + 1 :]  # the failed round's partial messages; the question stays
            turns.append((False, time.perf_counter() - started))
        mark()
    photo = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "x"},
                {"type": "image_url", "image_url": {"url": png_data_url(*PHOTO)}},
            ],
        }
    ]
    own = litellm.token_counter(model=MODEL, messages=photo) - litellm.token_counter(
        model=MODEL, messages=[{"role": "user", "content": "x"}]
    )
    return turns, f"{own:,}"


Runner = Callable[[str, bool, Callable[[], None]], tuple[list[tuple[bool, float]], str]]
FRAMEWORKS: dict[str, tuple[str, str, Runner]] = {
    "pydantic-ai": ("history processor, last 20 messages", "dropped", _pydantic_ai),
    "LangChain": ("SummarizationMiddleware (75% of the window, keep 20)", "summarised", _langchain),
    "OpenAI Agents SDK": ("SQLiteSession, limit 20 items", "dropped", _openai_agents),
    "litellm": ("trim_messages to the window", "dropped", _litellm),
}


def _photo_prices() -> tuple[int, int]:
    """contextwindow's estimate of the photo and the local provider's count of it."""
    from contextwindow import Estimator, Message
    from contextwindow.content import Request
    from contextwindow.formats import openai as openai_format

    with_photo = openai_format.parse_wire_messages(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "x"},
                    {"type": "image_url", "image_url": {"url": png_data_url(*PHOTO)}},
                ],
            }
        ]
    )
    [message] = with_photo.request.messages
    image = next(b for b in message.content if b.type == "image")
    estimate = round(Estimator(MODEL).block(image))
    model = ObservedModel()
    load = with_photo.loader()
    counted = model.count(Request(model=MODEL, messages=(message,)), load, wire="openai").input_tokens
    bare = model.count(Request(model=MODEL, messages=(Message.user("x"),)), wire="openai").input_tokens
    return estimate, counted - bare


def _row(framework: str, guarded: bool) -> dict[str, Any]:
    from contextwindow.testing import LocalServer

    mechanism, older, runner = FRAMEWORKS[framework]
    model = ObservedModel()
    marks: list[int] = []
    with LocalServer(model) as server:
        turns, own_price = runner(server.url + "/v1", guarded, lambda: marks.append(len(model.calls)))
    counts_by_turn = [model.calls[start:end] for start, end in zip([0, *marks[:-1]], marks, strict=True)]
    length = [c for c in model.rejections if "context length" in c.message or "too long" in c.message]
    pairs = [c for c in model.rejections if c not in length and "tool" in c.message.lower()]
    full = [
        c.input_tokens for calls in counts_by_turn[FULL_FROM:] for c in calls if c.input_tokens is not None
    ]
    seconds = [
        t / max(1, sum(1 for c in calls if c.input_tokens))
        for (ok, t), calls in zip(turns, counts_by_turn, strict=True)
        if ok
    ]
    return {
        "framework": framework,
        "mechanism": "contextwindow adapter" if guarded else mechanism,
        "older": "summarised (originals in the ledger)" if guarded else older,
        "turns": sum(ok for ok, _ in turns),
        "length_errors": len(length),
        "pairs_broken": len(pairs),
        "use": statistics.fmean(full) / WINDOW if full else None,
        "own_price": own_price,
        "ms_per_call": 1000 * statistics.median(seconds) if seconds else None,
    }


def main() -> None:
    estimate, provider = _photo_prices()
    rows = []
    for framework in FRAMEWORKS:
        for guarded in (False, True):
            rows.append(_row(framework, guarded))
    lines = [
        f"A tool-using agent, {TURNS} turns (a ~2,000-token tool result each; an 800×600 photo every "
        f"{IMAGE_EVERY}th turn), local provider with a {WINDOW:,}-token window, model {MODEL}.",
        "",
        "| framework | context mechanism | turns completed | length errors | tool pairs broken "
        "| window use once full | history past the window | photo priced (own count / provider) "
        "| time per model call, median (ms) |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |",
    ]
    for row in rows:
        price = (
            f"{estimate:,} / {provider:,}"
            if row["mechanism"] == "contextwindow adapter"
            else f"{row['own_price']} / {provider:,}"
        )
        use = "—" if row["use"] is None else f"{row['use']:.0%}"
        ms = "—" if row["ms_per_call"] is None else f"{row['ms_per_call']:.1f}"
        lines.append(
            f"| {row['framework']} | {row['mechanism']} | {row['turns']} / {TURNS} | {row['length_errors']} "
            f"| {row['pairs_broken']} | {use} | {row['older']} | {price} | {ms} |"
        )
    lines += [
        "",
        f"Window use: the provider's input count over the window, mean over the calls it accepted from turn {FULL_FROM} on.",
        "Photo priced: what the mechanism's own counter says the photo adds (pydantic-ai's and the Agents SDK's",
        "mechanisms count messages or items, not tokens), beside the local provider's count (OpenAI's tile rule).",
        "Time per model call includes the framework, the HTTP round trip and the provider; the contextwindow",
        "rows include their summary calls.",
    ]
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "integrations.md").write_text("# integrations\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
