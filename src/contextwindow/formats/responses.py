"""OpenAI Responses ⇄ canonical content (the ``input`` items of ``responses.create``).

Mapping (both directions):

- ``instructions``, and ``system``/``developer`` messages before any other item, are the system
  prompt (the instructions are the guard's to keep verbatim; a parse reads them for pricing);
- a message item (``{"role", "content"}``, ``type`` ``"message"`` or absent) holds ``input_text`` /
  ``output_text`` / ``refusal`` text, ``input_image`` (data URL or URL) and ``input_file`` parts; the
  parts are read as their Chat Completions equivalents are (:mod:`.openai`), so media become
  attachments the same way;
- the items a response outputs (``reasoning``, an assistant ``message``, ``function_call``) are the
  blocks of one assistant message while they follow one another, in their order: ``function_call``
  items are ``ToolUse`` blocks, and a ``reasoning`` item is one ``Thinking`` block per summary part
  (one with empty text when the summary is empty), each with the item's ``id``, the first with its
  ``encrypted_content`` as ``signature``; rendering writes them back as the same items, in the same
  order (a ``Thinking`` block without an ``id``, from another provider, has no Responses form and is
  not rendered). A reasoning item's ``content`` (raw reasoning text) is not carried. What else the
  output items said of themselves is kept in the message's metadata (``response_items``, one entry
  per item): an assistant message's ``phase`` (``commentary``/``final_answer``), rendered back always,
  and the items' own ids (``fc_…``, ``msg_…``), rendered only beside the reasoning they came with
  (OpenAI pairs a reasoning item with the item after it by that id, and refuses such an id without
  its reasoning item);
- ``function_call_output`` items are ``ToolResult`` blocks of a user message (consecutive ones share
  it);
- a ``compaction`` item (OpenAI's opaque summary of what came before it:
  https://developers.openai.com/api/docs/guides/compaction) is a user message of its own holding its
  ``encrypted_content`` as one ``Text`` block, marked in its metadata (:data:`COMPACTION_ITEM`, with the
  item's ``id`` when it had one); rendering writes it back as the same item. Its text is what the
  engine estimates it by (more than the summary it stands for costs: an estimate that errs high);
- other item kinds (a built-in tool's calls) are not carried.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..content import (
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolSpec,
    ToolUse,
)
from ..errors import InvalidInput
from . import openai as chat
from ._wire import AttachmentLoader, ParsedRequest, Sink, expect

__all__ = ["COMPACTION_ITEM", "compaction_item", "parse_request", "render_items", "render_request"]

COMPACTION_ITEM = "response_compaction"
"""The metadata key marking a message that is a Responses ``compaction`` item: ``{"id": ...}`` (the id
absent when the item had none)."""

_KNOWN_TOP = frozenset({"model", "input", "instructions", "tools", "max_output_tokens"})


def parse_request(data: Mapping[str, Any]) -> ParsedRequest:
    """A Responses request as canonical content; ``InvalidInput`` names any bad field."""
    expect(data, dict, "request", "a request object")
    sink = Sink()
    system: list[Text] = []
    instructions = data.get("instructions")
    if instructions is not None:
        text = expect(instructions, str, "instructions")
        if text:
            system.append(Text(text=text))
    raw = data.get("input", [])
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else expect(raw, list, "input")
    messages: list[Message] = []
    for i, item in enumerate(items):
        path = f"input[{i}]"
        expect(item, dict, path, "an input item")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer") and not messages:
                system.extend(
                    b for b in _parts(item.get("content"), f"{path}.content", sink) if isinstance(b, Text)
                )
                continue
            if role not in ("user", "assistant", "system", "developer"):
                raise InvalidInput(f"unknown role {role!r}", path=f"{path}.role")
            blocks = _parts(item.get("content"), f"{path}.content", sink)
            if role == "assistant":
                _output(messages, blocks, item)
                continue
            wire_role = {"wire_role": role} if role in ("system", "developer") else {}
            messages.append(Message(role="user", content=blocks, metadata=wire_role))
        elif kind == "reasoning":
            _output(messages, _reasoning(item, path), item)
        elif kind == "function_call":
            arguments = expect(item.get("arguments", "{}"), str, f"{path}.arguments")
            try:
                parsed = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError:
                parsed = None
            use = ToolUse(
                id=expect(item.get("call_id"), str, f"{path}.call_id"),
                name=expect(item.get("name"), str, f"{path}.name"),
                input=parsed if isinstance(parsed, dict) else {chat.RAW_ARGUMENTS: arguments},
            )
            _output(messages, (use,), item)
        elif kind == "function_call_output":
            output = item.get("output", "")
            content: str | tuple[Any, ...]
            if isinstance(output, list):
                content = tuple(
                    b for b in _parts(output, f"{path}.output", sink) if not isinstance(b, ToolUse)
                )
            else:
                content = expect(output, str, f"{path}.output", "a string or a list of parts")
            result = ToolResult(
                tool_use_id=expect(item.get("call_id"), str, f"{path}.call_id"), content=content
            )
            last = messages[-1] if messages else None
            if (
                last is not None
                and last.role == "user"
                and last.content
                and all(isinstance(b, ToolResult) for b in last.content)
            ):
                messages[-1] = Message(role="user", content=(*last.content, result))
            else:
                messages.append(Message(role="user", content=(result,)))
        elif kind == "compaction":
            messages.append(_compaction(item, path))
        # other items: not carried (see the module docstring)
    specs = (_tool(t, f"tools[{i}]") for i, t in enumerate(expect(data.get("tools", []), list, "tools")))
    tools = tuple(t for t in specs if t is not None)
    max_tokens = data.get("max_output_tokens")
    if max_tokens is not None:
        expect(max_tokens, int, "max_output_tokens")
    model = data.get("model")
    if model is not None:
        expect(model, str, "model")
    params = {k: v for k, v in data.items() if k not in _KNOWN_TOP}
    request = Request(
        model=model,
        system=tuple(system),
        tools=tools,
        messages=tuple(messages),
        max_tokens=max_tokens,
        params=params,
    )
    return ParsedRequest(request=request, attachments=sink.attachments, format="openai-responses")


ITEM_IDS = "response_items"
"""The metadata key of what an assistant message's output items said of themselves: one entry per
item, ``{"id": ..., "phase": ...}`` (either may be absent) or ``None``."""


def _output(messages: list[Message], blocks: Sequence[Block], item: Mapping[str, Any]) -> None:
    """Add an output item's blocks (and its id, see :data:`ITEM_IDS`): to the assistant message right
    before, else as a new one. An item with no blocks is not carried, nor is its id."""
    if not blocks:
        return
    ident = {k: item[k] for k in ("id", "phase") if isinstance(item.get(k), str) and item[k]} or None
    last = messages[-1] if messages else None
    if last is not None and last.role == "assistant" and "wire_role" not in last.metadata:
        earlier = list(last.metadata.get(ITEM_IDS) or [None] * _item_count(last.content))
        ids, content = [*earlier, ident], (*last.content, *blocks)
        messages.pop()
    else:
        ids, content = [ident], tuple(blocks)
    metadata = {ITEM_IDS: ids} if any(ids) else {}
    messages.append(Message(role="assistant", content=content, metadata=metadata))


def _item_count(content: Sequence[Block]) -> int:
    """How many output items :func:`_output_items` renders ``content`` as."""
    count, previous = 0, ""
    for block in content:
        kind = "part"
        if isinstance(block, Thinking):
            if block.id is None:
                continue
            kind = f"reasoning:{block.id}"
        elif isinstance(block, ToolUse):
            kind = "call"
        if kind == "call" or kind != previous:
            count += 1
        previous = kind
    return count


def _reasoning(item: Mapping[str, Any], path: str) -> tuple[Thinking, ...]:
    ident = expect(item.get("id"), str, f"{path}.id")
    summary = expect(item.get("summary", []), list, f"{path}.summary")
    texts = []
    for j, part in enumerate(summary):
        expect(part, dict, f"{path}.summary[{j}]", "a summary part")
        texts.append(expect(part.get("text"), str, f"{path}.summary[{j}].text"))
    sealed = item.get("encrypted_content")
    if sealed is not None:
        expect(sealed, str, f"{path}.encrypted_content")
    return tuple(
        Thinking(thinking=text, signature=sealed if j == 0 else None, id=ident)
        for j, text in enumerate(texts or [""])
    )


def _compaction(item: Mapping[str, Any], path: str) -> Message:
    sealed = expect(item.get("encrypted_content"), str, f"{path}.encrypted_content")
    ident = item.get("id")
    if ident is not None:
        expect(ident, str, f"{path}.id")
    said = {"id": ident} if ident else {}
    return Message(role="user", content=(Text(text=sealed),), metadata={COMPACTION_ITEM: said})


def compaction_item(message: Message) -> dict[str, Any] | None:
    """``message`` as the Responses ``compaction`` item it was read from, or ``None`` when it is not one."""
    said = message.metadata.get(COMPACTION_ITEM)
    if not isinstance(said, Mapping):
        return None
    item: dict[str, Any] = {"type": "compaction"}
    if isinstance(said.get("id"), str):
        item["id"] = said["id"]
    item["encrypted_content"] = "".join(b.text for b in message.content if isinstance(b, Text))
    return item


def _tool(tool: Any, path: str) -> ToolSpec | None:
    expect(tool, dict, path, "a tool object")
    if tool.get("type", "function") != "function":
        return (
            None  # a built-in tool (web search, file search, ...): the provider's, not priced as a function
        )
    function = {k: v for k, v in tool.items() if k in ("name", "description", "parameters")}
    return chat._parse_tool({"type": "function", "function": function}, path)


def _parts(content: Any, path: str, sink: Sink) -> tuple[Block, ...]:
    if isinstance(content, str):
        return (Text(text=content),) if content else ()
    out: list[Block] = []
    for j, part in enumerate(expect(content, list, path, "a string or a list of parts")):
        ppath = f"{path}[{j}]"
        expect(part, dict, ppath, "a content part")
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            out.append(Text(text=expect(part.get("text"), str, f"{ppath}.text")))
        elif kind == "refusal":
            out.append(Text(text=expect(part.get("refusal"), str, f"{ppath}.refusal")))
        elif kind == "input_image":
            url = expect(part.get("image_url"), str, f"{ppath}.image_url")
            image = {"url": url} | ({"detail": part["detail"]} if part.get("detail") else {})
            out.append(chat._parse_part({"type": "image_url", "image_url": image}, ppath, sink))
        elif kind == "input_file":
            file = {k: part[k] for k in ("file_data", "file_id", "filename") if k in part}
            out.append(chat._parse_part({"type": "file", "file": file}, ppath, sink))
        else:
            raise InvalidInput(f"unknown content part type {kind!r}", path=f"{ppath}.type")
    return tuple(out)


# ---------------------------------------------------------------------------------------------------
# canonical → wire


def render_request(request: Request, load: AttachmentLoader) -> dict[str, Any]:
    """A canonical request as a Responses request body."""
    out: dict[str, Any] = {}
    if request.model is not None:
        out["model"] = request.model
    if request.system:
        out["instructions"] = "\n\n".join(t.text for t in request.system)
    out["input"] = render_items(request.messages, load)
    if request.tools:
        out["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.input_schema),
            }
            for t in request.tools
        ]
    if request.max_tokens is not None:
        out["max_output_tokens"] = request.max_tokens
    for key, value in request.params.items():
        out.setdefault(key, value)
    return out


def render_items(messages: Sequence[Message], load: AttachmentLoader) -> list[dict[str, Any]]:
    """Canonical messages as Responses ``input`` items."""
    items: list[dict[str, Any]] = []
    for original in messages:
        if original.role == "assistant":
            items.extend(_output_items(original, load))
            continue
        compacted = compaction_item(original)
        if compacted is not None:
            items.append(compacted)
            continue
        for message in chat.carried([original]):
            role = message.metadata.get("wire_role") or message.role
            parts: list[dict[str, Any]] = []
            for block in message.content:
                if isinstance(block, ToolResult):
                    output = (
                        block.content
                        if isinstance(block.content, str)
                        else "\n".join(b.text for b in block.content if isinstance(b, Text))
                    )
                    items.append(
                        {"type": "function_call_output", "call_id": block.tool_use_id, "output": output}
                    )
                elif not isinstance(block, ToolUse | Thinking):
                    part = _render_part(block, load, assistant=False)
                    if part is not None:
                        parts.append(part)
            if parts:
                items.append({"role": role, "content": parts})
    return items


def _output_items(message: Message, load: AttachmentLoader) -> list[dict[str, Any]]:
    """An assistant message as the output items it was read from, in its blocks' order."""
    items: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, Thinking):
            if block.id is None:
                continue  # another provider's reasoning: no Responses form
            last = items[-1] if items and not parts else None
            if last is not None and last.get("type") == "reasoning" and last["id"] == block.id:
                last["summary"].append({"type": "summary_text", "text": block.thinking})
                continue
            if parts:
                items.append({"role": "assistant", "content": parts})
                parts = []
            item: dict[str, Any] = {"type": "reasoning", "id": block.id, "summary": []}
            if block.thinking:
                item["summary"].append({"type": "summary_text", "text": block.thinking})
            if block.signature is not None:
                item["encrypted_content"] = block.signature
            items.append(item)
        elif isinstance(block, ToolUse):
            if parts:
                items.append({"role": "assistant", "content": parts})
                parts = []
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": _arguments(block),
                }
            )
        else:
            part = _render_part(block, load, assistant=True)
            if part is not None:
                parts.append(part)
    if parts:
        items.append({"role": "assistant", "content": parts})
    known = message.metadata.get(ITEM_IDS)
    if not isinstance(known, list | tuple) or len(known) != len(items):
        return items
    reasoned = any(i.get("type") == "reasoning" for i in items)
    for n, (item, said) in enumerate(zip(items, known, strict=True)):
        if not isinstance(said, Mapping) or item.get("type") == "reasoning":
            continue
        message_item = "role" in item
        if message_item and isinstance(said.get("phase"), str):
            item["phase"] = said["phase"]
        if reasoned and isinstance(said.get("id"), str):
            if message_item:  # an item with its id is the output message itself
                content = [
                    {**p, "annotations": []} if p.get("type") == "output_text" else p for p in item["content"]
                ]
                item = {
                    "type": "message",
                    "id": said["id"],
                    **item,
                    "content": content,
                    "status": "completed",
                }
                items[n] = item
            else:
                item["id"] = said["id"]
    return items


def _arguments(use: ToolUse) -> str:
    if set(use.input) == {chat.RAW_ARGUMENTS}:
        return str(use.input[chat.RAW_ARGUMENTS])
    return json.dumps(dict(use.input), separators=(",", ":"), ensure_ascii=False)


def _render_part(block: Block, load: AttachmentLoader, *, assistant: bool) -> dict[str, Any] | None:
    if isinstance(block, Text):
        return {"type": "output_text" if assistant else "input_text", "text": block.text}
    chat_part = chat._render_part(block, load)
    if chat_part is None:
        return None
    if isinstance(block, Image | GeneratedImage) and chat_part.get("type") == "image_url":
        image = chat_part["image_url"]
        return {"type": "input_image", "image_url": image["url"]} | (
            {"detail": image["detail"]} if "detail" in image else {}
        )
    if isinstance(block, Document) and chat_part.get("type") == "file":
        return {"type": "input_file", **chat_part["file"]}
    text = chat_part.get("text")
    return {"type": "input_text", "text": text} if isinstance(text, str) else None
