"""A sync Anthropic tool loop that keeps its whole history, guarded by one line.

Runs offline: with no ``ANTHROPIC_BASE_URL`` it starts the local provider (16,000-token window,
calling the tools it is offered) and points the client at it. Against the real API, set
``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL=https://api.anthropic.com``.

    python examples/anthropic_tool_loop.py
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anthropic

import contextwindow

MODEL = "claude-haiku-4-5"
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a text file of this project.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }
]


def read_file(path: str) -> str:
    target = Path(__file__).parent / Path(path).name
    return target.read_text() if target.is_file() else Path(__file__).read_text()


def run(base_url: str, turns: int = 12) -> list[str]:
    """The agent: ``turns`` questions, each answered after as many tool calls as the model makes."""
    raw = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY", "local"), base_url=base_url)
    client = contextwindow.guard(raw, store=":memory:")  # the one line: everything else is the SDK's
    history: list[dict[str, Any]] = []
    answers = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Question {turn}: what does this example do?"})
        while True:
            response = client.messages.create(
                model=MODEL,
                max_tokens=1024,
                system="You answer questions about code.",
                tools=TOOLS,
                messages=history,
            )
            history.append({"role": "assistant", "content": response.content})
            calls = [block for block in response.content if block.type == "tool_use"]
            if not calls:
                break
            history.append(
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": c.id,
                            "content": read_file(str(c.input.get("path", ""))),
                        }
                        for c in calls
                    ],
                }
            )
        answers.append("".join(block.text for block in response.content if block.type == "text"))
    raw.close()
    return answers


def main() -> None:
    base_url = os.environ.get("ANTHROPIC_BASE_URL")
    if base_url:
        for answer in run(base_url):
            print(answer)
        return
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    with LocalServer(LocalModel(LocalSettings(window=16_000, call_tools=True))) as server:
        for answer in run(server.url):
            print(answer)


if __name__ == "__main__":
    main()
