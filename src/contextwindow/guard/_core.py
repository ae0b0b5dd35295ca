"""The request guard core: the request an agent would send in, the request to send out.

:class:`GuardCore` is sans-IO (:mod:`._steps`). :meth:`GuardCore.request` is a coroutine that takes
the body an agent would send (its system prompt, tools and whole history, in its client's wire
format) and asks its driver to send the compiled body instead; it returns an :class:`Exchange`
(:mod:`._exchange`), whose :meth:`Exchange.finish` records the reply once the caller has it (at once
for a response, at the end for a stream). A rejection for size that the driver hands back is
recovered by compacting and sending again, once; a second one raises
:class:`~contextwindow.errors.ContextOverflow` with the provider's numbers. Every other failure of
the call reaches the agent unchanged.

``request`` is four layers, each calling the next (as httpx's ``Client.send`` is):

- :meth:`GuardCore.request`: read the body; what the guard cannot fit (a model without a profile, a
  response or conversation the provider holds that this core never saw) passes through as written;
- :meth:`GuardCore._sync`: match the conversation in the ledger (:mod:`._conversation`) and append
  what the request adds; then the engine compiles the request (:meth:`GuardCore._prepare`);
- :meth:`GuardCore._send_rounds`: the model's re-reads answered from the ledger, and asked again
  (:mod:`._own_calls`);
- :meth:`GuardCore._send_recovering`: the compiled request sent, a rejection for size recovered.

A Responses request naming ``previous_response_id`` goes out as written while the provider's history
fits (:mod:`._chained`). Each session is run by an :class:`~contextwindow.engine.loop.Engine`
(:mod:`._engines`) over the ledger, through the engine's step API only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..compaction import (
    COMPACT_BETA,
    anthropic_compaction_management,
    compaction_in,
    compaction_trigger,
    guarded_body,
    with_extras,
)
from ..compile import Policy
from ..compile.reread import READ_ARCHIVED, READ_ARCHIVED_TOOL
from ..content import Message, Request, ToolUse, media_refs
from ..engine.events import MaxTokensLowered
from ..engine.loop import Engine
from ..engine.observe import warn_once
from ..engine.settings import EngineSettings
from ..errors import ContextOverflow, OverBudget, SessionMoved, StoreBusy, UnknownModel, UsageError
from ..formats import ParsedRequest
from ..models import ModelProfile, fallback_profile, get_profile, output_cap
from ..pricing import Estimator
from ..store import Store
from ._asked import MessagePrices
from ._chained import RecordedResponse, ResponseIds
from ._conversation import SYNC_ATTEMPTS, Conversation, Conversations
from ._engines import engine_for
from ._exchange import Call, Exchange, Replies, pass_through
from ._history import HistoryReader, Read
from ._match import chain
from ._options import GuardOptions
from ._own_calls import marked, own_ids, with_answers, without_calls
from ._steps import Ask, Reply, Send
from ._wire import FORMATS, GuardFormat

__all__ = ["MAX_REREADS", "Exchange", "GuardCore"]

MAX_REREADS = 3
"""Rounds of re-reads alone the guard answers within one agent call; past them the reply reaches the
agent without its re-reads, which are answered with the agent's next results."""

OverflowReader = Callable[[BaseException], ContextOverflow | None]
"""Reads a client's exception: the ``ContextOverflow`` it means, or ``None`` when it is not one."""


class GuardCore:
    """The guard for one client and wire format (see the module docstring), configured by
    ``options``; ``store`` is the ledger, open (:func:`~contextwindow.guard.resolve_store` opens
    ``options.store``). Not thread-safe: one agent loop at a time."""

    def __init__(
        self,
        store: Store,
        fmt: GuardFormat,
        *,
        overflow: OverflowReader,
        options: GuardOptions | None = None,
        reply_of: Callable[[Any], Reply] | None = None,
        tenant: str | None = None,
    ) -> None:
        self.store = store
        self.options = options = options or GuardOptions()
        self.tenant = tenant
        """Whose conversations these are: every session id this core finds or makes starts with
        ``tenant + "/"``, so another tenant's history, however alike, is never continued here."""
        self.wire = FORMATS[fmt]
        self.history = HistoryReader(self.wire, "input" if fmt == "openai-responses" else "messages")
        """Reads each request's history, converting only what is new since a history it read before."""
        self.overflow = overflow
        self.policy = options.policy or Policy()
        settings = options.settings or EngineSettings()
        if settings.usage_mode == "cumulative":
            # The SDKs report each call's own usage: there is no running total to take apart.
            settings = dataclasses.replace(settings, usage_mode="per-call")
        self.settings = settings
        self.reread = options.reread and reply_of is not None
        """Offer the model :data:`~contextwindow.compile.reread.READ_ARCHIVED` when a placeholder in the
        request names it, and answer its calls here (the agent never sees them); not on streams."""
        self.host_rereads = False
        """The host offers the re-read tool itself (a framework adapter's tool), so placeholders name
        it where this core does not offer it; set by the adapter, per call if need be. Where no tool
        is offered, placeholders name none (``Policy.reread_tool``)."""
        self.reply_of = reply_of
        capacity = None if options.cache_mb is None else int(options.cache_mb * 1024 * 1024)
        self.conversations = Conversations(
            store,
            options.session,
            tenant=tenant,
            wire=fmt,
            capacity=capacity,
            declared=options.context_window,
        )
        self.responses = ResponseIds()
        """The responses this core recorded, by id: what a ``previous_response_id`` continues."""
        self.replies = Replies(store, self.conversations, self.responses)
        """Records each accepted call's reply (:mod:`._exchange`)."""
        self.provider_windows: dict[str, int] = {}
        """Per model, the window a request sent with the provider's editing was refused at."""
        self.learned_windows = self.conversations.learned
        """Per model, the window a rejection for size named: kept in the ledger, for every guard on it."""
        self.measure = False
        """Estimate every agent request as written (:attr:`Exchange.asked_tokens`), not only when a
        log line or a span shows it: the proxy's access line and headers say it."""
        self._editing: dict[ModelProfile, tuple[Estimator, MessagePrices]] = {}
        """Per profile, what the provider's editing prices with (the request and its edits, before
        the call is matched): each message once (:class:`~._asked.MessagePrices`), so calls for two
        models through one core do not start each other's prices again."""

    # -- the model ------------------------------------------------------------------------------------

    def _profile(self, model: str) -> ModelProfile | None:
        """The profile ``model`` is fitted to: its registered one (:func:`~contextwindow.models.get_profile`
        reads platform ids), else its family's rule at the window the options give or a rejection
        taught (:func:`~contextwindow.models.fallback_profile`, a log line says so once), else ``None``:
        nothing to fit it to."""
        try:
            return get_profile(model)
        except UnknownModel:
            window = self.options.context_window or self.learned_windows.get(model)
            if window is None:
                return None
        profile = fallback_profile(model, window)
        warn_once(
            _log,
            f"model {model!r} has no profile: guarded as {profile.tokenizer} text in a {window}-token "
            f"window, {profile.max_output_tokens} tokens of output (register a ModelProfile for exact figures)",
        )
        return profile

    def _learned_from(self, model: str, exc: Exception) -> None:
        """Learn ``model``'s window from a rejection for size of its unguarded request (the window it
        names), so the call is guarded from now on; any other failure, or one without the window, is
        raised as it is."""
        rejection = self.overflow(exc)
        if rejection is None or rejection.limit is None:
            raise exc
        self.learned_windows[model] = rejection.limit

    # -- the layers of one call ---------------------------------------------------------------------

    async def request(
        self, body: Mapping[str, Any], *, count: bool = False, provider_wire: str | None = None
    ) -> Exchange:
        """Send what ``body`` asks for, fitted to the window (see the module docstring). With
        ``count``, ask for the fitted request's input count instead (nothing is sent, no reply).
        ``provider_wire``: the wire the call finally goes out on when it is not the core's own (a
        framework adapter's Chat Completions body for an Anthropic model: ``"anthropic"``), whose
        provider compaction ``compaction`` then attaches (:func:`~contextwindow.compaction.guarded_body`).
        Raises :class:`~contextwindow.errors.UsageError` for a body without messages or model."""
        body = self.history.plain(body)
        if self.wire.name == "anthropic" and compaction_in(self.history.unread(body)):
            # The provider compacted this conversation: it is the provider's from its block on.
            return await pass_through(body if count else self._compacting(body), count)
        read = self.history.read(body)
        canonical = read.parsed.request
        if not canonical.messages:
            raise UsageError("a guarded request needs at least one message")
        if canonical.model is None:
            raise UsageError("a guarded request names its model")
        profile = self._profile(canonical.model)
        if profile is None:
            # Nothing to fit it to yet: as written, until a rejection for size names the window.
            try:
                return await pass_through(body, count)
            except Exception as exc:
                self._learned_from(canonical.model, exc)
        chained = self.responses.get(body["previous_response_id"]) if self._chains(body) else None
        if (self._chains(body) and chained is None) or body.get("conversation") is not None:
            # A response (or conversation) the provider holds and this core never saw: as written.
            return await pass_through(body, count)
        if self.options.compaction != "local" and chained is None and not count:
            # The provider's own editing, when what it leaves fits; else (or when the provider still
            # finds it too long) the engine folds below: never a deadlock.
            edited = self._provider_compaction(
                body, canonical, self._profile(canonical.model), provider_wire or self.wire.name
            )
            if edited is not None:
                try:
                    return await pass_through(edited, count)
                except Exception as exc:
                    self._provider_rejected(canonical.model, exc)
        call = self._sync(body, read, canonical.model, chained)
        await self._prepare(call, body, canonical, chained)
        if count:
            sent = self._body(call, offer=False)
            counted = await Ask(Send(body=sent, purpose="count"))
            return Exchange(
                result=counted, body=sent, session_id=call.conversation.session.id, events=call.events
            )
        exchange = await self._send_rounds(call)
        if self.options.compaction != "local":
            # What the engine knows of the window (a rejection may have taught it) bounds the next
            # call's provider editing.
            self.provider_windows[canonical.model] = call.engine.fit_profile().context_window
        return exchange

    def _provider_compaction(
        self, body: Mapping[str, Any], canonical: Request, profile: ModelProfile | None, wire: str
    ) -> dict[str, Any] | None:
        """``body`` with the provider's context editing attached, or ``None`` to fold locally
        (:func:`~contextwindow.compaction.guarded_body`)."""
        if profile is None:
            return None
        editing = self._editing.get(profile)
        if editing is None:
            editing = self._editing[profile] = (Estimator(profile), MessagePrices())
        estimator, prices = editing
        return guarded_body(
            body,
            canonical,
            mode=self.options.compaction,
            wire=wire,
            room=self._room(canonical.model or "", profile, canonical.max_tokens),
            count=lambda request: prices.request(estimator, request),
        )

    def _room(self, model: str, profile: ModelProfile, max_tokens: int | None) -> int:
        """The room for input the provider's editing must leave: the window (the profile's, the
        options', one a rejection or the ledger taught) less the output reserve."""
        window = min(
            profile.context_window,
            self.options.context_window or profile.context_window,
            self.provider_windows.get(model, profile.context_window),
            # A window learned on the ledger (by any guard on the store) bounds the edits too.
            self.learned_windows.get(model) or profile.context_window,
        )
        # The agent's reserve, else the one the engine would keep (a third of a small window).
        return window - (max_tokens or self.policy.reserve_for(window, profile.max_output_tokens))

    def _compacting(self, body: Mapping[str, Any]) -> Mapping[str, Any]:
        """A body holding a compaction block, as sent: with the compaction edit attached under
        ``"provider"``/``"auto"`` where the window takes its trigger (:mod:`contextwindow.compaction`)."""
        model = body.get("model")
        profile = self._profile(model) if isinstance(model, str) else None
        if self.options.compaction == "local" or profile is None or not isinstance(model, str):
            return body
        asked = body.get("max_tokens")
        trigger = compaction_trigger(self._room(model, profile, asked if isinstance(asked, int) else None))
        if trigger is None:
            return body
        return with_extras(body, anthropic_compaction_management(trigger), COMPACT_BETA)

    def _provider_rejected(self, model: str | None, exc: Exception) -> None:
        """A request sent with the provider's editing was refused: for size, the window it names is
        learned and the call folds locally; any other failure is raised as it is."""
        rejection = self.overflow(exc)
        if rejection is None:
            raise exc
        if rejection.limit is not None and model is not None:
            self.provider_windows[model] = rejection.limit
            # Kept in the ledger too, for every guard on the store (the call itself is not recorded).
            self.learned_windows[model] = rejection.limit

    def _sync(
        self, body: Mapping[str, Any], read: Read, model: str, chained: RecordedResponse | None
    ) -> Call:
        """Match the conversation ``body`` continues and append what it adds, in one transaction;
        matched again when another process appended meanwhile, at most :data:`SYNC_ATTEMPTS` times
        (then :class:`~contextwindow.errors.StoreBusy`)."""
        parsed, messages = read.parsed, read.parsed.request.messages
        if chained is not None and read.new_from > 0:
            # Every message of a chained request is new to the session: all of them with their media.
            parsed = self.history.read(body, whole=True).parsed
        for _ in range(SYNC_ATTEMPTS):
            if chained is not None:
                conversation, new = self._continued(chained, messages)
            else:
                conversation, matched = self.match(read.hashes, messages)
                if matched < read.new_from:
                    # The stored session holds less than the history read before: what it lacks is
                    # read again, with its media's bytes, to be stored.
                    parsed = self.history.read(body, whole=True).parsed
                new = messages[matched:]
            engine = engine_for(
                conversation,
                model,
                wire=self.wire,
                options=self.options,
                settings=self.settings,
                profile=self._profile(model),
            )
            # One agent call is one turn of the engine's: its per-turn state starts afresh.
            engine.start_turn()
            try:
                self._append(conversation, engine, self._answered(conversation, engine, list(new)), parsed)
            except SessionMoved:
                # Another process appended between the match and this append: match again.
                if chained is not None:
                    self.conversations.learn(chained.conversation, chained.conversation.sync())
                continue
            max_tokens = read.parsed.request.max_tokens
            return Call(
                conversation=conversation, engine=engine, new=new, max_tokens=max_tokens, hashes=read.hashes
            )
        raise StoreBusy(f"session {conversation.session.id!r} kept moving under other writers")

    async def _prepare(
        self, call: Call, body: Mapping[str, Any], canonical: Request, chained: RecordedResponse | None
    ) -> None:
        """Compile what ``call`` sends: the agent's system prompt, tools and output reserve over the
        session's history, folded and evicted to fit (the engine's prepare step)."""
        compiler = call.conversation.compiler
        compiler.system = canonical.system
        compiler.tools = canonical.tools
        own = any(t.name == READ_ARCHIVED for t in canonical.tools)
        offerable = self.reread and not body.get("stream") and not own
        named = offerable or own or self.host_rereads
        compiler.policy = self.policy if named else self.policy.with_(reread_tool=False)
        estimator = call.engine.fit.live_estimator()
        call.smallest = estimator.request(dataclasses.replace(canonical, messages=canonical.messages[-1:]))
        if self.measure or call.engine.observer.watched:
            call.asked = call.conversation.asked.request(estimator, canonical, call.hashes)
            call.engine.observer.asked(call.asked)
        self._fit_max_tokens(
            call, call.engine.fit_profile().context_window, output_cap(canonical.model or "")
        )
        # The request sent is the agent's body with the compiled history in place of its own (the
        # leading system items, which a rendered request keeps verbatim, as JSON).
        call.shown = {**body, self.history.key: self.history.head(body.get(self.history.key) or [])}
        async for event in call.engine.prepare(call.conversation.turn_start):
            call.events.append(event)
        if chained is not None:
            if self._provider_fits(chained, call.engine, call.new):
                call.written = dict(body)
            call.shown = {k: v for k, v in call.shown.items() if k != "previous_response_id"}
        call.offers_reread = offerable and call.written is None

    async def _send_rounds(self, call: Call) -> Exchange:
        """Send ``call``; a reply that only re-reads archived results is a round of the guard's own,
        answered from the ledger, and the model is asked again (at most :data:`MAX_REREADS` rounds).
        The reply the agent gets carries none of the guard's calls."""
        rounds = 0
        while True:
            result, sent, offer = await self._send_recovering(call)
            if not offer or self.reply_of is None:
                return self.replies.exchange(call, result, sent, None)
            reply = self.reply_of(result)
            uses = [b for b in reply.message.content if isinstance(b, ToolUse)]
            own = [u.id for u in uses if u.name == READ_ARCHIVED]
            if not own:
                return self.replies.exchange(call, result, sent, None)
            full = dataclasses.replace(reply, message=marked(reply.message, own))
            if len(own) < len(uses) or rounds == MAX_REREADS:
                # The agent's own calls too (or re-reads past the bound): the agent gets the reply
                # without the guard's calls, answered when its own results come back.
                return self.replies.exchange(call, without_calls(result, frozenset(own)), sent, full)
            rounds += 1
            self.replies.accepted(call, full)
            answers = marked(Message(role="user", content=tuple(call.engine.reread(u) for u in uses)), own)
            async for event in call.engine.add_round(answers):
                call.events.append(event)
            call.conversation.took(answers)

    async def _send_recovering(self, call: Call) -> tuple[Any, dict[str, Any], bool]:
        """Send the compiled request: the client's result, the body sent, and whether it offered the
        re-read tool. A rejection for size is recovered by the engine and sent again (a second
        rejection, or a newest message alone too large, raises ``ContextOverflow``, the client's
        exception its cause); any other failure is raised as it is."""
        while True:
            # The engine offers the re-read tool when a placeholder in the request names it.
            offer = call.offers_reread and READ_ARCHIVED_TOOL in call.engine.request.tools
            sent = self._body(call, offer)
            call.events.append(call.engine.sending())
            try:
                return await Ask(Send(body=sent, purpose="request")), sent, offer
            except Exception as exc:
                rejection = self.overflow(exc)
                if rejection is None:
                    raise
                lowered = rejection.limit is not None and self._fit_max_tokens(call, rejection.limit)
                try:
                    async for event in call.engine.recover(rejection):
                        call.events.append(event)
                    call.conversation.learned_from(call.engine)
                except OverBudget:
                    # The newest message alone does not fit the window the provider serves.
                    raise rejection from exc
                except ContextOverflow as unrecovered:
                    if not lowered:
                        raise unrecovered from exc
                    # Nothing to free, but the lowered bound fits now: sent again (a second
                    # rejection in a row is the engine's to raise).
                call.written = None  # a retry sends the compiled history

    def _body(self, call: Call, offer: bool) -> dict[str, Any]:
        """The body to send: the agent's as written while the provider's history fits, else its body
        with the compiled history (and the re-read tool, when ``offer``)."""
        if call.written is not None:
            return call.written
        return self.wire.render(
            call.shown,
            call.engine.request.messages,
            call.conversation.session.read_attachment,
            extra_tools=(READ_ARCHIVED_TOOL,) if offer else (),
            max_tokens=call.max_tokens,
            memo=call.conversation.wire_memo,
        )

    def _fit_max_tokens(self, call: Call, window: int, cap: int | None = None) -> bool:
        """The agent's ``max_tokens`` as the output reserve compile keeps; one that cannot fit beside the
        smallest request that could be sent in ``window`` (system, tools, the newest message), or is
        above the model's own output ``cap``, is lowered, so a bound the provider must refuse is never
        sent; an event and a log line say so. Whether it was lowered."""
        asked = call.max_tokens
        if asked is None:
            return False
        room = window - call.smallest
        # Lowered to the reserve the policy derives for the window (a third of a small one), so the
        # history keeps room beside it, and never above what fits beside the smallest request.
        fitted = asked if asked <= room else max(1, min(room, self.policy.reserve_for(window, asked)))
        fitted = min(fitted, cap or fitted)
        call.conversation.compiler.policy = call.conversation.compiler.policy.with_(output_reserve=fitted)
        if fitted == asked:
            return False
        call.max_tokens = fitted
        call.events.append(
            call.engine.observer.event(MaxTokensLowered(asked=asked, lowered=fitted, window=window))
        )
        warn_once(
            _log,
            f"max_tokens {asked} cannot fit beside the smallest request in a {window}-token window, or is "
            f"above the model's output cap ({cap}): sent as {fitted}",
        )
        return True

    # -- the session ---------------------------------------------------------------------------------

    def match(
        self, hashes: Sequence[str], messages: Sequence[Message] | None = None
    ) -> tuple[Conversation, int]:
        """The conversation a history continues and how many of its leading messages it already has
        (:meth:`~._conversation.Conversations.match`)."""
        return self.conversations.match(hashes, messages)

    def _continued(
        self, chained: RecordedResponse, messages: Sequence[Message]
    ) -> tuple[Conversation, Sequence[Message]]:
        """The conversation a chained request continues, and what it adds: the agent sends only its
        new input, the rest is the conversation the response it names ends."""
        if chained.count == len(chained.conversation.chain):
            return chained.conversation, messages
        # A response from earlier in the conversation (or moved on since): its branch.
        earlier = [m.message for m in chained.conversation.session.messages()[: chained.count]]
        whole = (*earlier, *messages)
        conversation, matched = self.match(chain(whole), whole)
        return conversation, whole[matched:]

    def _append(
        self,
        conversation: Conversation,
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
        self.conversations.learn(conversation, had)
        self.conversations.grew(conversation, stored)

    def _answered(self, conversation: Conversation, engine: Engine, new: list[Message]) -> list[Message]:
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

    def _chains(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` continues a response the provider holds (Responses' ``previous_response_id``)."""
        return self.wire.name == "openai-responses" and isinstance(body.get("previous_response_id"), str)

    def _provider_fits(self, response: RecordedResponse, engine: Engine, new: Sequence[Message]) -> bool:
        """Whether the provider's history (its count for ``response``) plus ``new`` and the output
        reserve fits the window as known (:mod:`._chained`)."""
        if not response.stored or response.tokens is None:
            return False
        growth = engine.fit.live_estimator().messages(list(new))
        reserve = engine.request.max_tokens or 0
        return response.tokens + growth + reserve <= engine.fit_profile().context_window


_log = logging.getLogger("contextwindow.guard")
