"""A Chat Completions history the guard must archive results and put images out of line for, and what
its compiled request tells the model about them (the re-read tests of the guard and the adapters)."""

from __future__ import annotations

import base64
import json
from typing import Any

from contextwindow import Policy
from contextwindow.guard import GuardCore, Send, run_sync
from contextwindow.replay.synthetic_media import screenshot

__all__ = ["POLICY", "WINDOW", "answered", "body", "sent_through", "told"]

WINDOW = 16_000
"""Six reads of ~4,500 tokens and six images do not fit: the stale results are archived."""

POLICY = Policy(max_inline_images=2)
"""Two images inline: the older four go out of line, with a placeholder and the manifest."""


def body(*, stream: bool = False, turns: int = 6) -> dict[str, Any]:
    """``turns`` of a photo, a tool call and a long result, then a question."""
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        png = base64.b64encode(screenshot(64, 48, seed=turn)).decode()
        image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
        messages.append({"role": "user", "content": [{"type": "text", "text": f"Look {turn}."}, image]})
        call = {"id": f"c{turn}", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        result = f"ORIGINAL {turn} " + "a line of code\n" * 900
        messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": result})
    messages.append({"role": "user", "content": "And now?"})
    tool = {"name": "read_file", "parameters": {"type": "object", "properties": {}}}
    out: dict[str, Any] = {
        "model": "gpt-4o",
        "max_tokens": 256,
        "messages": messages,
        "tools": [{"type": "function", "function": tool}],
    }
    if stream:
        out["stream"] = True
    return out


def answered(step: Send) -> Any:
    """A Chat Completions reply to any call: no tool call, so no round of re-reads."""
    message = {"role": "assistant", "content": "ok"}
    return {"id": "r", "object": "chat.completion", "choices": [{"index": 0, "message": message}]}


def sent_through(core: GuardCore, **kwargs: Any) -> dict[str, Any]:
    """The body ``core`` sends for :func:`body`."""
    return run_sync(core.request(body(**kwargs)), answered).body


def told(sent: dict[str, Any]) -> tuple[str, list[str]]:
    """``(the compiled messages as text, the names of the tools offered)``; the history was fitted:
    results archived and images put out of line, their placeholders in the text."""
    text = json.dumps(sent["messages"], ensure_ascii=False)
    assert "tool result archived as tool-result-archive-" in text
    assert "dropped from live context" in text and "<attachments>" in text
    return text, [t["function"]["name"] for t in sent.get("tools") or []]
