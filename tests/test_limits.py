"""Every public boundary refuses what nests too deep or counts past its bound, with InvalidInput."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from contextwindow.content import Message, Text, ToolResult, ToolSpec, ToolUse, parse_block, parse_message
from contextwindow.errors import InvalidInput
from contextwindow.formats import parse_any
from contextwindow.limits import (
    MAX_DEPTH,
    MAX_DOCUMENT_DEPTH,
    MAX_TOKENS,
    check_count,
    check_depth,
    check_json_depth,
    finite,
    loads_json,
)
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator, count_tokens
from contextwindow.store import open_store
from contextwindow.usage.tracker import Usage

DEEP = 5_000  # far past the interpreter's recursion limit of 1,000


def nested(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def nested_lists(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


class TestCheckDepth:
    def test_accepts_exactly_the_limit_and_refuses_one_more(self) -> None:
        check_depth(nested(MAX_DEPTH))
        with pytest.raises(InvalidInput, match=f"deeper than {MAX_DEPTH}") as caught:
            check_depth(nested(MAX_DEPTH + 1), path="input")
        assert caught.value.path == "input" + ".a" * MAX_DEPTH

    def test_names_list_indices_in_the_path(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            check_depth({"x": [1, nested_lists(MAX_DEPTH)]})
        assert caught.value.path is not None and caught.value.path.startswith("x[1][0][0]")

    def test_a_value_that_contains_itself_is_refused_not_looped_on(self) -> None:
        cycle: dict[str, Any] = {}
        cycle["self"] = cycle
        with pytest.raises(InvalidInput):
            check_depth(cycle)

    def test_a_million_levels_are_refused_without_recursion(self) -> None:
        with pytest.raises(InvalidInput):
            check_depth(nested_lists(1_000_000))

    def test_strings_and_bytes_are_leaves(self) -> None:
        check_depth(["x" * 1_000_000, b"y" * 10])


class TestJsonText:
    @pytest.mark.parametrize("opener", ["[", '{"a":'], ids=["arrays", "objects"])
    def test_deep_text_is_refused_before_json_loads_sees_it(self, opener: str) -> None:
        closer = "]" if opener == "[" else "}"
        text = opener * 100_000 + "1" + closer * 100_000
        with pytest.raises(InvalidInput, match="JSON nests deeper"):
            loads_json(text, path="file")

    def test_brackets_inside_strings_do_not_count(self) -> None:
        text = json.dumps({"s": "[" * 10_000})
        assert loads_json(text) == {"s": "[" * 10_000}

    def test_escaped_quotes_do_not_end_a_string(self) -> None:
        text = json.dumps({"s": '\\"[' * 500})
        check_json_depth(text)

    def test_the_document_limit_is_accepted(self) -> None:
        text = "[" * MAX_DOCUMENT_DEPTH + "]" * MAX_DOCUMENT_DEPTH
        assert loads_json(text) is not None

    def test_bad_json_stays_a_decode_error(self) -> None:
        with pytest.raises(json.JSONDecodeError):
            loads_json("{nope")


class TestNumbers:
    @pytest.mark.parametrize("value", [10**400, float("nan"), float("inf"), -1, 1.5, True, "3", None])
    def test_a_count_outside_its_bound_is_invalid_input(self, value: object) -> None:
        with pytest.raises(InvalidInput):
            check_count(value, path="n")

    def test_a_count_within_its_bound_is_an_int(self) -> None:
        assert check_count(3.0, path="n") == 3 and check_count(MAX_TOKENS, path="n") == MAX_TOKENS

    def test_finite_never_overflows(self) -> None:
        assert finite(10**400) is None and finite(2.5) == 2.5 and finite(True) is None

    @pytest.mark.parametrize(
        "field", ["fresh_input", "cache_read", "cache_write", "output", "reasoning"], ids=str
    )
    @pytest.mark.parametrize(
        "value", [10**400, MAX_TOKENS + 1, -1], ids=["past-a-float", "past-bound", "negative"]
    )
    def test_usage_refuses_counts_past_the_bound(self, field: str, value: int) -> None:
        with pytest.raises(InvalidInput) as caught:
            Usage(**{field: value})
        assert caught.value.path == f"usage.{field}"

    def test_usage_normalises_integral_floats(self) -> None:
        assert Usage(fresh_input=3.0).fresh_input == 3 and type(Usage(output=2.0).output) is int

    def test_a_profile_window_past_the_bound_is_invalid_input(self) -> None:
        with pytest.raises(InvalidInput, match="context_window"):
            get_profile("gpt-4o").with_(context_window=10**400)

    def test_an_estimator_multiplier_past_a_float_is_invalid_input(self) -> None:
        with pytest.raises(InvalidInput, match="multiplier"):
            Estimator("gpt-4o", multiplier=10**400)


Boundary = Callable[[], object]

DEEP_BOUNDARIES: dict[str, Boundary] = {
    "ToolUse(input)": lambda: ToolUse(id="t", name="n", input=nested(DEEP)),
    "Message(metadata)": lambda: Message(role="user", content=(Text(text="x"),), metadata=nested(DEEP)),
    "ToolSpec(input_schema)": lambda: ToolSpec(name="n", input_schema=nested(DEEP)),
    "parse_message": lambda: parse_message({"role": "user", "content": [], "metadata": nested(DEEP)}),
    "parse_block": lambda: parse_block({"type": "tool_use", "id": "t", "name": "n", "input": nested(DEEP)}),
    "parse_any(anthropic)": lambda: parse_any(
        {
            "system": "s",
            "messages": [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "n", "input": nested(DEEP)}],
                }
            ],
        }
    ),
    "parse_any(openai arguments)": lambda: parse_any(
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "[" * DEEP + "]" * DEEP},
                        }
                    ],
                }
            ]
        }
    ),
    "parse_any(bare list)": lambda: parse_any(nested_lists(DEEP)),
    "count_tokens(wire)": lambda: count_tokens({"messages": [], "metadata": nested(DEEP)}, model="gpt-4o"),
    "count_tokens(block)": lambda: count_tokens(
        {"type": "tool_use", "id": "t", "name": "n", "input": nested(DEEP)}, model="gpt-4o"
    ),
    "count_tokens(list)": lambda: count_tokens(nested_lists(DEEP), model="gpt-4o"),
}


class TestDeepInputAtEveryBoundary:
    @pytest.mark.parametrize("call", DEEP_BOUNDARIES.values(), ids=DEEP_BOUNDARIES.keys())
    @pytest.mark.parametrize("mode", ["default", "error"])
    def test_is_invalid_input_naming_the_path_whatever_the_warnings_filter(
        self, call: Boundary, mode: str
    ) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter(mode)  # type: ignore[call-overload]
            with pytest.raises(InvalidInput, match="deeper than") as caught:
                call()
        assert caught.value.path

    def test_append_checks_a_message_whose_fields_were_changed_after_construction(self) -> None:
        session = open_store(None).session("s")
        message = Message.user("x")
        object.__setattr__(message, "metadata", nested(DEEP))
        with pytest.raises(InvalidInput, match="deeper than") as caught:
            session.append(message)
        assert caught.value.path is not None and caught.value.path.startswith("message.metadata.a")
        assert session.entries() == []

    def test_values_at_the_limit_go_all_the_way_through(self) -> None:
        session = open_store(None).session("s")
        use = ToolUse(id="t", name="n", input=nested(MAX_DEPTH - 1))
        stored = session.append(Message.assistant(use), block_prices=[1.0])
        assert session.messages() == [stored]
        assert count_tokens([stored.message], model="gpt-4o") > 0
        assert store_verified(session)


def store_verified(session: Any) -> bool:
    return session._store.verify() == []


class TestFriendlyContent:
    @pytest.mark.parametrize("mode", ["default", "error"])
    def test_string_and_list_content_are_the_canonical_tuple_without_warnings(self, mode: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter(mode)  # type: ignore[call-overload]
            session = open_store(None).session("s")
            a = session.append(Message(role="user", content="hi"))  # type: ignore[arg-type]
            b = session.append(Message(role="user", content=[Text(text="hi"), "there"]))  # type: ignore[arg-type]
            result = ToolResult(tool_use_id="t", content=[Text(text="out")])  # type: ignore[arg-type]
        assert a.message.content == (Text(text="hi"),)
        assert b.message.content == (Text(text="hi"), Text(text="there"))
        assert result.content == (Text(text="out"),)

    @pytest.mark.parametrize("mode", ["default", "error"])
    def test_a_wrongly_typed_block_is_invalid_input_whatever_the_warnings_filter(self, mode: str) -> None:
        session = open_store(None).session("s")
        with warnings.catch_warnings():
            warnings.simplefilter(mode)  # type: ignore[call-overload]
            with pytest.raises(InvalidInput) as caught:
                session.append(Message.user(Text(text=5)))  # type: ignore[arg-type]
        assert caught.value.path == "message.content[0].text"
        assert "Value error" not in str(caught.value)

    def test_count_tokens_of_a_bad_block_names_the_block_field(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            count_tokens({"type": "text", "text": 5}, model="gpt-4o")
        assert caught.value.path == "obj.text"
        with pytest.raises(InvalidInput, match="unknown block type") as caught:
            count_tokens({"type": "banana"}, model="gpt-4o")
        assert caught.value.path == "obj.type"
