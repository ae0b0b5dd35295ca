"""One guarded call's reply: the :class:`Exchange` the caller gets, and how its reply is recorded.

The layers of :meth:`~._core.GuardCore.request` share one :class:`Call`; once the provider accepted
it, :class:`Replies` makes its :class:`Exchange`, whose :meth:`Exchange.finish` records the reply in
one transaction: the engine's accept step (usage, anchors, calibration, the proactive fold's
baseline, the assistant message), then the conversation's chain grows by one hash (an append: the
history is not read again) and a Responses reply's id is remembered for ``previous_response_id``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..content import Message
from ..engine.events import Event
from ..engine.loop import Engine
from ..providers.base import Stop, normalise_stop_reason
from ..store import Store
from ._chained import RecordedResponse, ResponseIds
from ._conversation import Conversation, Conversations
from ._steps import Ask, Reply, Send

__all__ = ["Call", "Exchange", "Replies", "pass_through"]


@dataclass(slots=True)
class Call:
    """One agent call, as the layers under :meth:`~._core.GuardCore.request` share it."""

    conversation: Conversation
    engine: Engine
    new: Sequence[Message]
    """What the request added to the session."""
    max_tokens: int | None
    """The agent's output reserve (``max_tokens``), written into every body rendered."""
    events: list[Event] = field(default_factory=list)
    shown: dict[str, Any] = field(default_factory=dict)
    """The agent's body with only its leading system items as history: what the compiled history is
    rendered into."""
    written: dict[str, Any] | None = None
    """The agent's body as written, sent while the provider's history fits (``previous_response_id``);
    ``None``: the compiled history goes out."""
    offers_reread: bool = False
    """Whether the call may offer the re-read tool (the engine adds it when a placeholder names it)."""
    smallest: int = 0
    """The estimate of the smallest request the call could send: system, tools, the newest message."""
    asked: int | None = None
    """The estimate of the agent's own request, before it was fitted (when measured)."""
    hashes: Sequence[str] = ()
    """The chain hashes of the agent's messages (:attr:`~._history.Read.hashes`)."""


@dataclass(slots=True)
class Exchange:
    """One accepted call: the client's result, and how to record its reply (:meth:`finish`)."""

    result: Any
    """What the client returned for the body sent: a response, or a stream still to be read."""
    body: dict[str, Any]
    """The body that was sent (the accepted one, after any retry)."""
    session_id: str
    """The ledger session the call was kept in; ``""`` for a call passed through as written."""
    events: list[Event]
    """What the guard did for this call (folds, evictions, recoveries, usage), in order."""
    asked_tokens: int | None = None
    """The estimate of the agent's request as written, before it was fitted: measured when a log line
    or a span shows it, or the core's :attr:`~._core.GuardCore.measure` says so; else ``None``."""
    _finish: Callable[[Reply], None] | None = None

    def finish(self, reply: Reply) -> None:
        """Record the reply: its usage (calibration, anchors, the proactive fold's baseline) and the
        assistant message. Called once; later calls do nothing."""
        finish, self._finish = self._finish, None
        if finish is not None:
            finish(reply)


class Replies:
    """Records what a guard core's accepted calls replied, on ``store``: the engine's accept step, the
    conversations' chains (``conversations``), and the Responses ids a later call continues
    (``responses``)."""

    def __init__(self, store: Store, conversations: Conversations, responses: ResponseIds) -> None:
        self.store = store
        self.conversations = conversations
        self.responses = responses

    def accepted(self, call: Call, reply: Reply) -> None:
        """Record an accepted call's reply through the engine (usage, anchors, calibration, the
        proactive fold's baseline; the message stored unless it is empty)."""
        stop = Stop(
            reason=normalise_stop_reason(reply.stop_reason),
            raw_reason=reply.stop_reason,
            message=reply.message,
        )
        call.events.extend(call.engine.accept(stop, reply.usage))
        if reply.usage is not None:
            call.conversation.accepted(call.engine, reply.usage.prompt)
        if reply.message.content:
            # An assistant message: only its content enters the chain (the agent's copy has no ids).
            self.conversations.took(call.conversation, reply.message)

    def exchange(self, call: Call, result: Any, sent: dict[str, Any], full: Reply | None) -> Exchange:
        """The accepted call's :class:`Exchange`; its ``finish`` records the reply (``full``: the
        reply as it came, when the agent's copy lacks the guard's calls) in one transaction."""

        def finish(reply: Reply) -> None:
            if full is not None:
                # The agent's copy lacks the guard's calls: the ledger keeps the reply as it came.
                reply = dataclasses.replace(full, usage=reply.usage)
            # What a reply teaches (usage, anchor, calibration, notes, the message): one transaction.
            with self.store.batch():
                self.accepted(call, reply)
                self._remember_response(call.conversation, reply)

        return Exchange(
            result=result,
            body=sent,
            session_id=call.conversation.session.id,
            events=call.events,
            asked_tokens=call.asked,
            _finish=finish,
        )

    def _remember_response(self, conversation: Conversation, reply: Reply) -> None:
        """Remember the response a reply came in (Responses), for a later ``previous_response_id``."""
        response_id = reply.extra.get("response_id")
        if not isinstance(response_id, str):
            return
        usage = reply.usage
        tokens = usage.prompt + usage.output if usage is not None and usage.prompt > 0 else None
        recorded = RecordedResponse(
            conversation=conversation,
            count=len(conversation.chain),
            tokens=tokens,
            stored=bool(reply.extra.get("stored", True)),
        )
        self.responses.put(response_id, recorded)


async def pass_through(body: Mapping[str, Any], count: bool) -> Exchange:
    """``body`` sent as the agent wrote it, nothing recorded."""
    result = await Ask(Send(body=dict(body), purpose="count" if count else "request"))
    return Exchange(result=result, body=dict(body), session_id="", events=[])
