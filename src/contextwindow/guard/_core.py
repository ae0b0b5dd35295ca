"""The request guard: the request an agent would send in, the request to send out.

:class:`GuardCore` is sans-IO (:mod:`._steps`): :meth:`GuardCore.request` is a coroutine that takes
the body an agent would send (its system prompt, tools and whole history, in its client's wire
format) and asks its driver to send the compiled body instead; it returns an :class:`Exchange`,
whose :meth:`Exchange.finish` records the reply once the caller has it (at once for a response, at
the end for a stream). A rejection for size that the driver hands back is recovered by compacting
and sending again, once; a second one raises :class:`~contextwindow.errors.ContextOverflow` with the
provider's numbers. Every other failure of the call reaches the agent unchanged.

**Recognising the conversation.** An agent's history only grows, so a request is matched to a stored
session by its prefix (:mod:`._match`): the longest prefix of the request that ends where a stored
session ends is that session, and the rest of the request is appended to it. A request that
diverges from what was stored (an agent that edited or dropped earlier messages) becomes a new
session, named after its root with a ``.N`` suffix. The root is the ``session`` id given to the
guard, or ``guard-`` and the chain hash of the first message, so a new process finds the sessions
an earlier one stored.

**Responses the provider holds.** An OpenAI Responses request naming ``previous_response_id`` is
the conversation that response ends plus the new input (:mod:`._chained`): sent as written while the
provider's history fits, else replaced by the compiled history from the ledger.

**What it reuses.** Each session is run by an :class:`~contextwindow.engine.loop.Engine` over the
ledger, without its turn loop: blocks are priced once as they are appended, calibration and anchors
learn from each call's real usage, compile evicts media by the byte budget and archives stale
results, history compile leaves out is folded into summary checkpoints through the summariser (the
guard's own client and model by default, through this same driver), the proactive fold fires when
the last call neared the window, and a rejection's numbers teach the window the provider really
serves.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..compile import Policy
from ..compile.reread import READ_ARCHIVED, READ_ARCHIVED_TOOL, names_reread, read_archived
from ..content import Message, Request, ToolResult, ToolUse, media_refs
from ..engine.compiler import EngineCompiler
from ..engine.events import (
    Event,
)
from ..engine.loop import Engine, _Received
from ..engine.settings import EngineSettings
from ..engine.summarizer import Summarizer
from ..errors import ContextOverflow, InvalidInput, OverBudget, UnknownModel, UsageError
from ..formats import ParsedRequest
from ..models import get_profile
from ..providers.base import ProviderEvent, Stop, UsageSample, normalise_stop_reason
from ..store import Session, Store
from ._chained import Held, ResponseIds
from ._match import chain, extend_chain, longest_known
from ._steps import Ask, Reply, Send, drain
from ._wire import FORMATS, GuardFormat, WireAdapter

__all__ = ["Exchange", "GuardCore"]

OverflowReader = Callable[[BaseException], ContextOverflow | None]
"""Reads a client's exception: the ``ContextOverflow`` it means, or ``None`` when it is not one."""


class _Relay:
    """A :class:`~contextwindow.providers.Provider` whose calls go out through the driver as
    ``Send(purpose="summary")`` steps: the summariser talks to the guard's own client."""

    def __init__(self, wire: WireAdapter, model: str) -> None:
        self.name: str = wire.name
        self.wire = wire
        self.model = model

    async def stream(self, request: Request, *, max_tokens: int, load: Any) -> AsyncIterator[ProviderEvent]:
        body = self.wire.summary(
            Request(
                model=self.model,
                system=request.system,
                messages=request.messages,
                max_tokens=max_tokens,
            ),
            model=self.model,
        )
        reply: Reply = await Ask(Send(body=body, purpose="summary"))
        if reply.usage is not None:
            yield UsageSample(usage=reply.usage)
        yield Stop(
            reason=normalise_stop_reason(reply.stop_reason),
            raw_reason=reply.stop_reason,
            message=reply.message,
        )


class _Conversation:
    """One ledger session the guard keeps: its messages' chain and the engine that runs it."""

    def __init__(self, session: Session, root: str) -> None:
        self.session = session
        self.root = root
        self.chain: list[str] = []
        self.turn_start: str | None = None
        """The id of the message that opened the current turn: the newest user message that is
        not only tool results (folds never cover it)."""
        self.compiler = EngineCompiler()
        self.engines: dict[str, Engine] = {}

    def took(self, message: Message) -> None:
        """``message`` (stored, with its id) is now the newest of the session."""
        self.chain.append(extend_chain(self.chain[-1] if self.chain else "", message))
        if message.role == "user" and not all(isinstance(b, ToolResult) for b in message.content):
            self.turn_start = message.id


@dataclass(slots=True)
class Exchange:
    """One accepted call: the client's result, and how to record its reply (:meth:`finish`)."""

    result: Any
    """What the client returned for the body sent: a response, or a stream still to be read."""
    body: dict[str, Any]
    """The body that was sent (the accepted one, after any retry)."""
    session_id: str
    events: list[Event]
    """What the guard did for this call (folds, evictions, recoveries, usage), in order."""
    _finish: Callable[[Reply], None] | None = None

    def finish(self, reply: Reply) -> None:
        """Record the reply: its usage (calibration, anchors, the proactive fold's baseline) and the
        assistant message. Called once; later calls do nothing."""
        finish, self._finish = self._finish, None
        if finish is not None:
            finish(reply)


class GuardCore:
    """The guard for one client (see the module docstring). Not thread-safe: one agent loop at a time."""

    def __init__(
        self,
        store: Store,
        fmt: GuardFormat,
        *,
        overflow: OverflowReader,
        session: str | None = None,
        policy: Policy | None = None,
        settings: EngineSettings | None = None,
        context_window: int | None = None,
        summary_model: str | None = None,
        summarize: bool = True,
        reread: bool = True,
        reply_of: Callable[[Any], Reply] | None = None,
    ) -> None:
        self.store = store
        self.wire = FORMATS[fmt]
        self.overflow = overflow
        self.session_root = session
        self.policy = policy or Policy()
        self.settings = settings or EngineSettings()
        self.context_window = context_window
        self.summary_model = summary_model
        self.summarize = summarize
        self.reread = reread and reply_of is not None
        """Offer the model :data:`~contextwindow.compile.reread.READ_ARCHIVED` when a placeholder in the
        request names it, and answer its calls here (the agent never sees them); not on streams."""
        self.reply_of = reply_of
        self._conversations: dict[str, _Conversation] = {}
        self._hashes: dict[str, dict[str, tuple[_Conversation, int]]] = {}
        """Per root, every stored chain hash: the conversation and how many messages it covers."""
        self._roots: set[str] = set()
        self.responses = ResponseIds()
        """The responses this core recorded, by id: what a ``previous_response_id`` continues."""

    # -- recognising the conversation ---------------------------------------------------------------

    def _load_root(self, root: str) -> None:
        if root in self._roots:
            return
        self._roots.add(root)
        for sid in self.store.sessions():
            if sid == root or (sid.startswith(root + ".") and sid[len(root) + 1 :].isdigit()):
                conversation = _Conversation(self.store.session(sid), root)
                for stored in conversation.session.messages():
                    conversation.took(stored.message)
                self._conversations[sid] = conversation
                known = self._hashes.setdefault(root, {})
                for n, h in enumerate(conversation.chain, start=1):
                    known.setdefault(h, (conversation, n))

    def _new_conversation(self, root: str) -> _Conversation:
        sid, n = root, 0
        while sid in self._conversations or self.store.session(sid).latest("message") is not None:
            n += 1
            sid = f"{root}.{n}"
        conversation = _Conversation(self.store.session(sid), root)
        self._conversations[sid] = conversation
        return conversation

    def match(self, messages: Sequence[Message]) -> tuple[_Conversation, int]:
        """The conversation a history continues, and how many of its leading messages it holds."""
        hashes = chain(messages)
        root = self.session_root or f"guard-{hashes[0][:20]}"
        self._load_root(root)
        known = self._hashes.setdefault(root, {})
        n = longest_known(hashes, known)
        if n > 0:
            conversation, count = known[hashes[n - 1]]
            if count == len(conversation.chain):
                return conversation, n
        return self._new_conversation(root), 0

    # -- one call -----------------------------------------------------------------------------------

    def _engine(self, conversation: _Conversation, model: str) -> Engine:
        engine = conversation.engines.get(model)
        if engine is None:
            profile = get_profile(model)
            if self.context_window is not None:
                profile = profile.with_(
                    context_window=self.context_window,
                    max_output_tokens=min(profile.max_output_tokens, self.context_window),
                )
            summarizer = None
            if self.summarize:
                summary_model = self.summary_model or model
                summary_profile = get_profile(summary_model)
                summarizer = Summarizer(
                    _Relay(self.wire, summary_model),
                    summary_profile.with_(
                        context_window=min(summary_profile.context_window, profile.context_window),
                        max_output_tokens=min(summary_profile.max_output_tokens, profile.context_window),
                    ),
                )
            engine = Engine(
                conversation.session,
                _Relay(self.wire, model),
                profile,
                compiler=conversation.compiler,
                summarizer=summarizer,
                settings=self.settings,
            )
            conversation.engines[model] = engine
        return engine

    def _append(
        self, conversation: _Conversation, engine: Engine, message: Message, parsed: ParsedRequest | None
    ) -> None:
        if not message.content:
            return
        if parsed is not None:
            for ref in {r.id: r for r in media_refs(message.content)}.values():
                data = parsed.attachments.get(ref.id)
                if data is not None:
                    conversation.session.attach(data, ref.media_type)
        conversation.took(engine._append(message))
        known = self._hashes.setdefault(conversation.root, {})
        known.setdefault(conversation.chain[-1], (conversation, len(conversation.chain)))

    async def request(self, body: Mapping[str, Any], *, count: bool = False) -> Exchange:
        """Send what ``body`` asks for, fitted to the window; see the module docstring. With
        ``count``, ask for the fitted request's input count instead (nothing is sent, no reply)."""
        parsed = self.wire.parse(body)
        canonical = parsed.request
        if not canonical.messages:
            raise UsageError("a guarded request needs at least one message")
        if canonical.model is None:
            raise UsageError("a guarded request names its model")
        model: str = canonical.model
        try:
            get_profile(canonical.model)
        except UnknownModel:
            # Nothing to fit it to: the agent's request goes out as it wrote it (register a profile,
            # or name a known one, to guard it).
            result = await Ask(Send(body=dict(body), purpose="count" if count else "request"))
            return Exchange(result=result, body=dict(body), session_id="", events=[])
        chained = self.responses.get(body["previous_response_id"]) if self._chains(body) else None
        if (self._chains(body) and chained is None) or body.get("conversation") is not None:
            # A response (or conversation) the provider holds and this guard never saw: as written.
            result = await Ask(Send(body=dict(body), purpose="count" if count else "request"))
            return Exchange(result=result, body=dict(body), session_id="", events=[])
        new: Sequence[Message]
        if chained is not None and chained.count == len(chained.conversation.chain):
            conversation, new = chained.conversation, canonical.messages
        else:
            if chained is not None:  # a response from earlier in the conversation: its branch
                earlier = [m.message for m in chained.conversation.session.messages()[: chained.count]]
                canonical = replace(canonical, messages=(*earlier, *canonical.messages))
            conversation, held = self.match(canonical.messages)
            new = canonical.messages[held:]
        engine = self._engine(conversation, model)
        # One agent call is one send of the engine's: its per-send state starts afresh.
        engine._stats.reset()
        engine._notes.start_send()
        engine._folding.start_turn()
        engine._requests.overrides.clear()
        for message in new:
            self._append(conversation, engine, message, parsed)
        conversation.compiler.system = canonical.system
        conversation.compiler.tools = canonical.tools
        policy = self.policy
        if canonical.max_tokens is not None:
            policy = policy.with_(output_reserve=canonical.max_tokens)
        conversation.compiler.policy = policy
        turn_start = conversation.turn_start
        events: list[Event] = []

        async for event in engine._folding.maybe_fold("pre_turn", turn_start):
            events.append(event)
        async for event in engine._fresh_request(turn_start):
            events.append(event)
        # With previous_response_id: the agent's request as written while the provider's history fits.
        written = dict(body)
        holds = chained is not None and self._provider_fits(chained, engine, new)
        if chained is not None:  # otherwise the compiled history goes out in its place
            body = {k: v for k, v in body.items() if k != "previous_response_id"}
        overflowed = False
        while True:
            live = engine._current()
            offer = (
                self.reread
                and not holds
                and not count
                and not body.get("stream")
                and all(t.name != READ_ARCHIVED for t in canonical.tools)
                and names_reread(live.messages)
            )
            sent = (
                written
                if holds and not overflowed
                else self.wire.render(
                    body,
                    live.messages,
                    conversation.session.read_attachment,
                    extra_tools=(READ_ARCHIVED_TOOL,) if offer else (),
                    max_tokens=canonical.max_tokens,
                )
            )
            if count:
                counted = await Ask(Send(body=sent, purpose="count"))
                return Exchange(result=counted, body=sent, session_id=conversation.session.id, events=events)
            engine._calls.usage.start_stream()  # the SDKs report each call's own usage
            try:
                result = await Ask(Send(body=sent, purpose="request"))
            except Exception as exc:
                rejection = self.overflow(exc)
                if rejection is None:
                    raise
                engine._stats.calls += 1
                try:
                    async for event in engine._recover(rejection, live, turn_start or "", again=overflowed):
                        events.append(event)
                except OverBudget:
                    # The newest message alone does not fit the window the provider serves.
                    raise rejection from exc
                except ContextOverflow as unrecovered:
                    raise unrecovered from exc
                overflowed = True
                continue
            break
        if offer:
            result, sent = await self._answer_rereads(conversation.session, body, live.messages, result, sent)

        def finish(reply: Reply) -> None:
            request = Request(
                model=canonical.model,
                system=live.system,
                tools=live.tools,
                messages=tuple(live.messages),
                max_tokens=live.max_tokens,
            )
            engine._stats.calls += 1
            stop = Stop(
                reason=normalise_stop_reason(reply.stop_reason),
                raw_reason=reply.stop_reason,
                message=reply.message,
            )
            engine._calls.answered(request, reply.message)
            if not reply.message.content:
                # Nothing canonical to keep (the agent's own copy is stored when it sends it back):
                # the usage still anchors, calibrates and sets the proactive fold's baseline.
                call = engine._calls.account(
                    reply.usage,
                    max_tokens=live.max_tokens,
                    local_estimate=live.local_estimate,
                    multiplier=live.multiplier,
                )
                engine._folding.trigger.accepted(
                    input_tokens=call.prompt, output_tokens=call.usage.output, finish_reason=stop.reason
                )
                self._held(conversation, reply)
                return
            events.extend(
                drain(engine._accept(live, _Received(stop=stop, sample=reply.usage), first_of_send=True))
            )
            conversation.took(reply.message)  # an assistant message: only its content enters the chain
            known = self._hashes.setdefault(conversation.root, {})
            known.setdefault(conversation.chain[-1], (conversation, len(conversation.chain)))
            self._held(conversation, reply)

        return Exchange(
            result=result, body=sent, session_id=conversation.session.id, events=events, _finish=finish
        )

    def _chains(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` continues a response the provider holds (Responses' ``previous_response_id``)."""
        return self.wire.name == "openai-responses" and isinstance(body.get("previous_response_id"), str)

    def _provider_fits(self, held: Held, engine: Engine, new: Sequence[Message]) -> bool:
        """Whether the provider's history (its count for the response ``held``) plus ``new`` and the
        output reserve fits the window as known (:mod:`._chained`)."""
        if not held.stored or held.tokens is None:
            return False
        growth = engine._fit.live_estimator().messages(list(new))
        return held.tokens + growth + engine._current().max_tokens <= engine.fit_profile().context_window

    def _held(self, conversation: _Conversation, reply: Reply) -> None:
        """Remember the response a reply came in (Responses), for a later ``previous_response_id``."""
        response_id = reply.extra.get("response_id")
        if not isinstance(response_id, str):
            return
        usage = reply.usage
        tokens = usage.prompt + usage.output if usage is not None and usage.prompt > 0 else None
        held = Held(
            conversation=conversation,
            count=len(conversation.chain),
            tokens=tokens,
            stored=bool(reply.extra.get("stored", True)),
        )
        self.responses.put(response_id, held)

    async def _answer_rereads(
        self,
        session: Session,
        body: Mapping[str, Any],
        messages: Sequence[Message],
        result: Any,
        sent: dict[str, Any],
    ) -> tuple[Any, dict[str, Any]]:
        """While the model's reply only calls the re-read tool, answer it from the ledger and ask again
        (at most :data:`MAX_REREADS` times); the agent gets the first reply that is its own business."""
        assert self.reply_of is not None
        rounds: list[Message] = []
        for _ in range(MAX_REREADS):
            reply = self.reply_of(result)
            uses = [b for b in reply.message.content if isinstance(b, ToolUse)]
            if not uses or any(u.name != READ_ARCHIVED for u in uses):
                break
            answers = []
            for use in uses:
                try:
                    answers.append(
                        ToolResult(
                            tool_use_id=use.id, content=read_archived(session, str(use.input.get("id", "")))
                        )
                    )
                except InvalidInput as exc:
                    answers.append(ToolResult(tool_use_id=use.id, content=str(exc), is_error=True))
            rounds += [reply.message, Message(role="user", content=tuple(answers))]
            sent = self.wire.render(
                body, [*messages, *rounds], session.read_attachment, extra_tools=(READ_ARCHIVED_TOOL,)
            )
            try:
                result = await Ask(Send(body=sent, purpose="request"))
            except Exception as exc:
                if self.overflow(exc) is None:
                    raise
                # The original does not fit beside the request (archives happen under pressure, so
                # the request is near the window): the model is told so, and asked once more.
                rounds[-1] = Message(
                    role="user",
                    content=tuple(
                        ToolResult(tool_use_id=use.id, content=REREAD_TOO_LARGE, is_error=True)
                        for use in uses
                    ),
                )
                sent = self.wire.render(
                    body, [*messages, *rounds], session.read_attachment, extra_tools=(READ_ARCHIVED_TOOL,)
                )
                try:
                    result = await Ask(Send(body=sent, purpose="request"))
                except Exception as again:
                    rejection = self.overflow(again)
                    if rejection is None:
                        raise
                    raise rejection from again
        return result, sent


MAX_REREADS = 3
"""Re-read rounds the guard answers within one agent call before handing the reply over as it is."""

REREAD_TOO_LARGE = (
    "The original is too large to read again within the context window; work from its placeholder."
)
"""The re-read's error result when the provider refused the request carrying the original for size."""
