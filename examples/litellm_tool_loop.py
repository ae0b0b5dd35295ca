"""A litellm tool loop that resends its whole history, each call fitted to a 16,000-token window.

Runs offline: with no ``OPENAI_BASE_URL`` it starts the local provider (16,000-token window, calling
the tools it is offered) and routes ``openai/gpt-4o`` to it through litellm.

    python examples/litellm_tool_loop.py
"""

from __future__ import annotations

import os
from typing import Any

import litellm

from contextwindow.integrations.litellm import GuardedLiteLLM

litellm.suppress_debug_info = True  # the first call's rejection (which teaches the window) is not news

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


def run(base_url: str, turns: int = 12) -> list[str]:
    llm = GuardedLiteLLM(store=":memory:")  # the one line: llm.completion is litellm.completion, guarded
    route = {
        "model": "openai/gpt-4o",
        "api_base": base_url,
        "api_key": os.environ.get("OPENAI_API_KEY", "local"),
    }
    history: list[dict[str, Any]] = [{"role": "system", "content": "You search notes and report."}]
    answers = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Turn {turn}: notes on topic {turn}."})
        while True:
            message = llm.completion(**route, messages=history, tools=TOOLS).choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                notes = " ".join(f"note {turn}.{i}: a long paragraph about the topic." for i in range(150))
                history.append({"role": "tool", "tool_call_id": call.id, "content": notes})
        answers.append(message.content or "")
    return answers


def main() -> None:
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        print("\n".join(run(base_url)))
        return
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    with LocalServer(LocalModel(LocalSettings(window=16_000, call_tools=True))) as server:
        print("\n".join(run(server.url + "/v1")))


if __name__ == "__main__":
    main()
