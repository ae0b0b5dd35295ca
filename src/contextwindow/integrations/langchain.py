"""LangChain v1 agents: an ``AgentMiddleware`` that fits every model call to the window.

::

    from langchain.agents import create_agent
    from contextwindow.integrations.langchain import ContextWindowMiddleware

    agent = create_agent(model, tools, middleware=[ContextWindowMiddleware()])

The agent's state keeps every message, as it always does; each model call goes through
``wrap_model_call`` (or ``awrap_model_call``): the request's messages, system message and tools are
written as a Chat Completions body (``langchain_core.messages.convert_to_openai_messages``,
``convert_to_openai_tool``) and given to the guard core, which matches the conversation in the
ledger, prices what is new, folds, evicts media and archives stale results, and sends the compiled
history through the agent's own handler (``request.override(messages=...)``): the model, its bound
tools, retries and the other middleware run as before. Messages the guard did not change are the
agent's own objects; a rejection for size (recognised through the wrapped provider error) is
recovered by compacting and calling the handler again, once. Summary checkpoints are written by the
request's model unless ``summarizer=`` names another chat model (``False``: no summaries).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from ..compaction import CompactionMode
from ..compile import Policy
from ..engine.observe import EventHook
from ..engine.settings import EngineSettings
from ..errors import UsageError
from ..guard import Exchange, GuardOptions, Reply
from ..store import Store
from ..usage.tracker import Usage
from ._bridge import (
    REREAD_DESCRIPTION,
    REREAD_NAME,
    ChatBridge,
    Originals,
    fitted_max_tokens,
    leading_system,
    names_reread,
    reply_from_wire,
    usage_from_totals,
    without_reread,
)

__all__ = ["ContextWindowMiddleware"]

ModelCallResult = ModelResponse | AIMessage | ExtendedModelResponse


class ContextWindowMiddleware(AgentMiddleware):
    """Keeps a ``create_agent`` agent inside its model's window (see the module docstring).

    ``model`` names the model profile to fit (default: the chat model's ``model_name`` or
    ``model``); the other options are ``guard()``'s: ``store``, ``session``, ``context_window``,
    ``policy``, ``settings``, ``summary_model``. With ``reread`` (the default) the middleware adds the
    ``read_archived`` tool to the agent (``AgentMiddleware.tools``): the agent runs it like its own,
    and it answers from the ledger what a placeholder took out of the request. ``compaction`` is
    ``GuardOptions.compaction``: the middleware speaks Chat Completions to the guard and the model's
    own call carries no provider editing, so ``"provider"`` folds locally, saying so once on the
    ``contextwindow.guard`` logger (``"auto"`` folds locally without a word).
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        store: Store | str | Path | None = None,
        session: str | None = None,
        context_window: int | None = None,
        summarizer: BaseChatModel | bool | None = None,
        summary_model: str | None = None,
        policy: Policy | None = None,
        settings: EngineSettings | None = None,
        on_event: EventHook | None = None,
        reread: bool = True,
        compaction: CompactionMode = "local",
    ) -> None:
        super().__init__()
        if summarizer is True:
            summarizer = None
        self.model = model
        self.summarizer = summarizer
        self.bridge = ChatBridge(
            GuardOptions(
                store=store,
                session=session,
                summarizer=summarizer,
                summary_model=summary_model,
                context_window=context_window,
                policy=policy,
                settings=settings,
                on_event=on_event,
                compaction=compaction,
            ),
            host_rereads=reread,
        )
        self.tools = [self._reread_tool()] if reread else []

    def _reread_tool(self) -> Any:
        from langchain_core.tools import StructuredTool

        def read_archived(id: str) -> Any:
            answer = self.bridge.reread(id)
            if not answer.media:
                return answer.text
            blocks: list[dict[str, Any]] = [{"type": "text", "text": answer.text}]
            for media_type, data in answer.media:
                blocks.append(
                    {
                        "type": "image" if media_type.startswith("image/") else "file",
                        "base64": base64.b64encode(data).decode("ascii"),
                        "mime_type": media_type,
                    }
                )
            return blocks

        return StructuredTool.from_function(read_archived, name=REREAD_NAME, description=REREAD_DESCRIPTION)

    @property
    def last_exchange(self) -> Exchange | None:
        """What the guard did for the latest model call: session id, the body sent, events."""
        return self.bridge.last_exchange

    # -- LangChain → Chat Completions, and back --------------------------------------------------------

    def _body(self, request: ModelRequest[Any]) -> tuple[dict[str, Any], Originals[AnyMessage]]:
        model = self.model or _model_name(request.model)
        if model is None:
            raise UsageError("name the model profile: ContextWindowMiddleware(model='gpt-4o')")
        wire: list[dict[str, Any]] = []
        if request.system_message is not None:
            wire.extend(_to_wire([request.system_message]))
        pairs: list[tuple[dict[str, Any], AnyMessage]] = []
        for message in request.messages:
            converted = _to_wire([message])
            wire.extend(converted)
            if len(converted) == 1:
                pairs.append((converted[0], message))
        body: dict[str, Any] = {"model": model, "messages": wire}
        tools = without_reread([convert_to_openai_tool(t) for t in request.tools if not _is_server_tool(t)])
        if tools:
            body["tools"] = tools
        max_tokens = _max_tokens(request)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body, Originals(pairs)

    def _compiled(
        self, request: ModelRequest[Any], originals: Originals[AnyMessage], body: dict[str, Any]
    ) -> Any:
        wire = list(body["messages"])
        history = wire[leading_system(wire) :]
        messages = originals.restore(history, _from_wire)
        changes: dict[str, Any] = {"messages": messages}
        if not names_reread(body):
            changes["tools"] = [t for t in request.tools if getattr(t, "name", None) != REREAD_NAME]
        lowered = fitted_max_tokens(_max_tokens(request), body)
        if lowered is not None:
            # The guard lowered the agent's bound to fit the window: the model's call sends it.
            changes["model_settings"] = {**request.model_settings, "max_tokens": lowered}
        return request.override(**changes)

    def _summary_model(self, request: ModelRequest[Any]) -> BaseChatModel:
        return self.summarizer if isinstance(self.summarizer, BaseChatModel) else request.model

    # -- the hooks -----------------------------------------------------------------------------------

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult:
        body, originals = self._body(request)

        def summarize(summary: dict[str, Any]) -> Reply:
            messages, kwargs = _summary_call(summary)
            return _reply(self._summary_model(request).invoke(messages, **kwargs))

        exchange = self.bridge.run(
            body, lambda sent: handler(self._compiled(request, originals, sent)), summarize
        )
        exchange.finish(_reply(exchange.result))
        return exchange.result  # type: ignore[no-any-return]

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult:
        body, originals = self._body(request)

        async def send(sent: dict[str, Any]) -> Any:
            return await handler(self._compiled(request, originals, sent))

        async def summarize(summary: dict[str, Any]) -> Reply:
            messages, kwargs = _summary_call(summary)
            return _reply(await self._summary_model(request).ainvoke(messages, **kwargs))

        exchange = await self.bridge.arun(body, send, summarize)
        exchange.finish(_reply(exchange.result))
        return exchange.result  # type: ignore[no-any-return]


def _model_name(model: Any) -> str | None:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _max_tokens(request: ModelRequest[Any]) -> int | None:
    for source in (request.model_settings, vars(request.model) if hasattr(request.model, "__dict__") else {}):
        for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            value = source.get(key) if isinstance(source, Mapping) else None
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


def _is_server_tool(tool: Any) -> bool:
    # A provider's built-in tool given as a dict without a function schema (web search, say): the
    # guard cannot price it as a function; it still reaches the model through the handler.
    return isinstance(tool, Mapping) and "function" not in tool and "name" not in tool


def _to_wire(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    converted = convert_to_openai_messages(messages)
    return [dict(m) for m in (converted if isinstance(converted, list) else [converted])]


def _from_wire(message: Mapping[str, Any]) -> AnyMessage:
    [converted] = convert_to_messages([dict(message)])
    return converted  # type: ignore[return-value]


def _summary_call(body: Mapping[str, Any]) -> tuple[list[BaseMessage], dict[str, Any]]:
    messages = convert_to_messages(list(body.get("messages") or []))
    kwargs: dict[str, Any] = {}
    if isinstance(body.get("max_tokens"), int):
        kwargs["max_tokens"] = body["max_tokens"]
    return messages, kwargs


def _ai_message(result: Any) -> AIMessage | None:
    if isinstance(result, ExtendedModelResponse):
        result = result.model_response
    if isinstance(result, ModelResponse):
        result = next((m for m in result.result if isinstance(m, AIMessage)), None)
    return result if isinstance(result, AIMessage) else None


def _usage(message: AIMessage) -> Usage | None:
    meta = message.usage_metadata
    if not meta:
        return None
    # LangChain's input_tokens is everything the provider counted as input, cache reads and writes
    # included (https://python.langchain.com/api_reference/core/messages/langchain_core.messages.ai.UsageMetadata.html).
    details: Mapping[str, Any] = meta.get("input_token_details") or {}
    return usage_from_totals(
        input_tokens=int(meta.get("input_tokens") or 0),
        output_tokens=int(meta.get("output_tokens") or 0),
        cache_read=int(details.get("cache_read") or 0),
        cache_write=int(details.get("cache_creation") or 0),
        reasoning=int((meta.get("output_token_details") or {}).get("reasoning") or 0),
    )


def _reply(result: Any) -> Reply:
    message = _ai_message(result)
    if message is None:
        return Reply(message=reply_from_wire({"role": "assistant", "content": None}).message)
    [wire] = _to_wire([message])
    stop = (message.response_metadata or {}).get("finish_reason") or (message.response_metadata or {}).get(
        "stop_reason"
    )
    return reply_from_wire(wire, usage=_usage(message), stop_reason=stop if isinstance(stop, str) else None)
