"""Hostile input for every public boundary, and how a call's outcome is judged.

Shared by the property suite (``tests/test_fuzz_boundaries.py``, a few seconds per boundary in
``make test``) and the long run (``benchmarks/fuzz.py``, in ``make bench``). Each boundary takes
one drawn value and says whether it must be refused (``poisoned``: a value with a known-bad part
planted in it: NaN, ``10**400``, a negative count, a lone surrogate, nesting past the limit, a
wrong type). The outcome of a call is one of:

- ``accepted``: it returned (for a poisoned value: a *silent acceptance*, a defect);
- ``typed``: it raised a :class:`~contextwindow.errors.ContextWindowError`;
- ``bare``: it raised anything else (``RecursionError``, ``TypeError``, ``OverflowError`` ...), a defect;
- ``store_changed``: a store boundary refused the call but the store is not as it was, a defect.
"""

from __future__ import annotations

import base64
import io
import json
import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from PIL import Image as PILImage

from contextwindow.content import (
    Image,
    Message,
    Text,
    ToolResult,
    ToolUse,
    message_to_dict,
    parse_block,
    parse_message,
)
from contextwindow.errors import ContextWindowError
from contextwindow.formats import parse_any
from contextwindow.limits import MAX_DOCUMENT_DEPTH
from contextwindow.pricing import count_tokens
from contextwindow.replay.importers import import_chat
from contextwindow.replay.scenario_file import loads_scenario
from contextwindow.store import Store, open_store
from contextwindow.usage.tracker import Usage
from strategies import anthropic_wire, messages, openai_wire

# ---------------------------------------------------------------------------------------------------
# values

HUGE = 10**400
POISONS: list[Any] = [math.nan, math.inf, -math.inf, HUGE, -1, -(10**20), "\ud800", b"\x00\xff", object()]

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([HUGE, -HUGE, 2**63, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "image/png", "text", "user", "assistant", "tool_use"]),
)
json_like = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def nest(levels: int, leaf: Any = 1, *, as_list: bool = False) -> Any:
    """``levels`` containers around ``leaf``, built iteratively."""
    value = leaf
    for _ in range(levels):
        value = [value] if as_list else {"k": value}
    return value


deep = st.builds(nest, st.integers(MAX_DOCUMENT_DEPTH + 1, 1_500), json_like, as_list=st.booleans())
hostile = st.one_of(json_like, deep)
poison = st.one_of(st.sampled_from(POISONS), deep)

_BLOCK_TYPES = ["text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"]


@st.composite
def wire_blocks(draw: st.DrawFn) -> dict[str, Any]:
    """A block shaped like Anthropic or OpenAI wire content, its fields hostile."""
    kind = draw(st.sampled_from([*_BLOCK_TYPES, "image_url", "input_audio", "file", "banana"]))
    block: dict[str, Any] = {"type": kind}
    for key in draw(
        st.lists(
            st.sampled_from(["text", "source", "id", "name", "input", "content", "tool_use_id", "image_url"]),
            max_size=3,
        )
    ):
        block[key] = draw(hostile)
    return block


@st.composite
def wire_requests(draw: st.DrawFn) -> Any:
    """A request (or bare message list) with the right skeleton and hostile flesh."""
    messages = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["user", "assistant", "system", "tool", "developer"]) | hostile,
                    "content": st.text(max_size=20) | st.lists(wire_blocks(), max_size=3) | hostile,
                }
            ),
            max_size=4,
        )
    )
    if draw(st.booleans()):
        return messages
    request: dict[str, Any] = {"messages": messages}
    for key in draw(
        st.lists(st.sampled_from(["system", "tools", "max_tokens", "model", "metadata"]), max_size=3)
    ):
        request[key] = draw(hostile)
    return request


# ---------------------------------------------------------------------------------------------------
# valid values to plant poison in


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height)).save(out, "PNG")
    return out.getvalue()


PNG = _png(4, 3)


def plant(value: Any, bad: Any, path: list[int]) -> Any:
    """``value`` with ``bad`` put at a place chosen by ``path`` (indices into its containers)."""
    if not path or not isinstance(value, dict | list) or not value:
        return bad
    head, *rest = path
    if isinstance(value, dict):
        key = sorted(value)[head % len(value)]
        return {**value, key: plant(value[key], bad, rest)}
    index = head % len(value)
    return [*value[:index], plant(value[index], bad, rest), *value[index + 1 :]]


VALID_WIRE: list[Any] = [
    {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10},
    {
        "system": "s",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "look"}]},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"q": [1, 2]}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]},
        ],
        "max_tokens": 5,
    },
    {
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
                    }
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "done"},
        ]
    },
]
"""Requests every boundary accepts, in both wire formats, with media, tools and numbers in them."""


@st.composite
def poisoned_wire(draw: st.DrawFn, *, numbers: bool = True) -> Any:
    """A valid request with one known-bad part planted in it, which the boundary must refuse: nesting
    past the document limit anywhere, or (with ``numbers``) a ``max_tokens`` past a float or the
    count bound."""
    base = draw(st.sampled_from(VALID_WIRE))
    if numbers and draw(st.booleans()):
        return {**base, "max_tokens": draw(st.sampled_from([HUGE, 10**13, -1, 0, math.nan, True]))}
    return plant(base, draw(deep), draw(st.lists(st.integers(0, 5), min_size=1, max_size=6)))


# ---------------------------------------------------------------------------------------------------
# boundaries


@dataclass(frozen=True)
class Boundary:
    """One public entry point: ``call`` feeds it a drawn value; ``store`` when it writes to one."""

    name: str
    values: st.SearchStrategy[Any]
    call: Callable[[Any, Store], object]
    poisoned: st.SearchStrategy[Any] | None = None
    """Values it must refuse (a silent acceptance is a defect)."""
    writes: bool = False


def _append(value: Any, store: Store) -> object:
    role, content, metadata, prices = value
    return store.session("s").append(
        Message(role=role, content=content, metadata=metadata),  # type: ignore[arg-type]
        block_prices=prices,
    )


def _append_parsed(value: Any, store: Store) -> object:
    return store.session("s").append(parse_message(value))


def _attach(value: Any, store: Store) -> object:
    data, media_type, meta = value
    return store.session("s").attach(data, media_type, **meta)


def _record(value: Any, store: Store) -> object:
    kind, payload = value
    return store.session("s").record(kind, payload)


def _scenario(value: Any, store: Store) -> object:
    lines = []
    for event in value:
        try:
            lines.append(json.dumps(event, allow_nan=True))
        except (ValueError, TypeError, RecursionError):  # not JSON-able here: a deep or odd line instead
            lines.append(_deep_text(MAX_DOCUMENT_DEPTH * 20))
    return loads_scenario("\n".join(lines))


def _deep_text(levels: int) -> str:
    return "[" * levels + "]" * levels


def _cli(value: Any, store: Store) -> object:
    """``contextwindow count FILE`` and ``show FILE`` on the bytes; judged by the exit code."""
    import contextlib
    import sys

    from contextwindow.cli import main

    data, command = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "request.json"
        path.write_bytes(data)
        argv = ["contextwindow", command, str(path), *(["--model", "gpt-4o"] if command == "count" else [])]
        saved, sys.argv = sys.argv, argv
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
                code = main()
        finally:
            sys.argv = saved
    if code not in (0, 2):
        raise CliFailure(f"exit {code}: {err.getvalue()[-200:]}")
    if code == 2:
        raise CliRefused(err.getvalue().strip())
    return code


class CliRefused(ContextWindowError):
    """The command refused its input with exit 2 and one line: a typed outcome."""


class CliFailure(Exception):
    """The command exited otherwise (1 for an internal error): a bare outcome."""


_bytes_for_cli = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda s: s.encode("utf-16"), st.text(max_size=50)),
    st.builds(lambda n: _deep_text(n).encode(), st.integers(MAX_DOCUMENT_DEPTH + 1, 20_000)),
    st.one_of(wire_requests(), st.deferred(lambda: mutated(valid_wire))).map(
        lambda r: json.dumps(r, default=str).encode("utf-8", "surrogatepass")
    ),
)

_media_types = st.sampled_from(
    ["image/png", "image/jpeg", "application/pdf", "text/plain", "audio/wav", "video/mp4", "png", ""]
) | st.text(max_size=12)
_meta = st.dictionaries(
    st.sampled_from(["width", "height", "duration_seconds", "pages", "token_estimate", "filename"]),
    hostile,
    max_size=3,
)

_COUNT_FIELDS = ["fresh_input", "cache_read", "cache_write", "output", "reasoning"]
_bad_numbers = (
    st.sampled_from([math.nan, math.inf, -math.inf, HUGE, -HUGE, 1.5, "3", b"1", True])
    | st.integers(max_value=-1)
    | st.integers(min_value=10**12 + 1)
)
_poisoned_usage = st.builds(lambda f, p: {f: p}, st.sampled_from(_COUNT_FIELDS), _bad_numbers)


@st.composite
def _poisoned_append(draw: st.DrawFn) -> tuple[Any, ...]:
    blocks = tuple(Text(text=str(k)) for k in range(draw(st.integers(1, 4))))
    kind = draw(st.sampled_from(["price", "surrogate", "metadata"]))
    if kind == "price":
        prices: list[Any] = [1.0] * len(blocks)
        prices[draw(st.integers(0, len(blocks) - 1))] = draw(
            _bad_numbers.filter(lambda p: p is not True and p != 1.5)
        )
        return ("user", blocks, {}, prices)
    if kind == "surrogate":
        return ("user", (Text(text=draw(st.sampled_from(["\ud800", "a\udfff", "\udc00z"]))),), {}, None)
    return ("user", blocks, {"k": [draw(st.sampled_from([math.nan, math.inf, -math.inf]))]}, None)


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims a size and holds no pixels (a decompression bomb's header)."""
    import struct
    import zlib

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"") + chunk(b"IEND", b"")


_poisoned_attach = st.one_of(
    st.tuples(st.just(b""), st.sampled_from(["image/png", "text/plain", "application/pdf"]), st.just({})),
    st.tuples(st.just(PNG), st.sampled_from(["image/jpeg", "image/gif", "image/webp"]), st.just({})),
    st.tuples(
        st.just(PNG),
        st.just("image/png"),
        st.builds(lambda w: {"width": w}, st.integers(1, 10**6).filter(lambda w: w != 4)),
    ),
    st.tuples(
        st.builds(_png_header, st.integers(65_536, 2**31 - 1), st.integers(1, 2**31 - 1)),
        st.just("image/png"),
        st.just({}),
    ),
    st.tuples(
        st.binary(min_size=1, max_size=40).filter(lambda b: not b.startswith(b"\x89PNG")),
        st.just("image/png"),
        st.just({}),
    ),
    st.tuples(
        st.just(b"x"),
        st.just("text/plain"),
        st.builds(lambda p: {"duration_seconds": p}, st.sampled_from([math.nan, -1.0, HUGE, math.inf])),
    ),
)


def mutated(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Valid values, as they are or with one hostile part planted at a random place: reaches the
    code behind the first type check, where a wholly random value never gets."""
    paths = st.lists(st.integers(0, 7), min_size=1, max_size=7)
    return valid | st.builds(plant, valid, hostile, paths)


valid_wire = st.one_of(anthropic_wire(), openai_wire(), st.sampled_from(VALID_WIRE))
valid_message_data = messages().map(message_to_dict)
VALID_SCENARIO: list[dict[str, Any]] = [
    {"type": "meta", "name": "fuzz", "model": "gpt-4o", "window": 8000},
    {"type": "system", "text": "You are a coding agent."},
    {
        "type": "tools",
        "tools": [{"name": "read", "description": "read a file", "input_schema": {"type": "object"}}],
    },
    {"type": "user", "content": "Why does the test fail?"},
    {
        "type": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a.py"}}],
    },
    {"type": "tool_result", "tool_use_id": "t1", "content": "def f(): pass"},
    {"type": "inject", "content": [{"type": "image", "generate": "photo", "width": 64, "height": 48}]},
    {"type": "assistant", "content": "The fixture is stale."},
]


BOUNDARIES: list[Boundary] = [
    Boundary(
        "Message()",
        st.tuples(hostile, hostile, hostile),
        lambda v, _: Message(role=v[0], content=v[1], metadata=v[2]),  # type: ignore[arg-type]
        poisoned=st.tuples(st.just("user"), st.just((Text(text="x"),)), st.builds(lambda p: {"k": p}, deep)),
    ),
    Boundary(
        "ToolUse()",
        st.tuples(hostile, hostile, hostile),
        lambda v, _: ToolUse(id=v[0], name=v[1], input=v[2]),
        poisoned=st.tuples(st.just("t"), st.just("n"), deep.map(lambda d: {"k": d})),
    ),
    Boundary(
        "Usage()",
        st.dictionaries(
            st.sampled_from(["fresh_input", "cache_read", "cache_write", "output", "reasoning"]), hostile
        ),
        lambda v, _: Usage(**v),
        poisoned=_poisoned_usage,
    ),
    Boundary("parse_message", st.one_of(hostile, mutated(valid_message_data)), lambda v, _: parse_message(v)),
    Boundary("parse_block", st.one_of(hostile, wire_blocks()), lambda v, _: parse_block(v)),
    Boundary(
        "Session.append",
        st.tuples(st.sampled_from(["user", "assistant"]) | hostile, hostile, hostile, hostile),
        _append,
        poisoned=_poisoned_append(),
        writes=True,
    ),
    Boundary(
        "Session.append(parsed)",
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant"]), "content": st.lists(wire_blocks(), max_size=3)}
        ),
        _append_parsed,
        writes=True,
    ),
    Boundary(
        "Session.attach",
        st.tuples(st.one_of(st.binary(max_size=64), st.just(PNG), st.just(b"")), _media_types, _meta),
        _attach,
        poisoned=_poisoned_attach,
        writes=True,
    ),
    Boundary(
        "Session.record",
        st.tuples(
            st.sampled_from(["usage", "note", "anchor", "checkpoint", "message", "gossip"]) | hostile, hostile
        ),
        _record,
        poisoned=st.tuples(
            st.just("note"),
            st.builds(lambda p: {"x": p}, st.sampled_from([math.nan, math.inf, "\ud800"]) | deep),
        ),
        writes=True,
    ),
    Boundary(
        "count_tokens",
        st.one_of(hostile, wire_requests(), wire_blocks(), mutated(valid_wire)),
        lambda v, _: count_tokens(v, model="gpt-4o"),
        poisoned=poisoned_wire(),
    ),
    Boundary(
        "parse_any",
        st.one_of(hostile, wire_requests(), mutated(valid_wire)),
        lambda v, _: parse_any(v),
        poisoned=poisoned_wire(),
    ),
    Boundary(
        "import_chat", st.one_of(hostile, wire_requests(), mutated(valid_wire)), lambda v, _: import_chat(v)
    ),
    Boundary(
        "loads_scenario",
        st.lists(
            st.one_of(
                hostile,
                st.fixed_dictionaries(
                    {
                        "type": st.sampled_from(
                            ["meta", "user", "assistant", "tool_result", "inject", "system", "tools"]
                        ),
                        "content": hostile,
                    }
                ),
            ),
            max_size=4,
        )
        | mutated(st.just(VALID_SCENARIO)),
        _scenario,
    ),
    Boundary("cli count/show", st.tuples(_bytes_for_cli, st.sampled_from(["count", "show"])), _cli),
]


# ---------------------------------------------------------------------------------------------------
# judging


def snapshot(store: Store) -> Any:
    out = []
    for sid in store.sessions():
        session = store.session(sid)
        out.append((sid, session.entries(), session.attachments()))
    return out


def seeded_store() -> Store:
    store = open_store(None)
    session = store.session("s")
    session.append(Message.user("hello", Image(ref=session.attach(PNG, "image/png"))))
    session.append(Message.assistant(ToolUse(id="t", name="n", input={"a": 1})))
    session.append(Message.user(ToolResult(tool_use_id="t", content="ok")))
    return store


def outcome(boundary: Boundary, value: Any, store: Store) -> tuple[str, str]:
    """``(accepted | typed | bare | store_changed, what was raised)`` for one call."""
    before = snapshot(store) if boundary.writes else None
    try:
        boundary.call(value, store)
    except ContextWindowError as err:
        if before is not None and snapshot(store) != before:
            return "store_changed", repr(err)[:300]
        return "typed", ""
    except Exception as err:
        return "bare", f"{type(err).__name__}: {str(err)[:300]}"
    return "accepted", ""
