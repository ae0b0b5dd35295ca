"""The OpenAI Agents SDK: a ``call_model_input_filter`` that fits each model call, and a ``Session``
on the ledger.

::

    from contextwindow.integrations.openai_agents import ContextWindowFilter, LedgerSession

    guard = ContextWindowFilter()
    agent = Agent(name="notes", tools=TOOLS, model=guard.wrap(OpenAIResponsesModel("gpt-4o", client)))
    result = await Runner.run(agent, "…", session=LedgerSession("run-42", store=guard.store),
                              run_config=RunConfig(call_model_input_filter=guard), hooks=guard.hooks)

:class:`LedgerSession` keeps the run's items (the SDK's ``Session`` protocol: ``get_items``,
``add_items``, ``pop_item``, ``clear_session``) in contextwindow's store, append-only: a pop or a
clear is a record, the items stay in the ledger. :class:`ContextWindowFilter` is called by the runner
just before each model call with the instructions and the whole input; it writes them as a Chat
Completions body (the SDK's own ``Converter.items_to_messages``), hands it to the guard core (match
the conversation, price what is new, fold, evict media, archive stale results) and returns the
compiled input. An item the guard kept is the run's own item; what the guard wrote (a summary, a
placeholder, a cut message) is a new one.

``hooks=guard.hooks`` (a ``RunHooks``) records each response and its real usage, which anchor the
next estimate and calibrate the pricing; without it the guard relies on its estimates. A filter runs
before the call and cannot retry it: give the agent ``guard.wrap(model)`` (its ``Model`` wrapped) and
a rejection for size is handed to the guard core, which learns the window from it, compacts and
retries the call once, so no ``context_window`` is needed when the provider serves less than the
model's profile says; without the wrapper, give ``context_window`` so the first call already fits.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agents import RunHooks
from agents.items import ModelResponse, TResponseInputItem
from agents.memory import SessionABC
from agents.models.chatcmpl_converter import Converter
from agents.models.interface import Model
from agents.run_config import CallModelData, ModelInputData

from ..compile import Policy
from ..engine.observe import EventHook
from ..engine.settings import EngineSettings
from ..errors import UsageError
from ..guard import Exchange, GuardOptions, Reply
from ..store import Store
from ._bridge import (
    REREAD_DESCRIPTION,
    REREAD_NAME,
    REREAD_SCHEMA,
    ChatBridge,
    Originals,
    Stepper,
    fitted_max_tokens,
    leading_system,
    names_reread,
    reply_from_wire,
    usage_from_totals,
)

__all__ = ["ContextWindowFilter", "LedgerSession"]

_ITEM = "openai_agents_item"
_POP = "openai_agents_pop"
_CLEAR = "openai_agents_clear"


class LedgerSession(SessionABC):
    """An Agents SDK ``Session`` whose items live in contextwindow's store (ledger session
    ``<session_id>.items``, as notes), so a run resumes from the store in any process."""

    def __init__(self, session_id: str, *, store: Store | str | Path | None = None) -> None:
        from ..guard import resolve_store

        self.session_id = session_id
        self.session_settings = None
        self.store = resolve_store(store)
        self._ledger = self.store.session(f"{session_id}.items")

    def _items(self) -> list[TResponseInputItem]:
        items: list[TResponseInputItem] = []
        for entry in self._ledger.entries(["note"]):
            payload = entry.payload
            if _ITEM in payload:
                items.append(json.loads(payload[_ITEM]))
            elif _POP in payload and items:
                items.pop()
            elif _CLEAR in payload:
                items.clear()
        return items

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        items = self._items()
        return items[-limit:] if limit is not None and limit > 0 else items if limit is None else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        for item in items:
            self._ledger.note("agents item", **{_ITEM: json.dumps(_plain(item), ensure_ascii=False)})

    async def pop_item(self) -> TResponseInputItem | None:
        items = self._items()
        if not items:
            return None
        self._ledger.note("agents item popped", **{_POP: True})
        return items[-1]

    async def clear_session(self) -> None:
        self._ledger.note("agents session cleared", **{_CLEAR: True})


class _Hooks(RunHooks[Any]):
    def __init__(self, owner: ContextWindowFilter) -> None:
        self._owner = owner

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        await self._owner._accepted(_reply(response))


class ContextWindowFilter:
    """``RunConfig(call_model_input_filter=ContextWindowFilter())``: see the module docstring.

    ``model`` names the model profile to fit (default: the agent's model name). Summaries are
    written through the agent's own model. The other options are ``guard()``'s. :attr:`tools` is the
    ``read_archived`` tool to give the agent (``Agent(tools=[*tools, *guard.tools])``); through
    :meth:`wrap` it is offered only on calls whose input a placeholder names it in, and the
    ``max_tokens`` the guard lowers to fit the window is the one the call sends. An agent without it
    gets placeholders that say what was left out and name no tool.
    """

    def __init__(
        self,
        *,
        model: str | None = None,
        store: Store | str | Path | None = None,
        session: str | None = None,
        context_window: int | None = None,
        summarize: bool = True,
        policy: Policy | None = None,
        settings: EngineSettings | None = None,
        on_event: EventHook | None = None,
    ) -> None:
        self.model = model
        self.bridge = ChatBridge(
            GuardOptions(
                store=store,
                session=session,
                summarizer=None if summarize else False,
                context_window=context_window,
                policy=policy,
                settings=settings,
                on_event=on_event,
            )
        )
        self.hooks: RunHooks[Any] = _Hooks(self)
        """Pass as ``Runner.run(..., hooks=guard.hooks)`` to record each response's real usage."""
        self.tools: list[Any] = [self._reread_tool()]
        """The re-read tool, for the agent's tools: it answers from the ledger what a placeholder
        took out of the input."""
        self._pending: Stepper | None = None
        self._originals: Originals[Any] = Originals([])

    @property
    def store(self) -> Store:
        return self.bridge.store

    @property
    def last_exchange(self) -> Exchange | None:
        return self.bridge.last_exchange

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        await self._accepted(None)  # the previous call was answered: the run went on
        agent = data.agent
        model_name = self.model or _model_name(agent.model)
        if model_name is None:
            raise UsageError("name the model profile: ContextWindowFilter(model='gpt-4o')")
        items = list(data.model_data.input)
        instructions = data.model_data.instructions
        pairs: list[tuple[Mapping[str, Any], Any]] = []
        wire: list[dict[str, Any]] = []
        if instructions:
            wire.append({"role": "system", "content": instructions})
        for item in items:
            converted = [dict(m) for m in Converter.items_to_messages([item])]
            wire.extend(converted)
            if len(converted) == 1:
                pairs.append((converted[0], item))
        wire = _merge_calls(wire)
        body: dict[str, Any] = {"model": model_name, "messages": wire}
        agent_tools = list(getattr(agent, "tools", ()))
        tools = [_tool(t) for t in agent_tools if hasattr(t, "params_json_schema") and t.name != REREAD_NAME]
        # Placeholders tell the model to call the re-read tool only when the agent holds it (guard.tools).
        self.bridge.core.host_rereads = any(getattr(t, "name", None) == REREAD_NAME for t in agent_tools)
        if tools:
            body["tools"] = tools
        max_tokens = getattr(getattr(agent, "model_settings", None), "max_tokens", None)
        if isinstance(max_tokens, int) and max_tokens > 0:
            body["max_tokens"] = max_tokens  # the output reserve the guard keeps free
        chat_model = agent.model if not isinstance(agent.model, str) else None
        stepper = Stepper(self.bridge.core, body, lambda b: _summarize(chat_model, b))
        step = await stepper.start()
        self._pending = stepper
        self._originals = Originals(pairs)
        return ModelInputData(input=self._input(step.body), instructions=instructions)

    def _reread_tool(self) -> Any:
        from agents import FunctionTool, ToolOutputImage, ToolOutputText

        async def invoke(context: Any, arguments: str) -> Any:
            await self._accepted(None)  # the call that asked for it was answered (without hooks too)
            try:
                ident = str(json.loads(arguments or "{}").get("id", ""))
            except (ValueError, AttributeError):
                ident = ""
            answer = self.bridge.reread(ident)
            if not answer.media:
                return answer.text
            images = [
                ToolOutputImage(image_url=f"data:{kind};base64,{base64.b64encode(data).decode('ascii')}")
                for kind, data in answer.media
                if kind.startswith("image/")
            ]
            return [ToolOutputText(text=answer.text), *images]

        return FunctionTool(
            name=REREAD_NAME,
            description=REREAD_DESCRIPTION,
            params_json_schema={**REREAD_SCHEMA, "additionalProperties": False},
            on_invoke_tool=invoke,
        )

    def _fit(self, model_settings: Any, tools: Any) -> tuple[Any, Any]:
        """A call's settings and tools as the compiled body has them: the ``max_tokens`` the guard
        lowered to fit the window, and the re-read tool only where a placeholder names it."""
        step = self._pending.step if self._pending is not None else None
        if step is None:
            return model_settings, tools
        asked = getattr(model_settings, "max_tokens", None)
        lowered = fitted_max_tokens(asked if isinstance(asked, int) else None, step.body)
        if lowered is not None and asked is not None:
            model_settings = dataclasses.replace(model_settings, max_tokens=lowered)
        if isinstance(tools, list) and not names_reread(step.body):
            tools = [t for t in tools if getattr(t, "name", None) != REREAD_NAME]
        return model_settings, tools

    def wrap(self, model: Model) -> Model:
        """``model`` with its rejections for size handed to this guard: the guard learns the window,
        compacts and the call is retried (see the module docstring)."""
        return _GuardedModel(model, self)

    def _input(self, body: Mapping[str, Any]) -> list[TResponseInputItem]:
        """The compiled body's messages as the run's input items (the run's own where the guard kept them)."""
        compiled = list(body["messages"])
        restored = self._originals.restore(compiled[leading_system(compiled) :], _items)
        flat: list[TResponseInputItem] = []
        for entry in restored:
            flat.extend(entry if isinstance(entry, list) else [entry])
        return flat

    async def _retry(self, error: BaseException) -> list[TResponseInputItem]:
        """The input to send again after ``error``; raises it (or ``ContextOverflow``) when the guard
        core does not retry."""
        stepper = self._pending
        if stepper is None or stepper.step is None:
            raise error
        retry = await stepper.rejected(error)
        return self._input(retry.body)

    async def _accepted(self, reply: Reply | None) -> None:
        stepper, self._pending = self._pending, None
        if stepper is None or stepper.step is None:
            return
        exchange = await stepper.accepted(None)
        self.bridge.last_exchange = exchange
        if reply is not None:
            exchange.finish(reply)
        else:
            # No hooks: nothing known of the answer here; the next call's input carries it.
            exchange.finish(Reply(message=reply_from_wire({"role": "assistant", "content": None}).message))


class _GuardedModel(Model):
    """An Agents SDK ``Model`` whose failed calls go to the guard core first (``ContextWindowFilter.wrap``)."""

    def __init__(self, inner: Model, guard: ContextWindowFilter) -> None:
        self.inner = inner
        self.guard = guard
        name = _model_name(inner)
        if name is not None:
            self.model = name  # the profile the filter fits, as the inner model names it

    async def get_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> Any:
        while True:
            settings, offered = self.guard._fit(model_settings, tools)
            try:
                return await self.inner.get_response(
                    system_instructions, input, settings, offered, *args, **kwargs
                )
            except Exception as error:
                input = await self.guard._retry(error)

    async def stream_response(
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        while True:
            started = False
            settings, offered = self.guard._fit(model_settings, tools)
            try:
                async for event in self.inner.stream_response(
                    system_instructions, input, settings, offered, *args, **kwargs
                ):
                    started = True
                    yield event
                return
            except Exception as error:
                if started:
                    raise  # the stream was under way: not a rejection of the request
                input = await self.guard._retry(error)

    async def close(self) -> None:
        await self.inner.close()


def _model_name(model: Any) -> str | None:
    if isinstance(model, str) and model:
        return model.split("/", 1)[-1]
    for attr in ("model", "model_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _plain(item: Any) -> Any:
    dump = getattr(item, "model_dump", None)
    return dump(mode="json", exclude_none=True) if callable(dump) else item


def _tool(tool: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": getattr(tool, "description", "") or "",
            "parameters": tool.params_json_schema,
        },
    }


def _merge_calls(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive assistant messages with tool calls only (one per ``function_call`` item, as each item
    converts alone) as the one assistant message Chat Completions expects."""
    out: list[dict[str, Any]] = []
    for message in wire:
        previous = out[-1] if out else None
        if (
            previous is not None
            and message.get("role") == "assistant"
            and previous.get("role") == "assistant"
            and previous.get("tool_calls")
            and message.get("tool_calls")
            and not message.get("content")
        ):
            out[-1] = {**previous, "tool_calls": [*previous["tool_calls"], *message["tool_calls"]]}
            continue
        out.append(message)
    return out


def _items(message: Mapping[str, Any]) -> list[Any]:
    """A Chat Completions message the guard wrote, as Responses input items."""
    role = message.get("role")
    content = message.get("content")
    if role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": str(message.get("tool_call_id", "")),
                "output": content if isinstance(content, str) else _text(content),
            }
        ]
    if role == "assistant":
        out: list[Any] = []
        text = _text(content)
        if text:
            out.append({"role": "assistant", "content": text})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            out.append(
                {
                    "type": "function_call",
                    "call_id": str(call.get("id", "")),
                    "name": str(function.get("name", "")),
                    "arguments": str(function.get("arguments") or "{}"),
                }
            )
        return out
    if isinstance(content, list):
        parts: list[dict[str, Any]] = []
        for part in content:
            if part.get("type") == "text":
                parts.append({"type": "input_text", "text": part.get("text", "")})
            elif part.get("type") == "image_url":
                parts.append(
                    {
                        "type": "input_image",
                        "image_url": (part.get("image_url") or {}).get("url", ""),
                        "detail": "auto",
                    }
                )
        return [{"role": "user", "content": parts}]
    return [{"role": "system" if role in ("system", "developer") else "user", "content": _text(content)}]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _reply(response: ModelResponse) -> Reply:
    items = [_plain(item) for item in response.output]
    messages = [dict(m) for m in Converter.items_to_messages(items)] if items else []
    assistant = _merge_calls([m for m in messages if m.get("role") == "assistant"])
    usage = response.usage
    cached = getattr(getattr(usage, "input_tokens_details", None), "cached_tokens", 0) or 0
    reasoning = getattr(getattr(usage, "output_tokens_details", None), "reasoning_tokens", 0) or 0
    return reply_from_wire(
        assistant[0] if assistant else {"role": "assistant", "content": None},
        usage=usage_from_totals(
            input_tokens=int(usage.input_tokens or 0),
            output_tokens=int(usage.output_tokens or 0),
            cache_read=int(cached),
            reasoning=int(reasoning),
        ),
    )


async def _summarize(model: Any, body: Mapping[str, Any]) -> Reply:
    model = model.inner if isinstance(model, _GuardedModel) else model
    if model is None or not hasattr(model, "get_response"):
        raise UsageError("summaries need the agent's model as a Model object (or summarize=False)")
    from agents import ModelSettings, ModelTracing

    messages: Sequence[Mapping[str, Any]] = list(body.get("messages") or [])
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system") or None
    items: list[Any] = []
    for message in messages:
        if message.get("role") != "system":
            items.extend(_items(message))
    max_tokens = body.get("max_tokens")
    response = await model.get_response(
        system,
        items,
        ModelSettings(max_tokens=max_tokens if isinstance(max_tokens, int) else None),
        [],
        None,
        [],
        ModelTracing.DISABLED,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    )
    return _reply(response)
