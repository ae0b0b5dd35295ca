"""Format detection and the format-neutral entry points."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from contextwindow.content import Message
from contextwindow.errors import InvalidInput
from contextwindow.formats import detect_format, parse_any, render
from strategies import anthropic_wire, openai_wire

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestDetectFormat:
    @pytest.mark.parametrize(
        ("data", "expected"),
        [
            pytest.param({"system": "s", "messages": []}, "anthropic", id="top-level-system"),
            pytest.param(
                {"messages": [], "tools": [{"name": "f", "input_schema": {}}]},
                "anthropic",
                id="input-schema-tool",
            ),
            pytest.param(
                {"messages": [], "tools": [{"type": "function", "function": {"name": "f"}}]},
                "openai",
                id="function-tool",
            ),
            pytest.param([{"role": "system", "content": "s"}], "openai", id="system-role"),
            pytest.param([{"role": "developer", "content": "s"}], "openai", id="developer-role"),
            pytest.param([{"role": "tool", "tool_call_id": "c", "content": "r"}], "openai", id="tool-role"),
            pytest.param(
                [{"role": "assistant", "content": None, "tool_calls": []}], "openai", id="tool-calls"
            ),
            pytest.param(
                [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
                "openai",
                id="image-url-part",
            ),
            pytest.param([{"role": "user", "content": [{"type": "input_audio"}]}], "openai", id="audio-part"),
            pytest.param(
                [{"role": "user", "content": [{"type": "image", "source": {}}]}],
                "anthropic",
                id="image-block",
            ),
            pytest.param(
                [{"role": "assistant", "content": [{"type": "thinking", "thinking": ""}]}],
                "anthropic",
                id="thinking",
            ),
            pytest.param(
                [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}],
                "anthropic",
                id="tool-result",
            ),
            pytest.param([{"role": "user", "content": "plain"}], "anthropic", id="plain-text-is-anthropic"),
            pytest.param([], "anthropic", id="empty"),
        ],
    )
    def test_detects(self, data: Any, expected: str) -> None:
        assert detect_format(data) == expected

    @pytest.mark.parametrize(
        "data",
        [
            [{"role": {"a": 1}, "content": []}],
            [{"role": "user", "content": [{"type": {"a": 1}}, {"type": ["x"]}]}],
            [None, 5, "x"],
        ],
    )
    def test_malformed_messages_do_not_crash_detection(self, data: Any) -> None:
        assert detect_format(data) in ("anthropic", "openai")

    @pytest.mark.parametrize("data", [None, 5, "text", {"messages": "x"}, {"model": "m"}])
    def test_no_messages_is_invalid_input(self, data: Any) -> None:
        with pytest.raises(InvalidInput) as caught:
            detect_format(data)
        assert caught.value.path == "messages"

    @FAST
    @given(anthropic_wire())
    def test_anthropic_bodies_with_telling_content_are_anthropic(self, wire: dict[str, Any]) -> None:
        assert detect_format(wire) == "anthropic" or not _telling(wire, "anthropic")

    @FAST
    @given(openai_wire())
    def test_openai_bodies_are_never_taken_for_anthropic_when_they_say_otherwise(
        self, wire: dict[str, Any]
    ) -> None:
        assert detect_format(wire) == "openai" or not _telling(wire, "openai")


def _telling(wire: dict[str, Any], fmt: str) -> bool:
    """Whether a body carries anything only its format has (plain text reads the same in both)."""
    if fmt == "anthropic":
        return (
            "system" in wire
            or bool(wire.get("tools"))
            or any(
                isinstance(m["content"], list) and any(b["type"] != "text" for b in m["content"])
                for m in wire["messages"]
            )
        )
    return bool(wire.get("tools")) or any(
        m["role"] in ("system", "developer", "tool")
        or "tool_calls" in m
        or (isinstance(m.get("content"), list) and any(p["type"] != "text" for p in m["content"]))
        for m in wire["messages"]
    )


class TestParseAnyAndRender:
    def test_parse_any_reads_both_formats_and_bare_lists(self) -> None:
        assert (
            parse_any({"system": "s", "messages": [{"role": "user", "content": "hi"}]}).format == "anthropic"
        )
        assert parse_any([{"role": "user", "content": "hi"}]).request.messages == (Message.user("hi"),)
        openai_list = parse_any([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
        assert openai_list.format == "openai" and openai_list.request.system[0].text == "s"
        assert (
            parse_any({"messages": [{"role": "tool", "tool_call_id": "c", "content": "r"}]}).format
            == "openai"
        )

    @FAST
    @given(anthropic_wire())
    def test_anthropic_to_openai_and_back_keeps_text_and_tool_calls(self, wire: dict[str, Any]) -> None:
        parsed = parse_any(wire)
        as_openai = render(parsed.request, "openai", parsed.loader())
        assert "system_role" not in as_openai and all(m["role"] != "model" for m in as_openai["messages"])

    def test_render_refuses_an_unknown_format(self) -> None:
        parsed = parse_any([{"role": "user", "content": "hi"}])
        with pytest.raises(InvalidInput) as caught:
            render(parsed.request, "gemini", parsed.loader())  # type: ignore[arg-type]
        assert caught.value.path == "format"
