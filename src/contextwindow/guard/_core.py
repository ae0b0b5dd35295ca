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

**Responses the provider holds.** An OpenAI Responses request naming ``previous_response_id`` is
the conversation that response ends plus the new input (:mod:`._chained`): sent as written while the
provider's history fits, else replaced by the compiled history from the ledger.

**What it reuses.** Each session is run by an :class:`~contextwindow.engine.loop.Engine` over the
ledger, through the engine's step API (the steps its own turn loop is built on: prepare the
request, accept the reply, recover from a rejection, add a round): blocks are priced once as they are appended, calibration and anchors
learn from each call's real usage, compile evicts media by the byte budget and archives stale
results, history compile leaves out is folded into summary checkpoints through the summariser (the
guard's own client and model by default, through this same driver), the proactive fold fires when
the last call neared the window, and a rejection's numbers teach the window the provider really
serves. Re-reads the model asks for are answered here (:mod:`._own_calls`), each call's usage
recorded like any other's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..compile import Policy
from ..compile.reread import READ_ARCHIVED, READ_ARCHIVED_TOOL
from ..content import Message, Request, ToolResult, ToolUse, media_refs
from ..engine.compiler import EngineCompiler
from ..engine.events import Event
from ..engine.folding.summarizer import Summarizer
from ..engine.loop import Engine
from ..engine.settings import EngineSettings
from ..errors import ContextOverflow, OverBudget, SessionMoved, StoreBusy, UnknownModel, UsageError
from ..formats import ParsedRequest
from ..models import get_profile
from ..providers.base import ProviderEvent, Stop, UsageSample, normalise_stop_reason
from ..store import Session, Store
from ._chained import Held, ResponseIds
from ._history import HistoryReader
from ._match import chain, extend_chain, longest_known
from ._own_calls import marked, own_ids, with_answers, without_calls
from ._steps import Ask, Reply, Send
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
        self.last: Message | None = None
        """The newest stored message (its metadata may name calls of the guard's still unanswered)."""
        self.windows: dict[str, int] = {}
        """Per model, the window its engine knew when it was dropped by :meth:`sync`."""
        self.synced = 0
        """The session's length when this view last matched the store."""
        self._appended_at_sync = session.appended
        self._messages_at_sync = 0
        self._turn_start_at_sync: str | None = None
        self._last_at_sync: Message | None = None

    def took(self, message: Message) -> None:
        """``message`` (stored, with its id) is now the newest of the session."""
        self.last = message
        extended = extend_chain(self.chain[-1] if self.chain else "", message)
        if extended is None:
            return  # the guard's own calls alone: the agent never sees them
        self.chain.append(extended)
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
        self.last = self._last_at_sync
        for stored in self.session.messages(after=self.synced - 1 if self.synced else None):
            if stored.position < length:
                self.took(stored.message)
        self._mark(length)
        if self.engines:
            for model, engine in self.engines.items():
                # What a rejection taught of the window is this process's, not the ledger's: kept.
                if engine.window is not None:
                    self.windows[model] = engine.window
            self.engines.clear()
            self.compiler = EngineCompiler()
        return kept

    def _mark(self, length: int) -> None:
        self.synced = length
        self._appended_at_sync = self.session.appended
        self._messages_at_sync = len(self.chain)
        self._turn_start_at_sync = self.turn_start
        self._last_at_sync = self.last


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
        self.history = HistoryReader(self.wire, "input" if fmt == "openai-responses" else "messages")
        """Reads each request's history, converting only what is new since a history it read before."""
        self.overflow = overflow
        self.session_root = session
        self.policy = policy or Policy()
        settings = settings or EngineSettings()
        if settings.usage_mode == "cumulative":
            # The SDKs report each call's own usage: there is no running total to take apart.
            settings = dataclasses.replace(settings, usage_mode="per-call")
        self.settings = settings
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

    def match(self, hashes: Sequence[str]) -> tuple[_Conversation, int]:
        """The conversation a history continues (``hashes``: its chain, :mod:`._match`), and how many
        of its leading messages it holds.

        The ledger decides, not this process's memory of it: the conversation found is first
        brought up to what other processes appended to it (one indexed read when nobody did), and
        a history that continues none of the sessions known here looks again for sessions another
        process started.
        """
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
        with self.store.batch():
            if parsed is not None:
                for ref in {r.id: r for m in new for r in media_refs(m.content)}.values():
                    data = parsed.attachments.get(ref.id)
                    if data is not None:
                        conversation.session.attach(data, ref.media_type)
            stored = engine.extend(new, expect=conversation.expected())
        had = len(conversation.chain)
        for each in stored:
            conversation.took(each)
        self._learn_hashes(conversation, had)

    def _took(self, conversation: _Conversation, message: Message) -> None:
        conversation.took(message)
        if conversation.chain:
            self._learn_hashes(conversation, len(conversation.chain) - 1)

    def _answered(self, conversation: _Conversation, engine: Engine, new: list[Message]) -> list[Message]:
        """``new`` with the guard's answers to its own calls in the stored reply the agent answered
        (:func:`~._own_calls.with_answers`): the first of ``new`` is the agent's results."""
        last = conversation.last
        if last is None or last.role != "assistant" or not new or new[0].role != "user":
            return new
        ids = own_ids(last)
        uses = [b for b in last.content if isinstance(b, ToolUse) and b.id in ids]
        if not uses:
            return new
        return [with_answers(last, [engine.reread(u) for u in uses], new[0]), *new[1:]]

    async def request(self, body: Mapping[str, Any], *, count: bool = False) -> Exchange:
        """Send what ``body`` asks for, fitted to the window; see the module docstring. With
        ``count``, ask for the fitted request's input count instead (nothing is sent, no reply)."""
        read = self.history.read(body)
        parsed = read.parsed
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
        if chained is not None and read.new_from > 0:
            # Every message of a chained request is new to the session: all of them with their media.
            parsed = self.history.read(body, whole=True).parsed
        for _ in range(_SYNC_ATTEMPTS):
            if chained is not None:
                # The agent sends only the new input: the rest is the conversation that response ends.
                if chained.count == len(chained.conversation.chain):
                    conversation, new = chained.conversation, canonical.messages
                else:  # a response from earlier in the conversation (or moved on since): its branch
                    earlier = [m.message for m in chained.conversation.session.messages()[: chained.count]]
                    messages = (*earlier, *canonical.messages)
                    conversation, held = self.match(chain(messages))
                    new = messages[held:]
            else:
                conversation, held = self.match(read.hashes)
                if held < read.new_from:
                    # The stored session holds less than the history read before: what it lacks is
                    # read again, with its media's bytes, to be stored.
                    parsed = self.history.read(body, whole=True).parsed
                new = canonical.messages[held:]
            engine = self._engine(conversation, model)
            # One agent call is one turn of the engine's: its per-turn state starts afresh.
            engine.start_turn()
            try:
                self._append(conversation, engine, self._answered(conversation, engine, list(new)), parsed)
                break
            except SessionMoved:
                # Another process appended between the match and this append: match again.
                if chained is not None:
                    self._learn_hashes(chained.conversation, chained.conversation.sync())
        else:
            raise StoreBusy(f"session {conversation.session.id!r} kept moving under other writers")
        conversation.compiler.system = canonical.system
        conversation.compiler.tools = canonical.tools
        policy = self.policy
        if canonical.max_tokens is not None:
            policy = policy.with_(output_reserve=canonical.max_tokens)
        conversation.compiler.policy = policy
        # The request sent is the agent's body with the compiled history in place of its own (the
        # leading system items, which a rendered request keeps verbatim, as JSON).
        shown = {**body, self.history.key: self.history.head(body.get(self.history.key) or [])}
        events: list[Event] = []
        async for event in engine.prepare(conversation.turn_start):
            events.append(event)
        # With previous_response_id: the agent's request as written while the provider's history fits.
        written = dict(body)
        holds = chained is not None and self._provider_fits(chained, engine, new)
        if chained is not None:  # otherwise the compiled history goes out in its place
            shown = {k: v for k, v in shown.items() if k != "previous_response_id"}
        overflowed = False
        may_offer = (
            self.reread
            and not holds
            and not count
            and not body.get("stream")
            and all(t.name != READ_ARCHIVED for t in canonical.tools)
        )
        rounds = 0
        while True:
            request = engine.request
            # The engine offers the re-read tool when a placeholder in the request names it.
            offer = may_offer and READ_ARCHIVED_TOOL in request.tools
            sent = (
                written
                if holds and not overflowed
                else self.wire.render(
                    shown,
                    request.messages,
                    conversation.session.read_attachment,
                    extra_tools=(READ_ARCHIVED_TOOL,) if offer else (),
                    max_tokens=canonical.max_tokens,
                )
            )
            if count:
                counted = await Ask(Send(body=sent, purpose="count"))
                return Exchange(result=counted, body=sent, session_id=conversation.session.id, events=events)
            events.append(engine.sending())
            try:
                result = await Ask(Send(body=sent, purpose="request"))
            except Exception as exc:
                rejection = self.overflow(exc)
                if rejection is None:
                    raise
                try:
                    async for event in engine.recover(rejection):
                        events.append(event)
                except OverBudget:
                    # The newest message alone does not fit the window the provider serves.
                    raise rejection from exc
                except ContextOverflow as unrecovered:
                    raise unrecovered from exc
                overflowed = True
                continue
            if not offer or self.reply_of is None:
                break
            reply = self.reply_of(result)
            uses = [b for b in reply.message.content if isinstance(b, ToolUse)]
            own = [u.id for u in uses if u.name == READ_ARCHIVED]
            if not own:
                break
            full = dataclasses.replace(reply, message=marked(reply.message, own))
            if len(own) < len(uses) or rounds == MAX_REREADS:
                # The agent's own calls too (or re-reads past the bound): the agent gets the reply
                # without the guard's calls, answered when its own results come back.
                result = without_calls(result, frozenset(own))
                return self._exchange(conversation, engine, result, sent, events, full)
            # Only re-reads: a round of the guard's own, answered from the ledger, and ask again.
            rounds += 1
            self._accepted(conversation, engine, full, events)
            answers = marked(Message(role="user", content=tuple(engine.reread(u) for u in uses)), own)
            async for event in engine.add_round(answers):
                events.append(event)
            conversation.took(answers)
        return self._exchange(conversation, engine, result, sent, events, None)

    def _accepted(
        self, conversation: _Conversation, engine: Engine, reply: Reply, events: list[Event]
    ) -> None:
        """Record an accepted call's reply through the engine (usage, anchors, calibration, the
        proactive fold's baseline; the message stored unless it is empty)."""
        stop = Stop(
            reason=normalise_stop_reason(reply.stop_reason),
            raw_reason=reply.stop_reason,
            message=reply.message,
        )
        events.extend(engine.accept(stop, reply.usage))
        if reply.message.content:
            # An assistant message: only its content enters the chain (the agent's copy has no ids).
            self._took(conversation, reply.message)

    def _exchange(
        self,
        conversation: _Conversation,
        engine: Engine,
        result: Any,
        sent: dict[str, Any],
        events: list[Event],
        full: Reply | None,
    ) -> Exchange:
        def finish(reply: Reply) -> None:
            if full is not None:
                # The agent's copy lacks the guard's calls: the ledger keeps the reply as it came.
                reply = dataclasses.replace(full, usage=reply.usage)
            self._accepted(conversation, engine, reply, events)
            self._held(conversation, reply)

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

    def _chains(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` continues a response the provider holds (Responses' ``previous_response_id``)."""
        return self.wire.name == "openai-responses" and isinstance(body.get("previous_response_id"), str)

    def _provider_fits(self, held: Held, engine: Engine, new: Sequence[Message]) -> bool:
        """Whether the provider's history (its count for the response ``held``) plus ``new`` and the
        output reserve fits the window as known (:mod:`._chained`)."""
        if not held.stored or held.tokens is None:
            return False
        growth = engine.fit.live_estimator().messages(list(new))
        reserve = engine.request.max_tokens or 0
        return held.tokens + growth + reserve <= engine.fit_profile().context_window

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


MAX_REREADS = 3
"""Rounds of re-reads alone the guard answers within one agent call; past them the reply reaches the
agent without its re-reads, which are answered with the agent's next results."""

_SYNC_ATTEMPTS = 4
"""How many times one call re-reads a session other processes keep appending to before it gives up
(:class:`~contextwindow.errors.StoreBusy`): each attempt follows a real append by another writer."""
