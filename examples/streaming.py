"""Streaming through the guard: ``messages.stream`` and ``stream=True`` give the SDK's own streams.

Runs offline against the local provider unless ``ANTHROPIC_BASE_URL`` is set.

    python examples/streaming.py
"""

from __future__ import annotations

import os
from typing import Any

import anthropic

import contextwindow

MODEL = "claude-haiku-4-5"


def run(base_url: str, turns: int = 10) -> list[str]:
    raw = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY", "local"), base_url=base_url)
    client = contextwindow.guard(raw, store=":memory:")
    history: list[dict[str, Any]] = []
    texts = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Part {turn}: " + "tell me more about streams. " * 120})
        with client.messages.stream(model=MODEL, max_tokens=512, messages=history) as stream:
            text = "".join(stream.text_stream)  # printed as it arrives, in a real program
            final = stream.get_final_message()
        history.append({"role": "assistant", "content": final.content})
        texts.append(text)
    raw.close()
    return texts


def main() -> None:
    base_url = os.environ.get("ANTHROPIC_BASE_URL")
    if base_url:
        print("\n".join(run(base_url)))
        return
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    with LocalServer(LocalModel(LocalSettings(window=16_000))) as server:
        print("\n".join(run(server.url)))


if __name__ == "__main__":
    main()
