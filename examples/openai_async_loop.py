"""An async OpenAI Chat Completions tool loop that resends its whole history, guarded by one line.

Runs offline: with no ``OPENAI_BASE_URL`` it starts the local provider (16,000-token window, calling
the tools it is offered). The history holds the SDK's own message objects, as agents keep them.

    python examples/openai_async_loop.py
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import openai

import contextwindow

MODEL = "gpt-4o"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the notes.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]


async def run(base_url: str, turns: int = 12) -> list[str]:
    async with openai.AsyncOpenAI(
        api_key=os.environ.get("OPENAI_API_KEY", "local"), base_url=base_url
    ) as raw:
        client = contextwindow.guard(raw, store=":memory:")  # the one line
        history: list[Any] = [{"role": "system", "content": "You search notes and report."}]
        answers = []
        for turn in range(turns):
            history.append({"role": "user", "content": f"Turn {turn}: find the notes about topic {turn}."})
            while True:
                completion = await client.chat.completions.create(model=MODEL, tools=TOOLS, messages=history)
                message = completion.choices[0].message
                history.append(message)
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    notes = " ".join(
                        f"note {turn}.{i}: a long paragraph about the topic." for i in range(200)
                    )
                    history.append({"role": "tool", "tool_call_id": call.id, "content": notes})
            answers.append(message.content or "")
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
