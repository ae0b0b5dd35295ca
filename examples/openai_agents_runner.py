"""An OpenAI Agents SDK agent with a tool: its history in contextwindow's store, each call fitted.

Runs offline: with no ``OPENAI_BASE_URL`` it starts the local provider (16,000-token window, calling
the tools it is offered) and talks to it through Chat Completions.

    python examples/openai_agents_runner.py
"""

from __future__ import annotations

import asyncio
import os

import openai
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool, set_tracing_disabled

from contextwindow.integrations.openai_agents import ContextWindowFilter, LedgerSession


@function_tool
def search(query: str) -> str:
    """Search the notes."""
    return " ".join(f"note {query}.{i}: a long paragraph about the topic." for i in range(150))


async def run(base_url: str, turns: int = 12) -> list[str]:
    set_tracing_disabled(True)  # offline: no trace upload
    async with openai.AsyncOpenAI(
        base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "local")
    ) as client:
        agent = Agent(
            name="notes",
            instructions="You search notes and report.",
            tools=[search],
            model=OpenAIChatCompletionsModel(model="gpt-4o", openai_client=client),
        )
        guard = ContextWindowFilter(store=":memory:", context_window=16_000)  # the three lines
        session = LedgerSession("notes-run", store=guard.store)
        config = RunConfig(call_model_input_filter=guard)
        answers = []
        for turn in range(turns):
            result = await Runner.run(
                agent,
                f"Turn {turn}: notes on topic {turn}.",
                session=session,
                run_config=config,
                hooks=guard.hooks,
            )
            answers.append(str(result.final_output))
        return answers


def main() -> None:
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        print("\n".join(asyncio.run(run(base_url))))
        return
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    with LocalServer(LocalModel(LocalSettings(window=16_000, call_tools=True))) as server:
        print("\n".join(asyncio.run(run(server.url + "/v1"))))


if __name__ == "__main__":
    main()
