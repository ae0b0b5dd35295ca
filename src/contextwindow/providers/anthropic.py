"""The Anthropic Messages API through the official ``anthropic`` SDK.

Renders with :func:`contextwindow.formats.anthropic.render_request`, streams with
``messages.create(stream=True)`` (raw events: the SDK's accumulating helper assumes every server
sends usage, and some compatible servers do not), and maps every SDK exception into the error tree.

Cache breakpoints: with ``cache_breakpoints=True`` (the default) the last system block and the last
block of the last message carry ``cache_control: {"type": "ephemeral"}``, so consecutive requests of a
tool loop, which share their prefix by construction, read it from the prompt cache. Usage reports
``cache_read_input_tokens`` and ``cache_creation_input_tokens`` beside ``input_tokens``;
:meth:`contextwindow.usage.tracker.Usage.from_anthropic` keeps them disjoint.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

from ..compile.head import SUMMARY_HEADER
from ..content import Request, ToolUse
from ..errors import ProviderError
from ..formats import AttachmentLoader
from ..formats.anthropic import render_request
from ..usage.tracker import Usage
from .base import (
    MessageBuilder,
    ProviderEvent,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    UsageSample,
    normalise_stop_reason,
    request_model,
)
from .errors import map_sdk_error

if TYPE_CHECKING:
    import anthropic

__all__ = ["AnthropicProvider", "map_anthropic_error"]

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def map_anthropic_error(exc: BaseException) -> ProviderError:
    """An ``anthropic`` SDK exception as the error tree's equivalent (see :mod:`.errors`)."""
    import anthropic

    return map_sdk_error(exc, provider="anthropic", connection_error=anthropic.APIConnectionError)


class AnthropicProvider:
    """A :class:`~contextwindow.providers.base.Provider` over ``anthropic.AsyncAnthropic``.

    ``client`` defaults to ``AsyncAnthropic()`` (key and base URL from the environment); ``model`` is
    used when the request names none; ``extra`` is merged into every request body (``thinking``,
    ``temperature``, ...).
    """

    name = "anthropic"

    def __init__(
        self,
        client: anthropic.AsyncAnthropic | None = None,
        *,
        model: str | None = None,
        cache_breakpoints: bool = True,
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        if client is None:
            import anthropic

            client = anthropic.AsyncAnthropic()
        self.client = client
        self.model = model
        self.cache_breakpoints = cache_breakpoints
        self.extra = dict(extra or {})

    def body(self, request: Request, *, max_tokens: int, load: AttachmentLoader) -> dict[str, Any]:
        """The request body this provider sends for ``request`` (without ``stream``)."""
        body = render_request(request, load)
        body.update(self.extra)
        body.pop("stream", None)
        body["max_tokens"] = max_tokens
        body["model"] = request_model(request, self.model, provider=self.name)
        if self.cache_breakpoints:
            _mark_cache_breakpoints(body)
        return body

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int:
        """The provider's own count of ``request``'s input, by ``messages.count_tokens``
        (https://platform.claude.com/docs/en/build-with-claude/token-counting): exact for Claude,
        whose tokenizer is not public; nothing is generated or billed."""
        import anthropic

        body = self.body(request, max_tokens=1, load=load)
        allowed = ("messages", "model", "system", "tools", "tool_choice", "thinking")
        try:
            counted = await self.client.messages.count_tokens(**{k: body[k] for k in allowed if k in body})
        except anthropic.AnthropicError as exc:
            raise map_anthropic_error(exc) from exc
        return int(counted.input_tokens)

    async def stream(
        self, request: Request, *, max_tokens: int, load: AttachmentLoader
    ) -> AsyncIterator[ProviderEvent]:
        """Stream one call; see :mod:`contextwindow.providers.base` for the events."""
        import anthropic

        body = self.body(request, max_tokens=max_tokens, load=load)
        try:
            raw_stream = await self.client.messages.create(**body, stream=True)
        except anthropic.AnthropicError as exc:
            raise map_anthropic_error(exc) from exc
        builder = MessageBuilder()
        merged: dict[str, int] = {}
        tool: dict[str, Any] | None = None
        raw_stop: str | None = None
        try:
            async with raw_stream:
                async for event in raw_stream:
                    kind = event.type
                    if kind == "message_start":
                        sample = _merge_usage(merged, getattr(event.message, "usage", None))
                        if sample is not None:
                            yield UsageSample(usage=sample)
                    elif kind == "content_block_start":
                        block = event.content_block
                        builder.new_block()
                        if block.type == "tool_use":
                            tool = {"id": block.id, "name": block.name, "json": "", "input": block.input}
                        elif block.type == "text" and block.text:
                            builder.text(block.text)
                            yield TextDelta(text=block.text)
                    elif kind == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta":
                            builder.text(delta.text)
                            yield TextDelta(text=delta.text)
                        elif delta.type == "thinking_delta":
                            builder.thinking(delta.thinking)
                            yield ThinkingDelta(thinking=delta.thinking)
                        elif delta.type == "signature_delta":
                            builder.thinking("", signature=delta.signature)
                            yield ThinkingDelta(signature=delta.signature)
                        elif delta.type == "input_json_delta" and tool is not None:
                            tool["json"] += delta.partial_json
                    elif kind == "content_block_stop" and tool is not None:
                        use = _tool_use(tool)
                        tool = None
                        builder.tool_use(use)
                        yield ToolCall(tool_use=use)
                    elif kind == "message_delta":
                        raw_stop = event.delta.stop_reason or raw_stop
                        sample = _merge_usage(merged, getattr(event, "usage", None))
                        if sample is not None:
                            yield UsageSample(usage=sample)
                    elif kind == "message_stop":
                        break
        except anthropic.AnthropicError as exc:
            raise map_anthropic_error(exc) from exc
        yield Stop(reason=normalise_stop_reason(raw_stop), raw_reason=raw_stop, message=builder.message())


def _merge_usage(merged: dict[str, int], usage: Any) -> Usage | None:
    """Last writer wins per field (``message_delta`` counts are cumulative, and server tools can send
    several); ``None`` when this event carried no counts."""
    if usage is None:
        return None
    seen = False
    for key in _USAGE_KEYS:
        value = getattr(usage, key, None) if not isinstance(usage, Mapping) else usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            merged[key] = value
            seen = True
    if not seen:
        return None
    return Usage.from_anthropic(dict(merged))


def _tool_use(tool: dict[str, Any]) -> ToolUse:
    text = tool["json"]
    if text.strip():
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError:
            parsed = {"__raw_arguments__": text}
    else:
        parsed = tool["input"] if isinstance(tool["input"], dict) else {}
    if not isinstance(parsed, dict):
        parsed = {"__raw_arguments__": text}
    return ToolUse(id=tool["id"], name=tool["name"], input=parsed)


def _mark_cache_breakpoints(body: dict[str, Any]) -> None:
    """System and tools, the summary checkpoint, the newest message: a fold rewrites the cache from
    the summary on, and a change in the tail (an archived tool result, an evicted image) from there,
    while the prefix before the summary's breakpoint stays read."""
    system = body.get("system")
    if isinstance(system, list) and system:
        system[-1] = {**system[-1], "cache_control": {"type": "ephemeral"}}
    messages = body.get("messages") or []
    summary = _summary_message(messages)
    if summary is not None and summary < len(messages) - 1:
        content = messages[summary]["content"]
        content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
    for message in reversed(messages):
        content = message.get("content")
        if isinstance(content, list) and content:
            last = content[-1]
            if last.get("type") not in ("thinking", "redacted_thinking"):
                content[-1] = {**last, "cache_control": {"type": "ephemeral"}}
            break


def _summary_message(messages: list[dict[str, Any]]) -> int | None:
    """The index of the summary checkpoint's message (the first, opening with ``SUMMARY_HEADER``)."""
    if not messages:
        return None
    content = messages[0].get("content")
    if isinstance(content, list) and content:
        first = content[0]
        if first.get("type") == "text" and str(first.get("text", "")).startswith(SUMMARY_HEADER):
            return 0
    return None
