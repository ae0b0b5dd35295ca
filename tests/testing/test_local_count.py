"""The local provider counts a request as it would bill it: in process and over HTTP, in every usage
setting, refusing what a call refuses, and never as a call."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator

import httpx
import pytest
from PIL import Image as PILImage

from contextwindow.attachments import make_ref
from contextwindow.content import Image, Message, Request, Text, Thinking, ToolResult, ToolUse
from contextwindow.errors import ProviderError
from contextwindow.formats import WireFormat, loader_from
from contextwindow.testing import LocalModel, LocalProvider, LocalServer, LocalSettings
from contextwindow.testing.model import LocalReply
from contextwindow.usage.tracker import USAGE_MODES, UsageMode

MODEL = "claude-sonnet-4-5"
SIGNATURE = "EqQBCkYIBRgCKkD" * 40


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), "white").save(out, format="PNG")
    return out.getvalue()


PNG = _png(900, 600)
REF = make_ref(PNG, "image/png")
LOAD = loader_from({REF.id: PNG})


def _loop_request(*, new_turn: bool) -> Request:
    """A tool-use loop with signed thinking and an image in a result (and, with ``new_turn``, a new
    user turn after it, so that the earlier thinking is stripped as the API strips it)."""
    messages = [
        Message.user("Look at the screenshot and fix the layout bug."),
        Message.assistant(
            Thinking(thinking="Read the file first.", signature=SIGNATURE),
            ToolUse(id="t1", name="read", input={"path": "layout.css"}),
        ),
        Message.user(ToolResult(tool_use_id="t1", content=(Text(text="body { margin: 0 }"), Image(ref=REF)))),
    ]
    if new_turn:
        messages += [Message.assistant("Fixed the margin."), Message.user("Thanks. Now the header.")]
    return Request(model=MODEL, system=(Text(text="You are a careful agent."),), messages=tuple(messages))


def _call(model: LocalModel, request: Request, wire: WireFormat) -> LocalReply:
    outcome = model.handle(request, wire=wire, max_tokens=64, load=LOAD)
    assert isinstance(outcome, LocalReply), outcome
    return outcome


class TestLocalCount:
    @pytest.mark.parametrize("usage", USAGE_MODES)
    @pytest.mark.parametrize("new_turn", [False, True], ids=["in a tool loop", "after the turn"])
    @pytest.mark.parametrize("wire", ["anthropic", "openai"])
    def test_equals_the_input_the_call_counts_in_every_usage_mode(
        self, usage: UsageMode, new_turn: bool, wire: WireFormat
    ) -> None:
        model = LocalModel(LocalSettings(usage=usage, count_scale=1.3))
        provider = LocalProvider(model, wire=wire)
        request = _loop_request(new_turn=new_turn)
        counted = asyncio.run(provider.count_input_tokens(request, load=LOAD))
        reply = _call(model, request, wire)
        assert counted == reply.input_tokens
        if usage == "per-call":
            assert reply.reported is not None and reply.reported.prompt == counted

    def test_thinking_and_the_image_are_in_the_count(self) -> None:
        provider = LocalProvider(LocalModel(LocalSettings()))
        whole = asyncio.run(provider.count_input_tokens(_loop_request(new_turn=False), load=LOAD))
        stripped = asyncio.run(provider.count_input_tokens(_loop_request(new_turn=True), load=LOAD))
        plain = Request(
            model=MODEL, messages=(Message.user("Look at the screenshot and fix the layout bug."),)
        )
        alone = asyncio.run(provider.count_input_tokens(plain, load=LOAD))
        assert whole - alone > 600 // 4 + 500  # the signature's thinking and the image's patches
        # After the turn, the earlier thinking counts nothing (Sonnet 4.5 strips it): the new turn adds
        # a little text and takes the signature's 150 tokens away.
        assert stripped < whole

    def test_counting_is_not_a_call(self) -> None:
        model = LocalModel(
            LocalSettings(usage="cumulative"), script=[Message.assistant("one"), Message.assistant("two")]
        )
        provider = LocalProvider(model)
        model.fail_next(1)
        request = Request(model=MODEL, messages=(Message.user("hello there"),))
        for _ in range(3):
            asyncio.run(provider.count_input_tokens(request, load=LOAD))
        assert model.pending == 2 and provider.counts == 3
        model.fail_next(0)
        first = _call(model, request, "anthropic")
        assert first.message.content == (Text(text="one"),) and first.id == "local_00000001"
        assert first.reported is not None and first.reported.prompt == first.input_tokens

    def test_a_request_over_the_window_is_counted_not_refused(self) -> None:
        provider = LocalProvider(LocalModel(LocalSettings(window=50)))
        request = Request(model=MODEL, messages=(Message.user("word " * 400),))
        assert asyncio.run(provider.count_input_tokens(request, load=LOAD)) > 50

    @pytest.mark.parametrize("wire", ["anthropic", "openai"])
    def test_refuses_what_the_call_refuses_with_its_error(self, wire: WireFormat) -> None:
        model = LocalModel(LocalSettings())
        bad = Request(
            model=MODEL,
            messages=(Message.user("hi"), Message.user(ToolResult(tool_use_id="t_missing", content="42"))),
        )
        call = model.handle(bad, wire=wire, max_tokens=10, load=LOAD)
        assert not isinstance(call, LocalReply)
        with pytest.raises(ProviderError) as refused:
            asyncio.run(LocalProvider(model, wire=wire).count_input_tokens(bad, load=LOAD))
        assert refused.value.status == 400 and refused.value.body == dict(call.body)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with LocalServer(LocalModel(LocalSettings(usage="none", count_scale=1.2))) as running:
        yield running


class TestCountRoutes:
    def test_anthropic_count_tokens_equals_what_the_call_counts(self, server: LocalServer) -> None:
        body = {
            "model": MODEL,
            "system": "You are terse.",
            "messages": [{"role": "user", "content": "Count me, then answer me."}],
        }
        counted = httpx.post(server.url + "/v1/messages/count_tokens", json=body)
        called = httpx.post(server.url + "/v1/messages", json={**body, "max_tokens": 20})
        assert counted.status_code == called.status_code == 200
        assert counted.json() == {"input_tokens": int(called.headers["x-contextwindow-input-tokens"])}

    def test_responses_input_tokens_equals_what_the_call_counts(self, server: LocalServer) -> None:
        body = {"model": "gpt-4o", "instructions": "Be brief.", "input": "Count me, then answer me."}
        counted = httpx.post(server.url + "/v1/responses/input_tokens", json=body)
        called = httpx.post(server.url + "/v1/responses", json=body)
        assert counted.status_code == called.status_code == 200
        assert counted.json() == {
            "object": "response.input_tokens",
            "input_tokens": int(called.headers["x-contextwindow-input-tokens"]),
        }

    def test_anthropic_count_tokens_refuses_empty_content_as_the_call_does(self, server: LocalServer) -> None:
        body = {
            "model": MODEL,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": []},
                {"role": "user", "content": "again"},
            ],
        }
        counted = httpx.post(server.url + "/v1/messages/count_tokens", json=body)
        called = httpx.post(server.url + "/v1/messages", json={**body, "max_tokens": 20})
        assert counted.status_code == called.status_code == 400
        assert counted.json() == called.json()
        assert counted.json()["error"]["type"] == "invalid_request_error"

    def test_anthropic_count_tokens_refuses_a_conversation_opening_on_the_assistant(
        self, server: LocalServer
    ) -> None:
        body = {"model": MODEL, "messages": [{"role": "assistant", "content": "I start."}]}
        counted = httpx.post(server.url + "/v1/messages/count_tokens", json=body)
        assert counted.status_code == 400 and "first message" in counted.json()["error"]["message"]

    def test_responses_input_tokens_refuses_an_orphan_tool_output(self, server: LocalServer) -> None:
        body = {
            "model": "gpt-4o",
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call_output", "call_id": "call_missing", "output": "42"},
            ],
        }
        counted = httpx.post(server.url + "/v1/responses/input_tokens", json=body)
        called = httpx.post(server.url + "/v1/responses", json=body)
        assert counted.status_code == called.status_code == 400
        assert counted.json()["error"]["message"] == called.json()["error"]["message"]
