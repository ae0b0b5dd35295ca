"""The same tool-using agent in each framework, with the framework's own context handling and with
contextwindow's adapter, on one long task against the local provider, in one run.

The task: ``TURNS`` turns (``--quick``: ``QUICK_TURNS``); each asks for a file, the model (the local
provider, calling the tools it is offered) calls ``read_file``, whose answer is a real source file of
this repository (a few thousand tokens), then answers in prose; every ``PHOTO_EVERY``-th question
carries an 800×600 photo. The turns rotate through the framework's entry points: sync, streamed,
async. The provider serves ``WINDOW`` tokens where the model's profile says 128k (gpt-4o) or 200k
(Claude): within a few turns the history passes what is served. **The adapters are not told the
window** (no ``context_window=``): they learn it from the provider's first rejection.

The peers, each set up as its documentation suggests and told the window, since it must be:

- LangChain ``create_agent``: ``SummarizationMiddleware`` at 75% of the window, keeping ``KEEP`` messages;
- pydantic-ai: a history processor keeping the last ``KEEP`` messages (``ProcessHistory``);
- OpenAI Agents SDK (Chat Completions and the default Responses model): ``SQLiteSession`` with
  ``SessionSettings(limit=KEEP)``;
- litellm: ``litellm.utils.trim_messages`` to the window before each call;
- the Anthropic SDK's tool runner (``client.beta.messages.tool_runner``): the bare runner (the SDK's
  compaction needs the server's compaction beta, which the local provider does not serve).

LangChain, pydantic-ai and the Agents SDK are also run bare, with no context handling at all (the
framework as it comes; the litellm and tool-runner peers are bare already): what the adapter replaces.

Columns, per row:

- turns completed of the turns run (a turn whose call raised counts as not completed; the agent goes on);
- rejections: the provider's refusals (for size, or a tool result without its call);
- tool runs per call: how often ``read_file`` ran over how often the model asked for it (1.00 is
  every call answered once; more is the agent repeating work);
- prompts kept: the user prompts the framework's own history still holds at the end, of those sent;
- written into history: messages of the framework's history holding a summary, placeholder or cut
  marker that a context mechanism wrote (0: the framework's history holds only what the agent had);
- window use once full: the provider's input count over the window, mean over accepted calls from
  turn ``FULL_FROM`` on;
- time per model call: the completed turns' wall time over the calls the provider answered.

``python -m benchmarks.integrations [--quick]``; prints a markdown table and writes
``benchmarks/results/integrations.md``. Never fails on a timing.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks._agents import ObservedModel, png, png_data_url
from benchmarks._paths import RESULTS, ROOT

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: nothing fetched at run time

TURNS = 32
QUICK_TURNS = 12
WINDOW = 20_000
PHOTO_EVERY = 5
KEEP = 20
FULL_FROM = 8
GPT = "gpt-4o"
CLAUDE = "claude-sonnet-4-5"
SYSTEM = "You read the repository's files and report."
FILE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
PHOTO = (800, 600)
MAX_TOKENS = 1024
ENTRY_POINTS = ("sync", "stream", "async")
ADAPTER_TEXT = (
    "tool-result-archive-",
    "read_archived with",
    "[truncated",
    "<summary",
    "summary of the conversation",
)
"""What a context mechanism writes in place of history (placeholders, cut markers, summaries):
contextwindow's adapters write it into the request only, never into the framework's history."""


def _sources() -> list[str]:
    """Real source files of this repository, each a few thousand tokens."""
    files = sorted((ROOT / "src" / "contextwindow").rglob("*.py"))
    texts = [p.read_text(encoding="utf-8") for p in files]
    # Not the modules that spell the placeholders' words: the last columns look for those words.
    return [t for t in texts if 6_000 <= len(t) <= 14_000 and not any(m in t for m in ADAPTER_TEXT)]


SOURCES = _sources()


def _source(turn: int) -> str:
    """The tool's answer in turn ``turn``: the next real source file."""
    return SOURCES[turn % len(SOURCES)]


def _question(turn: int) -> str:
    return f"Turn {turn}: read file number {turn} and summarise it."


def _with_photo(turn: int) -> bool:
    return turn % PHOTO_EVERY == PHOTO_EVERY - 1


def _entry(turn: int) -> str:
    return ENTRY_POINTS[turn % len(ENTRY_POINTS)]


@dataclass
class Run:
    """What one agent did: per turn (completed, seconds); the tool's runs; the framework's history."""

    turns: list[tuple[bool, float]] = field(default_factory=list)
    runs: int = 0
    """How often the agent ran ``read_file``."""
    calls: int = 0
    """How often the model asked for it (the provider's count, set by :func:`_row`)."""
    history: list[str] = field(default_factory=list)
    """The framework's own history at the end, each message as text."""
    errors: list[str] = field(default_factory=list)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    """The agent's event loop for its async entry points (one loop, as an async program has)."""

    def wait(self, work: Any) -> Any:
        return self.loop.run_until_complete(work)

    def close(self) -> None:
        """Close the loop as ``asyncio.run`` does: the tasks a framework left on it (litellm's logging
        worker) are cancelled and finished first (left pending, CPython 3.11 crashed collecting them at
        exit)."""
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()

        async def finished() -> None:
            await asyncio.gather(*pending, return_exceptions=True)
            await self.loop.shutdown_asyncgens()

        self.loop.run_until_complete(finished())
        self.loop.close()

    def turn(self, work: Callable[[], Any]) -> None:
        started = time.perf_counter()
        try:
            work()
            self.turns.append((True, time.perf_counter() - started))
        except Exception as exc:
            self.turns.append((False, time.perf_counter() - started))
            self.errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")


# -- one runner per framework: (server url, guarded, turns) -> Run ----------------------------------------


def _langchain(url: str, guarded: bool | None, turns: int) -> Run:
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    from contextwindow.integrations.langchain import ContextWindowMiddleware

    run = Run()
    now = [0]

    @tool("read_file")
    def read(path: str) -> str:
        """Read a file of the repository."""
        run.runs += 1
        return _source(now[0])

    chat = ChatOpenAI(model=GPT, base_url=url + "/v1", api_key="local", max_retries=0, max_tokens=MAX_TOKENS)
    middleware: Any = (
        ContextWindowMiddleware(store=":memory:")
        if guarded
        else SummarizationMiddleware(chat, trigger=("tokens", int(0.75 * WINDOW)), keep=("messages", KEEP))
    )
    agent = create_agent(
        chat, [read], system_prompt=SYSTEM, middleware=[] if guarded is None else [middleware]
    )
    messages: list[Any] = []
    for turn in range(turns):
        now[0] = turn
        content: Any = _question(turn)
        if _with_photo(turn):
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": png_data_url(*PHOTO)}},
            ]
        state = {"messages": [*messages, HumanMessage(content=content)]}

        def once(state: dict[str, Any] = state, entry: str = _entry(turn)) -> None:
            nonlocal messages
            if entry == "sync":
                messages = agent.invoke(state)["messages"]
            elif entry == "stream":
                for chunk in agent.stream(state, stream_mode="values"):
                    messages = chunk["messages"]
            else:
                messages = run.wait(agent.ainvoke(state))["messages"]

        run.turn(once)
    run.history = [str(m.content) for m in messages]
    return run


def _pydantic_ai(url: str, guarded: bool | None, turns: int) -> Run:
    import httpx
    import openai
    from pydantic_ai import Agent, BinaryContent
    from pydantic_ai.capabilities import ProcessHistory
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    from contextwindow.integrations.pydantic_ai import ContextWindow

    run = Run()
    now = [0]

    def keep_last(messages: list[Any]) -> list[Any]:
        return messages[-KEEP:]

    client = openai.AsyncOpenAI(
        base_url=url + "/v1",
        api_key="local",
        max_retries=0,
        http_client=httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0)),
    )
    capability: Any = ContextWindow(store=":memory:") if guarded else ProcessHistory(keep_last)
    agent: Agent[None, str] = Agent(
        OpenAIChatModel(GPT, provider=OpenAIProvider(openai_client=client)),
        instructions=SYSTEM,
        capabilities=[] if guarded is None else [capability],
        model_settings={"max_tokens": MAX_TOKENS},
    )

    @agent.tool_plain(name="read_file")
    def read(path: str) -> str:
        """Read a file of the repository."""
        run.runs += 1
        return _source(now[0])

    history: list[Any] = []

    async def streamed(prompt: Any) -> list[Any]:
        async with agent.run_stream(prompt, message_history=history) as stream:
            await stream.get_output()
        return stream.all_messages()

    async def plain(prompt: Any) -> list[Any]:
        return (await agent.run(prompt, message_history=history)).all_messages()

    for turn in range(turns):
        now[0] = turn
        prompt: Any = _question(turn)
        if _with_photo(turn):
            prompt = [prompt, BinaryContent(data=png(*PHOTO), media_type="image/png")]

        def once(prompt: Any = prompt, entry: str = _entry(turn)) -> None:
            nonlocal history
            if entry == "sync":
                history = agent.run_sync(prompt, message_history=history).all_messages()
            else:
                history = run.wait(streamed(prompt) if entry == "stream" else plain(prompt))

        run.turn(once)
    run.history = [str(p.content) for m in history for p in m.parts if hasattr(p, "content")]
    return run


def _openai_agents(url: str, guarded: bool | None, turns: int, responses: bool) -> Run:
    import openai
    from agents import (
        Agent,
        ModelSettings,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        SQLiteSession,
        function_tool,
        set_tracing_disabled,
    )
    from agents.memory import SessionSettings

    from contextwindow.integrations.openai_agents import ContextWindowFilter, LedgerSession

    set_tracing_disabled(True)
    run = Run()
    now = [0]

    @function_tool(name_override="read_file")
    def read(path: str) -> str:
        """Read a file of the repository."""
        run.runs += 1
        return _source(now[0])

    guard = ContextWindowFilter(store=":memory:")
    session: Any = (
        LedgerSession("bench", store=guard.store)
        if guarded
        else SQLiteSession("bench", session_settings=SessionSettings(limit=None if guarded is None else KEEP))
    )
    config = RunConfig(call_model_input_filter=guard) if guarded else RunConfig()

    async def one(prompt: Any, entry: str) -> None:
        async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="local", max_retries=0) as client:
            kind = OpenAIResponsesModel if responses else OpenAIChatCompletionsModel
            model: Any = kind(model=GPT, openai_client=client)
            agent = Agent(
                name="files",
                instructions=SYSTEM,
                tools=[read, *guard.tools] if guarded else [read],
                model=guard.wrap(model) if guarded else model,
                model_settings=ModelSettings(max_tokens=MAX_TOKENS),
            )
            hooks = guard.hooks if guarded else None
            if entry == "stream":
                result = Runner.run_streamed(agent, prompt, session=session, run_config=config, hooks=hooks)
                async for _ in result.stream_events():
                    pass
            else:
                await Runner.run(agent, prompt, session=session, run_config=config, hooks=hooks)

    for turn in range(turns):
        now[0] = turn
        prompt: Any = _question(turn)
        if _with_photo(turn):
            image = {"type": "input_image", "image_url": png_data_url(*PHOTO), "detail": "auto"}
            prompt = [{"role": "user", "content": [{"type": "input_text", "text": prompt}, image]}]
        entry = _entry(turn)
        run.turn(lambda prompt=prompt, entry=entry: run.wait(one(prompt, entry)))
    items = run.wait(session.get_items())
    run.history = [str(i.get("content") or i.get("output") or "") for i in items]
    return run


def _litellm(url: str, guarded: bool, turns: int) -> Run:
    import litellm

    from contextwindow.integrations.litellm import GuardedLiteLLM

    litellm.suppress_debug_info = True
    logging.getLogger("LiteLLM").setLevel(logging.CRITICAL)  # trim_messages' notes on media it cannot trim
    tools = [
        {
            "type": "function",
            "function": {"name": "read_file", "description": "Read a file.", "parameters": FILE_SCHEMA},
        }
    ]
    route = {
        "model": f"openai/{GPT}",
        "api_base": url + "/v1",
        "api_key": "local",
        "num_retries": 0,
        "max_tokens": MAX_TOKENS,
    }
    llm = GuardedLiteLLM(store=":memory:")
    run = Run()

    def call(history: list[dict[str, Any]], entry: str) -> Any:
        messages = (
            history
            if guarded
            else litellm.utils.trim_messages(history, model=GPT, max_tokens=WINDOW - MAX_TOKENS)
        )
        stream = entry == "stream"
        if entry == "async":
            return run.wait(
                (llm.acompletion if guarded else litellm.acompletion)(**route, messages=messages, tools=tools)
            )
        response = (llm.completion if guarded else litellm.completion)(
            **route, messages=messages, tools=tools, stream=stream
        )
        if not stream:
            return response.choices[0].message.model_dump(exclude_none=True)
        chunks = list(response)
        return (
            litellm.stream_chunk_builder(chunks, messages=messages)
            .choices[0]
            .message.model_dump(exclude_none=True)
        )

    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns):
        content: Any = _question(turn)
        if _with_photo(turn):
            content = [
                {"type": "text", "text": content},
                {"type": "image_url", "image_url": {"url": png_data_url(*PHOTO)}},
            ]
        kept = len(history)
        history.append({"role": "user", "content": content})

        def once(turn: int = turn, entry: str = _entry(turn)) -> None:
            while True:
                message = call(history, entry)
                if not isinstance(message, dict):
                    message = message.choices[0].message.model_dump(exclude_none=True)
                message = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
                history.append(message)
                if not message.get("tool_calls"):
                    return
                for tool_call in message["tool_calls"]:
                    run.runs += 1
                    history.append(
                        {"role": "tool", "tool_call_id": tool_call["id"], "content": _source(turn)}
                    )

        run.turn(once)
        if not run.turns[-1][0]:
            del history[kept + 1 :]  # the failed round's partial messages; the question stays
    run.history = [str(m.get("content") or "") for m in history]
    return run


def _tool_runner(url: str, guarded: bool, turns: int) -> Run:
    import anthropic
    from anthropic import beta_tool

    import contextwindow

    run = Run()
    now = [0]

    @beta_tool
    def read_file(path: str) -> str:
        """Read a file of the repository.

        Args:
            path: the file's path.
        """
        run.runs += 1
        return _source(now[0])

    raw = anthropic.Anthropic(api_key="local", base_url=url, max_retries=0)
    client: Any = contextwindow.guard(raw, store=":memory:") if guarded else raw
    messages: list[Any] = []
    for turn in range(turns):
        now[0] = turn
        content: list[dict[str, Any]] = [{"type": "text", "text": _question(turn)}]
        if _with_photo(turn):
            data = base64.b64encode(png(*PHOTO)).decode("ascii")
            content.append(
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
            )
        kept = len(messages)
        messages.append({"role": "user", "content": content})

        def once(entry: str = _entry(turn)) -> None:
            stream = entry == "stream"
            runner = client.beta.messages.tool_runner(
                model=CLAUDE,
                max_tokens=MAX_TOKENS,
                tools=[read_file],
                messages=messages,
                stream=stream,
                thread=False,
            )
            for step in runner:
                message = step.get_final_message() if stream else step
                messages.append({"role": "assistant", "content": message.content})
                response = runner.generate_tool_call_response()
                if response is not None:
                    messages.append(response)

        run.turn(once)
        if not run.turns[-1][0]:
            del messages[kept + 1 :]
    raw.close()
    run.history = [str(m["content"]) for m in messages]
    return run


Runner = Callable[[str, bool | None, int], Run]
FRAMEWORKS: dict[str, tuple[str, Runner]] = {
    "LangChain create_agent": ("SummarizationMiddleware (75% of the window, keep 20)", _langchain),
    "pydantic-ai": ("history processor, last 20 messages", _pydantic_ai),
    "OpenAI Agents SDK, Chat Completions": (
        "SQLiteSession, limit 20 items",
        lambda url, guarded, turns: _openai_agents(url, guarded, turns, responses=False),
    ),
    "OpenAI Agents SDK, Responses": (
        "SQLiteSession, limit 20 items",
        lambda url, guarded, turns: _openai_agents(url, guarded, turns, responses=True),
    ),
    "litellm": ("trim_messages to the window", _litellm),
    "Anthropic tool runner": ("the bare runner", _tool_runner),
}


BARE = frozenset(
    {
        "LangChain create_agent",
        "pydantic-ai",
        "OpenAI Agents SDK, Chat Completions",
        "OpenAI Agents SDK, Responses",
    }
)
"""The frameworks shown also bare (no history handling at all: ``guarded=None``); the other two's peer is bare."""


class _AskingModel(ObservedModel):
    """The observed provider, counting the ``read_file`` calls it asks for."""

    asked = 0

    def handle(self, request: Any, **kwargs: Any) -> Any:
        from contextwindow.testing.model import LocalReply

        answer = super().handle(request, **kwargs)
        if isinstance(answer, LocalReply):
            with self._lock:
                self.asked += sum(getattr(b, "name", None) == "read_file" for b in answer.message.content)
        return answer


def _row(framework: str, guarded: bool | None, turns: int) -> dict[str, Any]:
    from contextwindow.testing import LocalServer, LocalSettings

    mechanism, runner = FRAMEWORKS[framework]
    model = _AskingModel(LocalSettings(window=WINDOW, call_tools=True))
    with LocalServer(model) as server:
        run = runner(server.url, guarded, turns)
    run.calls = model.asked
    run.close()
    for error in dict.fromkeys(run.errors):
        print(f"{framework}, {_kind(guarded)}: {error}", file=sys.stderr)
    full = [
        c.input_tokens for c in model.calls[len(model.calls) * FULL_FROM // max(turns, 1) :] if c.input_tokens
    ]
    answered = sum(1 for c in model.calls if c.input_tokens is not None) or 1
    seconds = [t for ok, t in run.turns if ok]
    prompts = sum(any(f"Turn {t}:" in h for h in run.history) for t in range(turns))
    return {
        "framework": framework,
        "mechanism": "contextwindow adapter, not told the window"
        if guarded
        else ("none (the bare framework)" if guarded is None else mechanism),
        "turns": f"{sum(ok for ok, _ in run.turns)} / {turns}",
        "rejections": len(model.rejections),
        "runs": f"{run.runs / run.calls:.2f}" if run.calls else "—",
        "prompts": f"{prompts} / {turns}",
        "written": sum(any(mark in h for mark in ADAPTER_TEXT) for h in run.history),
        "use": f"{statistics.fmean(full) / WINDOW:.0%}" if full else "—",
        "ms": f"{1000 * sum(seconds) / answered:.0f}" if seconds else "—",
    }


def _kind(guarded: bool | None) -> str:
    return "adapter" if guarded else ("bare" if guarded is None else "peer")


def run(turns: int) -> str:
    lines = [
        f"A tool-using agent, {turns} turns (a real source file as each tool result; an 800×600 photo every "
        f"{PHOTO_EVERY}th turn; entry points in turn: sync, streamed, async), against the local provider serving "
        f"{WINDOW:,} tokens where the profile says 128k ({GPT}) or 200k ({CLAUDE}).",
        "",
        "| framework | context handling | turns completed | rejections | tool runs per call | prompts kept "
        "| written into history | window use once full | time per model call (ms) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for framework in FRAMEWORKS:
        for guarded in (None, False, True) if framework in BARE else (False, True):
            row = _row(framework, guarded, turns)
            lines.append(
                f"| {row['framework']} | {row['mechanism']} | {row['turns']} | {row['rejections']} | {row['runs']} "
                f"| {row['prompts']} | {row['written']} | {row['use']} | {row['ms']} |"
            )
            print(lines[-1], file=sys.stderr, flush=True)
    lines += [
        "",
        "Rejections for the adapters: the first call over the served window, which teaches it (the agent never sees it).",
        "The SQLiteSession peer keeps only its last items, so its prompts kept is at most what those hold.",
        "Time per model call: the agent's wall time over the calls the provider answered, framework, HTTP and",
        "provider included; the adapter rows include their summary calls.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.integrations", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_TURNS} turns instead of {TURNS}")
    args = parser.parse_args([] if argv is None else argv)
    table = run(QUICK_TURNS if args.quick else TURNS)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "integrations.md").write_text("# integrations\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
