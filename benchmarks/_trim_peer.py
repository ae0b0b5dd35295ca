"""The simplest thing a user would do instead: LangChain's ``trim_messages`` on the agent's own history.

The agent keeps the whole scripted history (its replies as recorded, every tool result) and, before
each call, trims it with ``trim_messages(strategy="last", token_counter=count_tokens_approximately)``
to the window less the call's ``max_tokens``, with the options LangChain's documentation pairs with it
(``include_system=True``, ``start_on="human"``, ``end_on=("human", "tool")``, so a kept tail never
opens on an orphan tool result; https://python.langchain.com/docs/how_to/trim_messages/). The trimmed
messages go to the same local provider the engine is measured against; its reply is not used, the
history goes on with the script, as an agent replaying the same session would.

Each canonical message becomes the LangChain messages it would be in a LangChain agent: an assistant
message an ``AIMessage`` (its text as content, its tool uses as ``tool_calls``), each tool result a
``ToolMessage``, any other user content a ``HumanMessage`` (images as image blocks, which the counter
prices at its flat 85). What survives the trim is mapped back to the canonical blocks it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from contextwindow.content import (
    AttachmentRef,
    GeneratedImage,
    Image,
    Message,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from contextwindow.errors import ContextWindowError
from contextwindow.formats import WireFormat
from contextwindow.replay.scenario import AssistantStep, InjectStep, Scenario, ToolResultStep
from contextwindow.testing import LocalModel, LocalSettings
from contextwindow.testing.model import LocalReply, Rejection

from ._recount import recount

__all__ = [
    "PeerCall",
    "PeerRun",
    "PeerSend",
    "from_lc",
    "history_messages",
    "peer_provider",
    "run_trim_peer",
    "send_peer_call",
    "to_lc",
    "whole_count",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class PeerCall:
    full: int
    """The provider's count of the whole history before this call (what an untrimmed request holds)."""
    sent: int | None
    """The provider's count of what was sent (``None``: nothing could be sent)."""
    recounted: int | None
    outcome: str
    """``ok``, ``size`` (refused for its size), ``refused`` (refused for another reason) or ``empty``."""
    dropped: int
    """History messages not sent, with no summary in their place."""
    history: int
    cache_read: int = 0
    cache_write: int = 0
    """What the call read from and wrote to the local provider's prompt cache."""
    output: int = 0
    """The call's output tokens (0 when refused)."""


@dataclass
class PeerRun:
    calls: list[PeerCall] = field(default_factory=list)


def _lc_text(message: Message) -> str:
    parts = [b.text for b in message.content if isinstance(b, Text)]
    parts += [b.thinking for b in message.content if isinstance(b, Thinking)]
    return "\n".join(parts)


def _lc_blocks(blocks: Sequence[Any]) -> list[str | dict[str, Any]]:
    out: list[str | dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, Text):
            out.append({"type": "text", "text": block.text})
        elif isinstance(block, Image | GeneratedImage):
            out.append({"type": "image_url", "image_url": {"url": "attachment"}})
    return out


def to_lc(message: Message, index: int) -> list[BaseMessage]:
    if message.role == "assistant":
        calls = [
            {"name": b.name, "args": dict(b.input), "id": b.id, "type": "tool_call"}
            for b in message.content
            if isinstance(b, ToolUse)
        ]
        return [AIMessage(content=_lc_text(message), tool_calls=calls, id=f"{index}:a")]
    out: list[BaseMessage] = []
    for k, block in enumerate(message.content):
        if isinstance(block, ToolResult):
            content: str | list[str | dict[str, Any]] = (
                block.content if isinstance(block.content, str) else _lc_blocks(block.content)
            )
            out.append(ToolMessage(content=content, tool_call_id=block.tool_use_id, id=f"{index}:{k}"))
    rest = [b for b in message.content if not isinstance(b, ToolResult)]
    if rest:
        out.append(HumanMessage(content=_lc_blocks(rest) or "", id=f"{index}:h"))
    return out


def from_lc(kept: Sequence[BaseMessage], history: Sequence[Message]) -> list[Message]:
    """The canonical messages (or the parts of one) the kept LangChain messages came from, in order."""
    parts: dict[int, set[str]] = {}
    order: list[int | BaseMessage] = []
    for message in kept:
        if isinstance(message, SystemMessage):
            continue
        index, _, part = str(message.id).partition(":")
        if not index.isdigit():  # a message the peer wrote itself (a summary): its text, as the user's
            order.append(message)
            continue
        i = int(index)
        if i not in parts:
            parts[i] = set()
            order.append(i)
        parts[i].add(part)
    out: list[Message] = []
    for i in order:
        if isinstance(i, BaseMessage):
            out.append(Message(role="user", content=(Text(text=str(i.text)),)))
            continue
        message = history[i]
        if message.role == "assistant":
            out.append(message)
            continue
        keep = parts[i]
        blocks = tuple(
            b
            for k, b in enumerate(message.content)
            if (isinstance(b, ToolResult) and str(k) in keep)
            or (not isinstance(b, ToolResult) and "h" in keep)
        )
        if blocks:
            out.append(Message(role="user", content=blocks))
    return out


def _in_call_order(results: Sequence[ToolResult], reply: Message | None) -> tuple[ToolResult, ...]:
    """``results`` in the order of ``reply``'s tool uses, as LangChain's ``ToolNode`` returns them
    (a session records parallel tools in the order they finished; the Anthropic API wants the
    order of the uses); results of no use in ``reply`` keep their place after them."""
    order = {b.id: i for i, b in enumerate(reply.content if reply else ()) if isinstance(b, ToolUse)}
    return tuple(sorted(results, key=lambda r: order.get(r.tool_use_id, len(order))))


def history_messages(scenario: Scenario) -> list[tuple[Message, bool]]:
    """The scripted history as sent: ``(message, is_reply)``; results of one reply in one message, in
    the order of its tool uses."""
    out: list[tuple[Message, bool]] = []
    for turn in scenario.turns:
        out.append((turn.user, False))
        pending: list[ToolResult] = []
        injected: list[Message] = []
        reply: Message | None = None
        for step in turn.steps:
            if isinstance(step, ToolResultStep):
                pending.append(step.result)
                continue
            if isinstance(step, InjectStep):
                injected.append(step.message)
                continue
            assert isinstance(step, AssistantStep)
            if pending:
                out.append((Message(role="user", content=_in_call_order(pending, reply)), False))
                pending = []
            out.extend((m, False) for m in injected)
            injected = []
            out.append((step.message, True))
            reply = step.message
        if pending:
            out.append((Message(role="user", content=_in_call_order(pending, reply)), False))
        out.extend((m, False) for m in injected)
    return out


def peer_provider(
    scenario: Scenario, *, model: str, window: int, served: int | None, count_scale: float
) -> LocalModel:
    """The local provider a peer sends to: the window (``served``: what it really serves), the
    session's model, the count scale, and the prompt cache on."""
    del scenario
    return LocalModel(
        LocalSettings(
            window=window,
            effective_window=served,
            default_model=model,
            count_scale=count_scale,
            prompt_cache=True,
        )
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class PeerSend:
    """What one peer call sends through: the provider, the wire, the call's output bound, how the
    attachments load and how a request renders for the recount."""

    provider: LocalModel
    wire: WireFormat
    reserve: int
    load: Callable[[AttachmentRef], bytes]
    render: Callable[[Request], dict[str, Any]]
    count_scale: float


def send_peer_call(
    send: PeerSend, scenario: Scenario, model: str, messages: Sequence[Message], *, full: int, history: int
) -> PeerCall:
    """Send ``messages`` (what the peer kept of a ``history`` of that many messages, whose whole
    request the provider counts ``full``) and record the call's outcome, counts and cache use."""
    dropped = history - len(messages)
    if not messages:
        return PeerCall(
            full=full, sent=None, recounted=None, outcome="empty", dropped=dropped, history=history
        )
    request = Request(
        model=model,
        system=scenario.system,
        tools=scenario.tools,
        messages=tuple(messages),
        max_tokens=send.reserve,
    )
    try:
        reply = send.provider.handle(request, wire=send.wire, max_tokens=send.reserve, load=send.load)
    except ContextWindowError:
        reply = None
    counted = send.provider.count(request, send.load).input_tokens
    if reply is None:
        outcome = "refused"
    elif isinstance(reply, Rejection):
        size = "too long" in reply.message or "context limit" in reply.message
        outcome = "size" if size else "refused"
    else:
        outcome = "ok"
    done = isinstance(reply, LocalReply)
    return PeerCall(
        full=full,
        sent=counted,
        recounted=recount(send.render(request), send.count_scale),
        outcome=outcome,
        dropped=dropped,
        history=history,
        cache_read=reply.cache.read if done else 0,
        cache_write=reply.cache.write if done else 0,
        output=reply.output_tokens if done else 0,
    )


def whole_count(send: PeerSend, scenario: Scenario, model: str, history: Sequence[Message]) -> int:
    """The provider's count of the whole ``history`` (what an untrimmed request holds)."""
    whole = Request(model=model, system=scenario.system, tools=scenario.tools, messages=tuple(history))
    return send.provider.count(whole, send.load).input_tokens


def run_trim_peer(
    scenario: Scenario,
    *,
    model: str,
    window: int,
    reserve: int,
    served: int | None,
    load: Callable[[AttachmentRef], bytes],
    render: Callable[[Request], dict[str, Any]],
    count_scale: float = 1.0,
    wire: WireFormat = "anthropic",
) -> PeerRun:
    """Replay ``scenario`` with ``trim_messages`` in front of the local provider (module docstring),
    counting at ``count_scale`` (``LocalSettings.count_scale``), over ``wire`` with the provider's
    prompt cache on: on the Anthropic wire at the breakpoints the library's Anthropic provider marks
    (:func:`~contextwindow.testing.caching.provider_breakpoints`: a LangChain user who adds
    ``cache_control`` to the system and the newest message), on Chat Completions by the provider's
    automatic prefix cache."""
    provider = peer_provider(scenario, model=model, window=window, served=served, count_scale=count_scale)
    send = PeerSend(
        provider=provider, wire=wire, reserve=reserve, load=load, render=render, count_scale=count_scale
    )
    run = PeerRun()
    lc: list[BaseMessage] = []
    system = "\n\n".join(t.text for t in scenario.system)
    if system:
        lc.append(SystemMessage(content=system))
    history: list[Message] = []
    for message, is_reply in history_messages(scenario):
        if is_reply:
            kept = trim_messages(
                lc,
                max_tokens=window - reserve,
                strategy="last",
                token_counter=count_tokens_approximately,
                include_system=True,
                start_on="human",
                end_on=("human", "tool"),
            )
            full = whole_count(send, scenario, model, history)
            run.calls.append(
                send_peer_call(send, scenario, model, from_lc(kept, history), full=full, history=len(history))
            )
        history.append(message)
        lc.extend(to_lc(message, len(history) - 1))
    return run
