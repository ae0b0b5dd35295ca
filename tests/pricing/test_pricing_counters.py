"""The providers' own input counters through the real SDKs against the local server, and the anchor."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from typer.testing import CliRunner

from _shared import LazyModule
from contextwindow.cli import app
from contextwindow.content import Message, Request, Text, ToolResult, ToolSpec, ToolUse
from contextwindow.errors import ProviderError
from contextwindow.formats import loader_from
from contextwindow.pricing import Estimator
from contextwindow.pricing.counters import GeminiCounter, InputCounter, counted_anchor
from contextwindow.providers import AnthropicProvider, OpenAIProvider
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from contextwindow.usage.anchor import anchored_estimate

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

LOAD = loader_from({})
T = TypeVar("T")
REQUEST = Request(
    system=(Text(text="You are a careful assistant. Réponds en français si on te parle français."),),
    tools=(
        ToolSpec(
            name="read_file",
            description="Read a file from the workspace",
            input_schema={"type": "object", "properties": {"path": {"type": "string"}}},
        ),
    ),
    messages=(
        Message.user("Lis le fichier README, s'il te plaît, et résume-le en trois phrases."),
        Message(
            role="assistant", content=(ToolUse(id="call_1", name="read_file", input={"path": "README.md"}),)
        ),
        Message(
            role="user",
            content=(
                ToolResult(
                    tool_use_id="call_1", content="# contextwindow\nKeeps agents inside the window. " * 20
                ),
            ),
        ),
        Message.user("Merci !"),
    ),
)


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
    return LocalModel(LocalSettings(window=200_000))


@pytest.fixture
def server(model: LocalModel) -> Iterator[LocalServer]:
    with LocalServer(model) as running:
        yield running


def _anthropic(server: LocalServer) -> AnthropicProvider:
    return AnthropicProvider(anthropic.AsyncAnthropic(base_url=server.url, api_key="local", max_retries=0))


def _openai(server: LocalServer) -> OpenAIProvider:
    return OpenAIProvider(openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="local", max_retries=0))


def _run(provider: AnthropicProvider | OpenAIProvider, work: Awaitable[T]) -> T:
    async def go() -> T:
        async with provider.client:
            return await work

    return asyncio.run(go())


class TestProviderCounters:
    def test_anthropic_counts_with_messages_count_tokens(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        request = Request(
            model="claude-sonnet-4-5", system=REQUEST.system, tools=REQUEST.tools, messages=REQUEST.messages
        )
        provider = _anthropic(server)
        counted = _run(provider, provider.count_input_tokens(request, load=LOAD))
        assert counted == model.count(request, LOAD, wire="anthropic").input_tokens > 100

    def test_openai_counts_with_responses_input_tokens(self, server: LocalServer, model: LocalModel) -> None:
        request = Request(
            model="gpt-4o", system=REQUEST.system, tools=REQUEST.tools, messages=REQUEST.messages
        )
        provider = _openai(server)
        counted = _run(provider, provider.count_input_tokens(request, load=LOAD))
        # the Responses items carry what the Chat Completions request carries: the same count
        assert counted == model.count(request, LOAD, wire="openai").input_tokens > 100

    def test_a_refused_count_is_a_provider_error(self, server: LocalServer) -> None:
        request = Request(model="no-such-model", messages=(Message.user("hi"),))
        provider = _anthropic(server)
        with pytest.raises(ProviderError):
            _run(provider, provider.count_input_tokens(request, load=LOAD))

    def test_both_providers_are_input_counters(self, server: LocalServer) -> None:
        for provider in (_anthropic(server), _openai(server)):
            assert isinstance(provider, InputCounter)
            _run(provider, asyncio.sleep(0))  # closes its client


def _gemini(server: LocalServer) -> GeminiCounter:
    from google import genai
    from google.genai import types

    client = genai.Client(api_key="local", http_options=types.HttpOptions(base_url=server.url))
    return GeminiCounter(client)


def _count(counter: GeminiCounter, request: Request) -> int:
    async def go() -> int:
        try:
            return await counter.count_input_tokens(request, load=LOAD)
        finally:
            await counter.client.aio.aclose()

    return asyncio.run(go())


class TestGeminiCounter:
    """``models.countTokens`` through the real ``google.genai.Client``, served by the local provider."""

    def test_counts_the_conversation_as_the_local_provider_does(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        request = Request(model="gemini-2.5-flash", messages=REQUEST.messages)
        assert _count(_gemini(server), request) == model.count(request, LOAD).input_tokens > 100

    def test_system_and_tools_are_counted_as_a_leading_user_content(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        request = Request(
            model="gemini-2.5-flash", system=REQUEST.system, tools=REQUEST.tools, messages=REQUEST.messages
        )
        lead = Message.user(
            REQUEST.system[0].text,
            json.dumps(
                {
                    "name": "read_file",
                    "description": "Read a file from the workspace",
                    "parameters": dict(REQUEST.tools[0].input_schema),
                }
            ),
        )
        same = Request(model="gemini-2.5-flash", messages=(lead, *REQUEST.messages))
        counted = _count(_gemini(server), request)
        assert counted == model.count(same, LOAD).input_tokens
        assert counted > _count(_gemini(server), Request(model="gemini-2.5-flash", messages=REQUEST.messages))

    def test_an_unknown_model_is_a_provider_error_in_geminis_shape(self, server: LocalServer) -> None:
        with pytest.raises(ProviderError) as caught:
            _count(_gemini(server), Request(model="no-such-model", messages=(Message.user("hi"),)))
        assert caught.value.status == 404 and caught.value.provider == "gemini"
        assert caught.value.body["error"]["status"] == "NOT_FOUND"

    def test_a_response_without_its_call_is_refused_as_invalid_argument(self, server: LocalServer) -> None:
        import httpx

        body = {
            "contents": [{"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {}}}]}]
        }
        answer = httpx.post(f"{server.url}/v1beta/models/gemini-2.5-flash:countTokens", json=body)
        assert answer.status_code == 400
        assert answer.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert "follows no functionCall" in answer.json()["error"]["message"]

    def test_is_an_input_counter(self, server: LocalServer) -> None:
        counter = _gemini(server)
        assert isinstance(counter, InputCounter)
        counter.client.close()


class TestCountedAnchor:
    def test_a_cold_start_is_priced_from_the_providers_count(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        request = Request(
            model="claude-sonnet-4-5", system=REQUEST.system, tools=REQUEST.tools, messages=REQUEST.messages
        )
        estimator = Estimator("claude-sonnet-4-5")
        provider = _anthropic(server)
        anchor = _run(provider, counted_anchor(provider, request, estimator=estimator, load=LOAD))
        truth = model.count(request, LOAD, wire="anthropic").input_tokens
        assert anchor.input_tokens == truth and anchor.connection == "anthropic"
        now = anchored_estimate(
            anchor, model="claude-sonnet-4-5", connection="anthropic", estimate_now=estimator.request(request)
        )
        assert not now.cold and now.value == truth
        grown = Request(
            model=request.model,
            system=request.system,
            tools=request.tools,
            messages=(*request.messages, Message.user("Encore une question.")),
        )
        later = anchored_estimate(
            anchor, model="claude-sonnet-4-5", connection="anthropic", estimate_now=estimator.request(grown)
        )
        assert later.value == truth + estimator.request(grown) - estimator.request(request)


class TestCountCommand:
    def test_prints_the_providers_count_beside_the_estimate(
        self, server: LocalServer, tmp_path: Path
    ) -> None:
        path = tmp_path / "request.json"
        path.write_text(
            json.dumps(
                {
                    "model": "claude-sonnet-4-5",
                    "max_tokens": 100,
                    "messages": [{"role": "user", "content": "Bonjour à tous !"}],
                }
            )
        )
        env = {"ANTHROPIC_API_KEY": "local", "COLUMNS": "200"}
        result = CliRunner().invoke(
            app, ["count", str(path), "--provider", "anthropic", "--base-url", server.url, "--json"], env=env
        )
        assert result.exit_code == 0, result.output
        out = json.loads(result.output)
        assert out["provider"] == "anthropic" and out["provider_count"] > 0
        assert out["exact"] is False  # Claude: the rule

    def test_an_unknown_provider_is_bad_input(self, tmp_path: Path) -> None:
        path = tmp_path / "request.json"
        path.write_text(json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}))
        result = CliRunner().invoke(app, ["count", str(path), "--provider", "mistral"])
        assert result.exit_code == 2

    def test_gemini_counts_through_google_genai(self, server: LocalServer, tmp_path: Path) -> None:
        path = tmp_path / "request.json"
        path.write_text(
            json.dumps({"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": "Bonjour !"}]})
        )
        env = {"GEMINI_API_KEY": "local", "COLUMNS": "200"}
        result = CliRunner().invoke(
            app, ["count", str(path), "--provider", "gemini", "--base-url", server.url, "--json"], env=env
        )
        assert result.exit_code == 0, result.output
        out = json.loads(result.output)
        assert out["provider"] == "gemini" and out["provider_count"] > 0
