"""OpenAI Chat Completions ⇄ canonical content."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from contextwindow.content import (
    Audio,
    Document,
    Image,
    Message,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from contextwindow.errors import InvalidInput
from contextwindow.formats import openai
from contextwindow.formats._wire import loader_from
from strategies import IMAGES, PDF, WAV, b64, mutated, openai_canonical, openai_wire

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PNG, PNG_TYPE, PNG_SIZE = IMAGES[1]
JPEG, JPEG_TYPE, JPEG_SIZE = IMAGES[2]


def agent_request() -> dict[str, Any]:
    """A realistic Chat Completions request: a support agent with photos, a voice note, a PDF and tools."""
    return {
        "model": "gpt-4o-2024-08-06",
        "max_completion_tokens": 2048,
        "temperature": 0.3,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "lookup_order",
                    "description": "Find an order by id.",
                    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                },
            }
        ],
        "messages": [
            {"role": "developer", "content": "You are a support agent for a furniture shop."},
            {
                "role": "user",
                "name": "dana",
                "content": [
                    {
                        "type": "text",
                        "text": "My chair arrived broken, order 8812. Photos attached, and the invoice.",
                    },
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:{JPEG_TYPE};base64,{b64(JPEG)}", "detail": "high"},
                    },
                    {
                        "type": "image_url",
                        "image_url": {"url": "https://cdn.example.com/u/dana/chair2.png", "detail": "low"},
                    },
                    {
                        "type": "file",
                        "file": {
                            "filename": "invoice.pdf",
                            "file_data": f"data:application/pdf;base64,{b64(PDF)}",
                        },
                    },
                    {"type": "file", "file": {"file_id": "file-abc123"}},
                    {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}},
                ],
            },
            {
                "role": "assistant",
                "content": "Let me look that up.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": '{"order_id":"8812"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "lookup_order", "arguments": "{'order_id': 8812"},
                    },
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": '{"status": "delivered", "items": ["chair"]}',
            },
            {
                "role": "tool",
                "tool_call_id": "call_2",
                "content": [{"type": "text", "text": "error: bad arguments"}],
            },
            {"role": "system", "content": "Refunds above 200 EUR need a manager."},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "I can offer "}, {"type": "text", "text": "a refund."}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": f"data:{JPEG_TYPE};base64,{b64(JPEG)}"}}
                ],
            },
        ],
    }


class TestRealisticRequest:
    def test_parses_every_role_and_part(self) -> None:
        parsed = openai.parse_request(agent_request())
        request = parsed.request
        assert parsed.format == "openai"
        assert request.system == (Text(text="You are a support agent for a furniture shop."),)
        assert request.params["system_role"] == "developer"
        assert request.params["max_tokens_field"] == "max_completion_tokens" and request.max_tokens == 2048
        user, assistant, results, late_system, reply, photo_again = request.messages
        assert user.metadata == {"name": "dana"}
        first, photo, linked, invoice, by_id, voice = user.content
        assert isinstance(first, Text)
        assert isinstance(photo, Image) and photo.detail == "high" and photo.ref is not None
        assert (photo.ref.width, photo.ref.height) == JPEG_SIZE
        assert linked == Image(url="https://cdn.example.com/u/dana/chair2.png", detail="low")
        assert isinstance(invoice, Document) and invoice.filename == "invoice.pdf" and invoice.ref is not None
        assert invoice.ref.pages == 2
        assert by_id == Document(url="openai-file:file-abc123")
        assert (
            isinstance(voice, Audio)
            and voice.ref.media_type == "audio/wav"
            and voice.ref.duration_seconds == 0.25
        )
        assert assistant.content[1] == ToolUse(id="call_1", name="lookup_order", input={"order_id": "8812"})
        assert assistant.content[2] == ToolUse(
            id="call_2", name="lookup_order", input={"__raw_arguments__": "{'order_id': 8812"}
        )
        assert [type(b) for b in results.content] == [ToolResult, ToolResult]
        assert late_system.metadata == {"wire_role": "system"}
        assert reply.content == (Text(text="I can offer "), Text(text="a refund."))
        assert photo_again.content[0] == Image(ref=photo.ref)
        assert len(parsed.attachments) == 3  # the repeated photo is kept once

    def test_renders_back_to_the_same_request(self) -> None:
        wire = agent_request()
        parsed = openai.parse_request(wire)
        assert openai.render_request(parsed.request, parsed.loader()) == wire

    def test_a_bare_message_list(self) -> None:
        parsed = openai.parse_wire_messages(
            [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
        )
        assert parsed.request.system == (Text(text="s"),) and parsed.request.messages == (Message.user("u"),)


class TestRenderingWhatTheApiCannotSay:
    def test_thinking_is_not_sent_and_tool_result_media_follow_in_a_user_message(self) -> None:
        parsed = openai.parse_request(agent_request())
        photo = parsed.request.messages[0].content[1]
        assert isinstance(photo, Image) and photo.ref is not None
        messages = (
            Message.assistant(Thinking(thinking="hm", signature="s"), "ok"),
            Message.user(ToolResult(tool_use_id="c", content=(Text(text="see"), photo)), "and?"),
        )
        rendered = openai.render_messages(messages, parsed.loader())
        assert rendered[0] == {"role": "assistant", "content": "ok"}
        assert rendered[1]["role"] == "tool" and photo.ref.id in rendered[1]["content"][1]["text"]
        assert rendered[2]["role"] == "user"
        assert rendered[2]["content"][0]["type"] == "image_url"  # the screenshot is not lost
        assert rendered[2]["content"][1] == {"type": "text", "text": "and?"}

    def test_what_is_carried_is_what_parsing_the_wire_gives_back(self) -> None:
        parsed = openai.parse_request(agent_request())
        photo = parsed.request.messages[0].content[1]
        messages = (
            Message.assistant("look", ToolUse(id="c", name="shot", input={})),
            Message.user(ToolResult(tool_use_id="c", content=(photo,))),
        )
        wire = openai.render_messages(messages, parsed.loader())
        assert openai.parse_wire_messages(wire).request.messages == openai.carried(messages)

    def test_a_user_message_with_nothing_renderable_keeps_its_place(self) -> None:
        rendered = openai.render_messages((Message.user(Thinking(thinking="x")),), loader_from({}))
        assert rendered == [{"role": "user", "content": []}]

    def test_unknown_spelling_params_fall_back_to_the_defaults(self) -> None:
        request = Request(
            system=(Text(text="s"),), max_tokens=5, params={"system_role": "tool", "max_tokens_field": "x"}
        )
        out = openai.render_request(request, loader_from({}))
        assert out == {"messages": [{"role": "system", "content": "s"}], "max_tokens": 5}


class TestProperties:
    @FAST
    @given(openai_canonical())
    def test_canonical_render_parse_is_the_identity(self, case: tuple[Request, dict[str, bytes]]) -> None:
        request, data = case
        wire = json.loads(json.dumps(openai.render_request(request, loader_from(data))))
        assert openai.parse_request(wire).request == request

    @FAST
    @given(openai_wire())
    def test_wire_parse_render_parse_is_stable(self, wire: dict[str, Any]) -> None:
        first = openai.parse_request(wire)
        rendered = openai.render_request(first.request, first.loader())
        second = openai.parse_request(json.loads(json.dumps(rendered)))
        assert second.request == first.request
        assert second.attachments == first.attachments

    @FAST
    @given(mutated(openai_wire()))
    def test_broken_wire_is_invalid_input_or_parses(self, wire: dict[str, Any]) -> None:
        try:
            openai.parse_request(wire)
        except InvalidInput as err:
            assert err.path


class TestBadInput:
    @pytest.mark.parametrize(
        ("where", "value", "path"),
        [
            (
                (1, "content", 1, "image_url", "url"),
                "data:image/jpeg,abc",
                "messages[1].content[1].image_url.url",
            ),
            (
                (1, "content", 1, "image_url", "url"),
                "data:image/jpeg;base64,@@@",
                "messages[1].content[1].image_url.url",
            ),
            (
                (1, "content", 1, "image_url", "url"),
                "data:jpeg;base64,QUJD",
                "messages[1].content[1].image_url.url",
            ),
            ((1, "content", 1, "image_url", "url"), None, "messages[1].content[1].image_url.url"),
            ((1, "content", 1, "image_url", "detail"), "ultra", "messages[1].content[1].image_url.detail"),
            ((1, "content", 1, "image_url"), "https://x", "messages[1].content[1].image_url"),
            ((1, "content", 3, "file"), {}, "messages[1].content[3].file.file_id"),
            ((1, "content", 3, "file", "file_data"), "QUJD", "messages[1].content[3].file.file_data"),
            ((1, "content", 3, "file", "filename"), 3, "messages[1].content[3].file.filename"),
            ((1, "content", 5, "input_audio", "format"), None, "messages[1].content[5].input_audio.format"),
            ((1, "content", 5, "input_audio", "data"), "!!", "messages[1].content[5].input_audio.data"),
            ((1, "content", 0, "type"), "video", "messages[1].content[0].type"),
            ((1, "name"), 5, "messages[1].name"),
            ((1, "role"), "bot", "messages[1].role"),
            ((1, "role"), {"a": 1}, "messages[1].role"),
            ((2, "tool_calls"), {"a": 1}, "messages[2].tool_calls"),
            ((2, "tool_calls", 0, "function"), None, "messages[2].tool_calls[0].function"),
            (
                (2, "tool_calls", 0, "function", "arguments"),
                {"order_id": 1},
                "messages[2].tool_calls[0].function.arguments",
            ),
            ((2, "tool_calls", 0, "id"), None, "messages[2].tool_calls[0].id"),
            ((2, "content"), [{"type": "image_url"}], "messages[2].content[0].type"),
            ((3, "tool_call_id"), None, "messages[3].tool_call_id"),
            (
                (4, "content"),
                [{"type": "image_url", "image_url": {"url": "x"}}],
                "messages[4].content[0].type",
            ),
            ((0, "content"), 5, "messages[0].content"),
        ],
    )
    def test_names_the_bad_field(self, where: tuple[Any, ...], value: Any, path: str) -> None:
        wire = agent_request()
        node: Any = wire["messages"]
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = value
        before = copy.deepcopy(wire)
        with pytest.raises(InvalidInput) as caught:
            openai.parse_request(wire)
        assert caught.value.path == path
        assert wire == before

    @pytest.mark.parametrize(
        ("key", "value", "path"),
        [
            ("messages", None, "messages"),
            ("tools", [{"type": "retrieval"}], "tools[0].type"),
            ("tools", [{"type": "function", "function": {"name": 5}}], "tools[0].function.name"),
            ("max_completion_tokens", -1, "max_completion_tokens"),
            ("max_completion_tokens", 1.5, "max_completion_tokens"),
            ("model", ["gpt-4o"], "model"),
        ],
    )
    def test_names_the_bad_top_level_field(self, key: str, value: Any, path: str) -> None:
        wire = agent_request()
        wire[key] = value
        with pytest.raises(InvalidInput) as caught:
            openai.parse_request(wire)
        assert caught.value.path == path
