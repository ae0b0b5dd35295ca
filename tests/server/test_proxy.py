"""``contextwindow proxy`` on the HTTP stack: the real SDKs through it to the local provider, headers
kept, streams passed through as they arrive, upstream failures in the API's shape, nothing secret logged."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from _shared import LazyModule
from contextwindow.content import Message
from contextwindow.content import Request as CanonicalRequest
from contextwindow.server import BackgroundServer, HttpApp, ServerLimits, bind, json_response
from contextwindow.server.proxy import ProxyCall, Upstream, UpstreamReply, proxy_app
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from server_support import access_lines, exchange, post_head

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

CLAUDE = "claude-haiku-4-5"
KEY = "sk-ant-test-KEY-THAT-MUST-NOT-LEAK"


@pytest.fixture(scope="module")
def local() -> Iterator[LocalServer]:
    with LocalServer(LocalModel(LocalSettings(window=4_000, default_model=CLAUDE))) as running:
        yield running


@pytest.fixture(scope="module")
def proxy(local: LocalServer) -> Iterator[BackgroundServer]:
    with BackgroundServer(proxy_app(local.url)) as running:
        yield running


class _Echo:
    """An upstream that records what reached it and streams SSE events slowly."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.app = HttpApp(
            [
                Route("/v1/slow", self.slow, methods=["POST"]),
                Route("/{rest:path}", self.echo, methods=["GET", "POST"]),
            ],
            name="echo",
        )

    async def echo(self, request: Request) -> Response:
        body = await request.body()
        self.seen.append(
            {
                "method": request.method,
                "path": request.url.path,
                "query": request.url.query,
                "headers": dict(request.headers),
                "body": body,
            }
        )
        return json_response(200, {"ok": True}, {"x-upstream": "echo"})

    async def slow(self, request: Request) -> Response:
        await request.body()

        async def events() -> AsyncIterator[bytes]:
            for i in range(3):
                yield f"event: tick\ndata: {json.dumps({'i': i, 'at': time.monotonic()})}\n\n".encode()
                await asyncio.sleep(0.4)

        return StreamingResponse(events(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def echo() -> Iterator[tuple[_Echo, BackgroundServer]]:
    upstream = _Echo()
    with BackgroundServer(upstream.app) as running:
        yield upstream, running


@pytest.fixture(scope="module")
def echo_proxy(echo: tuple[_Echo, BackgroundServer]) -> Iterator[BackgroundServer]:
    with BackgroundServer(proxy_app(echo[1].url)) as running:
        yield running


class TestThroughTheRealSdks:
    def test_an_anthropic_call_and_its_stream_come_back_as_the_provider_sent_them(
        self, proxy: BackgroundServer, local: LocalServer
    ) -> None:
        local.model.enqueue(Message.assistant("hello from upstream"), Message.assistant("x " * 200))
        with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:
            reply = client.messages.create(
                model=CLAUDE, max_tokens=500, messages=[{"role": "user", "content": "hi"}]
            )
            with client.messages.stream(
                model=CLAUDE, max_tokens=500, messages=[{"role": "user", "content": "hi"}]
            ) as stream:
                final = stream.get_final_message()
        assert reply.content[0].text == "hello from upstream"  # type: ignore[union-attr]
        counted = local.model.count(CanonicalRequest(model=CLAUDE, messages=(Message.user("hi"),)))
        assert reply.usage.input_tokens == counted.input_tokens
        assert final.content[0].text == "x " * 200  # type: ignore[union-attr]

    def test_count_tokens_is_the_upstreams_count(self, proxy: BackgroundServer, local: LocalServer) -> None:
        with anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client:
            counted = client.messages.count_tokens(
                model=CLAUDE, messages=[{"role": "user", "content": "hello"}]
            )
        expected = local.model.count(CanonicalRequest(model=CLAUDE, messages=(Message.user("hello"),)))
        assert counted.input_tokens == expected.input_tokens

    def test_the_upstreams_rejection_reaches_the_sdk_with_its_own_body(self, proxy: BackgroundServer) -> None:
        with (
            anthropic.Anthropic(base_url=proxy.url, api_key=KEY, max_retries=0) as client,
            pytest.raises(anthropic.BadRequestError) as caught,
        ):
            client.messages.create(
                model=CLAUDE, max_tokens=10, messages=[{"role": "user", "content": "hi " * 5000}]
            )
        assert "prompt is too long" in caught.value.message

    def test_an_openai_call_and_its_stream_with_usage(self, proxy: BackgroundServer) -> None:
        with openai.OpenAI(base_url=proxy.url + "/v1", api_key=KEY, max_retries=0) as client:
            reply = client.chat.completions.create(
                model="gpt-4o", max_tokens=50, messages=[{"role": "user", "content": "hello"}]
            )
            chunks = list(
                client.chat.completions.create(
                    model="gpt-4o",
                    max_tokens=50,
                    messages=[{"role": "user", "content": "hello"}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )
        assert reply.usage is not None and reply.usage.prompt_tokens > 0
        assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == reply.usage.prompt_tokens


class TestHeaders:
    def test_authentication_goes_upstream_untouched_and_the_proxys_own_headers_do_not(
        self, echo: tuple[_Echo, BackgroundServer], echo_proxy: BackgroundServer
    ) -> None:
        upstream, _ = echo
        upstream.seen.clear()
        body = b'{"model":"m","input":"hi"}'
        answered = httpx.post(
            echo_proxy.url + "/v1/responses?api-version=1",
            content=body,
            headers={
                "content-type": "application/json",
                "authorization": f"Bearer {KEY}",
                "x-api-key": KEY,
                "anthropic-version": "2023-06-01",
                "openai-organization": "org-1",
                "x-contextwindow-session": "agent-7",
            },
        )
        assert answered.status_code == 200 and answered.headers["x-upstream"] == "echo"
        seen = upstream.seen[-1]
        assert seen["path"] == "/v1/responses" and seen["query"] == "api-version=1"
        assert seen["body"] == body  # byte for byte
        headers = seen["headers"]
        assert headers["authorization"] == f"Bearer {KEY}" and headers["x-api-key"] == KEY
        assert headers["anthropic-version"] == "2023-06-01" and headers["openai-organization"] == "org-1"
        assert "x-contextwindow-session" not in headers
        assert headers["host"] != echo_proxy.url.split("//")[1]

    def test_other_paths_are_forwarded_as_they_are(
        self, echo: tuple[_Echo, BackgroundServer], echo_proxy: BackgroundServer
    ) -> None:
        upstream, _ = echo
        answered = httpx.get(echo_proxy.url + "/v1/models", headers={"x-api-key": KEY})
        assert answered.status_code == 200
        assert upstream.seen[-1]["method"] == "GET" and upstream.seen[-1]["path"] == "/v1/models"

    def test_no_log_line_holds_a_key_or_a_prompt(
        self, echo_proxy: BackgroundServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        prompt = "PROMPT-THAT-MUST-NOT-LEAK"
        with caplog.at_level(logging.DEBUG), access_lines() as caught:
            httpx.post(
                echo_proxy.url + "/v1/messages",
                json={"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": prompt}]},
                headers={"x-api-key": KEY, "authorization": f"Bearer {KEY}"},
            )
            lines = caught.wait("contextwindow proxy")
        assert any("contextwindow proxy" in line for line in lines)  # the access line was written
        text = "\n".join([*lines, *(r.getMessage() for r in caplog.records)])
        assert KEY not in text and prompt not in text


class TestStreaming:
    def test_events_reach_the_client_as_the_upstream_sends_them(self, echo_proxy: BackgroundServer) -> None:
        arrivals: list[float] = []
        with httpx.stream(
            "POST", echo_proxy.url + "/v1/slow", content=b"{}", headers={"content-type": "application/json"}
        ) as response:
            for line in response.iter_lines():
                if line.startswith("data:"):
                    arrivals.append(time.monotonic())
        assert len(arrivals) == 3
        assert arrivals[1] - arrivals[0] > 0.25 and arrivals[2] - arrivals[1] > 0.25  # not buffered


class TestUpstreamFailures:
    def test_an_unreachable_upstream_is_502_in_each_apis_shape(self) -> None:
        closed = bind("127.0.0.1", 0)
        port = closed.getsockname()[1]
        closed.close()
        with BackgroundServer(proxy_app(f"http://127.0.0.1:{port}")) as running:
            messages = httpx.post(running.url + "/v1/messages", json={"model": "m"})
            chat = httpx.post(running.url + "/v1/chat/completions", json={"model": "m"})
        assert messages.status_code == 502 and messages.json()["error"]["type"] == "api_error"
        assert chat.status_code == 502 and chat.json()["error"]["type"] == "server_error"

    def test_the_proxy_keeps_the_servers_bounds(self, echo_proxy: BackgroundServer) -> None:
        reply = exchange(echo_proxy.port, post_head(content_length=str(10**12)))
        assert reply.status == 413 and reply.json()["error"]["type"] == "request_too_large"


class TestTransformSeam:
    def test_a_transform_decides_what_is_sent_and_sees_the_reply(
        self, echo: tuple[_Echo, BackgroundServer]
    ) -> None:
        upstream_app, upstream_server = echo
        calls: list[ProxyCall] = []

        async def rewrite(call: ProxyCall, upstream: Upstream) -> UpstreamReply:
            calls.append(call)
            return await upstream.send(call, {**call.body, "max_tokens": 7})

        limits = ServerLimits(max_concurrency=4)
        with BackgroundServer(proxy_app(upstream_server.url, transform=rewrite, limits=limits)) as running:
            httpx.post(
                running.url + "/v1/messages",
                json={"model": "m", "max_tokens": 1, "messages": []},
                headers={"x-contextwindow-session": "s1"},
            )
        assert calls[0].api == "anthropic-messages" and calls[0].session == "s1"
        assert json.loads(upstream_app.seen[-1]["body"])["max_tokens"] == 7
