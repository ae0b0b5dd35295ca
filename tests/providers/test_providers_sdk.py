"""The real ``anthropic`` and ``openai`` SDK clients against the local server, and the SDK error mapping."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx2 as httpx  # the transport both SDKs are built on
import pytest

from _shared import LazyModule
from contextwindow.content import Message, Request, Text, Thinking, ToolResult, ToolUse
from contextwindow.errors import ContextOverflow, ProviderError, TransientProviderError
from contextwindow.formats import loader_from
from contextwindow.providers import (
    AnthropicProvider,
    Completion,
    OpenAIProvider,
    TextDelta,
    ToolCall,
    UsageSample,
    complete,
    map_anthropic_error,
    map_openai_error,
)
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from contextwindow.usage.tracker import Usage

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

CLAUDE = "claude-haiku-4-5"
GPT = "gpt-4o"
LOAD = loader_from({})


@pytest.fixture(autouse=True)
def _tokenizer() -> None:
    tiktoken = pytest.importorskip("tiktoken")
    try:
        tiktoken.get_encoding("o200k_base")
    except Exception:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("o200k_base not cached (set TIKTOKEN_CACHE_DIR)")


@pytest.fixture
def model() -> LocalModel:
    return LocalModel(LocalSettings(window=2_000, default_model=CLAUDE))


@pytest.fixture
def server(model: LocalModel) -> Iterator[LocalServer]:
    with LocalServer(model) as running:
        yield running


def claude(server: LocalServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="test", max_retries=0)


def gpt(server: LocalServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="test", max_retries=0)


class TestAnthropicClient:
    def test_a_plain_call_gets_the_scripted_reply_and_real_usage(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        model.enqueue(Message.assistant("hello", ToolUse(id="t1", name="ls", input={"dir": "."})))
        body = {"model": CLAUDE, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        with claude(server) as client:
            reply = client.messages.create(**body)  # type: ignore[call-overload]
        assert [b.type for b in reply.content] == ["text", "tool_use"]
        assert reply.content[1].input == {"dir": "."}
        assert reply.stop_reason == "tool_use"
        counted = model.count(Request(model=CLAUDE, messages=(Message.user("hi"),))).input_tokens
        assert reply.usage.input_tokens == counted

    def test_the_streaming_helper_assembles_the_same_message(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        model.enqueue(Message.assistant(Thinking(thinking="hmm " * 30, signature="sig"), "x " * 100))
        with (
            claude(server) as client,
            client.messages.stream(
                model=CLAUDE, max_tokens=500, messages=[{"role": "user", "content": "hi"}]
            ) as stream,
        ):
            final = stream.get_final_message()
        assert [b.type for b in final.content] == ["thinking", "text"]
        assert final.content[1].text == "x " * 100  # type: ignore[union-attr]
        assert final.usage.output_tokens > 1

    def test_a_rejection_is_the_sdks_bad_request_with_anthropics_body(self, server: LocalServer) -> None:
        with claude(server) as client, pytest.raises(anthropic.BadRequestError) as caught:
            client.messages.create(
                model=CLAUDE, max_tokens=100, messages=[{"role": "user", "content": "hello " * 3000}]
            )
        assert caught.value.status_code == 400
        assert "prompt is too long" in caught.value.message


class TestOpenAIClient:
    def test_a_plain_call_gets_the_reply_and_usage(self, server: LocalServer, model: LocalModel) -> None:
        model.enqueue(Message.assistant("hi", ToolUse(id="c1", name="ls", input={"dir": "."})))
        with gpt(server) as client:
            reply = client.chat.completions.create(
                model=GPT, max_tokens=100, messages=[{"role": "user", "content": "hello"}]
            )
        choice = reply.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.tool_calls is not None
        assert choice.message.tool_calls[0].function.arguments == '{"dir":"."}'
        assert reply.usage is not None and reply.usage.prompt_tokens > 0

    def test_streaming_sends_usage_once_at_the_end_only_when_asked(self, server: LocalServer) -> None:
        messages: Any = [{"role": "user", "content": "hello"}]
        with gpt(server) as client:
            with_usage = list(
                client.chat.completions.create(
                    model=GPT,
                    max_tokens=100,
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
            without = list(
                client.chat.completions.create(model=GPT, max_tokens=100, messages=messages, stream=True)
            )
        assert [c.usage is not None for c in with_usage] == [False] * (len(with_usage) - 1) + [True]
        assert with_usage[-1].choices == []
        assert all(c.usage is None for c in without)

    def test_a_rejection_carries_openais_code(self, server: LocalServer) -> None:
        with gpt(server) as client, pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(
                model=GPT, max_tokens=100, messages=[{"role": "user", "content": "hello " * 3000}]
            )
        assert caught.value.code == "context_length_exceeded"


async def _with_provider(which: str, url: str, use: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``use(provider)`` with an SDK client opened and closed inside the event loop."""
    client: Any
    if which == "anthropic":
        client = anthropic.AsyncAnthropic(base_url=url, api_key="t", max_retries=0, timeout=5)
        provider: Any = AnthropicProvider(client)
    else:
        client = openai.AsyncOpenAI(base_url=url + "/v1", api_key="t", max_retries=0, timeout=5)
        provider = OpenAIProvider(client)
    try:
        return await use(provider)
    finally:
        await client.close()


def call(which: str, url: str, request: Request, max_tokens: int) -> Completion:
    async def use(provider: Any) -> Completion:
        return await complete(provider, request, max_tokens=max_tokens, load=LOAD)

    result: Completion = asyncio.run(_with_provider(which, url, use))
    return result


class TestAdapters:
    def test_anthropic_provider_streams_events_and_a_complete_message(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        model.enqueue(Message.assistant("let me look", ToolUse(id="t9", name="read", input={"path": "a.py"})))
        request = Request(model=CLAUDE, messages=(Message.user("read a.py"),))

        async def use(provider: Any) -> list[Any]:
            return [e async for e in provider.stream(request, max_tokens=200, load=LOAD)]

        events = asyncio.run(_with_provider("anthropic", server.url, use))
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "let me look"
        calls = [e for e in events if isinstance(e, ToolCall)]
        assert calls[0].tool_use == ToolUse(id="t9", name="read", input={"path": "a.py"})
        samples = [e.usage for e in events if isinstance(e, UsageSample)]
        assert samples[0].output == 1  # message_start's placeholder
        assert samples[-1].output > 1 and samples[-1].fresh_input == samples[0].fresh_input
        assert events[-1].type == "stop" and events[-1].reason == "tool_use"

    def test_openai_provider_completes_with_usage(self, server: LocalServer, model: LocalModel) -> None:
        model.enqueue(Message.assistant("fine", ToolUse(id="c1", name="ls", input={})))
        request = Request(
            model=GPT,
            messages=(
                Message.user("list"),
                Message.assistant(ToolUse(id="c0", name="ls", input={})),
                Message.user(ToolResult(tool_use_id="c0", content="a.py")),
            ),
        )
        done = call("openai", server.url, request, 100)
        assert done.stop_reason == "tool_use" and done.raw_stop_reason == "tool_calls"
        assert done.message.content[-1] == ToolUse(id="c1", name="ls", input={})
        assert done.usage is not None
        assert done.usage == Usage(fresh_input=model.count(request).input_tokens, output=done.usage.output)

    @pytest.mark.parametrize("which", ["anthropic", "openai"])
    def test_a_window_rejection_surfaces_as_context_overflow_with_both_numbers(
        self, server: LocalServer, model: LocalModel, which: str
    ) -> None:
        request = Request(
            model=CLAUDE if which == "anthropic" else GPT, messages=(Message.user("hello " * 3000),)
        )
        with pytest.raises(ContextOverflow) as caught:
            call(which, server.url, request, 100)
        n = model.count(request).input_tokens
        expected = n if which == "anthropic" else n + 100
        assert (caught.value.requested, caught.value.limit) == (expected, 2_000)
        assert caught.value.status == 400 and caught.value.provider == which

    @pytest.mark.parametrize(("which", "status"), [("anthropic", 529), ("openai", 503)])
    def test_an_overload_surfaces_as_transient(
        self, server: LocalServer, model: LocalModel, which: str, status: int
    ) -> None:
        model.fail_next(1)
        with pytest.raises(TransientProviderError) as caught:
            call(
                which,
                server.url,
                Request(model=CLAUDE if which == "anthropic" else GPT, messages=(Message.user("hi"),)),
                10,
            )
        assert caught.value.status == status

    @pytest.mark.parametrize("which", ["anthropic", "openai"])
    def test_a_refused_connection_surfaces_as_transient(self, which: str) -> None:
        with socket.socket() as probe:  # a port nobody listens on
            probe.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        with pytest.raises(TransientProviderError) as caught:
            call(
                which,
                url,
                Request(model=CLAUDE if which == "anthropic" else GPT, messages=(Message.user("x"),)),
                5,
            )
        assert caught.value.status is None

    def test_cache_breakpoints_are_sent_and_accepted(self, server: LocalServer) -> None:
        request = Request(model=CLAUDE, system=(Text(text="sys"),), messages=(Message.user("hi"),))
        body = AnthropicProvider(anthropic.AsyncAnthropic(api_key="t")).body(
            request, max_tokens=10, load=LOAD
        )
        assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
        assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
        assert call("anthropic", server.url, request, 100).stop_reason == "end_turn"

    def test_the_model_comes_from_the_request_else_the_provider_else_it_is_an_error(self) -> None:
        providers: list[Any] = [
            AnthropicProvider(anthropic.AsyncAnthropic(api_key="t"), model=CLAUDE),
            OpenAIProvider(openai.AsyncOpenAI(api_key="t"), model=GPT),
        ]
        for provider, default in zip(providers, (CLAUDE, GPT), strict=True):
            named = Request(model="named", messages=(Message.user("hi"),))
            assert provider.body(named, max_tokens=5, load=LOAD)["model"] == "named"
            bare = Request(messages=(Message.user("hi"),))
            assert provider.body(bare, max_tokens=5, load=LOAD)["model"] == default
            provider.model = None
            with pytest.raises(ProviderError, match="no model"):
                provider.body(bare, max_tokens=5, load=LOAD)


def _sdk_errors(name: str) -> list[type[BaseException]]:
    module = importlib.import_module(name)
    return [
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if issubclass(c, BaseException) and c.__module__.startswith(module.__name__)
    ]


def _instance(cls: type[BaseException], status_default: int = 400) -> BaseException:
    """An instance of any SDK exception class, its constructor's arguments filled by name."""
    request = httpx.Request("POST", "http://localhost/v1/messages")
    status = getattr(cls, "status_code", None) or status_default
    response = httpx.Response(status, request=request, headers={"x-test": "1"})
    by_name: dict[str, Any] = {
        "message": "boom",
        "request": request,
        "response": response,
        "body": {"error": {"message": "boom"}},
        "completion": openai.types.chat.ChatCompletion.model_construct(),
        "unsent_messages": [],
    }
    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.name not in by_name:
            if param.default is param.empty:
                raise AssertionError(f"cannot build {cls.__name__}: unknown argument {param.name}")
            continue
        if param.kind == param.POSITIONAL_ONLY or (param.kind == param.POSITIONAL_OR_KEYWORD and not kwargs):
            args.append(by_name[param.name])
        else:
            kwargs[param.name] = by_name[param.name]
    if any(p.kind == p.VAR_POSITIONAL for p in params) and not args:
        args = ["boom"]
    return cls(*args, **kwargs)


class TestSdkErrorMapping:
    """Every SDK error class in one test per SDK (listing them imports the SDK, which collecting should not)."""

    def test_every_anthropic_error_class_maps_into_the_tree(self) -> None:
        failures = []
        for cls in _sdk_errors("anthropic"):
            mapped = map_anthropic_error(_instance(cls))
            if not (isinstance(mapped, ProviderError) and mapped.provider == "anthropic"):
                failures.append(f"{cls.__name__} -> {mapped!r}")
        assert failures == [], "anthropic errors not mapped into the tree:\n" + "\n".join(failures)

    def test_every_openai_error_class_maps_into_the_tree(self) -> None:
        failures = []
        for cls in _sdk_errors("openai"):
            mapped = map_openai_error(_instance(cls))
            if not (isinstance(mapped, ProviderError) and mapped.provider == "openai"):
                failures.append(f"{cls.__name__} -> {mapped!r}")
        assert failures == [], "openai errors not mapped into the tree:\n" + "\n".join(failures)

    @pytest.mark.parametrize(
        ("name", "transient"),
        [
            ("anthropic.RateLimitError", True),
            ("anthropic.InternalServerError", True),
            ("anthropic.OverloadedError", True),
            ("anthropic.APITimeoutError", True),
            ("anthropic.APIConnectionError", True),
            ("anthropic.BadRequestError", False),
            ("anthropic.AuthenticationError", False),
            ("openai.RateLimitError", True),
            ("openai.InternalServerError", True),
            ("openai.APITimeoutError", True),
            ("openai.NotFoundError", False),
        ],
    )
    def test_retryable_failures_are_transient_and_the_rest_are_not(self, name: str, transient: bool) -> None:
        sdk, _, error = name.partition(".")
        cls = getattr(importlib.import_module(sdk), error)
        instance = _instance(cls, status_default=500)
        mapper = map_anthropic_error if cls.__module__.startswith("anthropic") else map_openai_error
        mapped = mapper(instance)
        assert isinstance(mapped, TransientProviderError) == transient
        assert mapped.__cause__ is instance

    def test_status_body_and_headers_are_kept(self) -> None:
        mapped = map_openai_error(_instance(openai.BadRequestError))
        assert mapped.status == 400 and mapped.body == {"error": {"message": "boom"}}
        assert mapped.headers["x-test"] == "1"
