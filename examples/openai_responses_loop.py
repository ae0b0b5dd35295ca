"""An OpenAI Responses tool loop, streamed, that sends only its new input with
``previous_response_id``, guarded by one line.

Runs offline: with no ``OPENAI_BASE_URL`` it starts the local provider (16,000-token window, calling
the tools it is offered). The provider holds the conversation while it fits; when the next request
would not, the guard sends the compacted history from its ledger instead, so the loop never sees a
length error.

    python examples/openai_responses_loop.py
"""

from __future__ import annotations

import os
from typing import Any

import openai

import contextwindow

MODEL = "gpt-4o"
TOOLS = [
    {
        "type": "function",
        "name": "search",
        "description": "Search the notes.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    }
]


def run(base_url: str, turns: int = 12) -> list[str]:
    with openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY", "local"), base_url=base_url) as raw:
        client = contextwindow.guard(raw, store=":memory:")  # the one line
        previous: str | None = None
        answers = []
        for turn in range(turns):
            new: list[Any] = [{"role": "user", "content": f"Turn {turn}: find the notes about topic {turn}."}]
            while True:
                chained = {"previous_response_id": previous} if previous else {}
                with client.responses.stream(
                    model=MODEL,
                    instructions="You search notes and report.",
                    tools=TOOLS,
                    input=new,
                    **chained,
                ) as stream:
                    response = stream.get_final_response()
                previous = response.id
                calls = [item for item in response.output if item.type == "function_call"]
                if not calls:
                    break
                notes = " ".join(f"note {turn}.{i}: a long paragraph about the topic." for i in range(200))
                new = [{"type": "function_call_output", "call_id": c.call_id, "output": notes} for c in calls]
            answers.append(response.output_text)
        client.store.close()
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
