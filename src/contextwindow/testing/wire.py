"""The local provider's replies in the two wire formats: whole JSON responses and SSE streams.

Shapes follow the public API references closely enough for the official SDKs to parse them:

- Anthropic Messages: a ``message`` object; the stream is ``message_start`` (usage with a placeholder
  ``output_tokens``), per block ``content_block_start`` / ``content_block_delta`` (``text_delta``,
  ``thinking_delta``, ``signature_delta``, ``input_json_delta``) / ``content_block_stop``, then
  ``message_delta`` (stop reason and cumulative usage) and ``message_stop``.
- OpenAI Chat Completions: a ``chat.completion`` object; the stream is ``chat.completion.chunk``
  objects, tool calls in fragments by ``index``, a last chunk with ``finish_reason``, then — only
  with ``stream_options.include_usage`` — a chunk with empty ``choices`` and ``usage``, then
  ``data: [DONE]``.

With usage reporting ``none`` no usage field is sent at all.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..content import Text, Thinking, ToolUse
from ..usage.tracker import Usage
from .anthropic_compaction import CompactionPass, iteration_usage
from .counting import compact_json
from .model import LocalReply

__all__ = [
    "anthropic_events",
    "anthropic_message",
    "anthropic_usage",
    "chat_from_responses",
    "openai_chunks",
    "openai_completion",
    "openai_usage",
    "sse",
    "text_pieces",
]

_PIECE_CHARS = 48
_OPENAI_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event."""
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"{head}data: {payload}\n\n".encode()


def text_pieces(text: str, size: int = _PIECE_CHARS) -> list[str]:
    """A text in the pieces it is streamed in (at least one, possibly empty)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def anthropic_usage(usage: Usage) -> dict[str, int]:
    """A ``Usage`` in Anthropic's fields (cache tokens beside ``input_tokens``)."""
    return {
        "input_tokens": usage.fresh_input,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
        "output_tokens": usage.output,
    }


def openai_usage(usage: Usage) -> dict[str, Any]:
    """A ``Usage`` in Chat Completions' fields (cached tokens inside ``prompt_tokens``)."""
    return {
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.output,
        "total_tokens": usage.prompt + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning, "audio_tokens": 0},
    }


def _anthropic_block(block: Any) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolUse):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": dict(block.input)}
    if isinstance(block, Thinking):
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature or ""}
    return {"type": "text", "text": f"[{block.type} block]"}


def anthropic_message(reply: LocalReply, compaction: CompactionPass | None = None) -> dict[str, Any]:
    """The non-streaming Messages response; ``compaction``: the server-side compaction that ran
    first (its block opens the content, its usage the ``usage.iterations``)."""
    lead = [dict(compaction.block)] if compaction is not None else []
    out: dict[str, Any] = {
        "id": f"msg_{reply.id}",
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [*lead, *(_anthropic_block(b) for b in reply.message.content)],
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
    }
    if reply.reported is not None:
        out["usage"] = _usage_with(reply, compaction)
    if reply.applied_edits is not None:
        out["context_management"] = context_management(reply)
    return out


def _usage_with(reply: LocalReply, compaction: CompactionPass | None) -> dict[str, Any]:
    """The reply's usage, with ``iterations`` when a compaction ran: the compaction pass, then the
    reply's own sampling (none when it paused); the top-level fields leave the compaction out."""
    assert reply.reported is not None
    usage: dict[str, Any] = anthropic_usage(reply.reported)
    if compaction is not None:
        own = Usage(
            fresh_input=reply.input_tokens - reply.cache.read - reply.cache.write,
            cache_read=reply.cache.read,
            cache_write=reply.cache.write,
            output=reply.output_tokens,
        )
        usage["iterations"] = [iteration_usage("compaction", compaction.usage)]
        if reply.stop_reason != "compaction":
            usage["iterations"].append(iteration_usage("message", own))
    return usage


def context_management(reply: LocalReply) -> dict[str, Any]:
    """The response's ``context_management``: the edits applied to the request (Anthropic's
    ``BetaContextManagementResponse``; on a stream, in the ``message_delta`` event)."""
    return {"applied_edits": [edit.wire() for edit in reply.applied_edits or ()]}


def anthropic_events(reply: LocalReply, compaction: CompactionPass | None = None) -> Iterator[bytes]:
    """The Messages SSE stream of a reply (``compaction``: as :func:`anthropic_message`'s; its block
    streams as one ``compaction_delta``)."""
    start: dict[str, Any] = {
        "id": f"msg_{reply.id}",
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
    }
    if reply.reported is not None:
        # message_start's output_tokens is a placeholder (Anthropic's streaming docs): what came before,
        # plus 1.
        placeholder = Usage(
            fresh_input=reply.reported.fresh_input,
            cache_read=reply.reported.cache_read,
            cache_write=reply.reported.cache_write,
            output=reply.before.output + 1,
        )
        start["usage"] = anthropic_usage(placeholder)
    yield sse({"type": "message_start", "message": start}, "message_start")
    lead = 0 if compaction is None else 1
    if compaction is not None:
        yield from _compaction_events(compaction)
    for index, block in enumerate(reply.message.content, start=lead):
        if isinstance(block, ToolUse):
            first = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in text_pieces(compact_json(dict(block.input)))
            ]
        elif isinstance(block, Thinking):
            first = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in text_pieces(block.thinking)]
            if block.signature:
                deltas.append({"type": "signature_delta", "signature": block.signature})
        else:
            text = block.text if isinstance(block, Text) else f"[{block.type} block]"
            first = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in text_pieces(text)]
        yield sse(
            {"type": "content_block_start", "index": index, "content_block": first}, "content_block_start"
        )
        for delta in deltas:
            yield sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta")
        yield sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    final: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": reply.stop_reason, "stop_sequence": None},
    }
    if reply.reported is not None:
        final["usage"] = _usage_with(reply, compaction)
    if reply.applied_edits is not None:
        final["context_management"] = context_management(reply)
    yield sse(final, "message_delta")
    yield sse({"type": "message_stop"}, "message_stop")


def _compaction_events(compaction: CompactionPass) -> Iterator[bytes]:
    """A compaction block's events: its start (no content yet), one delta with all of it, its stop."""
    first = {"type": "compaction", "content": None}
    delta = {"type": "compaction_delta", "content": compaction.block.get("content")}
    yield sse({"type": "content_block_start", "index": 0, "content_block": first}, "content_block_start")
    yield sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
    yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")


def _openai_message(reply: LocalReply) -> dict[str, Any]:
    texts = [b.text for b in reply.message.content if isinstance(b, Text)]
    calls = [b for b in reply.message.content if isinstance(b, ToolUse)]
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts else None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": compact_json(dict(c.input))},
            }
            for c in calls
        ]
    return message


def openai_completion(reply: LocalReply) -> dict[str, Any]:
    """The non-streaming Chat Completions response."""
    out: dict[str, Any] = {
        "id": f"chatcmpl-{reply.id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": _openai_message(reply),
                "finish_reason": _OPENAI_FINISH[reply.stop_reason],
                "logprobs": None,
            }
        ],
    }
    if reply.reported is not None:
        out["usage"] = openai_usage(reply.reported)
    return out


def openai_chunks(reply: LocalReply, *, include_usage: bool) -> Iterator[bytes]:
    """The Chat Completions SSE stream of a reply."""
    created = int(time.time())
    head = {
        "id": f"chatcmpl-{reply.id}",
        "object": "chat.completion.chunk",
        "created": created,
        "model": reply.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body: dict[str, Any] = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if include_usage:
            body["usage"] = None
        return sse(body)

    yield chunk({"role": "assistant", "content": ""})
    for block in reply.message.content:
        if isinstance(block, Text):
            for piece in text_pieces(block.text):
                yield chunk({"content": piece})
    calls = [b for b in reply.message.content if isinstance(b, ToolUse)]
    for index, call in enumerate(calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        for piece in text_pieces(compact_json(dict(call.input))):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, _OPENAI_FINISH[reply.stop_reason])
    if include_usage and reply.reported is not None:
        yield sse({**head, "choices": [], "usage": openai_usage(reply.reported)})
    yield sse("[DONE]")


def chat_from_responses(
    data: dict[str, Any], unseal: Callable[[str], str | None] | None = None
) -> dict[str, Any]:
    """A Responses API ``input_tokens`` body (``model``, ``input``, ``instructions``, ``tools``) as
    the Chat Completions request it stands for, so the local provider counts both alike:
    ``input_text`` / ``output_text`` parts become text, ``input_image`` an ``image_url`` part,
    ``function_call`` items the assistant's ``tool_calls`` and ``function_call_output`` a tool
    message, a ``compaction`` item a user message of the summary it seals (``unseal``; its sealed text
    when this server did not seal it). Shapes it does not know are left for the Chat Completions parser
    to refuse."""
    messages: list[dict[str, Any]] = []
    if isinstance(data.get("instructions"), str):
        messages.append({"role": "system", "content": data["instructions"]})
    items = data.get("input")
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict):
            messages.append(item)
            continue
        kind = item.get("type", "message")
        if kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments")},
            }
            if messages and messages[-1].get("role") == "assistant" and "tool_calls" in messages[-1]:
                messages[-1]["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "compaction":
            sealed = str(item.get("encrypted_content") or "")
            summary = unseal(sealed) if unseal is not None else None
            messages.append({"role": "user", "content": sealed if summary is None else summary})
        elif kind == "function_call_output":
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")}
            )
        else:
            content = item.get("content")
            if isinstance(content, list):
                content = [_chat_part(p) for p in content]
            messages.append({"role": item.get("role"), "content": content})
    tools = [
        {
            "type": "function",
            "function": {k: t.get(k) for k in ("name", "description", "parameters") if t.get(k) is not None},
        }
        for t in data.get("tools") or ()
        if isinstance(t, dict) and t.get("type") == "function"
    ]
    out: dict[str, Any] = {"model": data.get("model"), "messages": messages}
    if tools:
        out["tools"] = tools
    return out


def _chat_part(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    if part.get("type") in ("input_text", "output_text"):
        return {"type": "text", "text": part.get("text")}
    if part.get("type") == "input_image":
        return {
            "type": "image_url",
            "image_url": {"url": part.get("image_url"), "detail": part.get("detail", "auto")},
        }
    return part
