"""The SDKs' responses and stream events as a canonical :class:`~._steps.Reply`.

Used by the client wrappers to record what the provider answered: for a response at once, for a
stream as its events pass by the agent (:class:`AnthropicEvents`, :class:`OpenAIChunks` accumulate
them). Anything the canonical form cannot hold (a server tool's blocks, say) leaves the message
empty rather than failing the agent's call: the usage is still recorded, and the agent's own copy of
the message is stored when it sends it back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..content import Message
from ..errors import ContextWindowError
from ..formats import anthropic as anthropic_format
from ..formats import openai as openai_format
from ..formats import responses as responses_format
from ..usage.tracker import Usage
from ._steps import Reply

__all__ = [
    "AnthropicEvents",
    "OpenAIChunks",
    "ResponsesEvents",
    "anthropic_reply",
    "jsonable",
    "openai_reply",
    "responses_reply",
]

_EMPTY = Message(role="assistant", content=())


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON values: SDK models dumped, the SDKs' ``NOT_GIVEN``/``omit`` dropped."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        # JSON mode dumps JSON values only (string keys; no SDK sentinel is a field's value).
        return dump(mode="json", exclude_none=True, by_alias=True)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items() if not _omitted(v)}
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if isinstance(value, list | tuple) or hasattr(value, "__iter__"):
        return [jsonable(v) for v in value]
    return value


def _omitted(value: Any) -> bool:
    return type(value).__name__ in ("NotGiven", "Omit")


def _assistant(parse: Any, raw: Mapping[str, Any]) -> Message:
    try:
        [message] = parse([raw]).request.messages
    except (ContextWindowError, ValueError):
        return _EMPTY
    return message if message.role == "assistant" else _EMPTY


def _usage(kind: str, raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping) or not raw:
        return None
    try:
        return Usage.from_anthropic(raw) if kind == "anthropic" else Usage.from_openai(raw)
    except ContextWindowError:
        return None


def anthropic_reply(response: Any) -> Reply:
    """An Anthropic ``Message`` response as a reply."""
    data = jsonable(response)
    if not isinstance(data, Mapping):
        return Reply(message=_EMPTY)
    message = _assistant(
        anthropic_format.parse_wire_messages, {"role": "assistant", "content": data.get("content") or []}
    )
    return Reply(
        message=message, usage=_usage("anthropic", data.get("usage")), stop_reason=data.get("stop_reason")
    )


def openai_reply(response: Any) -> Reply:
    """An OpenAI ``ChatCompletion`` response as a reply (its first choice)."""
    data = jsonable(response)
    if not isinstance(data, Mapping):
        return Reply(message=_EMPTY)
    choices = data.get("choices") or []
    first = choices[0] if choices and isinstance(choices[0], Mapping) else {}
    raw = dict(first.get("message") or {})
    raw["role"] = "assistant"
    raw = {k: raw[k] for k in ("role", "content", "tool_calls") if k in raw}
    return Reply(
        message=_assistant(openai_format.parse_wire_messages, raw),
        usage=_usage("openai", data.get("usage")),
        stop_reason=first.get("finish_reason"),
    )


class AnthropicEvents:
    """Accumulates an Anthropic Messages stream's raw events into a reply."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, str] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.done = False

    def feed(self, event: Any) -> None:
        data = jsonable(event)
        if not isinstance(data, Mapping):
            return
        kind = data.get("type")
        if kind == "message_start":
            self.usage.update((data.get("message") or {}).get("usage") or {})
        elif kind == "content_block_start":
            block = dict(data.get("content_block") or {})
            if block.get("type") == "tool_use":
                block["input"] = {}
            self.blocks[int(data.get("index", len(self.blocks)))] = block
        elif kind == "content_block_delta":
            index = int(data.get("index", 0))
            block = self.blocks.setdefault(index, {"type": "text", "text": ""})
            delta = data.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = delta.get("signature")
            elif dtype == "input_json_delta":
                self.json[index] = self.json.get(index, "") + delta.get("partial_json", "")
        elif kind == "message_delta":
            self.usage.update({k: v for k, v in (data.get("usage") or {}).items() if v is not None})
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
        elif kind == "message_stop":
            self.done = True

    def reply(self) -> Reply:
        content = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            if index in self.json:
                try:
                    block["input"] = json.loads(self.json[index]) if self.json[index].strip() else {}
                except json.JSONDecodeError:
                    block["input"] = {}
            content.append(block)
        message = _assistant(anthropic_format.parse_wire_messages, {"role": "assistant", "content": content})
        return Reply(message=message, usage=_usage("anthropic", self.usage), stop_reason=self.stop_reason)


class OpenAIChunks:
    """Accumulates an OpenAI Chat Completions stream's chunks into a reply (its first choice)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.done = False

    def feed(self, chunk: Any) -> None:
        data = jsonable(chunk)
        if not isinstance(data, Mapping):
            return
        if isinstance(data.get("usage"), Mapping):
            self.usage = dict(data["usage"])
        for choice in data.get("choices") or []:
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(
                    int(call.get("index", 0)), {"id": "", "name": "", "arguments": ""}
                )
                slot["id"] = call.get("id") or slot["id"]
                function = call.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.stop_reason = choice["finish_reason"]
                self.done = True

    def reply(self) -> Reply:
        raw: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            raw["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for _, c in sorted(self.calls.items())
            ]
        return Reply(
            message=_assistant(openai_format.parse_wire_messages, raw),
            usage=_usage("openai", self.usage),
            stop_reason=self.stop_reason,
        )


def responses_reply(response: Any) -> Reply:
    """An OpenAI Responses ``Response`` as a reply: its reasoning, message and function-call output
    items, and (in ``extra``) the response's ``id`` and whether the provider stores it."""
    data = jsonable(response)
    if not isinstance(data, Mapping):
        return Reply(message=_EMPTY)
    items = [
        _output_item(item)
        for item in data.get("output") or []
        if isinstance(item, Mapping) and item.get("type") in _OUTPUT_ITEMS
    ]
    try:
        parsed = responses_format.parse_request({"input": items}).request.messages
    except (ContextWindowError, ValueError):
        parsed = ()
    said = [m for m in parsed if m.role == "assistant"]
    if len(said) == 1:
        message = said[0]  # with what its items said of themselves (ids, phase) as metadata
    else:
        blocks = tuple(b for m in said for b in m.content)
        message = Message(role="assistant", content=blocks) if blocks else _EMPTY
    status = data.get("status")
    stop = "tool_calls" if any(i.get("type") == "function_call" for i in items) else "stop"
    if status == "incomplete":
        stop = "length"
    extra: dict[str, Any] = {}
    if isinstance(data.get("id"), str):
        extra = {"response_id": data["id"], "stored": data.get("store") is not False}
    return Reply(message=message, usage=_usage("openai", data.get("usage")), stop_reason=stop, extra=extra)


_OUTPUT_ITEMS = {
    "message": ("type", "id", "role", "content", "phase"),
    "function_call": ("type", "id", "call_id", "name", "arguments"),
    "reasoning": ("type", "id", "summary", "encrypted_content"),
}
"""The output items a reply keeps, and the fields of each that the canonical form carries."""


def _output_item(item: Mapping[str, Any]) -> dict[str, Any]:
    kept = {k: item[k] for k in _OUTPUT_ITEMS[item["type"]] if k in item}
    if item["type"] == "message":
        kept["content"] = [
            p
            for p in item.get("content") or []
            if isinstance(p, Mapping) and p.get("type") in ("output_text", "refusal")
        ]
    return kept


class ResponsesEvents:
    """Accumulates an OpenAI Responses stream: the reply is the ``response.completed`` event's response
    (or ``response.incomplete``'s)."""

    def __init__(self) -> None:
        self.final: Any = None
        self.usage: dict[str, Any] | None = None
        self.done = False

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None) if not isinstance(event, Mapping) else event.get("type")
        if kind in ("response.completed", "response.incomplete"):
            self.final = (
                getattr(event, "response", None) if not isinstance(event, Mapping) else event.get("response")
            )
            self.usage = {"final": True}
            self.done = True

    def reply(self) -> Reply:
        return responses_reply(self.final) if self.final is not None else Reply(message=_EMPTY)
