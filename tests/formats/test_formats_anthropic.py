"""Anthropic Messages API ⇄ canonical content."""

from __future__ import annotations

import base64
import copy
import json
from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from contextwindow.content import (
    Audio,
    Document,
    GeneratedImage,
    Image,
    Message,
    RedactedThinking,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    Video,
)
from contextwindow.errors import InvalidInput
from contextwindow.formats import anthropic
from contextwindow.formats._wire import loader_from
from strategies import IMAGES, PDF, anthropic_canonical, anthropic_wire, b64, mutated

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def coding_agent() -> dict[str, Any]:
    """The bundled realistic request: a coding-agent conversation with every Anthropic block kind."""
    text = resources.files("contextwindow").joinpath("data/coding_agent_anthropic.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


class TestRealisticRequest:
    def test_parses_every_block_kind(self) -> None:
        parsed = anthropic.parse_request(coding_agent())
        request = parsed.request
        assert parsed.format == "anthropic"
        assert request.model == "claude-sonnet-4-5" and request.max_tokens == 8192
        assert request.params == {"temperature": 0.2}
        assert [t.name for t in request.tools] == ["bash", "read_file", "edit_file"]
        assert request.system[0].text.startswith("You are a coding agent")
        first, second, third = request.messages[:3]
        text, image, document = first.content
        assert isinstance(text, Text) and isinstance(image, Image) and isinstance(document, Document)
        assert image.ref is not None and (image.ref.width, image.ref.height) == (320, 200)
        assert document.ref is not None and document.ref.pages == 2 and document.title == "Date format spec"
        thinking, _, call = second.content
        assert isinstance(thinking, Thinking) and thinking.signature and thinking.signature.startswith("EqQB")
        assert call == ToolUse(
            id="toolu_01A",
            name="bash",
            input={"command": "python -m pytest -q tests/test_parse.py::test_dates"},
        )
        result = third.content[0]
        assert isinstance(result, ToolResult) and result.is_error and "ValueError" in str(result.content)
        assert isinstance(request.messages[3].content[0], RedactedThinking)
        assert request.messages[-1].content[-1] == Image(url="https://example.com/mocks/date-picker.png")

    def test_keeps_the_decoded_bytes_aside_by_id(self) -> None:
        wire = coding_agent()
        parsed = anthropic.parse_request(wire)
        image = parsed.request.messages[0].content[1]
        assert isinstance(image, Image) and image.ref is not None
        raw = base64.b64decode(wire["messages"][0]["content"][1]["source"]["data"])
        assert parsed.attachments[image.ref.id] == raw
        assert image.ref.size_bytes == len(raw)
        assert len(parsed.attachments) == 2

    def test_renders_back_to_the_same_request(self) -> None:
        wire = coding_agent()
        parsed = anthropic.parse_request(wire)
        assert anthropic.render_request(parsed.request, parsed.loader()) == wire

    def test_identical_images_are_kept_once(self) -> None:
        data, media_type, _ = IMAGES[1]
        block = {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": b64(data)}}
        parsed = anthropic.parse_wire_messages(
            [{"role": "user", "content": [block, block]}, {"role": "user", "content": [block]}]
        )
        assert len(parsed.attachments) == 1
        refs = {b.ref for m in parsed.request.messages for b in m.content if isinstance(b, Image)}
        assert len(refs) == 1

    def test_a_string_system_and_string_content(self) -> None:
        parsed = anthropic.parse_request(
            {"system": "be brief", "messages": [{"role": "user", "content": "hi"}]}
        )
        assert parsed.request.system == (Text(text="be brief"),)
        assert parsed.request.messages == (Message.user("hi"),)

    def test_a_plain_text_document_is_an_attachment(self) -> None:
        block = {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "é notes"},
        }
        parsed = anthropic.parse_wire_messages([{"role": "user", "content": [block]}])
        document = parsed.request.messages[0].content[0]
        assert isinstance(document, Document) and document.ref is not None
        assert parsed.attachments[document.ref.id] == "é notes".encode()
        assert anthropic.render_messages(parsed.request.messages, parsed.loader())[0]["content"][0] == block


class TestRenderingWhatTheApiCannotSay:
    def test_audio_and_video_become_a_placeholder_naming_the_attachment(self) -> None:
        parsed = anthropic.parse_wire_messages(
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "document",
                            "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
                        }
                    ],
                }
            ]
        )
        document = parsed.request.messages[0].content[0]
        assert isinstance(document, Document) and document.ref is not None
        for block in (Audio(ref=document.ref), Video(ref=document.ref)):
            rendered = anthropic.render_block(block, parsed.loader())
            assert rendered["type"] == "text" and document.ref.id in rendered["text"]

    def test_a_generated_image_renders_as_an_image(self) -> None:
        data, media_type, _ = IMAGES[0]
        parsed = anthropic.parse_wire_messages(
            [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": media_type, "data": b64(data)},
                        }
                    ],
                }
            ]
        )
        image = parsed.request.messages[0].content[0]
        assert isinstance(image, Image) and image.ref is not None
        rendered = anthropic.render_block(GeneratedImage(ref=image.ref), parsed.loader())
        assert rendered == {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": b64(data)},
        }

    def test_openai_spelling_params_are_not_sent(self) -> None:
        request = Request(
            messages=(Message.user("hi"),),
            params={"system_role": "developer", "max_tokens_field": "max_completion_tokens", "top_p": 0.5},
        )
        assert anthropic.render_request(request, loader_from({})) == {
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "top_p": 0.5,
        }

    def test_a_missing_attachment_is_invalid_input(self) -> None:
        parsed = anthropic.parse_request(coding_agent())
        with pytest.raises(InvalidInput):
            anthropic.render_request(parsed.request, loader_from({}))


class TestProperties:
    @FAST
    @given(anthropic_canonical())
    def test_canonical_render_parse_is_the_identity(self, case: tuple[Request, dict[str, bytes]]) -> None:
        request, data = case
        wire = json.loads(json.dumps(anthropic.render_request(request, loader_from(data))))
        parsed = anthropic.parse_request(wire)
        assert parsed.request == request
        assert dict(parsed.attachments) == {k: v for k, v in data.items() if k in parsed.attachments}

    @FAST
    @given(anthropic_wire())
    def test_wire_parse_render_parse_is_stable(self, wire: dict[str, Any]) -> None:
        first = anthropic.parse_request(wire)
        rendered = anthropic.render_request(first.request, first.loader())
        second = anthropic.parse_request(json.loads(json.dumps(rendered)))
        assert second.request == first.request
        assert second.attachments == first.attachments
        assert anthropic.render_request(second.request, second.loader()) == rendered

    @FAST
    @given(mutated(anthropic_wire()))
    def test_broken_wire_is_invalid_input_or_parses(self, wire: dict[str, Any]) -> None:
        try:
            anthropic.parse_request(wire)
        except InvalidInput as err:
            assert err.path


def _broken(edit: str, value: Any) -> dict[str, Any]:
    wire = coding_agent()
    node: Any = wire
    keys = [int(k) if k.isdigit() else k for k in edit.split("/")]
    for key in keys[:-1]:
        node = node[key]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return wire


class TestBadInput:
    @pytest.mark.parametrize(
        ("edit", "value", "path"),
        [
            ("messages/0/content/1/source/data", "!!not base64!!", "messages[0].content[1].source.data"),
            ("messages/0/content/1/source/data", 5, "messages[0].content[1].source.data"),
            ("messages/0/content/1/source/data", KeyError, "messages[0].content[1].source.data"),
            ("messages/0/content/1/source/media_type", "png", "messages[0].content[1].source.media_type"),
            ("messages/0/content/1/source/media_type", None, "messages[0].content[1].source.media_type"),
            ("messages/0/content/1/source/type", "file", "messages[0].content[1].source.type"),
            ("messages/0/content/1/source", "x", "messages[0].content[1].source"),
            ("messages/0/content/2/source/data", "@@", "messages[0].content[2].source.data"),
            ("messages/0/content/2/title", 7, "messages[0].content[2].title"),
            ("messages/0/content/0/type", {"a": 1}, "messages[0].content[0].type"),
            ("messages/0/content/0/text", None, "messages[0].content[0].text"),
            ("messages/0/content/0", "text", "messages[0].content[0]"),
            ("messages/0/role", "system", "messages[0].role"),
            ("messages/0/role", ["user"], "messages[0].role"),
            ("messages/0/content", 5, "messages[0].content"),
            ("messages/1/content/0/signature", 5, "messages[1].content[0].signature"),
            ("messages/1/content/2/input", "ls", "messages[1].content[2].input"),
            ("messages/1/content/2/id", KeyError, "messages[1].content[2].id"),
            ("messages/2/content/0/content", 5, "messages[2].content[0].content"),
            ("messages/2/content/0/is_error", "yes", "messages[2].content[0].is_error"),
            ("messages/3/content/0/data", None, "messages[3].content[0].data"),
            (
                "messages/4/content/0/content/0",
                {"type": "tool_use", "id": "a", "name": "b", "input": {}},
                "messages[4].content[0].content[0].type",
            ),
            ("messages/6/content/2/source/url", 5, "messages[6].content[2].source.url"),
            ("messages", {"0": 1}, "messages"),
            ("tools", {"a": 1}, "tools"),
            ("tools/0/name", None, "tools[0].name"),
            ("tools/0/input_schema", [], "tools[0].input_schema"),
            ("system", 5, "system"),
            ("system/0/type", "image", "system[0].type"),
            ("max_tokens", True, "max_tokens"),
            ("max_tokens", 0, "max_tokens"),
            ("max_tokens", "8192", "max_tokens"),
            ("model", 4, "model"),
        ],
    )
    def test_names_the_bad_field(self, edit: str, value: Any, path: str) -> None:
        wire = _broken(edit, value)
        before = copy.deepcopy(wire)
        with pytest.raises(InvalidInput) as caught:
            anthropic.parse_request(wire)
        assert caught.value.path == path
        assert wire == before  # the input is never modified

    @pytest.mark.parametrize("media_type", [[None], 5, {"a": 1}])
    def test_a_media_type_that_is_not_a_string_names_its_path(self, media_type: Any) -> None:
        source = {"type": "text", "media_type": media_type, "data": "plain text"}
        wire = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1,
            "messages": [{"role": "user", "content": [{"type": "document", "source": source}]}],
        }
        with pytest.raises(InvalidInput) as caught:
            anthropic.parse_request(wire)
        assert "media_type" in caught.value.path

    @pytest.mark.parametrize("junk", [None, [], "request", 5])
    def test_a_request_that_is_not_an_object(self, junk: Any) -> None:
        with pytest.raises(InvalidInput) as caught:
            anthropic.parse_request(junk)
        assert caught.value.path == "request"
