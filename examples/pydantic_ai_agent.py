"""A pydantic-ai agent with a tool, kept inside a 16,000-token window by one capability.

Runs offline: with no ``OPENAI_BASE_URL`` it starts the local provider (16,000-token window, calling
the tools it is offered). The run's message history keeps every message; each model request is fitted.

    python examples/pydantic_ai_agent.py
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import openai
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from contextwindow.integrations.pydantic_ai import ContextWindow


async def run(base_url: str, turns: int = 12) -> list[str]:
    async with openai.AsyncOpenAI(
        base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "local")
    ) as client:
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(openai_client=client))
        agent = Agent(
            model,
            instructions="You search notes and report.",
            capabilities=[ContextWindow(store=":memory:")],  # the one line
        )

        @agent.tool_plain
        def search(query: str) -> str:
            """Search the notes."""
            return " ".join(f"note {query}.{i}: a long paragraph about the topic." for i in range(150))

        history: list[Any] = []
        answers = []
        for turn in range(turns):
            result = await agent.run(f"Turn {turn}: notes on topic {turn}.", message_history=history)
            history = result.all_messages()
            answers.append(result.output)
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
