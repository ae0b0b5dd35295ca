"""``contextwindow proxy`` relays faults faithfully: an upstream that breaks its protocol is 502 in the
API's own shape, a stream's error is never recorded as a reply, a refused session name is 400 naming
the header, the request target reaches the upstream byte for byte, one ``Date``, one log line per
expected fault, and a request over the profile's window goes upstream for the upstream to judge."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from _shared import LazyModule
from contextwindow.engine.folding.summary_rules import REQUIRED_SECTIONS
from contextwindow.models import get_profile, register
from contextwindow.server import BackgroundServer, HttpApp, json_response
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import proxy_app
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from server_support import access_lines, exchange, post, post_head, running

anthropic = LazyModule("anthropic")

CLAUDE = "claude-haiku-4-5"
SMALL = register(get_profile(CLAUDE).with_(name="claude-haiku-4-5-window-2k-test", context_window=2_000))
"""A profile whose window a test request can pass without a megabyte of text."""


def _message(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": CLAUDE, "max_tokens": 16, "messages": [{"role": "user", "content": text}], **extra}


def _anthropic_reply(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": CLAUDE,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    }


def _sse(*events: tuple[str, dict[str, Any]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events)


def _stream_start() -> list[tuple[str, dict[str, Any]]]:
    message = {**_anthropic_reply(""), "content": [], "stop_reason": None}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "half a"}},
        ),
    ]


def _stream_end() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


class _Scripted:
    """An upstream whose every answer is ``answer(path, body)``; records what reached it."""

    def __init__(self, answer: Callable[[str, dict[str, Any]], Response]) -> None:
        self.answer = answer
        self.seen: list[dict[str, Any]] = []
        self.app = HttpApp([Route("/{rest:path}", self.handle, methods=["GET", "POST"])], name="scripted")

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        self.seen.append(
            {"raw_path": request.scope["raw_path"], "headers": request.headers, "body": body, "raw": raw}
        )
        return self.answer(request.url.path, body)


@pytest.fixture
def scripted() -> Iterator[Callable[[Callable[[str, dict[str, Any]], Response]], _Scripted]]:
    servers: list[BackgroundServer] = []

    def start(answer: Callable[[str, dict[str, Any]], Response]) -> _Scripted:
        upstream = _Scripted(answer)
        server = BackgroundServer(upstream.app).start()
        servers.append(server)
        upstream.url = server.url  # type: ignore[attr-defined]
        return upstream

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def cut_upstream() -> Iterator[str]:
    """An upstream that declares a 1,000-byte JSON body, sends 40 bytes of it and closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                while len(rest) < length:
                    rest += conn.recv(65536)
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n"
                    + b'{"id":"msg_1","type":"message","content":[{"ty'
                )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    listener.close()


def _guarded(upstream_url: str, **options: Any) -> tuple[BackgroundServer, GuardTransform]:
    transform = GuardTransform(open_store(":memory:"), **options)
    return BackgroundServer(proxy_app(upstream_url, transform=transform)).start(), transform


class TestUpstreamProtocolFailures:
    @pytest.mark.parametrize(
        ("path", "body", "shape"),
        [
            ("/v1/messages", _message(), "anthropic"),
            (
                "/v1/chat/completions",
                {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
                "openai",
            ),
        ],
        ids=["anthropic", "openai"],
    )
    def test_a_body_cut_midway_is_502_in_the_apis_shape(
        self, cut_upstream: str, path: str, body: dict[str, Any], shape: str
    ) -> None:
        proxy, _ = _guarded(cut_upstream)
        try:
            answered = httpx.post(proxy.url + path, json=body, headers={"x-api-key": "k"})
        finally:
            proxy.stop()
        assert answered.status_code == 502
        error = answered.json()["error"]
        if shape == "anthropic":
            assert answered.json()["type"] == "error" and error["type"] == "api_error"
        else:
            assert "type" not in answered.json() and error["type"] == "server_error"
        assert "cut short" in error["message"]


def _history(turns: int = 8, words: int = 300) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for turn in range(turns):
        history += [
            {"role": "user", "content": f"turn {turn} " + " ".join(f"w{turn}x{i}" for i in range(words))},
            {"role": "assistant", "content": f"reply {turn}"},
        ]
    history.append({"role": "user", "content": "and now?"})
    return history


_SUMMARY = "\n".join(f"## {name}\nThe work on turn three goes on as planned." for name in REQUIRED_SECTIONS)
_TOO_LONG = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "prompt is too long: 2600 tokens > 2000 maximum"},
}


class TestTheSummarisersFailures:
    """A summary's failure upstream is the summariser's: the agent gets its own answer."""

    @pytest.mark.parametrize(
        "failure",
        [
            Response(b"<html>bad gateway</html>", media_type="text/html"),
            json_response(500, {"type": "error", "error": {"type": "api_error", "message": "boom"}}),
            json_response(400, _TOO_LONG),
        ],
        ids=["not-json", "a-500", "always-too-long"],
    )
    def test_a_failed_summary_never_reaches_the_agent(self, scripted: Any, failure: Response) -> None:
        def answer(path: str, body: dict[str, Any]) -> Response:
            if "<transcript>" in json.dumps(body):  # the summariser's request
                return failure
            return json_response(200, _anthropic_reply("fine"))

        upstream = scripted(answer)
        proxy, _ = _guarded(upstream.url, context_window=3_000)
        try:
            answered = httpx.post(
                proxy.url + "/v1/messages", json={"model": CLAUDE, "max_tokens": 16, "messages": _history()}
            )
        finally:
            proxy.stop()
        assert any("<transcript>" in json.dumps(seen["body"]) for seen in upstream.seen)  # it did summarise
        assert answered.status_code == 200, answered.text
        assert answered.json()["content"][0]["text"] == "fine"

    def test_a_summary_refused_for_size_is_halved_and_asked_again(self, scripted: Any) -> None:
        sizes: list[int] = []

        def answer(path: str, body: dict[str, Any]) -> Response:
            text = json.dumps(body)
            if "<transcript>" in text:
                sizes.append(len(text))
                if len(text) > 2_500:  # the upstream's own window for the summary's request
                    return json_response(400, _TOO_LONG)
                return json_response(200, _anthropic_reply(_SUMMARY))
            return json_response(200, _anthropic_reply("fine"))

        upstream = scripted(answer)
        proxy, _ = _guarded(upstream.url, context_window=3_000)
        history = _history(40, 30)
        try:
            answered = httpx.post(
                proxy.url + "/v1/messages", json={"model": CLAUDE, "max_tokens": 16, "messages": history}
            )
        finally:
            proxy.stop()
        assert answered.status_code == 200, answered.text
        assert len(sizes) >= 2 and sizes[0] > 2_500 >= sizes[-1]  # refused, then asked with less
        sent = upstream.seen[-1]["body"]
        assert "The work on turn three goes on as planned." in json.dumps(sent)  # the summary went out


class TestStreamErrors:
    def test_a_mid_stream_error_is_not_recorded_so_the_retry_continues_the_same_session(
        self, scripted: Any
    ) -> None:
        calls = [0]

        def answer(path: str, body: dict[str, Any]) -> Response:
            calls[0] += 1
            error = (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            )
            events = [*_stream_start(), error] if calls[0] == 1 else [*_stream_start(), *_stream_end()]
            return Response(_sse(*events), media_type="text/event-stream")

        upstream = scripted(answer)
        proxy, transform = _guarded(upstream.url)
        first = [{"role": "user", "content": "hello"}]
        try:
            with anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0) as client:
                with (
                    pytest.raises(anthropic.APIStatusError),  # the SDK raises the stream's error
                    client.messages.stream(model=CLAUDE, max_tokens=16, messages=first) as stream,
                ):
                    stream.get_final_message()
                with client.messages.stream(model=CLAUDE, max_tokens=16, messages=first) as stream:
                    text = stream.get_final_message().content[0].text  # type: ignore[union-attr]
                following = [
                    *first,
                    {"role": "assistant", "content": text},
                    {"role": "user", "content": "next"},
                ]
                with client.messages.stream(model=CLAUDE, max_tokens=16, messages=following) as stream:
                    stream.get_final_message()
        finally:
            proxy.stop()
        [session] = transform.store.sessions()  # no branch
        stored = [m.message for m in transform.store.session(session).messages()]
        assert [m.role for m in stored] == ["user", "assistant", "user", "assistant"]
        assert stored[1].content[0].text == "half a"  # type: ignore[union-attr]  # the retry's whole reply


class TestBodiesNoProviderAccepts:
    @pytest.mark.parametrize(
        ("raw", "needle"),
        [
            (b'{"temperature": NaN}', "NaN is not a JSON number"),
            (b'{"temperature": Infinity}', "Infinity is not a JSON number"),
            (b'{"system": "\\ud83d alone"}', "lone surrogate"),
        ],
        ids=["nan", "infinity", "lone-surrogate"],
    )
    def test_are_400_in_the_apis_shape_and_never_reach_the_upstream(
        self, scripted: Any, raw: bytes, needle: str
    ) -> None:
        upstream = scripted(lambda path, body: json_response(200, _anthropic_reply("unreachable")))
        proxy, transform = _guarded(upstream.url)
        body = json.dumps(_message()).encode()[:-1] + b", " + raw[1:]
        try:
            answered = exchange(proxy.port, post("/v1/messages", body))
        finally:
            proxy.stop()
        assert answered.status == 400
        error = answered.json()["error"]
        assert error["type"] == "invalid_request_error" and needle in error["message"]
        assert upstream.seen == [] and transform.store.sessions() == []

    def test_an_escaped_surrogate_pair_is_one_character_and_goes_through(self, scripted: Any) -> None:
        upstream = scripted(lambda path, body: json_response(200, _anthropic_reply("ok")))
        proxy, _ = _guarded(upstream.url)
        body = json.dumps(_message("smile \U0001f600")).encode()
        assert b"\\ud83d\\ude00" in body  # json.dumps escapes it as a pair
        try:
            answered = exchange(proxy.port, post("/v1/messages", body))
        finally:
            proxy.stop()
        assert answered.status == 200
        [seen] = upstream.seen
        assert seen["body"]["messages"][-1]["content"][0]["text"] == "smile \U0001f600"


class TestTheBodyGoesUpstreamExactly:
    HUGE = 2**100 + 7
    """An integer beyond 64 bits: orjson cannot write it, json.loads keeps it whole."""
    TEXT = 'naïve café, 日本語, emoji \U0001f600, quote " backslash \\ tab \t'

    def _agent_body(self) -> dict[str, Any]:
        use = {
            "type": "tool_use",
            "id": "toolu_1",
            "name": "count",
            "input": {"n": self.HUGE, "why": self.TEXT},
        }
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": self.TEXT}
        tools = [{"name": "count", "description": self.TEXT, "input_schema": {"type": "object"}}]
        return _message(
            self.TEXT,
            tools=tools,
            messages=[
                {"role": "user", "content": [{"type": "text", "text": self.TEXT}]},
                {"role": "assistant", "content": [use]},
                {"role": "user", "content": [result]},
            ],
        )

    @pytest.mark.parametrize("guard", [True, False], ids=["guarded", "pass-through"])
    def test_a_huge_integer_and_non_ascii_text_reach_the_upstream_unchanged(
        self, scripted: Any, guard: bool
    ) -> None:
        upstream = scripted(lambda path, body: json_response(200, _anthropic_reply(self.TEXT)))
        if guard:
            proxy, _ = _guarded(upstream.url)
        else:
            proxy = BackgroundServer(proxy_app(upstream.url)).start()
        sent = self._agent_body()
        try:
            answered = httpx.post(
                proxy.url + "/v1/messages",
                content=json.dumps(sent).encode(),  # ASCII, the non-ASCII text escaped
                headers={"content-type": "application/json"},
            )
        finally:
            proxy.stop()
        assert answered.status_code == 200
        assert answered.json()["content"][0]["text"] == self.TEXT
        [seen] = upstream.seen
        raw: bytes = seen["raw"]
        assert str(self.HUGE).encode() in raw  # written as the digits, never as a float
        received = json.loads(raw)
        [user, assistant, result] = received["messages"]
        assert user["content"][0]["text"] == self.TEXT
        assert assistant["content"][0]["input"] == {"n": self.HUGE, "why": self.TEXT}
        assert type(assistant["content"][0]["input"]["n"]) is int
        assert result["content"][0]["content"] in (self.TEXT, [{"type": "text", "text": self.TEXT}])
        assert received["tools"][0]["description"] == self.TEXT


class TestUpstreamCookies:
    def test_a_cookie_the_upstream_sets_for_one_caller_never_reaches_anothers_request(
        self, scripted: Any
    ) -> None:
        def answer(path: str, body: dict[str, Any]) -> Response:
            reply = json_response(200, _anthropic_reply("ok"))
            reply.set_cookie("__cf_bm", "caller-a-only", path="/")
            return reply

        upstream = scripted(answer)
        with BackgroundServer(proxy_app(upstream.url)) as proxy:
            first = httpx.post(proxy.url + "/v1/messages", json=_message(), headers={"x-api-key": "key-a"})
            second = httpx.post(proxy.url + "/v1/messages", json=_message(), headers={"x-api-key": "key-b"})
            own = {"x-api-key": "key-b", "cookie": "mine=1"}
            third = httpx.post(proxy.url + "/v1/messages", json=_message(), headers=own)
        assert first.status_code == second.status_code == third.status_code == 200
        assert "caller-a-only" in first.headers["set-cookie"]  # relayed to the caller it was set for
        assert [seen["headers"].get("cookie") for seen in upstream.seen] == [None, None, "mine=1"]


class TestSessionHeader:
    @pytest.mark.parametrize("name", ["x" * 300, "agent\t7"], ids=["300-characters", "tab"])
    def test_a_name_the_ledger_refuses_is_400_naming_the_header(self, name: str) -> None:
        with LocalServer(LocalModel(LocalSettings(default_model=CLAUDE))) as upstream:
            proxy, _ = _guarded(upstream.url)
            try:
                answered = httpx.post(
                    proxy.url + "/v1/messages", json=_message(), headers={"x-contextwindow-session": name}
                )
            finally:
                proxy.stop()
        assert answered.status_code == 400
        error = answered.json()["error"]
        assert error["type"] == "invalid_request_error"
        assert error["message"].startswith("x-contextwindow-session header: ")


class TestWhatReachesTheUpstream:
    def test_the_request_target_is_forwarded_byte_for_byte(self, scripted: Any) -> None:
        upstream = scripted(lambda path, body: json_response(200, {"ok": True}))
        with BackgroundServer(proxy_app(upstream.url)) as proxy:
            target = "/v1/files/abc%2F..%2F..%2Fadmin?name=a%2Fb&x=%20"
            request = f"GET {target} HTTP/1.1\r\nhost: 127.0.0.1\r\nx-api-key: k\r\n\r\n".encode()
            answered = exchange(proxy.port, request)
            messages = exchange(
                proxy.port, post("/v1/messages?beta=true&q=%2F", json.dumps(_message()).encode())
            )
        assert answered.status == 200 and messages.status == 200
        assert upstream.seen[0]["raw_path"] == b"/v1/files/abc%2F..%2F..%2Fadmin"
        assert upstream.seen[1]["raw_path"] == b"/v1/messages"

    def test_a_request_over_the_profiles_window_goes_upstream_when_the_agent_asked_for_more(
        self, scripted: Any
    ) -> None:
        upstream = scripted(lambda path, body: json_response(200, _anthropic_reply("read it all")))
        proxy, _ = _guarded(upstream.url)
        big = _message(" ".join(f"word{i}" for i in range(6_000)), model=SMALL.name)  # over 2,000 tokens
        try:
            answered = httpx.post(
                proxy.url + "/v1/messages", json=big, headers={"anthropic-beta": "context-1m-2025-08-07"}
            )
        finally:
            proxy.stop()
        assert answered.status_code == 200 and answered.json()["content"][0]["text"] == "read it all"
        [sent] = upstream.seen[-1]["body"]["messages"]
        assert sent["content"][0]["text"] == big["messages"][0]["content"]  # whole, not cut to the window
        assert upstream.seen[-1]["headers"]["anthropic-beta"] == "context-1m-2025-08-07"

    def test_a_system_prompt_over_the_profiles_window_goes_upstream_as_written(self, scripted: Any) -> None:
        upstream = scripted(lambda path, body: json_response(200, _anthropic_reply("fine")))
        proxy, _ = _guarded(upstream.url)
        system = " ".join(f"rule{i}" for i in range(6_000))  # over the 2,000-token profile by itself
        try:
            answered = httpx.post(proxy.url + "/v1/messages", json=_message(model=SMALL.name, system=system))
        finally:
            proxy.stop()
        assert answered.status_code == 200  # the upstream judged it, not the proxy
        assert upstream.seen[-1]["body"]["system"] == system


class TestAnswers:
    def test_a_relayed_answer_has_one_date_header(self) -> None:
        with (
            LocalServer(LocalModel(LocalSettings(default_model=CLAUDE))) as upstream,
            BackgroundServer(proxy_app(upstream.url)) as proxy,
        ):
            answered = httpx.post(proxy.url + "/v1/messages", json=_message())
            other = httpx.get(proxy.url + "/")
        assert answered.status_code == 200 and len(answered.headers.get_list("date")) == 1
        assert other.status_code == 200 and len(other.headers.get_list("date")) == 1


class TestFaultLogging:
    def test_a_body_cut_while_relayed_is_one_log_line_and_a_502_access_line(
        self, cut_upstream: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        with (
            caplog.at_level(logging.DEBUG),
            access_lines() as access,
            BackgroundServer(proxy_app(cut_upstream)) as proxy,  # no guard: relayed as it arrives
        ):
            with pytest.raises(httpx.RemoteProtocolError):  # the agent sees it broken, not short
                httpx.post(proxy.url + "/v1/messages", json=_message())
            lines = access.wait('"status":502')
        faults = [
            r for r in caplog.records if r.name == "contextwindow.server" and r.levelno >= logging.WARNING
        ]
        assert [r.getMessage() for r in faults] == [
            "POST /v1/messages: The upstream's answer was cut short (RemoteProtocolError)"
        ]
        assert not any(r.exc_info for r in caplog.records if r.levelno >= logging.WARNING)
        assert [json.loads(line)["status"] for line in lines] == [502]


class TestReadTimeoutFlag:
    @pytest.mark.parametrize("command", ["serve", "proxy"])
    def test_a_body_that_never_arrives_gets_408_within_the_flags_seconds(self, command: str) -> None:
        extra = ["--upstream", "http://127.0.0.1:9", "--no-guard"] if command == "proxy" else []
        with running(command, *extra, "--read-timeout", "1") as url:
            port = int(url.rsplit(":", 1)[1])
            answered = exchange(port, post_head(content_length="1000"), wait=10)
        assert answered.status == 408 and answered.closed
        assert answered.seconds < 3


class TestRecording:
    @pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
    def test_the_ledgers_commit_of_a_reply_does_not_hold_up_other_requests(self, stream: bool) -> None:
        with LocalServer(LocalModel(LocalSettings(default_model=CLAUDE))) as upstream:
            proxy, transform = _guarded(upstream.url)
            store = transform.store
            real_batch = store.batch

            @contextmanager
            def slow_batch() -> Iterator[None]:
                time.sleep(1.5)  # a slow disk's commit
                with real_batch():
                    yield

            store.batch = slow_batch  # type: ignore[method-assign]
            answered: list[int] = []
            call = threading.Thread(
                target=lambda: answered.append(
                    httpx.post(
                        proxy.url + "/v1/messages", json=_message(stream=stream), timeout=30
                    ).status_code
                )
            )
            slowest = 0.0
            try:
                call.start()
                with httpx.Client(timeout=30) as client:
                    while call.is_alive():
                        started = time.monotonic()
                        client.get(proxy.url + "/health")
                        slowest = max(slowest, time.monotonic() - started)
                call.join()
            finally:
                proxy.stop()
        assert answered == [200]
        assert slowest < 1.0  # the health answer never waited out a commit
