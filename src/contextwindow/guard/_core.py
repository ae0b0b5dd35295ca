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
an earlier one stored. Several processes may serve one store at once: on each call the session's
length in the store says whether another one appended since (then what it appended is read first),
and a call's new messages are appended in one transaction only if nobody did meanwhile
(:meth:`~contextwindow.store.Session.extend` with ``expect``), else the request is matched again.

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
from dataclasses import dataclass
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
from ..errors import (
    ContextOverflow,
    InvalidInput,
    OverBudget,
    SessionMoved,
    StoreBusy,
    UnknownModel,
    UsageError,
)
from ..formats import ParsedRequest
from ..models import get_profile
from ..providers.base import ProviderEvent, Stop, UsageSample, normalise_stop_reason
from ..store import Session, Store
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
    """One ledger session the guard keeps: its messages' chain and the engine that runs it.

    Other processes may serve the same session (several proxy workers on one store), so what this
    one holds is a view of the ledger as of :attr:`synced`: the session's length then, and the
    handle's own appends since (:attr:`Session.appended`) are the only entries it expects to find
    beyond. :meth:`moved` asks the store (one indexed read) whether anyone else appended;
    :meth:`sync` then reads what they appended."""

    def __init__(self, session: Session, root: str) -> None:
        self.session = session
        self.root = root
        self.chain: list[str] = []
        self.turn_start: str | None = None
        """The id of the message that opened the current turn: the newest user message that is
        not only tool results (folds never cover it)."""
        self.compiler = EngineCompiler()
        self.engines: dict[str, Engine] = {}
        self.windows: dict[str, int] = {}
        """Per model, the window its engine knew when it was dropped by :meth:`sync`."""
        self.synced = 0
        """The session's length when this view last matched the store."""
        self._appended_at_sync = session.appended
        self._messages_at_sync = 0
        self._turn_start_at_sync: str | None = None

    def took(self, message: Message) -> None:
        """``message`` (stored, with its id) is now the newest of the session."""
        self.chain.append(extend_chain(self.chain[-1] if self.chain else "", message))
        if message.role == "user" and not all(isinstance(b, ToolResult) for b in message.content):
            self.turn_start = message.id

    def expected(self) -> int:
        """The session's length if nobody but this handle appended since :attr:`synced`."""
        return self.synced + self.session.appended - self._appended_at_sync

    def moved(self) -> int | None:
        """The session's length in the store when another writer appended to it since the last sync;
        ``None`` when this view is current."""
        length = self.session.length()
        if length == self.expected():
            self._mark(length)
            return None
        return length

    def sync(self, length: int | None = None) -> int:
        """Bring the view up to the store: the messages appended since the last sync, by anyone, in
        the ledger's order. What the engines held in memory of the session is dropped with them
        (they are rebuilt from the ledger, as a new process would build them). Returns how many
        leading messages of the chain were kept as they were."""
        length = self.session.length() if length is None else length
        kept = self._messages_at_sync
        del self.chain[kept:]
        self.turn_start = self._turn_start_at_sync
        for stored in self.session.messages(after=self.synced - 1 if self.synced else None):
            if stored.position < length:
                self.took(stored.message)
        self._mark(length)
        if self.engines:
            for model, engine in self.engines.items():
                # What a rejection taught of the window is this process's, not the ledger's: kept.
                self.windows[model] = engine._requests.window
            self.engines.clear()
            self.compiler = EngineCompiler()
        return kept

    def _mark(self, length: int) -> None:
        self.synced = length
        self._appended_at_sync = self.session.appended
        self._messages_at_sync = len(self.chain)
        self._turn_start_at_sync = self.turn_start


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

    # -- recognising the conversation ---------------------------------------------------------------

    def _load_root(self, root: str, *, again: bool = False) -> None:
        """Read the sessions of ``root`` from the store: once, or ``again`` to find those another
        process started or moved since."""
        if root in self._roots and not again:
            return
        self._roots.add(root)
        for sid in self.store.sessions(prefix=root):
            if not (sid == root or (sid.startswith(root + ".") and sid[len(root) + 1 :].isdigit())):
                continue
            conversation = self._conversations.get(sid)
            if conversation is None:
                conversation = self._conversations[sid] = _Conversation(self.store.session(sid), root)
                self._learn_hashes(conversation, conversation.sync())
            elif (length := conversation.moved()) is not None:
                self._learn_hashes(conversation, conversation.sync(length))

    def _learn_hashes(self, conversation: _Conversation, start: int = 0) -> None:
        known = self._hashes.setdefault(conversation.root, {})
        for n, h in enumerate(conversation.chain[start:], start=start + 1):
            known.setdefault(h, (conversation, n))

    def _new_conversation(self, root: str) -> _Conversation:
        sid, n = root, 0
        while sid in self._conversations or self.store.session(sid).length() > 0:
            n += 1
            sid = f"{root}.{n}"
        conversation = _Conversation(self.store.session(sid), root)
        self._conversations[sid] = conversation
        return conversation

    def match(self, messages: Sequence[Message]) -> tuple[_Conversation, int]:
        """The conversation a history continues, and how many of its leading messages it holds.

        The ledger decides, not this process's memory of it: the conversation found is first
        brought up to what other processes appended to it (one indexed read when nobody did), and
        a history that continues none of the sessions known here looks again for sessions another
        process started."""
        hashes = chain(messages)
        root = self.session_root or f"guard-{hashes[0][:20]}"
        fresh = root not in self._roots
        self._load_root(root)
        reloaded = fresh
        for _ in range(_SYNC_ATTEMPTS):
            known = self._hashes.setdefault(root, {})
            n = longest_known(hashes, known)
            if n > 0:
                conversation, count = known[hashes[n - 1]]
                if count <= len(conversation.chain) and conversation.chain[count - 1] == hashes[n - 1]:
                    length = conversation.moved()
                    if length is not None:
                        self._learn_hashes(conversation, conversation.sync(length))
                        continue  # what another process appended may hold more of this history
                    if count == len(conversation.chain):
                        return conversation, n
            if reloaded:
                return self._new_conversation(root), 0
            reloaded = True
            self._load_root(root, again=True)  # sessions another process started since
        raise StoreBusy(f"the sessions of {root!r} kept moving under other writers; try the call again")

    # -- one call -----------------------------------------------------------------------------------

    def _engine(self, conversation: _Conversation, model: str) -> Engine:
        engine = conversation.engines.get(model)
        if engine is None:
            profile = get_profile(model)
            window = self.context_window or profile.context_window
            window = min(window, conversation.windows.get(model, window))
            if window != profile.context_window:
                profile = profile.with_(
                    context_window=window, max_output_tokens=min(profile.max_output_tokens, window)
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
        self,
        conversation: _Conversation,
        engine: Engine,
        messages: Sequence[Message],
        parsed: ParsedRequest | None,
    ) -> None:
        """Append what the request adds to the session: in one transaction, and only if nobody else
        appended since this view of it was synced (else :class:`~contextwindow.errors.SessionMoved`,
        nothing written)."""
        new = [m for m in messages if m.content]
        if not new:
            return
        raw_block = engine._estimator.raw_block
        prices = [[raw_block(b) for b in m.content] for m in new]
        with self.store.batch():
            if parsed is not None:
                for ref in {r.id: r for m in new for r in media_refs(m.content)}.values():
                    data = parsed.attachments.get(ref.id)
                    if data is not None:
                        conversation.session.attach(data, ref.media_type)
            stored = conversation.session.extend(new, block_prices=prices, expect=conversation.expected())
        had = len(conversation.chain)
        for each in stored:
            conversation.took(each.message)
        self._learn_hashes(conversation, had)

    async def request(self, body: Mapping[str, Any], *, count: bool = False) -> Exchange:
        """Send what ``body`` asks for, fitted to the window; see the module docstring. With
        ``count``, ask for the fitted request's input count instead (nothing is sent, no reply)."""
        parsed = self.wire.parse(body)
        canonical = parsed.request
        if not canonical.messages:
            raise UsageError("a guarded request needs at least one message")
        if canonical.model is None:
            raise UsageError("a guarded request names its model")
        try:
            get_profile(canonical.model)
        except UnknownModel:
            # Nothing to fit it to: the agent's request goes out as it wrote it (register a profile,
            # or name a known one, to guard it).
            result = await Ask(Send(body=dict(body), purpose="count" if count else "request"))
            return Exchange(result=result, body=dict(body), session_id="", events=[])
        for _ in range(_SYNC_ATTEMPTS):
            conversation, held = self.match(canonical.messages)
            engine = self._engine(conversation, canonical.model)
            try:
                self._append(conversation, engine, canonical.messages[held:], parsed)
                break
            except SessionMoved:
                continue  # another process appended between the match and this append: match again
        else:
            raise StoreBusy(f"session {conversation.session.id!r} kept moving under other writers")
        # One agent call is one send of the engine's: its per-send state starts afresh.
        engine._stats.reset()
        engine._notes.start_send()
        engine._folding.start_turn()
        engine._requests.overrides.clear()
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
        overflowed = False
        while True:
            live = engine._current()
            offer = (
                self.reread
                and not count
                and not body.get("stream")
                and all(t.name != READ_ARCHIVED for t in canonical.tools)
                and names_reread(live.messages)
            )
            sent = self.wire.render(
                body,
                live.messages,
                conversation.session.read_attachment,
                extra_tools=(READ_ARCHIVED_TOOL,) if offer else (),
                max_tokens=canonical.max_tokens,
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
                return
            events.extend(
                drain(engine._accept(live, _Received(stop=stop, sample=reply.usage), first_of_send=True))
            )
            conversation.took(reply.message)  # an assistant message: only its content enters the chain
            self._learn_hashes(conversation, len(conversation.chain) - 1)

        def finish_in_one_commit(reply: Reply) -> None:
            # What a reply teaches (usage, anchor, calibration, notes, the message): one transaction.
            with self.store.batch():
                finish(reply)

        return Exchange(
            result=result,
            body=sent,
            session_id=conversation.session.id,
            events=events,
            _finish=finish_in_one_commit,
        )

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

_SYNC_ATTEMPTS = 4
"""How many times one call re-reads a session other processes keep appending to before it gives up
(:class:`~contextwindow.errors.StoreBusy`): each attempt follows a real append by another writer."""

REREAD_TOO_LARGE = (
    "The original is too large to read again within the context window; work from its placeholder."
)
"""The re-read's error result when the provider refused the request carrying the original for size."""
