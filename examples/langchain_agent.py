"""A LangChain v1 ``create_agent`` agent with a tool, kept inside a 16,000-token window by one middleware.

Runs offline: with no ``OPENAI_BASE_URL`` it starts the local provider (16,000-token window, calling
the tools it is offered). The agent's state keeps every message; each model call is fitted.

    python examples/langchain_agent.py
"""

from __future__ import annotations

import os
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from contextwindow.integrations.langchain import ContextWindowMiddleware


@tool
def search(query: str) -> str:
    """Search the notes."""
    return " ".join(f"note {query}.{i}: a long paragraph about the topic." for i in range(150))


def run(base_url: str, turns: int = 12) -> list[str]:
    model = ChatOpenAI(model="gpt-4o", base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "local"))
    agent = create_agent(
        model,
        [search],
        system_prompt="You search notes and report.",
        middleware=[ContextWindowMiddleware(store=":memory:")],  # the one line
    )
    messages: list[Any] = []
    answers = []
    for turn in range(turns):
        state = agent.invoke({"messages": [*messages, HumanMessage(f"Turn {turn}: notes on topic {turn}.")]})
        messages = state["messages"]
        answers.append(str(messages[-1].content))
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
