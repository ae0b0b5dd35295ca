"""OpenAI Chat Completions through the official ``openai`` SDK.

Renders with :func:`contextwindow.formats.openai.render_request` and streams with
``stream_options={"include_usage": True}``: OpenAI then sends usage once, on a last chunk whose
``choices`` is empty, and not at all when a stream is interrupted
(``stream_options.include_usage``: https://platform.openai.com/docs/api-reference/chat/create).
Some compatible servers send a running total on every chunk instead; each non-null ``usage``
becomes a :class:`~.base.UsageSample`, so last-value semantics handle both. Cached tokens are a subset of
``prompt_tokens``; :meth:`contextwindow.usage.tracker.Usage.from_openai` subtracts them out of fresh input.

Tool calls arrive in fragments keyed by ``index``; each is emitted as one :class:`~.base.ToolCall` when
the stream ends (Chat Completions has no per-call end marker). ``reasoning_content`` deltas, which
DeepSeek and vLLM send, become thinking.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..content import Request, ToolUse
from ..errors import ProviderError
from ..formats import AttachmentLoader
from ..formats.openai import RAW_ARGUMENTS, render_request
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
    import openai

__all__ = ["OpenAIProvider", "map_openai_error", "responses_input", "responses_tool"]


def map_openai_error(exc: BaseException) -> ProviderError:
    """An ``openai`` SDK exception as the error tree's equivalent (see :mod:`.errors`)."""
    import openai

    return map_sdk_error(exc, provider="openai", connection_error=openai.APIConnectionError)


class OpenAIProvider:
    """A :class:`~contextwindow.providers.base.Provider` over ``openai.AsyncOpenAI`` Chat Completions.

    ``max_tokens_field`` is ``max_completion_tokens`` (OpenAI's current name, required by reasoning
    models) or ``max_tokens`` (what many compatible servers know).
    """

    name = "openai"

    def __init__(
        self,
        client: openai.AsyncOpenAI | None = None,
        *,
        model: str | None = None,
        max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        if client is None:
            import openai

            client = openai.AsyncOpenAI()
        self.client = client
        self.model = model
        self.max_tokens_field = max_tokens_field
        self.extra = dict(extra or {})

    def body(self, request: Request, *, max_tokens: int, load: AttachmentLoader) -> dict[str, Any]:
        """The request body this provider sends for ``request`` (streaming, with usage)."""
        body = render_request(request, load)
        body.update(self.extra)
        body.pop("max_tokens", None)
        body.pop("max_completion_tokens", None)
        body[self.max_tokens_field] = max_tokens
        body["model"] = request_model(request, self.model, provider=self.name)
        body["stream"] = True
        body["stream_options"] = {**(body.get("stream_options") or {}), "include_usage": True}
        return body

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int:
        """The provider's own count of ``request``'s input, by the Responses API's
        ``responses.input_tokens.count`` (https://platform.openai.com/docs/api-reference/responses/input-tokens):
        it includes the formatting tokens and the images, files and tools tiktoken cannot count."""
        import openai

        body = self.body(request, max_tokens=1, load=load)
        arguments: dict[str, Any] = {"model": body["model"], "input": responses_input(body["messages"])}
        if body.get("tools"):
            arguments["tools"] = [responses_tool(t) for t in body["tools"]]
        try:
            counted = await self.client.responses.input_tokens.count(**arguments)
        except openai.OpenAIError as exc:
            raise map_openai_error(exc) from exc
        return int(counted.input_tokens)

    async def stream(
        self, request: Request, *, max_tokens: int, load: AttachmentLoader
    ) -> AsyncIterator[ProviderEvent]:
        """Stream one call; see :mod:`contextwindow.providers.base` for the events."""
        import openai

        body = self.body(request, max_tokens=max_tokens, load=load)
        try:
            chunks = await self.client.chat.completions.create(**body)
        except openai.OpenAIError as exc:
            raise map_openai_error(exc) from exc
        builder = MessageBuilder()
        calls: dict[int, dict[str, str]] = {}
        raw_stop: str | None = None
        try:
            async with chunks:
                async for chunk in chunks:
                    usage = getattr(chunk, "usage", None)
                    for choice in chunk.choices or ():
                        delta = choice.delta
                        if delta is not None:
                            reasoning = getattr(delta, "reasoning_content", None)
                            if isinstance(reasoning, str) and reasoning:
                                builder.thinking(reasoning)
                                yield ThinkingDelta(thinking=reasoning)
                            if delta.content:
                                builder.text(delta.content)
                                yield TextDelta(text=delta.content)
                            for call in delta.tool_calls or ():
                                slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                                if call.id:
                                    slot["id"] = call.id
                                if call.function is not None:
                                    slot["name"] += call.function.name or ""
                                    slot["arguments"] += call.function.arguments or ""
                        if choice.finish_reason:
                            raw_stop = choice.finish_reason
                    if usage is not None:
                        yield UsageSample(usage=Usage.from_openai(usage))
        except openai.OpenAIError as exc:
            raise map_openai_error(exc) from exc
        for index in sorted(calls):
            use = _tool_use(calls[index])
            builder.tool_use(use)
            yield ToolCall(tool_use=use)
        yield Stop(reason=normalise_stop_reason(raw_stop), raw_reason=raw_stop, message=builder.message())


def responses_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages as Responses API input items: a message keeps its role and
    content (text parts become ``input_text`` / ``output_text``, images ``input_image``); an
    assistant's tool calls become ``function_call`` items and a tool message a
    ``function_call_output`` (https://platform.openai.com/docs/guides/migrate-to-responses)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            output = message.get("content")
            if not isinstance(output, str):
                output = "".join(p.get("text", "") for p in output or () if isinstance(p, dict))
            items.append(
                {"type": "function_call_output", "call_id": message["tool_call_id"], "output": output}
            )
            continue
        content = message.get("content")
        if content:
            kind = "output_text" if role == "assistant" else "input_text"
            if isinstance(content, str):
                parts: list[dict[str, Any]] = [{"type": kind, "text": content}]
            else:
                parts = [_responses_part(p, kind) for p in content]
            items.append({"role": role, "content": parts})
        for call in message.get("tool_calls") or ():
            function = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function["arguments"],
                }
            )
    return items


def _responses_part(part: dict[str, Any], text_kind: str) -> dict[str, Any]:
    if part.get("type") == "image_url":
        image = part["image_url"]
        return {"type": "input_image", "image_url": image["url"], "detail": image.get("detail", "auto")}
    return {"type": text_kind, "text": part.get("text", "")}


def responses_tool(tool: dict[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool definition as a Responses API function tool."""
    function = tool.get("function", {})
    return {
        "type": "function",
        "name": function.get("name"),
        "description": function.get("description"),
        "parameters": function.get("parameters", {}),
    }


def _tool_use(call: dict[str, str]) -> ToolUse:
    arguments = call["arguments"]
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        parsed = None
    tool_input = parsed if isinstance(parsed, dict) else {RAW_ARGUMENTS: arguments}
    return ToolUse(id=call["id"], name=call["name"], input=tool_input)
