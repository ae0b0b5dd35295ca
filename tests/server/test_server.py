"""The HTTP stack under attack: every refusal in the API's own shape, and the server still serving after."""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _shared import encoding as tiktoken_encoding
from contextwindow.content import Message, Request, Text, ToolResult, ToolUse
from contextwindow.server import MIB, PARSERS, ServerLimits, api_of, error_body
from contextwindow.server.request import json_depth_exceeds
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from contextwindow.testing.counting import CountMemo, count_in_pieces
from contextwindow.testing.sessions import SessionStream, SessionStreams, retained_bytes
from server_support import ANTHROPIC_BODY, access_lines, assert_serving, exchange, post, post_head, read_reply

LIMITS = ServerLimits(
    max_body_bytes=2 * MIB,
    inflight_body_bytes=4 * MIB,
    read_timeout=1.0,
    idle_timeout=0.5,
    queue_timeout=0.5,
    max_concurrency=4,
    max_connections=64,
)


@pytest.fixture(scope="module", params=PARSERS)
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    # Every attack, on each HTTP parser the server can run on (httptools by default, h11 without it).
    with LocalServer(
        LocalModel(LocalSettings(window=1_000_000)), limits=LIMITS, http=request.param
    ) as running:
        yield running


def openai_body(**extra: object) -> bytes:
    return json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], **extra}).encode()


class TestMalformedHttp:
    @pytest.mark.parametrize(
        "data",
        [
            post_head(content_length="abc") + ANTHROPIC_BODY,
            post_head(content_length="-1") + ANTHROPIC_BODY,
            post_head(content_length="12, 13") + ANTHROPIC_BODY,
            b"\x00\x01 not http\r\n\r\n",
            b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n" + b"x-pad: " + b"a" * 100_000 + b"\r\n\r\n",
        ],
        ids=[
            "content-length-abc",
            "content-length-negative",
            "content-length-list",
            "garbage",
            "huge-header",
        ],
    )
    def test_is_answered_400_in_the_merged_error_shape_and_closed(
        self, server: LocalServer, data: bytes
    ) -> None:
        reply = exchange(server.port, data)
        assert reply.status == 400
        assert reply.closed
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and "Malformed HTTP" in error["message"]
        assert_serving(server.port)

    def test_a_head_that_never_ends_is_refused_once_it_passes_the_limit_not_held(
        self, server: LocalServer
    ) -> None:
        # The head's bytes are bounded as they arrive, not once it is whole: without that the server
        # would hold them all and answer only the read timeout's 408.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            conn.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")
            started = time.monotonic()
            try:
                for n in range(200):
                    conn.sendall(b"x-pad-%d: %s\r\n" % (n, b"a" * 1000))
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = read_reply(conn, started)
        assert reply.status == 400 and reply.closed
        assert reply.seconds < LIMITS.read_timeout
        assert_serving(server.port)


class TestBodySize:
    def test_a_claimed_length_of_a_terabyte_is_refused_413_before_any_body_is_sent(
        self, server: LocalServer
    ) -> None:
        reply = exchange(server.port, post_head(content_length=str(10**12)))
        assert reply.status == 413 and reply.closed
        assert reply.json() == {
            "type": "error",
            "error": {"type": "request_too_large", "message": reply.json()["error"]["message"]},
        }
        assert reply.seconds < LIMITS.read_timeout  # answered from the header, nothing was waited for
        assert_serving(server.port)

    def test_a_chunked_body_is_refused_as_soon_as_it_passes_the_limit(self, server: LocalServer) -> None:
        chunk = b"x" * 65536
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            conn.sendall(post_head(extra="transfer-encoding: chunked\r\n"))
            started = time.monotonic()
            sent = 0
            try:
                while sent < 3 * LIMITS.max_body_bytes:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    sent += len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = read_reply(conn, started)
        assert reply.status == 413
        assert sent <= LIMITS.max_body_bytes + 4 * MIB  # it stopped reading near the limit
        assert_serving(server.port)

    def test_the_openai_routes_answer_in_openais_shape(self, server: LocalServer) -> None:
        reply = exchange(server.port, post_head("/v1/chat/completions", content_length=str(10**12)))
        assert reply.status == 413
        assert reply.json()["error"]["code"] == "request_too_large"
        assert "type" not in reply.json()


class TestTimeouts:
    def test_a_body_shorter_than_its_length_gets_408_within_the_read_timeout(
        self, server: LocalServer
    ) -> None:
        reply = exchange(server.port, post_head(content_length="1000") + ANTHROPIC_BODY)
        assert reply.status == 408 and reply.closed
        assert LIMITS.read_timeout * 0.9 <= reply.seconds < LIMITS.read_timeout + 2
        assert reply.json()["error"]["type"] == "invalid_request_error"
        assert_serving(server.port)

    def test_a_head_never_finished_gets_408_and_the_connection_closed(self, server: LocalServer) -> None:
        reply = exchange(server.port, b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")
        assert reply.status == 408 and reply.closed
        assert reply.seconds < LIMITS.read_timeout + 2

    def test_fifty_slow_clients_do_not_stop_a_fast_one(self, server: LocalServer) -> None:
        slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(50)]
        try:
            for conn in slow:
                conn.sendall(post_head(content_length="1000") + b"{")
            started = time.monotonic()
            assert_serving(server.port)
            assert time.monotonic() - started < 2.0
        finally:
            for conn in slow:
                conn.close()

    def test_an_idle_connection_outlives_the_clients_own_keep_alive(self) -> None:
        # The client drops an idle connection first: the server closing at the same moment races the
        # client's next request on it (a ReadError for the agent).
        assert ServerLimits().idle_timeout > httpx.Limits().keepalive_expiry + 5

    def test_an_idle_keep_alive_connection_is_closed(self, server: LocalServer) -> None:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
            conn.sendall(post("/v1/messages", ANTHROPIC_BODY))
            reply = read_reply(conn, time.monotonic())
            assert reply.status == 200
            conn.settimeout(LIMITS.idle_timeout + 3)
            assert conn.recv(1) == b""


class TestMalformedJson:
    @pytest.mark.parametrize(
        ("path", "body", "needle"),
        [
            ("/v1/messages", b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}", "nests deeper"),
            ("/v1/messages", b"{" * 100_000, "nests deeper"),
            ("/v1/messages", b'{"model": ', "not valid JSON"),
            ("/v1/messages", b"[1, 2]", "JSON object"),
            ("/v1/messages", b"\xff\xfe\x00", "not valid JSON"),
            ("/v1/messages", ANTHROPIC_BODY.replace(b'"max_tokens": 10', b'"max_tokens": NaN'), "NaN"),
            ("/v1/messages", b'{"model": "m", "temperature": -Infinity}', "-Infinity"),
            ("/v1/messages", b'{"model": "m", "system": "a\\ud800b"}', "lone surrogate"),
            ("/v1/messages", b'{"model": "m", "system": "\\uDC00"}', "lone surrogate"),
            ("/v1/chat/completions", openai_body(stream=True, stream_options="yes"), "stream_options"),
            ("/v1/chat/completions", openai_body(stream=True, stream_options=[1]), "stream_options"),
            ("/v1/chat/completions", openai_body(stream="yes"), "stream"),
        ],
        ids=[
            "nested-1000",
            "open-braces",
            "truncated",
            "array",
            "not-utf8",
            "nan",
            "infinity",
            "lone-high-surrogate",
            "lone-low-surrogate",
            "options-str",
            "options-list",
            "stream-str",
        ],
    )
    def test_is_answered_400_in_the_routes_shape(
        self, server: LocalServer, path: str, body: bytes, needle: str
    ) -> None:
        reply = exchange(server.port, post(path, body))
        assert reply.status == 400
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and needle in error["message"]
        assert ("param" in error) == (path == "/v1/chat/completions")
        assert_serving(server.port)

    @pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
    def test_a_body_that_is_not_declared_json_is_answered_415(
        self, server: LocalServer, content_type: str | None
    ) -> None:
        reply = exchange(server.port, post("/v1/messages", ANTHROPIC_BODY, content_type=content_type))
        assert reply.status == 415
        assert reply.json()["error"]["type"] == "invalid_request_error"

    def test_json_with_a_charset_is_accepted(self, server: LocalServer) -> None:
        reply = exchange(
            server.port, post("/v1/messages", ANTHROPIC_BODY, content_type="application/json; charset=utf-8")
        )
        assert reply.status == 200


class TestLatency:
    def test_a_keep_alive_client_is_answered_without_a_delayed_ack_stall(self, server: LocalServer) -> None:
        # A response written as head then body stalls 40 ms on the client's delayed ACK unless the
        # server's sockets have TCP_NODELAY: sequential requests would take about 44 ms each.
        with httpx.Client(base_url=server.url) as client:
            times = []
            for _ in range(20):
                started = time.perf_counter()
                client.post(
                    "/v1/messages", content=ANTHROPIC_BODY, headers={"content-type": "application/json"}
                )
                times.append(time.perf_counter() - started)
        assert sorted(times)[10] < 0.02


class TestRoutes:
    def test_the_health_endpoint_says_ok_and_how_busy(self, server: LocalServer) -> None:
        health = httpx.get(server.url + "/health").json()
        assert health["status"] == "ok"
        assert health["active_requests"] == 0 and health["inflight_body_bytes"] == 0

    def test_an_unknown_path_is_404_and_a_wrong_method_405_in_the_apis_shape(
        self, server: LocalServer
    ) -> None:
        missing = httpx.post(server.url + "/v1/nothing", json={})
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"
        wrong = httpx.get(server.url + "/v1/messages")
        assert wrong.status_code == 405 and wrong.json()["type"] == "error"


class TestConcurrency:
    def test_requests_past_the_slots_wait_then_get_overloaded_in_the_apis_shape(self) -> None:
        limits = ServerLimits(max_concurrency=2, queue_timeout=0.3, read_timeout=5)
        model = LocalModel(LocalSettings(delay_seconds=1.0))
        with LocalServer(model, limits=limits) as running:
            replies: list[httpx.Response] = []

            def call() -> None:
                replies.append(
                    httpx.post(
                        running.url + "/v1/messages",
                        content=ANTHROPIC_BODY,
                        headers={"content-type": "application/json"},
                        timeout=10,
                    )
                )

            threads = [threading.Thread(target=call) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        statuses = sorted(r.status_code for r in replies)
        assert statuses == [200, 200, 529, 529]
        refused = next(r for r in replies if r.status_code == 529)
        assert refused.json()["error"]["type"] == "overloaded_error"
        assert refused.headers["retry-after"] == "1"

    def test_connections_past_the_limit_get_503_and_are_closed(self) -> None:
        limits = ServerLimits(max_connections=3)
        with LocalServer(LocalModel(), limits=limits) as running:
            held = [socket.create_connection(("127.0.0.1", running.port)) for _ in range(3)]
            try:
                time.sleep(0.2)
                reply = exchange(running.port, post("/v1/messages", ANTHROPIC_BODY))
                assert reply.status == 503 and reply.closed
            finally:
                for conn in held:
                    conn.close()
            time.sleep(0.2)
            assert_serving(running.port)


class TestClientGone:
    def test_a_client_leaving_mid_body_prints_nothing_and_the_server_keeps_serving(
        self, server: LocalServer, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
    ) -> None:
        with caplog.at_level(logging.INFO), access_lines() as caught:
            for _ in range(5):
                conn = socket.create_connection(("127.0.0.1", server.port))
                conn.sendall(post_head(content_length="5000") + b'{"model":')
                conn.close()
            assert_serving(server.port)
            caught.wait('"status":499')
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert "Traceback" not in capfd.readouterr().err
        gone = [json.loads(line) for line in caught.lines]
        assert any(line["status"] == 499 for line in gone)


class TestAccessLog:
    def test_one_json_line_per_request_without_headers_or_bodies(self, server: LocalServer) -> None:
        secret_key, secret_prompt = "sk-ant-SECRET-KEY-123", "PROMPT-SECRET-456"
        body = {
            "model": "claude-haiku-4-5",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": secret_prompt}],
        }
        raw = json.dumps(body).encode()
        with access_lines() as caught:
            answered = httpx.post(
                server.url + "/v1/messages?key=QUERY-SECRET",
                content=raw,
                headers={
                    "content-type": "application/json",
                    "x-api-key": secret_key,
                    "authorization": f"Bearer {secret_key}",
                },
            )
            lines = caught.wait('"status":200')
        assert answered.status_code == 200
        ours = [json.loads(x) for x in lines if '"status":200' in x]  # other tests' leavers may log too
        assert len(ours) == 1, lines
        line = ours[0]
        assert line["method"] == "POST" and line["path"] == "/v1/messages"
        assert line["bytes_in"] == len(raw) and line["bytes_out"] > 0
        assert set(line) == {"server", "method", "path", "status", "bytes_in", "bytes_out", "ms"}
        for secret in (secret_key, secret_prompt, "QUERY-SECRET"):
            assert all(secret not in x for x in lines)


class TestErrorShapes:
    @pytest.mark.parametrize(
        ("path", "api"),
        [
            ("/v1/messages", "anthropic"),
            ("/v1/messages/count_tokens", "anthropic"),
            ("/v1/chat/completions", "openai"),
            ("/v1/responses", "openai"),
            ("/v1/models", "any"),
        ],
    )
    def test_a_path_belongs_to_its_api(self, path: str, api: str) -> None:
        assert api_of(path) == api

    def test_the_merged_shape_reads_as_both_apis(self) -> None:
        status, body = error_body("any", "invalid_request_error", "bad")
        assert status == 400
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
        assert body["error"]["message"] == "bad" and body["error"]["param"] is None

    def test_overloaded_is_529_for_anthropic_and_503_for_openai(self) -> None:
        assert error_body("anthropic", "overloaded_error", "x")[0] == 529
        assert error_body("openai", "overloaded_error", "x")[0] == 503


def _nested(depth: int) -> st.SearchStrategy[object]:
    leaves = st.one_of(st.integers(), st.text(alphabet='[]{}"\\ab', max_size=5), st.none())
    return st.recursive(
        leaves,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=depth,
    )


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


def _scanned_depth(raw: bytes) -> int:
    """The reference: a character-by-character scan of JSON text, strings and escapes skipped."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in raw:
        char = chr(byte)
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


_TRICKY_TEXT = st.text(alphabet='[]{}"\\/ubnrtf a\n\u00e9\u2028', max_size=8)
"""Strings full of what a scan could mistake for structure: brackets, quotes, backslashes, the letters
of escapes, a character ``ensure_ascii`` writes as ``\\u`` and one it does not."""


def _tricky(leaves: int) -> st.SearchStrategy[object]:
    return st.recursive(
        st.one_of(st.integers(), _TRICKY_TEXT, st.none(), st.booleans(), st.floats(allow_nan=False)),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY_TEXT, inner, max_size=4),
        max_leaves=leaves,
    )


class TestJsonDepth:
    @settings(max_examples=200, deadline=None)
    @given(value=_nested(40), limit=st.integers(min_value=0, max_value=8))
    def test_matches_the_real_nesting_whatever_the_strings_hold(self, value: object, limit: int) -> None:
        raw = json.dumps(value).encode()
        assert json_depth_exceeds(raw, limit) == (_depth(value) > limit)

    @settings(max_examples=300, deadline=None)
    @given(
        value=_tricky(60),
        limit=st.integers(min_value=0, max_value=10),
        ascii_only=st.booleans(),
        indent=st.sampled_from([None, 0, 2]),
    )
    def test_agrees_with_a_character_scan_on_any_json_text(
        self, value: object, limit: int, ascii_only: bool, indent: int | None
    ) -> None:
        raw = json.dumps(value, ensure_ascii=ascii_only, indent=indent).encode()
        assert json_depth_exceeds(raw, limit) == (_scanned_depth(raw) > limit)
        assert _scanned_depth(raw) == _depth(value)  # the reference itself reads the real nesting

    @pytest.mark.parametrize(
        ("raw", "deepest"),
        [
            (rb'["\\", [["\\\"[[[["]]]', 3),  # an escaped backslash, then an escaped quote
            (rb'[["\u005c"], ["\"]"], {"k]": "{"}]', 2),  # \u005c is a backslash, written as an escape
            (b'[[["' + b"\\\\" * 999 + b'\\"]"]]]', 3),  # a run of escaped backslashes, a quote
            (b"[" * 70 + b"]" * 70, 70),
            (b'{"a": ' * 65 + b"1" + b"}" * 65, 65),
        ],
        ids=["escaped-backslash-then-quote", "unicode-escape", "backslash-runs", "arrays-70", "objects-65"],
    )
    def test_known_answers(self, raw: bytes, deepest: int) -> None:
        assert _scanned_depth(raw) == deepest and json.loads(raw)
        assert json_depth_exceeds(raw, deepest - 1) and not json_depth_exceeds(raw, deepest)

    def test_its_python_level_work_does_not_grow_with_the_body(self) -> None:
        # The check must cost a few passes of C, not a Python step per string or bracket: the number
        # of calls it makes is the same for a body of 10 strings and one of 10,000.
        def calls(body: bytes) -> int:
            seen = [0]

            def count(frame: object, event: str, arg: object) -> None:
                seen[0] += event == "c_call"

            sys.setprofile(count)
            try:
                assert not json_depth_exceeds(body, 8)
            finally:
                sys.setprofile(None)
            return seen[0]

        def body(n: int) -> bytes:
            return json.dumps([[[{"k": 'a\\"b[c]'}] for _ in range(n)]]).encode()

        assert calls(body(10)) == calls(body(10_000))


class TestMemoryBounds:
    def test_the_count_memo_stays_within_its_bytes_for_distinct_megabyte_texts(self) -> None:
        memo = CountMemo(len, max_bytes=4096)  # room for about 20 entries
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            for i in range(60):  # 60 distinct 1 MB texts, each dropped once counted
                assert memo(f"{i:04d}" * 250_000) == 1_000_000
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        assert memo.bytes <= memo.max_bytes and 0 < len(memo) < 60
        assert held < 64 * 1024  # a digest per text, never the 60 MB of texts

    def test_the_count_memo_still_answers_a_repeated_text_from_memory(self) -> None:
        calls: list[str] = []
        memo = CountMemo(lambda text: calls.append(text) or len(text), max_bytes=64 * 1024)
        assert memo("a" * 1000) == memo("a" * 1000) == 1000
        assert len(calls) == 1

    def test_sessions_stay_within_their_bytes_when_each_sends_a_megabyte(self) -> None:
        streams = SessionStreams(max_bytes=8 * MIB)
        for i in range(60):
            request = Request(messages=(Message.user(f"{i}" + "x" * MIB),))
            streams.put(f"session-{i}", SessionStream(request=request, reply=Message.assistant("ok")))
            assert streams.bytes <= streams.max_bytes
        assert 1 <= len(streams) <= 8
        assert streams.get("session-59") is not None and streams.get("session-0") is None

    def test_retained_bytes_counts_the_text_a_request_holds(self) -> None:
        request = Request(messages=(Message.user("x" * 100_000), Message.assistant("y" * 50_000)))
        assert 150_000 <= retained_bytes(request) <= 152_000

    def test_the_local_models_sessions_are_bounded_and_cumulative_totals_still_run(self) -> None:
        model = LocalModel(LocalSettings(usage="cumulative"), session_bytes=2 * MIB)
        for i in range(20):
            request = Request(model="gpt-4o", messages=(Message.user(f"{i} " + "word " * 100_000),))
            model.handle(request, wire="openai", max_tokens=10, session=f"s{i}")
        assert model._streams.bytes <= 2 * MIB
        # a stream that continues still adds to its own total
        model.enqueue(Message.assistant(ToolUse(id="t1", name="ls", input={})))
        first = Request(model="gpt-4o", messages=(Message.user("start"),))
        one = model.handle(first, wire="anthropic", max_tokens=10, session="agent")
        assert not isinstance(one, type(None)) and hasattr(one, "message")
        follow = Request(
            model="gpt-4o",
            messages=(
                *first.messages,
                one.message,  # type: ignore[union-attr]
                Message(role="user", content=(ToolResult(tool_use_id="t1", content="a b"),)),
            ),
        )
        two = model.handle(follow, wire="anthropic", max_tokens=10, session="agent")
        assert two.reported.prompt == one.input_tokens + two.input_tokens  # type: ignore[union-attr]


class TestLocalServerStillWorks:
    def test_count_tokens_answers_the_models_count(self, server: LocalServer) -> None:
        body = {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": "hello there"}]}
        answered = httpx.post(server.url + "/v1/messages/count_tokens", json=body)
        expected = server.model.count(
            Request(model="claude-haiku-4-5", messages=(Message.user("hello there"),))
        )
        assert answered.json() == {"input_tokens": expected.input_tokens}

    def test_a_megabyte_request_is_counted(self, server: LocalServer) -> None:
        text = "word " * 200_000
        body = {"model": "claude-haiku-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": text}]}
        answered = httpx.post(server.url + "/v1/messages", json=body, timeout=30)
        assert answered.status_code == 200
        expected = server.model.count(Request(model="claude-haiku-4-5", messages=(Message.user(text),)))
        assert int(answered.headers["x-contextwindow-input-tokens"]) == expected.input_tokens
        assert isinstance(Text(text="x"), Text)


_PIECES_ALPHABET = st.sampled_from(
    [
        " ",
        "  ",
        "\n",
        "\t",
        "a",
        "Z",
        "é",
        "ß",
        "1",
        "42",
        ".",
        ",",
        "'s",
        "/",
        "-",
        "(",
        "漢",
        "字",
        "。",
        "😀",
        "\u00a0",
        "x y",
    ]
)


class TestCountingInPieces:
    @pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
    @settings(max_examples=150, deadline=None)
    @given(
        parts=st.lists(_PIECES_ALPHABET, min_size=1, max_size=200),
        piece=st.integers(min_value=1, max_value=40),
    )
    def test_the_pieces_add_up_to_the_whole_count(self, encoding: str, parts: list[str], piece: int) -> None:
        enc = tiktoken_encoding(encoding)
        text = "".join(parts)
        assert count_in_pieces(enc.encode_ordinary, text, piece) == len(enc.encode_ordinary(text))

    def test_a_megabyte_of_prose_counts_the_same_in_pieces(self) -> None:
        enc = tiktoken_encoding("o200k_base")
        text = " ".join(f"word{i % 977}, and (more) text." for i in range(40_000))
        assert len(text) > 1_000_000
        assert count_in_pieces(enc.encode_ordinary, text) == len(enc.encode_ordinary(text))
