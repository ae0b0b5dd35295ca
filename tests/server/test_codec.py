"""The servers' JSON writer and event loop (server/codec.py), and the strict read of a body (server/request.py)."""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.server import codec
from contextwindow.server.errors import HttpError
from contextwindow.server.limits import ServerLimits
from contextwindow.server.request import _lone_surrogate_escaped, parse_json

HUGE = 2**100 + 7


class TestDumps:
    def test_writes_with_orjson_when_it_is_installed(self) -> None:
        assert ("orjson" if importlib.util.find_spec("orjson") else "json") == codec.WRITER

    @pytest.mark.parametrize(
        "value",
        [
            {"n": HUGE, "m": -HUGE, "text": "naïve 日本語 \U0001f600"},
            {"n": 2**64, "nested": [{"deep": [2**63, -(2**63) - 1]}]},
            {"list": [1, 2.5, -0.0, 1e-7, 1e16, True, None, "\u2028\x1f\x7f"]},
        ],
        ids=["beyond-64-bits", "at-the-edges", "ordinary"],
    )
    def test_reads_back_as_the_value_it_was(self, value: dict[str, Any]) -> None:
        written = codec.dumps(value)
        assert isinstance(written, bytes)
        assert json.loads(written) == value
        assert json.dumps(json.loads(written)) == json.dumps(value)  # the same types, the same floats

    def test_an_integer_beyond_64_bits_is_written_as_its_digits(self) -> None:
        assert codec.dumps({"n": HUGE}) == b'{"n":%d}' % HUGE

    def test_text_is_compact_utf8_not_escaped(self) -> None:
        assert codec.dumps({"a": ["é", 1]}) == '{"a":["é",1]}'.encode()

    def test_a_key_that_is_not_a_string_is_written_as_json_writes_it(self) -> None:
        assert codec.dumps({1: "a", "b": {2: None}}) == b'{"1":"a","b":{"2":null}}'

    def test_a_lone_surrogate_is_written_as_its_escape(self) -> None:
        written = codec.dumps({"a": "x\ud800y", "b": "é"})
        assert json.loads(written) == {"a": "x\ud800y", "b": "é"}
        assert b"\\ud800" in written

    @pytest.mark.parametrize(
        "value", [object(), ServerLimits(), datetime.date(2026, 1, 2)], ids=["object", "dataclass", "date"]
    )
    def test_a_value_json_cannot_write_is_still_refused(self, value: Any) -> None:
        with pytest.raises(TypeError):
            json.dumps(value)
        with pytest.raises(TypeError):
            codec.dumps({"a": value})


class TestLoop:
    def test_is_uvloop_when_it_is_installed(self) -> None:
        assert ("uvloop" if importlib.util.find_spec("uvloop") else "asyncio") == codec.LOOP
        loop = codec.new_event_loop()
        try:
            assert isinstance(loop, asyncio.AbstractEventLoop)
            assert loop.run_until_complete(asyncio.sleep(0, result=7)) == 7
        finally:
            loop.close()


def _is_lone(text: str) -> bool:
    """The truth: the JSON string decodes to text that cannot be encoded."""
    try:
        json.loads(text).encode()
    except UnicodeEncodeError:
        return True
    return False


_PIECES = st.sampled_from(
    ["\\ud83d", "\\ude00", "\\uDBFF", "\\uDC00", "\\\\", "\\n", "a", "é", "\\u0041", "ud800"]
)


class TestLoneSurrogates:
    @given(st.lists(_PIECES, max_size=12))
    def test_the_escape_scan_agrees_with_decoding(self, pieces: list[str]) -> None:
        text = '"' + "".join(pieces) + '"'
        assert _lone_surrogate_escaped(text) == _is_lone(text)

    @pytest.mark.parametrize(
        "raw",
        [b'{"a": "\xed\xa0\x80"}', b'{"a": "\xed\xb8\x80 and more"}'],
        ids=["encoded-high", "encoded-low"],
    )
    def test_an_encoded_surrogate_is_refused_too(self, raw: bytes) -> None:
        assert json.loads(raw)  # Python's own reading lets it through
        with pytest.raises(HttpError, match="not valid utf-8"):
            parse_json(raw, ServerLimits())

    def test_a_byte_order_mark_and_utf16_are_read_as_json_reads_them(self) -> None:
        limits = ServerLimits()
        assert parse_json(b'\xef\xbb\xbf{"a": 1}', limits) == {"a": 1}
        assert parse_json('{"a": "é\\ud83d\\ude00"}'.encode("utf-16"), limits) == {"a": "é\U0001f600"}

    def test_an_escaped_backslash_before_the_letters_is_not_an_escape(self) -> None:
        assert parse_json(b'{"path": "C:\\\\ud800\\\\x"}', ServerLimits()) == {"path": "C:\\ud800\\x"}


class TestServingProcessCollector:
    def test_run_tunes_the_collector_before_it_serves(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import gc

        import uvicorn

        from contextwindow.server import HttpApp, bind, run
        from contextwindow.server.runner import GC_THRESHOLD

        seen: dict[str, Any] = {}

        def serve(self: Any, sockets: Any = None) -> None:
            seen["threshold"] = gc.get_threshold()
            seen["frozen"] = gc.get_freeze_count()

        before = gc.get_threshold()
        monkeypatch.setattr(uvicorn.Server, "run", serve)
        sock = bind("127.0.0.1", 0)
        try:
            run(HttpApp([]), sock)
        finally:
            sock.close()
            gc.unfreeze()
            gc.set_threshold(*before)
        assert seen["threshold"] == (GC_THRESHOLD, before[1], before[2])
        assert seen["frozen"] > 0  # what was alive when serving began is never scanned again
