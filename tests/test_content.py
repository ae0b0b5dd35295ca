"""Canonical content: values, the edge validators and their error paths."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given, settings

from contextwindow.content import (
    AttachmentRef,
    Document,
    Image,
    Message,
    Text,
    ToolResult,
    ToolUse,
    attachment_id,
    block_to_dict,
    media_refs,
    message_to_dict,
    parse_attachment_ref,
    parse_block,
    parse_message,
    parse_messages,
    valid_stamp,
)
from contextwindow.errors import InvalidInput
from strategies import blocks, messages

REF: dict[str, Any] = {
    "id": "att_" + "ab" * 16,
    "sha256": "ab" * 32,
    "media_type": "image/png",
    "size_bytes": 1200,
    "width": 640,
    "height": 480,
}


def _image(**ref: Any) -> dict[str, Any]:
    return {"type": "image", "ref": {**REF, **ref}}


def _msgs_with_bad_block(bad: dict[str, Any]) -> list[dict[str, Any]]:
    ok = {"role": "user", "content": [{"type": "text", "text": "fine"}]}
    return [ok, ok, ok, {"role": "user", "content": [{"type": "text", "text": "x"}, bad]}]


class TestEdgeErrorPaths:
    @pytest.mark.parametrize(
        ("bad", "path"),
        [
            pytest.param(_image(width=-1), "messages[3].content[1].ref.width", id="negative-width"),
            pytest.param(_image(width="wide"), "messages[3].content[1].ref.width", id="string-width"),
            pytest.param(_image(height=0), "messages[3].content[1].ref.height", id="zero-height"),
            pytest.param(_image(size_bytes=-5), "messages[3].content[1].ref.size_bytes", id="negative-size"),
            pytest.param(
                _image(size_bytes=1.5), "messages[3].content[1].ref.size_bytes", id="fractional-size"
            ),
            pytest.param({"type": "text"}, "messages[3].content[1].text", id="missing-text"),
            pytest.param({"type": "text", "text": 5}, "messages[3].content[1].text", id="text-not-string"),
            pytest.param({"type": "nope"}, "messages[3].content[1]", id="unknown-type"),
            pytest.param({"type": "image"}, "messages[3].content[1]", id="image-without-source"),
            pytest.param(
                {"type": "image", "ref": REF, "url": "https://x"}, "messages[3].content[1]", id="two-sources"
            ),
            pytest.param(
                {"type": "audio", "ref": {**REF, "duration_seconds": math.nan}},
                "messages[3].content[1].ref.duration_seconds",
                id="nan-duration",
            ),
            pytest.param(
                {"type": "document", "ref": {**REF, "pages": 0}},
                "messages[3].content[1].ref.pages",
                id="zero-pages",
            ),
            pytest.param(
                {"type": "tool_result", "tool_use_id": "t", "content": [_image(height=-3)]},
                "messages[3].content[1].content[0].ref.height",
                id="nested-tool-result-media",
            ),
            pytest.param(
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "content": [{"type": "tool_use", "id": "a", "name": "b"}],
                },
                "messages[3].content[1].content[0]",
                id="tool-use-inside-tool-result",
            ),
            pytest.param(
                {"type": "tool_use", "id": "a"}, "messages[3].content[1].name", id="tool-use-no-name"
            ),
        ],
    )
    def test_names_the_exact_field(self, bad: dict[str, Any], path: str) -> None:
        with pytest.raises(InvalidInput) as caught:
            parse_messages(_msgs_with_bad_block(bad))
        assert caught.value.path == path
        assert str(caught.value).startswith(path + ": ")

    def test_a_bad_role_names_the_role(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            parse_messages([{"role": "bot", "content": []}])
        assert caught.value.path == "messages[0].role"

    def test_not_a_list_names_the_list(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            parse_messages("hello")
        assert caught.value.path == "messages"

    def test_a_single_block_path_does_not_repeat_its_type(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            parse_block(_image(width=0), path="block")
        assert caught.value.path == "block.ref.width"
        with pytest.raises(InvalidInput) as caught:
            parse_block(_image(width=0))
        assert caught.value.path == "ref.width"

    def test_an_attachment_ref_path_is_prefixed(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            parse_attachment_ref({**REF, "width": -1}, path="attachments[2]")
        assert caught.value.path == "attachments[2].width"

    def test_is_a_value_error_and_never_a_bare_key_error(self) -> None:
        with pytest.raises(ValueError):
            parse_message({})
        for junk in (
            None,
            5,
            [],
            "x",
            {"role": "user"},
            {"content": []},
            {"role": "user", "content": [None]},
        ):
            with pytest.raises(InvalidInput):
                parse_message(junk)

    def test_direct_construction_of_a_sourceless_image_is_invalid_input(self) -> None:
        with pytest.raises(InvalidInput):
            Image()
        with pytest.raises(InvalidInput):
            Document(url="https://x", ref=parse_attachment_ref(REF))


class TestStamps:
    @pytest.mark.parametrize(
        "stamp",
        [math.nan, -1, -1600.0, math.inf, -math.inf, "12", "NaN", "abc", True, False, [1], {"a": 1}, 10**400],
        ids=repr,
    )
    def test_an_invalid_stamp_is_ignored_not_refused(self, stamp: object) -> None:
        assert parse_block(_image(token_estimate=stamp)).ref.token_estimate is None  # type: ignore[union-attr]
        thinking = parse_block({"type": "thinking", "thinking": "x", "token_estimate": stamp})
        assert thinking.token_estimate is None  # type: ignore[union-attr]
        redacted = parse_block({"type": "redacted_thinking", "data": "x", "token_estimate": stamp})
        assert redacted.token_estimate is None  # type: ignore[union-attr]

    @pytest.mark.parametrize("stamp", [0, 0.0, 1, 1600, 12.5, 1e9], ids=repr)
    def test_a_finite_non_negative_stamp_is_kept(self, stamp: float) -> None:
        assert parse_block(_image(token_estimate=stamp)).ref.token_estimate == float(stamp)  # type: ignore[union-attr]

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (0, 0.0),
            (3, 3.0),
            (2.5, 2.5),
            (math.nan, None),
            (-0.5, None),
            (math.inf, None),
            ("3", None),
            (True, None),
            (None, None),
        ],
        ids=repr,
    )
    def test_valid_stamp(self, value: object, expected: float | None) -> None:
        assert valid_stamp(value) == expected


class TestRoundTrip:
    @settings(max_examples=80, deadline=None)
    @given(messages())
    def test_message_to_dict_then_parse_gives_the_same_message(self, message: Message) -> None:
        assert parse_message(message_to_dict(message)) == message

    @settings(max_examples=80, deadline=None)
    @given(blocks())
    def test_block_to_dict_then_parse_gives_the_same_block(self, block: Any) -> None:
        assert parse_block(block_to_dict(block)) == block

    def test_dicts_are_json_ready(self) -> None:
        import json

        message = Message.user(
            "hi", Image(ref=parse_attachment_ref(REF)), ToolUse(id="1", name="f", input={"a": [1]})
        )
        assert parse_message(json.loads(json.dumps(message_to_dict(message)))) == message

    def test_a_string_content_tool_result_stays_a_string(self) -> None:
        block = ToolResult(tool_use_id="t", content="42")
        assert parse_block(block_to_dict(block)) == block


class TestPathologicalInputs:
    def test_a_million_character_text(self) -> None:
        text = "x" * 1_000_000
        message = parse_message({"role": "user", "content": [{"type": "text", "text": text}]})
        assert message.content == (Text(text=text),)

    def test_ten_thousand_one_character_blocks(self) -> None:
        data = {"role": "assistant", "content": [{"type": "text", "text": "a"}] * 10_000}
        message = parse_message(data)
        assert len(message.content) == 10_000
        assert message_to_dict(message) == {**data, "metadata": {}}

    def test_an_error_in_the_last_of_ten_thousand_blocks_names_it(self) -> None:
        content: list[Any] = [{"type": "text", "text": "a"}] * 9_999 + [{"type": "text", "text": None}]
        with pytest.raises(InvalidInput) as caught:
            parse_messages([{"role": "user", "content": content}])
        assert caught.value.path == "messages[0].content[9999].text"


class TestValues:
    def test_blocks_and_messages_are_frozen(self) -> None:
        text = Text(text="a")
        message = Message.user(text)
        with pytest.raises(dataclasses.FrozenInstanceError):
            text.text = "b"  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            message.role = "assistant"  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            parse_attachment_ref(REF).width = 1  # type: ignore[misc]
        assert isinstance(message.content, tuple)

    def test_keyword_only(self) -> None:
        with pytest.raises(TypeError):
            Text("a")  # type: ignore[misc]

    def test_equal_values_are_equal(self) -> None:
        assert Message.user("a", "b") == Message(role="user", content=(Text(text="a"), Text(text="b")))
        assert Text(text="a") != Text(text="b")

    def test_media_refs_finds_nested_tool_result_media_in_order(self) -> None:
        first = parse_attachment_ref(REF)
        second = parse_attachment_ref({**REF, "id": "att_2"})
        content = (
            Image(ref=first),
            Image(url="https://x"),
            ToolResult(tool_use_id="t", content=(Text(text="x"), Document(ref=second))),
        )
        assert media_refs(content) == [first, second]

    def test_attachment_id_is_prefixed_and_derived_from_the_hash(self) -> None:
        assert attachment_id("0123456789abcdef" * 4) == "att_" + "0123456789abcdef" * 2

    def test_attachment_ref_from_data_equals_the_constructed_one(self) -> None:
        assert parse_attachment_ref(REF) == AttachmentRef(**REF)
