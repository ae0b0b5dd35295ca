"""The proxy parses what a body repeats of the connection's last one only once (server/bodies.py):
the value and the errors are parse_json's, whatever the bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _shared import LazyModule
from contextwindow.server import BackgroundServer
from contextwindow.server import proxy as proxy_module
from contextwindow.server.bodies import Bodies
from contextwindow.server.errors import HttpError
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.limits import ServerLimits
from contextwindow.server.proxy import proxy_app
from contextwindow.server.request import parse_json
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

LIMITS = ServerLimits()


def _outcome(parse: Any, raw: bytes) -> tuple[str, Any]:
    try:
        return "value", parse(raw)
    except HttpError as refused:
        return "refused", (refused.problem, refused.message)


def _same_as_parse_json(bodies: Bodies, raw: bytes, where: Any = "conn") -> Any:
    got = _outcome(lambda r: bodies.parse(r, LIMITS, history="messages", where=where), raw)
    want = _outcome(lambda r: parse_json(r, LIMITS), raw)
    assert got == want, raw
    if got[0] == "value":
        # Equal, and in the same order, all the way down (json.dumps writes keys in order).
        assert json.dumps(got[1]) == json.dumps(want[1])
    return got[1]


def _message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f'step {i}: é ☃ \\ " {i * 7}'}


def _body(messages: list[Any], **members: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 16, "messages": messages, **members}


class TestAHistoryThatGrows:
    def test_is_parsed_from_where_the_last_body_ended_and_shares_its_items(self) -> None:
        bodies = Bodies()
        history: list[Any] = []
        parsed: list[Any] = []
        for i in range(8):
            history.append(_message(i))
            raw = json.dumps(_body(history, system="s", tools=[{"name": "t"}])).encode()
            parsed.append(_same_as_parse_json(bodies, raw))
        assert bodies.continued == 7
        # The items the bodies repeat are the very objects parsed the first time.
        assert all(parsed[-1]["messages"][k] is parsed[k]["messages"][k] for k in range(7))
        # Members after the history are parsed afresh each time.
        assert parsed[-1]["tools"] is not parsed[-2]["tools"]

    def test_on_another_connection_is_parsed_whole(self) -> None:
        bodies = Bodies()
        raw = json.dumps(_body([_message(0)])).encode()
        first = _same_as_parse_json(bodies, raw, where="a")
        again = _same_as_parse_json(bodies, raw, where="b")
        assert bodies.continued == 0
        assert again["messages"][0] is not first["messages"][0]

    def test_a_body_sent_again_as_it_was_is_continued(self) -> None:
        bodies = Bodies()
        raw = json.dumps(_body([_message(0), _message(1)])).encode()
        _same_as_parse_json(bodies, raw)
        _same_as_parse_json(bodies, raw)
        assert bodies.continued == 1


@pytest.mark.parametrize(
    ("first", "then"),
    [
        # The last item a number: more digits extend it, they do not follow it.
        (b'{"messages":[1]}', b'{"messages":[12]}'),
        (b'{"messages":[1]}', b'{"messages":[1.5]}'),
        (b'{"messages":[1]}', b'{"messages":[1e3]}'),
        (b'{"messages":[true]}', b'{"messages":[truex]}'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1},]}'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1},{"b":NaN}]}'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1},{"b":"\\ud800"}]}'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1},{"b":"\\ud83d\\ude00"}]}'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1},' + b"[" * 80 + b"]" * 80 + b"]}"),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1},{"b":"\xff"}]}'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1}],"messages":[]}'),
        (b'{"model":"m","messages":[{"a":1}]}', b'{"model":"m","messages":[{"a":1}],"model":"n"}'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1}]} x'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1}]'),
        (b'{"messages":[{"a":1}]}', b'{"messages":[{"a":1}],"n":123456789012345678901234567890}'),
        (b'{"messages":[]}', b'{"messages":[ ]}'),
        (b'{"messages":[]}', b'{"messages":[{"a":1}]}'),
        (b'{"messages":[ ]}', b'{"messages":[ 1 , 2 ] }\n'),
        (b'{"messages":"text"}', b'{"messages":"text"}'),
        (b'{"other":[1]}', b'{"other":[1,2]}'),
        ('{"messages":["\u2603"]}'.encode("utf-16"), '{"messages":["\u2603",1]}'.encode("utf-16")),
        (b'\xef\xbb\xbf{"messages":[1]}', b'\xef\xbb\xbf{"messages":[1,2]}'),
        (b"[1]", b"[1,2]"),
    ],
)
def test_whatever_follows_is_parsed_as_parse_json_parses_it(first: bytes, then: bytes) -> None:
    bodies = Bodies()
    _same_as_parse_json(bodies, first)
    _same_as_parse_json(bodies, then)


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_value = st.recursive(
    _leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_members = st.dictionaries(st.sampled_from(["model", "system", "tools", "stream", "x"]), _value, max_size=3)


@settings(max_examples=150, deadline=None)
@given(
    before=_members,
    after=_members,
    items=st.lists(_value, max_size=6),
    grow=st.lists(st.lists(_value, max_size=3), min_size=1, max_size=4),
    indent=st.sampled_from([None, 1]),
    ascii_only=st.booleans(),
)
def test_a_growing_history_parses_as_parse_json_parses_it(
    before: dict[str, Any],
    after: dict[str, Any],
    items: list[Any],
    grow: list[list[Any]],
    indent: int | None,
    ascii_only: bool,
) -> None:
    bodies = Bodies()
    history = list(items)
    for more in [[], *grow]:
        history += more
        body = {**before, "messages": history, **{k: v for k, v in after.items() if k not in before}}
        _same_as_parse_json(bodies, json.dumps(body, indent=indent, ensure_ascii=ascii_only).encode())


@settings(max_examples=100, deadline=None)
@given(first=st.binary(max_size=40), then=st.binary(max_size=40))
def test_any_bytes_after_a_body_parse_as_parse_json_parses_them(first: bytes, then: bytes) -> None:
    bodies = Bodies()
    kept = b'{"model":"m","messages":[{"a":1},"b",2' + first
    _same_as_parse_json(bodies, b'{"model":"m","messages":[{"a":1},"b",2]}')
    _same_as_parse_json(bodies, kept + then)


class TestWhatIsKept:
    def test_is_bounded_in_connections(self) -> None:
        bodies = Bodies(entries=3)
        for c in range(10):
            bodies.parse(json.dumps(_body([_message(c)])).encode(), LIMITS, history="messages", where=c)
        assert len(bodies) == 3

    def test_is_bounded_in_bytes(self) -> None:
        bodies = Bodies(text_bytes=10_000)
        big = [{"role": "user", "content": "x" * 3000}]
        for c in range(10):
            bodies.parse(json.dumps(_body(big)).encode(), LIMITS, history="messages", where=c)
        assert len(bodies) <= 3

    def test_nothing_without_a_connection(self) -> None:
        bodies = Bodies()
        bodies.parse(json.dumps(_body([_message(0)])).encode(), LIMITS, history="messages", where=None)
        assert len(bodies) == 0


@pytest.fixture
def kept_bodies(monkeypatch: pytest.MonkeyPatch) -> list[Bodies]:
    made: list[Bodies] = []

    class Spied(Bodies):
        def __init__(self, **bounds: Any) -> None:
            super().__init__(**bounds)
            made.append(self)

    monkeypatch.setattr(proxy_module, "Bodies", Spied)
    return made


class TestThroughTheProxy:
    """Agents on the official SDKs through the guarded proxy, folding on a 16k window: each body's
    repeated items are the objects parsed before, and nothing the proxy does edits them (else the
    next body, sharing them, would be something the agent never sent)."""

    @pytest.fixture
    def kept(self, kept_bodies: list[Bodies]) -> list[Bodies]:
        return kept_bodies

    @staticmethod
    def _unedited(bodies: Bodies) -> None:
        for entry in bodies._kept.values():
            assert json.loads(entry.prefix + b"]}") == {**dict(entry.leading), entry.key: list(entry.items)}

    @pytest.mark.parametrize(
        ("sdk", "compaction"), [("anthropic", "local"), ("anthropic", "auto"), ("openai", "local")]
    )
    def test_repeated_items_are_shared_and_never_edited(
        self, sdk: str, compaction: Any, kept: list[Bodies]
    ) -> None:
        settings = LocalSettings(effective_window=16_000, default_model="claude-haiku-4-5")
        with (
            LocalServer(LocalModel(settings)) as upstream,
            BackgroundServer(
                proxy_app(upstream.url, transform=GuardTransform(open_store(":memory:")))
            ) as proxy,
        ):
            [bodies] = kept
            history: list[dict[str, Any]] = []
            if sdk == "anthropic":
                client: Any = anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0)
            else:
                client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
                history.append({"role": "system", "content": "You are a careful coding agent."})
            with client:
                for turn in range(12):
                    listing = "\n".join(
                        f"src/m{turn}/f{i}.py:{i}: def h{turn}_{i}(): ..." for i in range(150)
                    )
                    history.append({"role": "user", "content": f"turn {turn}:\n{listing}"})
                    if sdk == "anthropic":
                        reply = client.messages.create(
                            model="claude-haiku-4-5", max_tokens=256, messages=history
                        )
                        text = reply.content[0].text
                    else:
                        reply = client.chat.completions.create(
                            model="gpt-4o", max_tokens=256, messages=history
                        )
                        text = reply.choices[0].message.content
                    history.append({"role": "assistant", "content": text})
                    self._unedited(bodies)
        assert bodies.continued >= 9  # one connection: every body after the first (a retry or two aside)


def test_the_bodies_kept_are_bounded_by_the_conversation_cache(kept_bodies: list[Bodies]) -> None:
    transform = GuardTransform(open_store(":memory:"), cache_bytes=4 * 1024 * 1024)
    proxy_app("http://127.0.0.1:9", transform=transform)
    [bodies] = kept_bodies
    assert bodies.text_bytes == transform.kept_body_bytes < 4 * 1024 * 1024 // 10
