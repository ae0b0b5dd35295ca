"""The local provider refuses what Anthropic and OpenAI refuse, with their status and error shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow import Image, Message, Text, ToolResult, ToolSpec, ToolUse
from contextwindow.attachments import make_ref
from contextwindow.content import Request
from contextwindow.formats import loader_from
from contextwindow.replay.synthetic_media import screenshot
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from contextwindow.testing.model import Rejection, arguments_for
from contextwindow.testing.strict import check

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")


def ask(*messages: Message) -> Request:
    return Request(model="claude-haiku-4-5", messages=messages, max_tokens=100)


CALL = Message.assistant(ToolUse(id="t1", name="f"), ToolUse(id="t2", name="f"))
GOOD = (
    Message.user("go"),
    CALL,
    Message.user(ToolResult(tool_use_id="t1", content="a"), ToolResult(tool_use_id="t2", content="b")),
)

CASES = {
    "no messages": ((), "at least one message"),
    "opens with the assistant": (
        (Message.assistant("hi"), Message.user("x")),
        'first message must use the "user" role',
    ),
    "empty content": (
        (Message.user("go"), Message(role="assistant", content=()), Message.user("x")),
        "non-empty content",
    ),
    "empty text": ((Message.user(Text(text="")),), "text content blocks must be non-empty"),
    "result without its use": (
        (
            Message.user("go"),
            Message.assistant("ok"),
            Message.user(ToolResult(tool_use_id="zz", content="a")),
        ),
        "unexpected `tool_use_id`",
    ),
    "use without results": (
        (Message.user("go"), CALL, Message.user("what now?")),
        "without `tool_result` blocks immediately after: t1, t2",
    ),
    "one result missing": (
        (Message.user("go"), CALL, Message.user(ToolResult(tool_use_id="t1", content="a"))),
        "immediately after: t2",
    ),
    "results out of order": (
        (
            Message.user("go"),
            CALL,
            Message.user(
                ToolResult(tool_use_id="t2", content="b"), ToolResult(tool_use_id="t1", content="a")
            ),
        ),
        "must come first",
    ),
    "text before results": (
        (
            Message.user("go"),
            Message.assistant(ToolUse(id="t1", name="f")),
            Message.user(Text(text="n"), ToolResult(tool_use_id="t1", content="a")),
        ),
        "must come first",
    ),
    "trailing use": ((Message.user("go"), CALL), "without `tool_result` blocks"),
}


class TestAnthropicRules:
    @pytest.mark.parametrize("name", list(CASES))
    def test_refuses(self, name: str) -> None:
        messages, text = CASES[name]
        refusal = check(ask(*messages), "anthropic")
        assert refusal is not None and text in refusal.message

    def test_accepts_a_well_formed_tool_round(self) -> None:
        assert check(ask(*GOOD), "anthropic") is None

    def test_a_final_assistant_prefill_may_be_empty_of_nothing_but_must_not_be_empty_text(self) -> None:
        assert check(ask(Message.user("go"), Message.assistant("Sure,")), "anthropic") is None

    def test_an_image_whose_bytes_are_not_its_declared_type_is_refused(self) -> None:
        jpeg = screenshot(64, 48, fmt="jpeg")
        # make_ref refuses the mislabel at intake; a ref relabelled after intake reaches the provider
        ref = dataclasses.replace(make_ref(jpeg, "image/jpeg"), media_type="image/png")
        refusal = check(ask(Message.user(Image(ref=ref))), "anthropic", loader_from({ref.id: jpeg}))
        assert refusal is not None and "does not appear to be a valid image/png image" in refusal.message


class TestOpenAIRules:
    def test_a_tool_message_without_a_call_names_its_role(self) -> None:
        refusal = check(
            Request(
                model="gpt-4o",
                system=(Text(text="s"),),
                messages=(Message.user("go"), Message.user(ToolResult(tool_use_id="x", content="a"))),
            ),
            "openai",
        )
        assert refusal is not None and refusal.param == "messages.[2].role"
        assert "must be a response to a preceeding message with 'tool_calls'" in refusal.message

    def test_calls_without_results_are_refused_and_a_trailing_call_is_not(self) -> None:
        refusal = check(
            Request(model="gpt-4o", messages=(Message.user("go"), CALL, Message.user("next"))), "openai"
        )
        assert refusal is not None and "did not have response messages: t1, t2" in refusal.message
        assert check(Request(model="gpt-4o", messages=(Message.user("go"), CALL)), "openai") is None

    def test_an_assistant_opening_is_accepted(self) -> None:
        assert (
            check(Request(model="gpt-4o", messages=(Message.assistant("hi"), Message.user("x"))), "openai")
            is None
        )


class TestOverHTTP:
    @pytest.fixture
    def server(self) -> Iterator[LocalServer]:
        with LocalServer(LocalModel()) as running:
            yield running

    def test_the_anthropic_sdk_gets_a_bad_request_with_the_apis_body(self, server: LocalServer) -> None:
        with (
            anthropic.Anthropic(api_key="l", base_url=server.url, max_retries=0) as client,
            pytest.raises(anthropic.BadRequestError) as raised,
        ):
            client.messages.create(
                model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": ""}]
            )
        body: Any = raised.value.body
        assert body["error"]["type"] == "invalid_request_error"
        assert "non-empty" in body["error"]["message"]

    def test_the_openai_sdk_gets_a_bad_request_naming_the_param(self, server: LocalServer) -> None:
        with (
            openai.OpenAI(api_key="l", base_url=server.url + "/v1", max_retries=0) as client,
            pytest.raises(openai.BadRequestError) as raised,
        ):
            client.chat.completions.create(
                model="gpt-4o",
                messages=[
                    {"role": "user", "content": "go"},
                    {"role": "tool", "tool_call_id": "x", "content": "a"},
                ],
            )
        body: Any = raised.value.body
        assert body["param"] == "messages.[1].role"

    def test_strict_false_answers_what_the_apis_refuse(self) -> None:
        model = LocalModel(LocalSettings(strict=False))
        outcome = model.handle(ask(Message.user(Text(text=""))), wire="anthropic", max_tokens=10)
        assert not isinstance(outcome, Rejection)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "mode": {"enum": ["r", "w"]},
        "lines": {"type": "array", "items": {"type": "integer", "minimum": 3}},
        "flags": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
        "note": {"type": "string"},
    },
    "required": ["path", "mode", "lines", "flags"],
}


class TestCallingTools:
    def test_arguments_are_valid_for_the_schema(self) -> None:
        assert arguments_for(SCHEMA) == {
            "path": "example",
            "mode": "r",
            "lines": [3],
            "flags": {"deep": True},
        }

    def test_a_tool_loop_is_answered_with_calls_then_text(self) -> None:
        model = LocalModel(LocalSettings(call_tools=True))
        tools = (ToolSpec(name="read", input_schema=SCHEMA), ToolSpec(name="ls"))
        first = model.handle(
            Request(model="claude-haiku-4-5", tools=tools, messages=(Message.user("go"),)),
            wire="anthropic",
            max_tokens=500,
        )
        assert not isinstance(first, Rejection) and first.stop_reason == "tool_use"
        uses = [b for b in first.message.content if isinstance(b, ToolUse)]
        assert [u.name for u in uses] == ["read", "ls"]
        results = Message.user(*(ToolResult(tool_use_id=u.id, content="ok") for u in uses))
        second = model.handle(
            Request(
                model="claude-haiku-4-5", tools=tools, messages=(Message.user("go"), first.message, results)
            ),
            wire="anthropic",
            max_tokens=500,
        )
        assert not isinstance(second, Rejection) and second.stop_reason == "end_turn"

    def test_an_agent_loop_over_http_runs_offline(self) -> None:
        with (
            LocalServer(LocalModel(LocalSettings(call_tools=True))) as server,
            anthropic.Anthropic(api_key="l", base_url=server.url, max_retries=0) as client,
        ):
            tools = [{"name": "read", "input_schema": SCHEMA}]
            history: list[Any] = [{"role": "user", "content": "go"}]
            calls = 0
            while True:
                response = client.messages.create(
                    model="claude-haiku-4-5", max_tokens=300, tools=tools, messages=history
                )
                history.append({"role": "assistant", "content": response.content})
                uses = [b for b in response.content if b.type == "tool_use"]
                if not uses:
                    break
                calls += len(uses)
                assert uses[0].input["mode"] == "r"
                history.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": u.id, "content": "done"} for u in uses
                        ],
                    }
                )
        assert calls == 1
