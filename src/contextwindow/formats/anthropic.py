"""Anthropic Messages API ⇄ canonical content.

:func:`parse_request` reads a Messages request (system, tools, messages with text, image — base64 or
URL —, document, tool_use, tool_result, thinking, redacted_thinking) into a canonical
:class:`~contextwindow.content.Request`; inline base64 media become attachments whose decoded bytes
are kept aside in the :class:`ParsedRequest`. :func:`render_request` writes canonical content back,
fetching each inline attachment's bytes once through a loader.

Audio and video have no Messages API block: they render as a short text placeholder naming the
attachment, so the model can still ask for it. ``cache_control`` markers are not canonical content and
are not carried; where breakpoints go is decided when a request is compiled.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, assert_never

from ..content import (
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
from ..errors import InvalidInput
from ..limits import MAX_DOCUMENT_DEPTH, MAX_TOKENS, check_depth
from ._wire import SPELLING_PARAMS, AttachmentLoader, ParsedRequest, Sink, expect

__all__ = ["parse_request", "parse_wire_messages", "render_block", "render_messages", "render_request"]

_KNOWN_TOP = frozenset({"model", "system", "tools", "messages", "max_tokens"})


def parse_request(data: Mapping[str, Any]) -> ParsedRequest:
    """An Anthropic Messages request as canonical content; ``InvalidInput`` names any bad field."""
    expect(data, dict, "request", "a request object")
    check_depth(data, limit=MAX_DOCUMENT_DEPTH)
    sink = Sink()
    system = _parse_system(data.get("system"), "system")
    tools = tuple(
        _parse_tool(t, f"tools[{i}]") for i, t in enumerate(expect(data.get("tools", []), list, "tools"))
    )
    messages = _parse_messages(data.get("messages"), sink)
    max_tokens = data.get("max_tokens")
    if max_tokens is not None:
        expect(max_tokens, int, "max_tokens")
        if not 0 < max_tokens <= MAX_TOKENS:
            raise InvalidInput(f"must be > 0 and ≤ {MAX_TOKENS}", path="max_tokens")
    model = data.get("model")
    if model is not None:
        expect(model, str, "model")
    params = {k: v for k, v in data.items() if k not in _KNOWN_TOP}
    request = Request(
        model=model, system=system, tools=tools, messages=messages, max_tokens=max_tokens, params=params
    )
    return ParsedRequest(request=request, attachments=sink.attachments, format="anthropic")


def parse_wire_messages(messages: Any) -> ParsedRequest:
    """A bare Anthropic ``messages`` list as canonical content."""
    check_depth(messages, path="messages", limit=MAX_DOCUMENT_DEPTH)
    sink = Sink()
    request = Request(messages=_parse_messages(messages, sink))
    return ParsedRequest(request=request, attachments=sink.attachments, format="anthropic")


def _parse_messages(messages: Any, sink: Sink) -> tuple[Message, ...]:
    out = []
    for i, raw in enumerate(expect(messages, list, "messages")):
        path = f"messages[{i}]"
        expect(raw, dict, path, "a message object")
        role = raw.get("role")
        if role not in ("user", "assistant"):
            raise InvalidInput(f"role must be 'user' or 'assistant', got {role!r}", path=f"{path}.role")
        content = raw.get("content")
        if isinstance(content, str):
            blocks: tuple[Block, ...] = (Text(text=content),)
        else:
            items = expect(content, list, f"{path}.content", "a string or a list of blocks")
            blocks = tuple(_parse_block(b, f"{path}.content[{j}]", sink) for j, b in enumerate(items))
        out.append(Message(role=role, content=blocks))
    return tuple(out)


def _parse_system(system: Any, path: str) -> tuple[Text, ...]:
    if system is None:
        return ()
    if isinstance(system, str):
        return (Text(text=system),) if system else ()
    items = expect(system, list, path, "a string or a list of text blocks")
    out = []
    for i, block in enumerate(items):
        expect(block, dict, f"{path}[{i}]", "a text block")
        if block.get("type") != "text":
            raise InvalidInput("system blocks must be text", path=f"{path}[{i}].type")
        out.append(Text(text=expect(block.get("text"), str, f"{path}[{i}].text")))
    return tuple(out)


def _parse_tool(tool: Any, path: str) -> ToolSpec:
    expect(tool, dict, path, "a tool object")
    name = expect(tool.get("name"), str, f"{path}.name")
    schema = tool.get("input_schema", {"type": "object", "properties": {}})
    expect(schema, dict, f"{path}.input_schema")
    check_depth(schema, path=f"{path}.input_schema")
    description = expect(tool.get("description", ""), str, f"{path}.description")
    return ToolSpec(name=name, description=description, input_schema=schema)


def _parse_block(raw: Any, path: str, sink: Sink, *, nested: bool = False) -> Block:
    expect(raw, dict, path, "a content block")
    kind = raw.get("type")
    if kind == "text":
        return Text(text=expect(raw.get("text"), str, f"{path}.text"))
    if kind == "image":
        return _parse_image(raw, path, sink)
    if kind == "document":
        return _parse_document(raw, path, sink)
    if nested:
        raise InvalidInput(
            f"a tool result may hold text, image and document blocks, not {kind!r}", path=f"{path}.type"
        )
    if kind == "tool_use":
        tool_input = raw.get("input", {})
        expect(tool_input, dict, f"{path}.input")
        check_depth(tool_input, path=f"{path}.input")
        return ToolUse(
            id=expect(raw.get("id"), str, f"{path}.id"),
            name=expect(raw.get("name"), str, f"{path}.name"),
            input=tool_input,
        )
    if kind == "tool_result":
        content = raw.get("content", "")
        if isinstance(content, list):
            nested_blocks = tuple(
                _parse_block(b, f"{path}.content[{j}]", sink, nested=True) for j, b in enumerate(content)
            )
            result_content: str | tuple[Any, ...] = nested_blocks
        else:
            result_content = expect(content, str, f"{path}.content", "a string or a list of blocks")
        is_error = raw.get("is_error", False)
        expect(is_error, bool, f"{path}.is_error", "a boolean")
        return ToolResult(
            tool_use_id=expect(raw.get("tool_use_id"), str, f"{path}.tool_use_id"),
            content=result_content,
            is_error=is_error,
        )
    if kind == "thinking":
        signature = raw.get("signature")
        if signature is not None:
            expect(signature, str, f"{path}.signature")
        return Thinking(
            thinking=expect(raw.get("thinking"), str, f"{path}.thinking"), signature=signature or None
        )
    if kind == "redacted_thinking":
        return RedactedThinking(data=expect(raw.get("data"), str, f"{path}.data"))
    raise InvalidInput(f"unknown content block type {kind!r}", path=f"{path}.type")


def _parse_image(raw: dict[str, Any], path: str, sink: Sink) -> Image:
    source = expect(raw.get("source"), dict, f"{path}.source", "a source object")
    kind = source.get("type")
    if kind == "base64":
        media_type = expect(source.get("media_type"), str, f"{path}.source.media_type")
        data = sink.decode(source.get("data"), f"{path}.source.data")
        return Image(ref=sink.add(data, media_type, media_type_path=f"{path}.source.media_type"))
    if kind == "url":
        return Image(url=expect(source.get("url"), str, f"{path}.source.url"))
    raise InvalidInput(f"unsupported image source type {kind!r}", path=f"{path}.source.type")


def _parse_document(raw: dict[str, Any], path: str, sink: Sink) -> Document:
    source = expect(raw.get("source"), dict, f"{path}.source", "a source object")
    kind = source.get("type")
    title = raw.get("title")
    context = raw.get("context")
    if title is not None:
        expect(title, str, f"{path}.title")
    if context is not None:
        expect(context, str, f"{path}.context")
    if kind == "base64":
        media_type = expect(source.get("media_type"), str, f"{path}.source.media_type")
        data = sink.decode(source.get("data"), f"{path}.source.data")
        ref = sink.add(data, media_type, media_type_path=f"{path}.source.media_type")
        return Document(ref=ref, title=title, context=context)
    if kind == "text":
        text = expect(source.get("data"), str, f"{path}.source.data")
        media_type = source.get("media_type") or "text/plain"
        ref = sink.add(text.encode("utf-8"), media_type, media_type_path=f"{path}.source.media_type")
        return Document(ref=ref, title=title, context=context)
    if kind == "url":
        return Document(
            url=expect(source.get("url"), str, f"{path}.source.url"), title=title, context=context
        )
    raise InvalidInput(f"unsupported document source type {kind!r}", path=f"{path}.source.type")


# ---------------------------------------------------------------------------------------------------
# canonical → wire


def render_request(request: Request, load: AttachmentLoader) -> dict[str, Any]:
    """A canonical request as an Anthropic Messages request body."""
    out: dict[str, Any] = {}
    if request.model is not None:
        out["model"] = request.model
    if request.max_tokens is not None:
        out["max_tokens"] = request.max_tokens
    if request.system:
        out["system"] = [{"type": "text", "text": t.text} for t in request.system]
    if request.tools:
        out["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.input_schema)}
            for t in request.tools
        ]
    out["messages"] = render_messages(request.messages, load)
    for key, value in request.params.items():
        if key not in SPELLING_PARAMS:
            out.setdefault(key, value)
    return out


def render_messages(
    messages: tuple[Message, ...] | list[Message], load: AttachmentLoader
) -> list[dict[str, Any]]:
    """Canonical messages as an Anthropic ``messages`` list."""
    return [{"role": m.role, "content": [render_block(b, load) for b in m.content]} for m in messages]


def render_block(block: Block, load: AttachmentLoader) -> dict[str, Any]:
    """One canonical block as an Anthropic content block."""
    match block:
        case Text():
            return {"type": "text", "text": block.text}
        case Image() | GeneratedImage():
            if isinstance(block, Image) and block.url is not None:
                return {"type": "image", "source": {"type": "url", "url": block.url}}
            ref = block.ref
            assert ref is not None
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": ref.media_type, "data": _b64(load(ref))},
            }
        case Document():
            return _render_document(block, load)
        case Audio() | Video():
            return {
                "type": "text",
                "text": f"[{block.type} {block.ref.id} ({block.ref.media_type}) not supported by this API]",
            }
        case ToolUse():
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
        case ToolResult():
            out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
            out["content"] = (
                block.content
                if isinstance(block.content, str)
                else [render_block(b, load) for b in block.content]
            )
            if block.is_error:
                out["is_error"] = True
            return out
        case Thinking():
            thinking: dict[str, Any] = {"type": "thinking", "thinking": block.thinking}
            if block.signature is not None:
                thinking["signature"] = block.signature
            return thinking
        case RedactedThinking():
            return {"type": "redacted_thinking", "data": block.data}
        case _:
            assert_never(block)


def _render_document(block: Document, load: AttachmentLoader) -> dict[str, Any]:
    if block.url is not None:
        source: dict[str, Any] = {"type": "url", "url": block.url}
    else:
        ref = block.ref
        assert ref is not None
        data = load(ref)
        if ref.media_type.startswith("text/"):
            source = {
                "type": "text",
                "media_type": ref.media_type,
                "data": data.decode("utf-8", errors="replace"),
            }
        else:
            source = {"type": "base64", "media_type": ref.media_type, "data": _b64(data)}
    out: dict[str, Any] = {"type": "document", "source": source}
    if block.title is not None:
        out["title"] = block.title
    if block.context is not None:
        out["context"] = block.context
    return out


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
