"""pydantic-ai: a capability that fits every model request to the window.

::

    from pydantic_ai import Agent
    from contextwindow.integrations.pydantic_ai import ContextWindow

    agent = Agent("openai:gpt-4o", tools=[...], capabilities=[ContextWindow()])

pydantic-ai (V2) runs each model request through its capabilities' hooks; this one uses three:

- ``prepare_model_request`` (once per attempt, with the model that will serve it): the request's
  messages, instructions and tool definitions are written as a Chat Completions body and handed to
  the guard core, which matches the conversation in the ledger, prices what is new, folds, evicts
  media and archives stale results; the attempt's messages become the compiled history (for this
  attempt only: the run's own history keeps every message);
- ``after_model_request``: the response and its usage are recorded (anchors, calibration, the
  proactive fold's baseline);
- ``on_model_request_error``: a rejection for size (pydantic-ai's ``ModelHTTPError`` read through
  the project's classifier) is handed to the core, which learns the window and compacts, and the
  capability asks for another attempt (``RetryModelRequest``), once; a second rejection is
  :class:`~contextwindow.errors.ContextOverflow`. Every other error is pydantic-ai's own.

So ``Agent.run``, ``run_sync``, ``run_stream`` and ``iter`` are all guarded. A part the guard did not
change is the agent's own object; only what the guard wrote (a summary checkpoint, a placeholder, a
cut message) is new. Summaries are written by the request's model unless ``summarizer=`` names
another pydantic-ai model (``False``: no summaries).

One capability keeps one core: give each concurrently running agent its own ``ContextWindow``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import RetryModelRequest
from pydantic_ai.messages import (
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestContext, ModelRequestParameters
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import FunctionToolset

from ..compaction import CompactionMode
from ..compile import Policy
from ..engine.observe import EventHook
from ..engine.settings import EngineSettings
from ..errors import UsageError
from ..guard import Exchange, GuardOptions, Reply
from ..store import Store
from ._bridge import (
    REREAD_DESCRIPTION,
    REREAD_NAME,
    ChatBridge,
    Originals,
    Stepper,
    anthropic_edits,
    fitted_max_tokens,
    leading_system,
    names_reread,
    reply_from_wire,
    usage_from_totals,
)

__all__ = ["ContextWindow"]


@dataclass
class ContextWindow(AbstractCapability[Any]):
    """Keeps a pydantic-ai agent inside its model's window (see the module docstring).

    ``model`` names the model profile to fit (default: the request model's ``model_name``); the
    other options are ``guard()``'s. With ``reread`` (the default) the capability's toolset holds
    ``read_archived``, offered on a request only when a placeholder in it names the tool: the agent
    runs it like its own tools, and it answers from the ledger.
    """

    model: str | None = None
    store: Store | str | Path | None = None
    session: str | None = None
    context_window: int | None = None
    summarizer: Model | bool | None = None
    policy: Policy | None = None
    settings: EngineSettings | None = None
    on_guard_event: EventHook | None = None
    """Called with every event the guard produces (``GuardOptions.on_event``; pydantic-ai's own
    ``on_event`` is its run events)."""
    reread: bool = True
    compaction: CompactionMode = "local"
    """Who makes a long conversation fit (``GuardOptions.compaction``): on an Anthropic model,
    ``"provider"``/``"auto"`` have the model's own request carry Anthropic's context editing
    (``anthropic_context_management`` and ``anthropic_betas`` in its settings); on any other model
    ``"provider"`` folds locally, saying so once."""
    bridge: ChatBridge = field(init=False, repr=False)
    _pending: dict[str | None, tuple[Stepper, _Restorer]] = field(
        init=False, repr=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        summarizer = self.summarizer
        self.bridge = ChatBridge(
            GuardOptions(
                store=self.store,
                session=self.session,
                summarizer=summarizer,
                summary_model=summarizer.model_name if isinstance(summarizer, Model) else None,
                context_window=self.context_window,
                policy=self.policy,
                settings=self.settings,
                on_event=self.on_guard_event,
                compaction=self.compaction,
            ),
            host_rereads=self.reread,
        )

    def get_toolset(self) -> FunctionToolset[Any] | None:
        if not self.reread:
            return None

        def read_archived(id: str) -> Any:
            answer = self.bridge.reread(id)
            if not answer.media:
                return answer.text
            return [answer.text, *(BinaryContent(data=data, media_type=kind) for kind, data in answer.media)]

        toolset: FunctionToolset[Any] = FunctionToolset()
        toolset.add_function(read_archived, name=REREAD_NAME, description=REREAD_DESCRIPTION)
        return toolset

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a store and a live core: not spec-serialisable

    @property
    def last_exchange(self) -> Exchange | None:
        """What the guard did for the latest accepted request: session id, the body sent, events."""
        return self.bridge.last_exchange

    # -- the hooks -----------------------------------------------------------------------------------

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        pending = self._pending.get(ctx.run_id)
        if pending is not None and pending[0].step is not None and request_context.attempt > 1:
            stepper, restorer = pending  # the retry the core asked for after a rejection
            step = stepper.step
            assert step is not None
        else:
            if pending is not None:
                pending[0].close()
            body, restorer = self._body(request_context)
            summary_model = self.summarizer if isinstance(self.summarizer, Model) else request_context.model
            wire = "anthropic" if getattr(request_context.model, "system", None) == "anthropic" else None
            stepper = Stepper(
                self.bridge.core, body, lambda b: _summarize(summary_model, b), provider_wire=wire
            )
            self._pending[ctx.run_id] = (stepper, restorer)
            step = await stepper.start()
        request_context.messages = restorer.restore(step.body)
        self._fit(request_context, step.body)
        return request_context

    def _fit(self, request_context: ModelRequestContext, sent: Mapping[str, Any]) -> None:
        """The request's settings and tools as the compiled body has them: the ``max_tokens`` the
        guard lowered to fit the window, and the re-read tool only where a placeholder names it."""
        lowered = fitted_max_tokens(_max_tokens(request_context), sent)
        if lowered is not None:
            request_context.model_settings = {**(request_context.model_settings or {}), "max_tokens": lowered}
        edits = anthropic_edits(sent)
        if edits is not None:
            # The provider's own compaction, through AnthropicModelSettings (pydantic-ai merges the
            # betas with the ones it adds).
            settings: dict[str, Any] = dict(request_context.model_settings or {})
            betas = [*settings.get("anthropic_betas", ()), *edits.betas]
            settings["anthropic_context_management"] = dict(edits.context_management)
            settings["anthropic_betas"] = list(dict.fromkeys(betas))
            request_context.model_settings = settings  # type: ignore[assignment]
        params = request_context.model_request_parameters
        if not names_reread(sent) and any(t.name == REREAD_NAME for t in params.function_tools):
            kept = [t for t in params.function_tools if t.name != REREAD_NAME]
            request_context.model_request_parameters = replace(params, function_tools=kept)

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, response: ModelResponse
    ) -> ModelResponse:
        pending = self._pending.pop(ctx.run_id, None)
        if pending is not None and pending[0].step is not None:
            exchange = await pending[0].accepted(response)
            self.bridge.last_exchange = exchange
            exchange.finish(_reply(response))
        return response

    async def on_model_request_error(
        self, ctx: RunContext[Any], *, request_context: ModelRequestContext, error: Exception
    ) -> ModelResponse:
        pending = self._pending.get(ctx.run_id)
        if pending is None or pending[0].step is None:
            raise error
        try:
            await pending[0].rejected(error)  # raises the error itself, or ContextOverflow
        except BaseException:
            self._pending.pop(ctx.run_id, None)
            raise
        raise RetryModelRequest()

    # -- pydantic-ai → Chat Completions ----------------------------------------------------------------

    def _body(self, request_context: ModelRequestContext) -> tuple[dict[str, Any], _Restorer]:
        model = self.model or request_context.model.model_name
        if not model:
            raise UsageError("name the model profile: ContextWindow(model='gpt-4o')")
        params = request_context.model_request_parameters
        restorer = _Restorer(request_context.messages)
        instructions = "\n\n".join(p.content for p in params.instruction_parts or () if p.content)
        wire: list[dict[str, Any]] = []
        if instructions:
            wire.append({"role": "system", "content": instructions})
        wire.extend(restorer.head_wire)
        wire.extend(restorer.history_wire)
        body: dict[str, Any] = {"model": model, "messages": wire}
        tools = [t for t in (*params.function_tools, *params.output_tools) if t.name != REREAD_NAME]
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description or "",
                        "parameters": t.parameters_json_schema,
                    },
                }
                for t in tools
            ]
        max_tokens = _max_tokens(request_context)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        return body, restorer


_ANTHROPIC_DEFAULT_MAX_TOKENS = 16384
"""What pydantic-ai's ``AnthropicModel`` sends as ``max_tokens`` when neither the settings nor the
model's profile (``anthropic_max_output_tokens``) give one (pydantic-ai 2.x, ``models/anthropic``)."""
_ANTHROPIC_LEGACY_MAX_TOKENS = 4096
"""Its default for a model whose profile says it refuses input plus ``max_tokens`` over the window."""


def _max_tokens(request_context: ModelRequestContext) -> int | None:
    """The output bound the request will go out with: its settings', else the one the model sends
    by itself (Anthropic's API needs one: pydantic-ai sends the model's whole output, up to 64,000
    tokens, which cannot fit a small window)."""
    settings: Mapping[str, Any] = request_context.model_settings or {}
    asked = settings.get("max_tokens")
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        return asked
    model = request_context.model
    if getattr(model, "system", None) != "anthropic":
        return None
    profile: Any = getattr(model, "profile", None) or {}
    if not isinstance(profile, Mapping):
        return _ANTHROPIC_DEFAULT_MAX_TOKENS
    if profile.get("anthropic_rejects_max_tokens_beyond_context_window"):
        return _ANTHROPIC_LEGACY_MAX_TOKENS
    default = profile.get("anthropic_max_output_tokens")
    return default if isinstance(default, int) and default > 0 else _ANTHROPIC_DEFAULT_MAX_TOKENS


class _Restorer:
    """A request's messages as Chat Completions messages, and the compiled history back as pydantic-ai
    messages: unchanged parts and responses are the agent's own objects."""

    def __init__(self, messages: Sequence[ModelMessage]) -> None:
        self.head: list[SystemPromptPart] = []
        """The system prompt parts that open the conversation (the guard keeps them verbatim)."""
        self.head_wire: list[dict[str, Any]] = []
        self.history_wire: list[dict[str, Any]] = []
        self.tool_names: dict[str, str] = {}
        self._source: dict[int, ModelRequest] = {}
        pairs: list[tuple[Mapping[str, Any], Any]] = []
        opening = True
        for message in messages:
            if isinstance(message, ModelResponse):
                opening = False
                wire = _response_wire(message)
                for call in message.parts:
                    if isinstance(call, ToolCallPart):
                        self.tool_names[call.tool_call_id] = call.tool_name
                if wire is not None:
                    self.history_wire.append(wire)
                    pairs.append((wire, message))
                continue
            for part in message.parts:
                if opening and isinstance(part, SystemPromptPart):
                    self.head.append(part)
                    self.head_wire.append({"role": "system", "content": part.content})
                    continue
                opening = False
                wire = _part_wire(part)
                self._source[id(part)] = message
                self.history_wire.append(wire)
                pairs.append((wire, part))
        self.originals: Originals[Any] = Originals(pairs)

    def restore(self, body: Mapping[str, Any]) -> list[ModelMessage]:
        wire = list(body.get("messages") or [])
        history = wire[leading_system(wire) :]
        items = self.originals.restore(history, self._build)
        out: list[ModelMessage] = []
        parts: list[Any] = list(self.head)
        for item in items:
            if isinstance(item, ModelResponse):
                if parts:
                    out.append(self._request(parts))
                    parts = []
                out.append(item)
            else:
                parts.append(item)
        if parts:
            out.append(self._request(parts))
        return out

    def _request(self, parts: list[Any]) -> ModelRequest:
        source = next((self._source[id(p)] for p in parts if id(p) in self._source), None)
        if source is not None and list(source.parts) == parts:
            return source
        return replace(source, parts=parts) if source is not None else ModelRequest(parts=parts)

    def _build(self, wire: Mapping[str, Any]) -> Any:
        role = wire.get("role")
        if role == "assistant":
            return _response_from_wire(wire)
        if role == "tool":
            call_id = str(wire.get("tool_call_id") or "")
            return ToolReturnPart(
                tool_name=self.tool_names.get(call_id, ""),
                content=_text(wire.get("content")),
                tool_call_id=call_id,
            )
        if role in ("system", "developer"):
            return SystemPromptPart(content=_text(wire.get("content")))
        return UserPromptPart(content=_user_content(wire.get("content")))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _user_content(content: Any) -> str | list[Any]:
    if isinstance(content, str) or not isinstance(content, list):
        return _text(content)
    out: list[Any] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text":
            out.append(str(part.get("text", "")))
        elif part.get("type") == "image_url":
            url = str((part.get("image_url") or {}).get("url", ""))
            if url.startswith("data:"):
                out.append(BinaryContent.from_data_uri(url))
            else:
                out.append(ImageUrl(url=url))
    return out


def _part_wire(part: Any) -> dict[str, Any]:
    if isinstance(part, UserPromptPart):
        return {"role": "user", "content": _user_wire(part.content)}
    if isinstance(part, ToolReturnPart):
        return {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response_str()}
    if isinstance(part, RetryPromptPart):
        if part.tool_name is not None:
            return {"role": "tool", "tool_call_id": part.tool_call_id, "content": part.model_response()}
        return {"role": "user", "content": part.model_response()}
    if isinstance(part, SystemPromptPart):
        return {"role": "system", "content": part.content}
    return {"role": "user", "content": f"[{type(part).__name__}]"}


def _user_wire(content: Any) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    out: list[dict[str, Any]] = []
    for item in content:
        if isinstance(item, str):
            out.append({"type": "text", "text": item})
        elif isinstance(item, ImageUrl):
            out.append({"type": "image_url", "image_url": {"url": item.url}})
        elif isinstance(item, BinaryContent) and item.is_image:
            data = base64.b64encode(item.data).decode("ascii")
            out.append({"type": "image_url", "image_url": {"url": f"data:{item.media_type};base64,{data}"}})
        else:
            # Media the Chat Completions form cannot carry as an image (documents, audio, video):
            # priced as a short stand-in; the part itself still reaches the model unchanged.
            kind = getattr(item, "media_type", None) or type(item).__name__
            out.append({"type": "text", "text": f"[{kind} attachment]"})
    return out or ""


def _response_wire(message: ModelResponse) -> dict[str, Any] | None:
    texts = [p.content for p in message.parts if isinstance(p, TextPart) and p.content]
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    if not texts and not calls:
        return None  # thinking only, or empty: nothing the next request carries
    wire: dict[str, Any] = {"role": "assistant", "content": texts[0] if len(texts) == 1 else None}
    if len(texts) > 1:
        wire["content"] = [{"type": "text", "text": t} for t in texts]
    if calls:
        wire["tool_calls"] = [
            {
                "id": c.tool_call_id,
                "type": "function",
                "function": {"name": c.tool_name, "arguments": c.args_as_json_str()},
            }
            for c in calls
        ]
    return wire


def _response_from_wire(wire: Mapping[str, Any]) -> ModelResponse:
    parts: list[ModelResponsePart] = []
    text = _text(wire.get("content"))
    if text:
        parts.append(TextPart(content=text))
    for call in wire.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(
            ToolCallPart(
                tool_name=str(function.get("name", "")),
                args=str(function.get("arguments") or "{}"),
                tool_call_id=str(call.get("id", "")),
            )
        )
    return ModelResponse(parts=parts)


def _reply(response: ModelResponse) -> Reply:
    wire = _response_wire(response) or {"role": "assistant", "content": None}
    usage = response.usage
    return reply_from_wire(
        wire,
        # pydantic-ai's input_tokens counts cache reads and writes too
        # (https://ai.pydantic.dev/api/usage/#pydantic_ai.usage.RequestUsage).
        usage=usage_from_totals(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read=usage.cache_read_tokens,
            cache_write=usage.cache_write_tokens,
            reasoning=usage.output_reasoning_tokens,
        ),
        stop_reason=response.finish_reason,
    )


async def _summarize(model: Model, body: Mapping[str, Any]) -> Reply:
    restorer = _Restorer(())
    messages = restorer.restore(
        {"messages": [m for m in body.get("messages") or [] if m.get("role") != "system"]}
    )
    system = [m for m in body.get("messages") or [] if m.get("role") == "system"]
    if system:
        head = SystemPromptPart(content="\n\n".join(_text(m.get("content")) for m in system))
        first = messages[0] if messages else ModelRequest(parts=[])
        if isinstance(first, ModelRequest):
            messages[:1] = [replace(first, parts=[head, *first.parts])]
    settings: dict[str, Any] = {}
    if isinstance(body.get("max_tokens"), int):
        settings["max_tokens"] = body["max_tokens"]
    response = await model.request(messages, settings, ModelRequestParameters())  # type: ignore[arg-type]
    return _reply(response)
