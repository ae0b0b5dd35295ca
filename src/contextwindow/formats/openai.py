"""OpenAI Chat Completions ⇄ canonical content.

Mapping (both directions):

- ``system`` / ``developer`` messages before the first other message become the request's system
  prompt (the role is kept in ``params["system_role"]`` when it is ``developer``); one that appears
  later becomes a user message whose ``metadata["wire_role"]`` says what it was.
- ``tool`` messages become ``ToolResult`` blocks; consecutive ones share one user message, and a user
  message holding tool results renders back as one ``tool`` message each.
- ``tool_calls`` become ``ToolUse`` blocks; ``arguments`` that are not a JSON object are kept verbatim
  under ``{"__raw_arguments__": ...}`` so that nothing the model said is lost.
- ``image_url`` parts (URLs and ``data:`` URLs), ``input_audio`` and ``file`` (``file_data`` data URLs)
  parts: inline data becomes attachments. Parts by ``file_id`` are kept as a document URL
  ``openai-file:<id>``.

Thinking has no Chat Completions input form and is not rendered; video renders as a placeholder text.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, assert_never

from ..attachments import split_data_url
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
from ..limits import MAX_DEPTH, MAX_DOCUMENT_DEPTH, MAX_TOKENS, check_depth, loads_json
from ._wire import AttachmentLoader, ParsedRequest, Sink, expect

__all__ = ["carried", "parse_request", "parse_wire_messages", "render_messages", "render_request"]

RAW_ARGUMENTS = "__raw_arguments__"
FILE_ID_SCHEME = "openai-file:"
_KNOWN_TOP = frozenset({"model", "messages", "tools", "max_tokens", "max_completion_tokens"})
_AUDIO_FORMATS = {
    "wav": "audio/wav",
    "mp3": "audio/mpeg",
    "flac": "audio/flac",
    "ogg": "audio/ogg",
    "webm": "audio/webm",
}
_AUDIO_FORMAT_OF = {v: k for k, v in _AUDIO_FORMATS.items()} | {"audio/x-wav": "wav", "audio/mp3": "mp3"}


def parse_request(data: Mapping[str, Any]) -> ParsedRequest:
    """A Chat Completions request as canonical content; ``InvalidInput`` names any bad field."""
    expect(data, dict, "request", "a request object")
    check_depth(data, limit=MAX_DOCUMENT_DEPTH)
    sink = Sink()
    system, system_role, messages = _parse_messages(data.get("messages"), sink)
    tools = tuple(
        _parse_tool(t, f"tools[{i}]") for i, t in enumerate(expect(data.get("tools", []), list, "tools"))
    )
    params = {k: v for k, v in data.items() if k not in _KNOWN_TOP}
    key = "max_completion_tokens" if "max_completion_tokens" in data else "max_tokens"
    max_tokens = data.get(key)
    if max_tokens is not None:
        expect(max_tokens, int, key)
        if not 0 < max_tokens <= MAX_TOKENS:
            raise InvalidInput(f"must be > 0 and ≤ {MAX_TOKENS}", path=key)
        if key == "max_completion_tokens":
            params["max_tokens_field"] = key
    if system_role == "developer":
        params["system_role"] = "developer"
    model = data.get("model")
    if model is not None:
        expect(model, str, "model")
    request = Request(
        model=model, system=system, tools=tools, messages=messages, max_tokens=max_tokens, params=params
    )
    return ParsedRequest(request=request, attachments=sink.attachments, format="openai")


def parse_wire_messages(messages: Any) -> ParsedRequest:
    """A bare Chat Completions ``messages`` list as canonical content (system messages included)."""
    check_depth(messages, path="messages", limit=MAX_DOCUMENT_DEPTH)
    sink = Sink()
    system, system_role, parsed = _parse_messages(messages, sink)
    params = {"system_role": "developer"} if system_role == "developer" else {}
    return ParsedRequest(
        request=Request(system=system, messages=parsed, params=params),
        attachments=sink.attachments,
        format="openai",
    )


def _parse_messages(messages: Any, sink: Sink) -> tuple[tuple[Text, ...], str, tuple[Message, ...]]:
    system: list[Text] = []
    system_role = "system"
    out: list[Message] = []
    for i, raw in enumerate(expect(messages, list, "messages")):
        path = f"messages[{i}]"
        expect(raw, dict, path, "a message object")
        role = raw.get("role")
        if role in ("system", "developer"):
            texts = _text_parts(raw.get("content"), f"{path}.content")
            if not out:
                system.extend(texts)
                system_role = role
            else:
                out.append(Message(role="user", content=tuple(texts), metadata={"wire_role": role}))
        elif role == "user":
            metadata = _name_metadata(raw, path)
            out.append(
                Message(
                    role="user",
                    content=_user_content(raw.get("content"), f"{path}.content", sink),
                    metadata=metadata,
                )
            )
        elif role == "assistant":
            out.append(_parse_assistant(raw, path))
        elif role == "tool":
            result = ToolResult(
                tool_use_id=expect(raw.get("tool_call_id"), str, f"{path}.tool_call_id"),
                content=_tool_content(raw.get("content"), f"{path}.content"),
            )
            if (
                out
                and out[-1].role == "user"
                and out[-1].content
                and all(isinstance(b, ToolResult) for b in out[-1].content)
            ):
                out[-1] = Message(role="user", content=(*out[-1].content, result))
            else:
                out.append(Message(role="user", content=(result,)))
        else:
            raise InvalidInput(
                f"role must be system, developer, user, assistant or tool, got {role!r}", path=f"{path}.role"
            )
    return tuple(system), system_role, tuple(out)


def _name_metadata(raw: dict[str, Any], path: str) -> dict[str, Any]:
    name = raw.get("name")
    return {"name": expect(name, str, f"{path}.name")} if name is not None else {}


def _text_parts(content: Any, path: str) -> list[Text]:
    if isinstance(content, str):
        return [Text(text=content)]
    items = expect(content, list, path, "a string or a list of text parts")
    out = []
    for j, part in enumerate(items):
        expect(part, dict, f"{path}[{j}]", "a content part")
        if part.get("type") != "text":
            raise InvalidInput("only text parts are allowed here", path=f"{path}[{j}].type")
        out.append(Text(text=expect(part.get("text"), str, f"{path}[{j}].text")))
    return out


def _tool_content(content: Any, path: str) -> str | tuple[Text, ...]:
    if isinstance(content, str):
        return content
    return tuple(_text_parts(content, path))


def _user_content(content: Any, path: str, sink: Sink) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (Text(text=content),)
    items = expect(content, list, path, "a string or a list of content parts")
    return tuple(_parse_part(p, f"{path}[{j}]", sink) for j, p in enumerate(items))


def _parse_part(part: Any, path: str, sink: Sink) -> Block:
    expect(part, dict, path, "a content part")
    kind = part.get("type")
    if kind == "text":
        return Text(text=expect(part.get("text"), str, f"{path}.text"))
    if kind == "image_url":
        image = expect(part.get("image_url"), dict, f"{path}.image_url")
        url = expect(image.get("url"), str, f"{path}.image_url.url")
        detail = image.get("detail")
        if detail not in (None, "auto", "low", "high", "original"):
            raise InvalidInput(f"unknown detail {detail!r}", path=f"{path}.image_url.detail")
        if url.startswith("data:"):
            media_type, payload = split_data_url(url, path=f"{path}.image_url.url")
            data = sink.decode(payload, f"{path}.image_url.url")
            ref = sink.add(data, media_type, media_type_path=f"{path}.image_url.url")
            return Image(ref=ref, detail=detail)
        return Image(url=url, detail=detail)
    if kind == "input_audio":
        audio = expect(part.get("input_audio"), dict, f"{path}.input_audio")
        fmt = expect(audio.get("format"), str, f"{path}.input_audio.format")
        media_type = _AUDIO_FORMATS.get(fmt, f"audio/{fmt}")
        data = sink.decode(audio.get("data"), f"{path}.input_audio.data")
        return Audio(ref=sink.add(data, media_type, media_type_path=f"{path}.input_audio.format"))
    if kind == "file":
        file = expect(part.get("file"), dict, f"{path}.file")
        filename = file.get("filename")
        if filename is not None:
            expect(filename, str, f"{path}.file.filename")
        if "file_data" in file:
            data_url = expect(file.get("file_data"), str, f"{path}.file.file_data")
            media_type, payload = split_data_url(data_url, path=f"{path}.file.file_data")
            data = sink.decode(payload, f"{path}.file.file_data")
            ref = sink.add(data, media_type, media_type_path=f"{path}.file.file_data")
            return Document(ref=ref, filename=filename)
        file_id = expect(file.get("file_id"), str, f"{path}.file.file_id", "file_data or file_id")
        return Document(url=FILE_ID_SCHEME + file_id, filename=filename)
    raise InvalidInput(f"unknown content part type {kind!r}", path=f"{path}.type")


def _parse_assistant(raw: dict[str, Any], path: str) -> Message:
    content = raw.get("content")
    blocks: list[Block] = []
    if content is not None:
        if isinstance(content, str):
            if content:
                blocks.append(Text(text=content))
        else:
            for j, part in enumerate(expect(content, list, f"{path}.content", "a string or a list of parts")):
                expect(part, dict, f"{path}.content[{j}]", "a content part")
                kind = part.get("type")
                if kind == "text":
                    blocks.append(Text(text=expect(part.get("text"), str, f"{path}.content[{j}].text")))
                elif kind == "refusal":
                    blocks.append(Text(text=expect(part.get("refusal"), str, f"{path}.content[{j}].refusal")))
                else:
                    raise InvalidInput(
                        f"unknown assistant part type {kind!r}", path=f"{path}.content[{j}].type"
                    )
    for j, call in enumerate(expect(raw.get("tool_calls") or [], list, f"{path}.tool_calls")):
        cpath = f"{path}.tool_calls[{j}]"
        expect(call, dict, cpath, "a tool call")
        function = expect(call.get("function"), dict, f"{cpath}.function")
        arguments = expect(function.get("arguments", "{}"), str, f"{cpath}.function.arguments")
        try:
            parsed = (
                loads_json(arguments, path=f"{cpath}.function.arguments", limit=MAX_DEPTH)
                if arguments.strip()
                else {}
            )
        except json.JSONDecodeError:
            parsed = None
        tool_input = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS: arguments}
        blocks.append(
            ToolUse(
                id=expect(call.get("id"), str, f"{cpath}.id"),
                name=expect(function.get("name"), str, f"{cpath}.function.name"),
                input=tool_input,
            )
        )
    return Message(role="assistant", content=tuple(blocks), metadata=_name_metadata(raw, path))


def _parse_tool(tool: Any, path: str) -> ToolSpec:
    expect(tool, dict, path, "a tool object")
    if tool.get("type", "function") != "function":
        raise InvalidInput(f"unsupported tool type {tool.get('type')!r}", path=f"{path}.type")
    function = expect(tool.get("function"), dict, f"{path}.function")
    schema = function.get("parameters", {"type": "object", "properties": {}})
    expect(schema, dict, f"{path}.function.parameters")
    check_depth(schema, path=f"{path}.function.parameters")
    return ToolSpec(
        name=expect(function.get("name"), str, f"{path}.function.name"),
        description=expect(function.get("description", ""), str, f"{path}.function.description"),
        input_schema=schema,
    )


# ---------------------------------------------------------------------------------------------------
# canonical → wire


def render_request(request: Request, load: AttachmentLoader) -> dict[str, Any]:
    """A canonical request as a Chat Completions request body."""
    out: dict[str, Any] = {}
    if request.model is not None:
        out["model"] = request.model
    params = dict(request.params)
    system_role = params.pop("system_role", "system")
    max_key = params.pop("max_tokens_field", "max_tokens")
    if system_role not in ("system", "developer"):
        system_role = "system"
    if max_key not in ("max_tokens", "max_completion_tokens"):
        max_key = "max_tokens"
    out["messages"] = render_messages(request.messages, load, system=request.system, system_role=system_role)
    if request.tools:
        out["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.input_schema),
                },
            }
            for t in request.tools
        ]
    if request.max_tokens is not None:
        out[max_key] = request.max_tokens
    for key, value in params.items():
        out.setdefault(key, value)
    return out


def render_messages(
    messages: tuple[Message, ...] | list[Message],
    load: AttachmentLoader,
    *,
    system: tuple[Text, ...] = (),
    system_role: str = "system",
) -> list[dict[str, Any]]:
    """Canonical messages (and an optional system prompt) as a Chat Completions ``messages`` list."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": system_role, "content": _render_text_content(system)})
    for message in carried(messages):
        out.extend(_render_message(message, load))
    return out


def _render_text_content(texts: tuple[Text, ...] | list[Text]) -> str | list[dict[str, Any]]:
    if len(texts) == 1:
        return texts[0].text
    return [{"type": "text", "text": t.text} for t in texts]


def carried(messages: tuple[Message, ...] | list[Message]) -> tuple[Message, ...]:
    """``messages`` as Chat Completions can carry them, still canonical: what a provider behind it sees.

    A ``tool`` message holds text only, so media in a tool result move to a user message of their own
    right after the tool messages (the tool result keeps a line naming each one), followed by the
    message's other blocks; thinking has no input form and is dropped. Everything else is unchanged,
    and parsing the rendered wire gives exactly these messages back. Rendering goes through this, and
    the local provider counts an OpenAI-wire request through it, so both see the same request.
    """
    out: list[Message] = []
    for message in messages:
        out.extend(_carried(message))
    return tuple(out)


def _carried(message: Message) -> tuple[Message, ...]:
    if message.role == "assistant":
        if any(isinstance(b, Thinking | RedactedThinking) for b in message.content):
            kept = tuple(b for b in message.content if not isinstance(b, Thinking | RedactedThinking))
            return (replace(message, content=kept),)
        return (message,)
    moved: list[Block] = []
    results: list[Block] = []
    others: list[Block] = []
    for block in message.content:
        if isinstance(block, ToolResult) and not isinstance(block.content, str):
            media = [b for b in block.content if not isinstance(b, Text)]
            if media:
                moved.extend(media)
                lines = tuple(
                    b
                    if isinstance(b, Text)
                    else Text(text=f"[{b.type} {_ident(b)} from this tool result follows]")
                    for b in block.content
                )
                block = replace(block, content=lines)
        (results if isinstance(block, ToolResult) else others).append(block)
    if not moved:
        return (message,)
    return (
        replace(message, content=tuple(results)),
        replace(message, content=(*moved, *others), id=None),
    )


def _ident(block: Block) -> str:
    ref = getattr(block, "ref", None)
    return ref.id if ref is not None else str(getattr(block, "url", ""))


def _render_message(message: Message, load: AttachmentLoader) -> list[dict[str, Any]]:
    wire_role = message.metadata.get("wire_role")
    if wire_role in ("system", "developer"):
        texts = [b for b in message.content if isinstance(b, Text)]
        return [{"role": wire_role, "content": _render_text_content(texts)}]
    if message.role == "assistant":
        return [_render_assistant(message)]
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResult):
            content: Any = block.content
            if not isinstance(content, str):
                content = _render_tool_parts(content)
            out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
        else:
            part = _render_part(block, load)
            if part is not None:
                parts.append(part)
    if parts or not out:  # a user message with no renderable part still keeps its place
        user: dict[str, Any] = {"role": "user"}
        user["content"] = parts[0]["text"] if len(parts) == 1 and parts[0]["type"] == "text" else parts
        if "name" in message.metadata:
            user["name"] = message.metadata["name"]
        out.append(user)
    return out


def _render_tool_parts(blocks: tuple[Any, ...]) -> list[dict[str, Any]]:
    # Text only by now (``carried`` moved the media out). A list stays a list, even of one part, so
    # that parsing it back gives the same canonical form.
    return [{"type": "text", "text": b.text} for b in blocks]


def _render_assistant(message: Message) -> dict[str, Any]:
    texts = [b.text for b in message.content if isinstance(b, Text)]
    calls = [b for b in message.content if isinstance(b, ToolUse)]
    # Several text blocks stay several parts: joining them would change the canonical form.
    content: Any = None
    if len(texts) == 1:
        content = texts[0]
    elif texts:
        content = [{"type": "text", "text": t} for t in texts]
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.input[RAW_ARGUMENTS]
                    if set(c.input) == {RAW_ARGUMENTS}
                    else json.dumps(c.input, separators=(",", ":"), ensure_ascii=False),
                },
            }
            for c in calls
        ]
    if "name" in message.metadata:
        out["name"] = message.metadata["name"]
    return out


def _render_part(block: Block, load: AttachmentLoader) -> dict[str, Any] | None:
    match block:
        case Text():
            return {"type": "text", "text": block.text}
        case Image() | GeneratedImage():
            detail = block.detail if isinstance(block, Image) else None
            if isinstance(block, Image) and block.url is not None:
                url = block.url
            else:
                assert block.ref is not None
                url = f"data:{block.ref.media_type};base64,{_b64(load(block.ref))}"
            image: dict[str, Any] = {"url": url}
            if detail is not None:
                image["detail"] = detail
            return {"type": "image_url", "image_url": image}
        case Audio():
            fmt = _AUDIO_FORMAT_OF.get(block.ref.media_type, block.ref.media_type.partition("/")[2])
            return {"type": "input_audio", "input_audio": {"data": _b64(load(block.ref)), "format": fmt}}
        case Document():
            file: dict[str, Any] = {}
            if block.url is not None and block.url.startswith(FILE_ID_SCHEME):
                file["file_id"] = block.url[len(FILE_ID_SCHEME) :]
            elif block.url is not None:
                return {"type": "text", "text": f"[document at {block.url}]"}
            else:
                assert block.ref is not None
                file["file_data"] = f"data:{block.ref.media_type};base64,{_b64(load(block.ref))}"
            if block.filename is not None:
                file["filename"] = block.filename
            return {"type": "file", "file": file}
        case Video():
            return {
                "type": "text",
                "text": f"[video {block.ref.id} ({block.ref.media_type}) not supported by this API]",
            }
        case Thinking() | RedactedThinking() | ToolUse() | ToolResult():
            return None  # no user-side form in Chat Completions; tool results are handled by the caller
        case _:
            assert_never(block)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
