"""The conversation's wire memo renders a message once: every body is what a render without it
gives, byte for byte, and an earlier body is never changed by a later one (the cache breakpoint
moves to the newest message)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextwindow.content import Message, Text, ToolResult, ToolUse
from contextwindow.guard._wire import FORMATS, WireMemo


def _no_media(ref: Any) -> bytes:
    raise AssertionError(ref)


def _history(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        if i % 3 == 2:
            out.append(Message.assistant(ToolUse(id=f"t{i}", name="read", input={"i": i})))
            out.append(Message.user(ToolResult(tool_use_id=f"t{i}", content=f"row {i}")))
        else:
            out.append(Message.user(f"ask {i}") if i % 3 == 0 else Message.assistant(Text(text=f"ok {i}")))
    return out


@pytest.mark.parametrize("fmt", ["anthropic", "openai", "openai-responses"])
def test_each_body_rendered_with_the_memo_is_the_body_rendered_without_it(fmt: str) -> None:
    wire = FORMATS[fmt]  # type: ignore[index]
    body: dict[str, Any] = {"model": "m", "max_tokens": 100}
    memo = WireMemo()
    history = _history(30)
    bodies = []
    for end in range(5, len(history) + 1, 4):
        messages = history[:end]
        with_memo = wire.render(body, messages, _no_media, memo=memo)
        bodies.append((json.dumps(with_memo, sort_keys=True), with_memo))
        assert with_memo == wire.render(body, messages, _no_media)
    for text, sent in bodies:
        assert json.dumps(sent, sort_keys=True) == text  # no later render changed it


@pytest.mark.parametrize("fmt", ["anthropic", "openai"])
def test_a_history_that_changed_in_place_is_rendered_as_it_is_now(fmt: str) -> None:
    # A fold, an archive or a cut hands back other messages where the last render had its own: the
    # leading run kept is only the one that is the same, in the same places.
    wire = FORMATS[fmt]  # type: ignore[index]
    body: dict[str, Any] = {"model": "m", "max_tokens": 100}
    memo = WireMemo()
    history = _history(30)
    changed = list(history)
    changed[7] = Message.user("a summary stands here now")
    for messages in (history, changed, history[3:], history, changed[:12], history[:20], history):
        assert wire.render(body, messages, _no_media, memo=memo) == wire.render(body, messages, _no_media)


def _last_block(body: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = body["messages"][-1]["content"][-1]
    return block


def test_the_newest_message_carries_a_breakpoint_while_the_agent_set_fewer_than_four() -> None:
    wire = FORMATS["anthropic"]
    marked = {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    history = _history(4)
    three = {"model": "m", "system": [marked, marked, marked]}
    assert "cache_control" in _last_block(wire.render(three, history, _no_media))
    four = {"model": "m", "system": [marked, marked, marked, marked]}
    assert "cache_control" not in _last_block(wire.render(four, history, _no_media))  # a fifth is refused


def test_a_tool_schema_naming_a_property_cache_control_is_no_breakpoint() -> None:
    # A tool's input may have a field called cache_control; only a cache_control on the tool itself
    # is a breakpoint the API counts.
    schema = {"type": "object", "properties": {"cache_control": {"type": "string"}}}
    tools = [{"name": f"t{i}", "description": "", "input_schema": schema} for i in range(4)]
    body = FORMATS["anthropic"].render({"model": "m", "tools": tools}, _history(4), _no_media)
    assert _last_block(body)["cache_control"] == {"type": "ephemeral"}
