"""Hypothesis strategies for canonical content and both wire formats, shared by every test file.

- ``blocks()`` / ``messages()``: arbitrary *valid* canonical values (for the edge round trip).
- ``anthropic_canonical()`` / ``openai_canonical()``: canonical requests made only of what each wire
  format can express, with the bytes of their attachments, so canonical → render → parse is exact.
- ``anthropic_wire()`` / ``openai_wire()``: wire request bodies as a client would send them, with real
  media bytes (tiny PNG, JPEG, GIF, PDF, WAV) inline, for wire → parse → render → parse stability.
"""

from __future__ import annotations

import base64
import io
import wave
from typing import Any

from hypothesis import strategies as st
from PIL import Image as PILImage

from contextwindow.attachments import make_ref
from contextwindow.content import (
    AttachmentRef,
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    RedactedThinking,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolSpec,
    ToolUse,
    Video,
)


def _image(size: tuple[int, int], fmt: str) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", size, (10, 120, 200)).save(buf, fmt)
    return buf.getvalue()


def _wav(seconds: float, rate: int = 8000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * int(seconds * rate))
    return buf.getvalue()


PDF = b"%PDF-1.4\n1 0 obj << /Type /Pages /Count 2 >>\n2 0 obj << /Type /Page >>\n3 0 obj << /Type /Page >>\n%%EOF"

# (bytes, media type, what sniffing must find)
IMAGES: tuple[tuple[bytes, str, tuple[int, int]], ...] = (
    (_image((1, 1), "PNG"), "image/png", (1, 1)),
    (_image((37, 5), "PNG"), "image/png", (37, 5)),
    (_image((64, 48), "JPEG"), "image/jpeg", (64, 48)),
    (_image((9, 20), "GIF"), "image/gif", (9, 20)),
    (_image((12, 12), "WEBP"), "image/webp", (12, 12)),
)
WAV = _wav(0.25)
AUDIO: tuple[tuple[bytes, str], ...] = ((WAV, "audio/wav"), (b"ID3\x03\x00fake-mp3-frames", "audio/mpeg"))
DOCUMENTS: tuple[tuple[bytes, str], ...] = ((PDF, "application/pdf"),)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# ---------------------------------------------------------------------------------------------------
# plain values

texts = st.text(max_size=40)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=12)
urls = names.map(lambda n: f"https://example.com/{n}.png")

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    """Finite JSON values (no NaN: JSON cannot carry it and NaN ≠ NaN)."""
    return st.recursive(
        _scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
        max_leaves=max_leaves,
    )


json_objects = st.dictionaries(texts, json_values(), max_size=4)


# ---------------------------------------------------------------------------------------------------
# canonical values, arbitrary but valid

stamps = st.none() | st.floats(min_value=0, max_value=1e9, allow_nan=False) | st.integers(0, 10**6)


@st.composite
def attachment_refs(draw: st.DrawFn) -> AttachmentRef:
    digest = draw(st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))
    optional_int = st.none() | st.integers(min_value=1, max_value=1_000_000)
    return AttachmentRef(
        id=f"att_{digest[:32]}",
        sha256=digest,
        media_type=draw(st.sampled_from(["image/png", "image/jpeg", "application/pdf", "audio/wav"])),
        size_bytes=draw(st.integers(min_value=0, max_value=2**40)),
        width=draw(optional_int),
        height=draw(optional_int),
        duration_seconds=draw(st.none() | st.floats(min_value=0, max_value=3600, allow_nan=False)),
        pages=draw(st.none() | st.integers(min_value=1, max_value=10_000)),
        token_estimate=draw(stamps.map(lambda s: None if s is None else float(s))),
    )


def _ref_or_url(draw: st.DrawFn) -> dict[str, Any]:
    return {"ref": draw(attachment_refs())} if draw(st.booleans()) else {"url": draw(urls)}


@st.composite
def media_blocks(draw: st.DrawFn) -> Block:
    kind = draw(st.sampled_from(["image", "generated_image", "document", "audio", "video"]))
    if kind == "image":
        detail = draw(st.none() | st.sampled_from(["auto", "low", "high", "original"]))
        return Image(detail=detail, **_ref_or_url(draw))
    if kind == "generated_image":
        return GeneratedImage(ref=draw(attachment_refs()), prompt=draw(st.none() | texts))
    if kind == "document":
        opt = st.none() | texts
        return Document(title=draw(opt), context=draw(opt), filename=draw(opt), **_ref_or_url(draw))
    if kind == "audio":
        return Audio(ref=draw(attachment_refs()))
    return Video(ref=draw(attachment_refs()))


text_blocks = texts.map(lambda t: Text(text=t))
tool_uses = st.builds(lambda i, n, inp: ToolUse(id=i, name=n, input=inp), names, names, json_objects)
thinkings = st.builds(
    lambda t, s, e: Thinking(thinking=t, signature=s, token_estimate=e),
    texts,
    st.none() | texts.filter(bool),
    stamps.map(lambda s: None if s is None else float(s)),
)
redacted = st.builds(lambda d: RedactedThinking(data=d), texts)
tool_results = st.builds(
    lambda i, c, e: ToolResult(tool_use_id=i, content=c, is_error=e),
    names,
    texts | st.lists(text_blocks | media_blocks(), max_size=3).map(tuple),
    st.booleans(),
)


def blocks() -> st.SearchStrategy[Block]:
    """Any valid canonical block."""
    return st.one_of(text_blocks, media_blocks(), tool_uses, tool_results, thinkings, redacted)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    """Any valid canonical message, id, time and metadata included."""
    created = draw(st.none() | st.datetimes(timezones=st.just(__import__("datetime").timezone.utc)))
    return Message(
        role=draw(st.sampled_from(["user", "assistant"])),
        content=tuple(draw(st.lists(blocks(), max_size=5))),
        id=draw(st.none() | names),
        created_at=created,
        metadata=draw(json_objects),
    )


# ---------------------------------------------------------------------------------------------------
# canonical requests a wire format can express exactly, with their attachment bytes


class _Store:
    """Attachment bytes a generated canonical request refers to (what a ledger would hold)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def ref(self, data: bytes, media_type: str) -> AttachmentRef:
        ref = make_ref(data, media_type)
        self.data[ref.id] = data
        return ref


def _image_ref(draw: st.DrawFn, store: _Store) -> AttachmentRef:
    data, media_type, _ = draw(st.sampled_from(IMAGES))
    return store.ref(data, media_type)


tool_specs = st.builds(
    lambda n, d, s: ToolSpec(name=n, description=d, input_schema=s), names, texts, json_objects
)
_params_keys = st.sampled_from(["temperature", "top_p", "stop_sequences", "metadata", "stream"])


@st.composite
def anthropic_canonical(draw: st.DrawFn) -> tuple[Request, dict[str, bytes]]:
    """A canonical request made only of what the Messages API expresses, and its attachment bytes."""
    store = _Store()

    def media(nested: bool) -> Block:
        kind = draw(st.sampled_from(["image-ref", "image-url", "pdf", "text-doc", "doc-url"]))
        opt = st.none() | texts
        if kind == "image-ref":
            return Image(ref=_image_ref(draw, store))
        if kind == "image-url":
            return Image(url=draw(urls))
        if kind == "pdf":
            return Document(ref=store.ref(PDF, "application/pdf"), title=draw(opt), context=draw(opt))
        if kind == "text-doc":
            body = draw(texts.filter(bool)).encode("utf-8")  # empty media are refused
            return Document(ref=store.ref(body, "text/plain"), title=draw(opt), context=draw(opt))
        return Document(url=draw(urls), title=draw(opt), context=draw(opt))

    def block(role: str) -> Block:
        kinds = ["text", "media"] + (["tool_result"] if role == "user" else ["tool_use", "thinking"])
        kind = draw(st.sampled_from(kinds + (["redacted"] if role == "assistant" else [])))
        if kind == "text":
            return draw(text_blocks)
        if kind == "media":
            return media(nested=False)
        if kind == "tool_use":
            return draw(tool_uses)
        if kind == "thinking":
            return Thinking(thinking=draw(texts), signature=draw(st.none() | texts.filter(bool)))
        if kind == "redacted":
            return draw(redacted)
        nested = draw(
            texts
            | st.lists(st.sampled_from(["text", "media"]), max_size=3).map(
                lambda ks: tuple(draw(text_blocks) if k == "text" else media(nested=True) for k in ks)
            )
        )
        return ToolResult(tool_use_id=draw(names), content=nested, is_error=draw(st.booleans()))

    msgs = []
    for _ in range(draw(st.integers(0, 5))):
        role = draw(st.sampled_from(["user", "assistant"]))
        msgs.append(Message(role=role, content=tuple(block(role) for _ in range(draw(st.integers(0, 4))))))
    request = Request(
        model=draw(st.none() | names),
        system=tuple(draw(st.lists(text_blocks, max_size=2))),
        tools=tuple(draw(st.lists(tool_specs, max_size=2))),
        messages=tuple(msgs),
        max_tokens=draw(st.none() | st.integers(1, 200_000)),
        params=draw(st.dictionaries(_params_keys, json_values(4), max_size=2)),
    )
    return request, store.data


@st.composite
def openai_canonical(draw: st.DrawFn) -> tuple[Request, dict[str, bytes]]:
    """A canonical request made only of what Chat Completions expresses, and its attachment bytes."""
    store = _Store()
    name_meta = st.just({}) | names.map(lambda n: {"name": n})

    def user_part() -> Block:
        kind = draw(st.sampled_from(["text", "image-ref", "image-url", "audio", "file", "file-id"]))
        detail = draw(st.none() | st.sampled_from(["auto", "low", "high", "original"]))
        if kind == "text":
            return draw(text_blocks)
        if kind == "image-ref":
            return Image(ref=_image_ref(draw, store), detail=detail)
        if kind == "image-url":
            return Image(url=draw(urls), detail=detail)
        if kind == "audio":
            data, media_type = draw(st.sampled_from(AUDIO))
            return Audio(ref=store.ref(data, media_type))
        if kind == "file":
            return Document(ref=store.ref(PDF, "application/pdf"), filename=draw(st.none() | names))
        return Document(url=f"openai-file:file-{draw(names)}", filename=draw(st.none() | names))

    msgs: list[Message] = []
    for i in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "late-system"]))
        if kind == "tools" and msgs and all(isinstance(b, ToolResult) for b in msgs[-1].content):
            kind = "user"  # consecutive tool messages are one canonical message
        if kind == "late-system" and i == 0:
            kind = "user"  # a leading system message is the system prompt
        if kind == "user":
            parts = tuple(user_part() for _ in range(draw(st.integers(0, 4))))
            msgs.append(Message(role="user", content=parts, metadata=draw(name_meta)))
        elif kind == "assistant":
            said = [Text(text=t) for t in draw(st.lists(texts.filter(bool), max_size=2))]
            calls = [
                ToolUse(id=draw(names), name=draw(names), input=draw(json_objects))
                for _ in range(draw(st.integers(0, 2)))
            ]
            msgs.append(Message(role="assistant", content=(*said, *calls), metadata=draw(name_meta)))
        elif kind == "tools":
            content = texts | st.lists(text_blocks, max_size=2).map(tuple)
            results = tuple(
                ToolResult(tool_use_id=draw(names), content=draw(content))
                for _ in range(draw(st.integers(1, 3)))
            )
            msgs.append(Message(role="user", content=results))
        else:
            role = draw(st.sampled_from(["system", "developer"]))
            body = tuple(draw(st.lists(text_blocks, max_size=2)))
            msgs.append(Message(role="user", content=body, metadata={"wire_role": role}))
    system = tuple(draw(st.lists(text_blocks, max_size=2)))
    params: dict[str, Any] = draw(st.dictionaries(_params_keys, json_values(4), max_size=2))
    if system and draw(st.booleans()):
        params["system_role"] = "developer"
    max_tokens = draw(st.none() | st.integers(1, 200_000))
    if max_tokens is not None and draw(st.booleans()):
        params["max_tokens_field"] = "max_completion_tokens"
    request = Request(
        model=draw(st.none() | names),
        system=system,
        tools=tuple(draw(st.lists(tool_specs, max_size=2))),
        messages=tuple(msgs),
        max_tokens=max_tokens,
        params=params,
    )
    return request, store.data


# ---------------------------------------------------------------------------------------------------
# wire bodies as clients send them


@st.composite
def anthropic_wire(draw: st.DrawFn) -> dict[str, Any]:
    """An Anthropic Messages request body with every block kind, media inline and by URL."""

    def media() -> dict[str, Any]:
        kind = draw(st.sampled_from(["image64", "image-url", "pdf", "text-doc", "doc-url"]))
        if kind == "image64":
            data, media_type, _ = draw(st.sampled_from(IMAGES))
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": b64(data)},
            }
        if kind == "image-url":
            return {"type": "image", "source": {"type": "url", "url": draw(urls)}}
        if kind == "pdf":
            source = {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)}
            return {"type": "document", "source": source, "title": draw(texts)}
        if kind == "text-doc":
            return {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": draw(texts.filter(bool))},
            }
        return {"type": "document", "source": {"type": "url", "url": draw(urls)}, "context": draw(texts)}

    def block(role: str) -> dict[str, Any]:
        kinds = ["text", "media"] + (
            ["tool_result"] if role == "user" else ["tool_use", "thinking", "redacted_thinking"]
        )
        kind = draw(st.sampled_from(kinds))
        if kind == "text":
            return {"type": "text", "text": draw(texts)}
        if kind == "media":
            return media()
        if kind == "tool_use":
            return {"type": "tool_use", "id": draw(names), "name": draw(names), "input": draw(json_objects)}
        if kind == "thinking":
            return {"type": "thinking", "thinking": draw(texts), "signature": draw(texts)}
        if kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": draw(texts)}
        content: Any = (
            draw(texts)
            if draw(st.booleans())
            else [
                {"type": "text", "text": draw(texts)} if draw(st.booleans()) else media()
                for _ in range(draw(st.integers(0, 3)))
            ]
        )
        out = {"type": "tool_result", "tool_use_id": draw(names), "content": content}
        if draw(st.booleans()):
            out["is_error"] = draw(st.booleans())
        return out

    messages_out = []
    for _ in range(draw(st.integers(0, 5))):
        role = draw(st.sampled_from(["user", "assistant"]))
        content: Any = (
            draw(texts) if draw(st.booleans()) else [block(role) for _ in range(draw(st.integers(0, 4)))]
        )
        messages_out.append({"role": role, "content": content})
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": draw(st.integers(1, 64_000))}
    if draw(st.booleans()):
        body["system"] = draw(texts) if draw(st.booleans()) else [{"type": "text", "text": draw(texts)}]
    if draw(st.booleans()):
        body["tools"] = [
            {"name": draw(names), "description": draw(texts), "input_schema": {"type": "object"}}
        ]
    body["messages"] = messages_out
    return body


@st.composite
def openai_wire(draw: st.DrawFn) -> dict[str, Any]:
    """A Chat Completions request body with every role and part kind."""

    def part() -> dict[str, Any]:
        kind = draw(st.sampled_from(["text", "image64", "image-url", "audio", "file", "file-id"]))
        if kind == "text":
            return {"type": "text", "text": draw(texts)}
        if kind in ("image64", "image-url"):
            if kind == "image64":
                data, media_type, _ = draw(st.sampled_from(IMAGES))
                url = f"data:{media_type};base64,{b64(data)}"
            else:
                url = draw(urls)
            image: dict[str, Any] = {"url": url}
            if draw(st.booleans()):
                image["detail"] = draw(st.sampled_from(["auto", "low", "high"]))
            return {"type": "image_url", "image_url": image}
        if kind == "audio":
            return {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}}
        if kind == "file":
            return {
                "type": "file",
                "file": {"filename": "a.pdf", "file_data": f"data:application/pdf;base64,{b64(PDF)}"},
            }
        return {"type": "file", "file": {"file_id": f"file-{draw(names)}"}}

    msgs: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 7))):
        role = draw(st.sampled_from(["system", "developer", "user", "assistant", "tool"]))
        if role in ("system", "developer"):
            content: Any = draw(texts) if draw(st.booleans()) else [{"type": "text", "text": draw(texts)}]
            msgs.append({"role": role, "content": content})
        elif role == "user":
            content = draw(texts) if draw(st.booleans()) else [part() for _ in range(draw(st.integers(0, 3)))]
            msgs.append({"role": "user", "content": content})
        elif role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": draw(st.none() | texts)}
            calls = [
                {
                    "id": draw(names),
                    "type": "function",
                    "function": {
                        "name": draw(names),
                        "arguments": draw(st.sampled_from(['{"a": 1}', "{}", "", "oops"])),
                    },
                }
                for _ in range(draw(st.integers(0, 2)))
            ]
            if calls:
                message["tool_calls"] = calls
            msgs.append(message)
        else:
            content = draw(texts) if draw(st.booleans()) else [{"type": "text", "text": draw(texts)}]
            msgs.append({"role": "tool", "tool_call_id": draw(names), "content": content})
    body: dict[str, Any] = {"model": "gpt-4o", "messages": msgs}
    if draw(st.booleans()):
        body["max_completion_tokens"] = draw(st.integers(1, 16_000))
    if draw(st.booleans()):
        body["tools"] = [
            {"type": "function", "function": {"name": draw(names), "parameters": {"type": "object"}}}
        ]
    return body


# ---------------------------------------------------------------------------------------------------
# broken wire bodies

JUNK: tuple[Any, ...] = (None, 5, -1, 2.5, True, "x", "", [], {}, [None], {"type": {}}, {"type": "nope"})


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out.extend(_paths(value, (*prefix, key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out.extend(_paths(value, (*prefix, i)))
    return out


@st.composite
def mutated(draw: st.DrawFn, bodies: st.SearchStrategy[dict[str, Any]]) -> dict[str, Any]:
    """A valid wire body with one node (anywhere, the root's fields included) replaced by junk."""
    import copy

    body = copy.deepcopy(draw(bodies))
    path = draw(st.sampled_from(_paths(body)[1:] or [("messages",)]))
    node: Any = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = draw(st.sampled_from(JUNK))
    return body
