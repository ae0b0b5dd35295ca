"""The turn engine: a sequencer of the step API (:class:`Engine`).

``async for event in engine.run_turn(message)`` runs one user turn to its end. Within a turn the
rounds (tool results and mid-turn messages from :meth:`Engine.inject`) are appended to the request
already sent, without recompiling, so the provider's prompt cache stays warm, until one of these says
recompile (the words are defined in ``docs/concepts.md``):

1. ``end_turn`` from a tool ends the turn (it wins over both restarts);
2. the stream's accumulated fresh input passes ``max_stream_input_tokens``:
   ``stream_restarted(reason="context_budget")`` (takes precedence);
3. the physical-window projection crosses the window:
   ``stream_restarted(reason="physical_window", projected, window)``;
4. the provider rejects for size: compact (the escalation ladder) and retry once; a second rejection
   raises :class:`~contextwindow.errors.ContextOverflow` with the provider's numbers, after the notes.

The decisions are others': what fits is the window's (:mod:`~contextwindow.engine.window`), folds
are :mod:`~contextwindow.engine.folding`'s, counting before sending
:mod:`~contextwindow.engine.counting`'s, a rejection :mod:`~contextwindow.engine.recovery`'s, a
call's usage :mod:`~contextwindow.engine.accounting`'s, tools
:mod:`~contextwindow.engine.tool_results`' and re-reads :mod:`~contextwindow.engine.rereads`'.
Everything is recorded in the ledger as it happens.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from ..compile import Policy
from ..compile.reread import READ_ARCHIVED_TOOL
from ..content import Message, Request, ToolResult, ToolUse
from ..cost import Cost
from ..errors import ContextOverflow, InvalidInput, UsageError
from ..formats import ToolDefinition
from ..models import ModelProfile, get_profile
from ..pricing import Estimator
from ..pricing.counters import InputCounter
from ..providers import Provider, Stop
from ..store import Session
from ..store.slots import LedgerSlot, StateSlot
from ..usage.calibration import Calibrator, stored_prices_unchanged
from ..usage.tracker import AnchorBook, Usage
from .accounting import CallAccounting
from .compiler import Compiled, Compiler, EngineCompiler, RequestCompiler, SystemPrompt
from .counting import CountBeforeSend, rescale
from .events import (
    Compacted,
    Event,
    Note,
    NoteBook,
    OverflowRecovered,
    RequestSent,
    StreamRestarted,
    StreamResumed,
    TurnEnded,
    record_event,
)
from .fit import WindowFit
from .folding.fold_trigger import ProactiveTrigger, accepted_history
from .folding.folds import Folding
from .folding.summarizer import Summarizer
from .live import LiveRequest
from .next_request import NextRequest
from .observe import CallObserver, EventHook
from .recovery import Freed, Recovery
from .rereads import answer_reread
from .send import Received, stream_call
from .settings import EngineSettings
from .stats import TurnStats
from .tool_results import ToolOutcome, ToolRound, ToolRunner, inline_cap_chars, run_round
from .window import WindowState

_E = TypeVar("_E", bound=Event)
_P = ParamSpec("_P")

__all__ = ["Compiled", "Compiler", "Engine", "EngineSettings", "ToolOutcome", "ToolRunner"]


def _observed(
    step: Callable[Concatenate[Engine, _P], AsyncIterator[Event]],
) -> Callable[Concatenate[Engine, _P], AsyncIterator[Event]]:
    """A step whose events the engine's observer sees as they pass (:attr:`Engine.observer`)."""

    @functools.wraps(step)
    async def observed(engine: Engine, /, *args: _P.args, **kwargs: _P.kwargs) -> AsyncIterator[Event]:
        async for event in step(engine, *args, **kwargs):
            yield engine.observer.event(event)

    return observed


class Engine:
    """Runs turns for one session against one provider (see the module docstring).

    ``Engine(session, provider, model, system=..., tools=..., tool_runner=..., summarizer=...)``
    compiles with the default :class:`~contextwindow.engine.compiler.EngineCompiler` (``system`` a
    string or text blocks, ``tools`` specs or Anthropic/OpenAI wire dicts, ``policy`` compile's
    policy); pass ``compiler=`` for another one (then those three are its business, else
    :class:`~contextwindow.errors.UsageError`). ``counter`` counts a request before it is sent when
    ``settings.count_before_send`` says a decision depends on it (default: the provider itself when
    it has ``count_input_tokens``). ``on_event`` is called with every event as it is produced, the
    stream's text and thinking deltas excepted (:mod:`~contextwindow.engine.observe`). ``calibration``
    is where the calibration record lives (default: the session's ledger; the guard's is the store's).
    """

    def __init__(
        self,
        session: Session,
        provider: Provider,
        model: str | ModelProfile,
        *,
        system: SystemPrompt = (),
        tools: Sequence[ToolDefinition] = (),
        policy: Policy | None = None,
        compiler: Compiler | None = None,
        tool_runner: ToolRunner | None = None,
        summarizer: Summarizer | None = None,
        settings: EngineSettings | None = None,
        estimator: Estimator | None = None,
        counter: InputCounter | None = None,
        on_event: EventHook | None = None,
        calibration: StateSlot | None = None,
    ) -> None:
        settings = settings or EngineSettings()
        if compiler is None:
            policy = policy or Policy()  # no re-read tool offered: placeholders name none
            policy = policy if settings.reread else policy.with_(reread_tool=False)
            compiler = EngineCompiler(policy, system=system, tools=tools)
        elif system or tools or policy is not None:
            raise UsageError(
                "system, tools and policy are the default compiler's: give them to your compiler"
            )
        # What the host set (and may swap between turns).
        self.session = session
        self.provider = provider
        self.profile = profile = get_profile(model)
        self.settings = settings
        self.tool_runner = tool_runner
        self.counter: InputCounter | None = (
            counter if counter is not None else provider if isinstance(provider, InputCounter) else None
        )
        """Counts a request before it is sent when ``settings.count_before_send`` says a decision
        depends on it (default: the provider's own ``count_input_tokens``, when it has one)."""
        self._estimator = estimator or Estimator(profile)
        self.observer = CallObserver(
            session=session.id, model=profile.name, provider=provider.name, on_event=on_event
        )
        """Sees every event as it is produced: the host's ``on_event``, the log lines, the tracers."""
        self._build(compiler, summarizer, calibration)
        # The turn.
        self._injected: list[Message] = []
        self._sent: Request | None = None
        self._turn_start: str | None = None
        self._first_of_send = True
        self._overflowed = False

    def _build(self, compiler: Compiler, summarizer: Summarizer | None, slot: StateSlot | None) -> None:
        """The engine's parts: the window (one owner of what fits), the books of its calls, the
        request compiler, folding, counting before sending and recovery."""
        session, profile, settings = self.session, self.profile, self.settings
        connection = settings.connection
        self._calibrator = Calibrator(
            slot
            or LedgerSlot(session, "calibration", match={"model": profile.name, "connection": connection}),
            model=profile.name,
            connection=connection,
            prices_unchanged=lambda: stored_prices_unchanged(session.messages(), self._estimator.raw_block),
        )
        self._window = window = WindowState(
            profile, self._calibrator, estimator=self._estimator, settings=settings
        )
        self._anchors = anchors = AnchorBook(LedgerSlot(session, "anchor"))
        self._requests = RequestCompiler(session, compiler, window, anchors, connection=connection)
        self._notes = NoteBook(limits=window.limits)
        self._calls = CallAccounting(
            session,
            profile,
            connection=connection,
            usage_mode=settings.usage_mode,
            window=window,
            anchors=anchors,
            notes=self._notes,
        )
        self._stats = stats = TurnStats()
        self._folding = Folding(
            session,
            self._requests,
            estimator=self._estimator,
            limits=settings,
            counters=stats,
            notes=self._notes,
            window=window,
            summarizer=summarizer,
        )
        count = CountBeforeSend(window, self._calls, stats, model=profile.name, connection=connection)
        self._next = NextRequest(session, self._requests, self._folding, self._calls, count)
        self._recovery = Recovery(self._requests, self._folding, self._calls, stats)
        stored = anchors.latest
        if stored is not None and stored.model == profile.name and stored.connection == connection:
            window.resume(stored, accepted_history(session))  # the provider counted this route before

    # -- what a host reads ----------------------------------------------------------------------

    @property
    def summarizer(self) -> Summarizer | None:
        """The summariser folds call (``None``: what compile leaves out is cut with a note)."""
        return self._folding.summarizer

    @summarizer.setter
    def summarizer(self, summarizer: Summarizer | None) -> None:
        self._folding.summarizer = summarizer

    @property
    def calibrator(self) -> Calibrator:
        """The calibration multiplier of this model and connection, learned from real usage."""
        return self._calibrator

    @property
    def window_state(self) -> WindowState:
        """What is known about the window: the one owner of what fits (:class:`WindowState`)."""
        return self._window

    @property
    def fit(self) -> WindowFit:
        """What compile fits against (the fit margin, what rejections taught, round ratios)."""
        return self._window.fit

    @property
    def trigger(self) -> ProactiveTrigger:
        """When the next fold is due (its baseline is the last accepted request)."""
        return self._window.trigger

    @property
    def stats(self) -> TurnStats:
        """What the latest turn cost: calls, restarts, compactions, engine time."""
        return self._stats

    @property
    def cost(self) -> Cost | None:
        """What this engine's calls cost in dollars so far (:mod:`contextwindow.cost`: input with cache
        reads and writes, output); ``None`` when genai-prices is not installed or does not know the
        model (each call's own is on its ``UsageReported``)."""
        return self._calls.spent

    @property
    def window(self) -> int | None:
        """The window the projection guards (``None``: no projection), as the provider proved it."""
        return self._window.window

    @property
    def last_projection(self) -> int | None:
        """The projection at the latest tool boundary (``None`` when none could be made)."""
        return self._window.last_projection

    def fit_profile(self) -> ModelProfile:
        """The profile compile fits against (:meth:`WindowState.fit_profile`): the window as known
        (declared, or as the provider proved it), less the fit margin and what it taught."""
        return self._window.fit_profile()

    # -- host API -------------------------------------------------------------------------------

    def inject(self, message: Message) -> None:
        """A mid-turn message: it rides into the next round (or the next turn's request). Raises
        :class:`~contextwindow.errors.InvalidInput` unless a user message without tool blocks."""
        if message.role != "user" or any(isinstance(b, ToolUse | ToolResult) for b in message.content):
            raise InvalidInput("a mid-turn message is a user message without tool blocks", path="message")
        self._injected.append(message)

    async def run_turn(self, message: Message) -> AsyncIterator[Event]:
        """Run one user turn; yields events as they happen; raises ``ContextOverflow`` when unrecoverable.

        The turn is the step API's loop (see "The step API" in ``docs/guide.md``): :meth:`prepare` the
        request, send it and stream the reply, then :meth:`accept` it, or :meth:`recover` from a
        rejection for size; a reply that asks for tools runs them and :meth:`add_round` decides whether
        the round rides on the same request or the next request is compiled afresh.
        """
        stats = self._stats
        self.start_turn()
        turn_start = self.append(message)
        for pending in self._drain_injected():
            self.append(pending)
        assert turn_start.id is not None
        async for event in self.prepare(turn_start.id):
            yield event
        for _ in range(self.settings.max_steps_per_turn):
            received = Received()
            try:
                async for event in self._call(received):
                    yield event
            except ContextOverflow as rejection:
                stats.resume()
                async for event in self.recover(rejection):
                    yield event
                continue
            stats.resume()
            stop = received.stop
            assert stop is not None
            for event in self.accept(stop, received.sample):
                yield event
            tool_uses = [b for b in stop.message.content if isinstance(b, ToolUse)]
            if stop.reason != "tool_use" or not tool_uses:
                stats.pause()
                yield self._turn_ended(stop.reason)
                return
            round_ = ToolRound()
            async for event in self._run_tools(tool_uses, round_):
                yield event
            results = Message(role="user", content=tuple(round_.results))
            async for event in self.add_round(results, end_turn=round_.end_turn):
                yield event
            if round_.end_turn:
                stats.pause()
                yield self._turn_ended("end_turn_by_tool")
                return
        yield self.observer.event(
            self._record(Note(kind="step_limit", data={"steps": self.settings.max_steps_per_turn}))
        )

    # -- the step API: one provider call at a time ----------------------------------------------
    #
    # ``run_turn`` is built on these, and so is a host that makes its calls itself (the request
    # guard, which sends each request through the agent's own client): start a turn, append what
    # is new, prepare the request, send ``request`` yourself, then hand back the reply
    # (``accept``) or the rejection for size (``recover``); a round of tool results goes in with
    # ``add_round``. See "The step API" in ``docs/guide.md``.

    def start_turn(self) -> None:
        """A new turn (a user turn, or one agent call for a host that keeps its own loop): the turn's
        figures (:attr:`stats`), its notes, its bound on folds and compile's one-turn overrides start
        afresh."""
        self._stats.reset()
        self._stats.resume()
        self._notes.start_send()
        self._folding.start_turn()
        self._requests.overrides.clear()
        self._window.start_turn(has_counter=self.counter is not None)
        self._turn_start = None
        self._first_of_send = True
        self._overflowed = False

    def append(self, message: Message) -> Message:
        """Store ``message`` in the session, each block priced once; returns it as stored (with its id)."""
        prices = [self._estimator.raw_block(b) for b in message.content]
        return self.session.append(message, block_prices=prices).message

    def extend(self, messages: Sequence[Message], *, expect: int | None = None) -> list[Message]:
        """Store ``messages`` in one transaction, each block priced once; with ``expect``, only if the
        session still holds exactly that many entries (else :class:`~contextwindow.errors.SessionMoved`
        and nothing is written). Returns them as stored."""
        prices = [[self._estimator.raw_block(b) for b in m.content] for m in messages]
        return [s.message for s in self.session.extend(messages, block_prices=prices, expect=expect)]

    @_observed
    async def prepare(self, turn_start_id: str | None) -> AsyncIterator[Event]:
        """Fold first when the last accepted request neared the window (the proactive fold), then
        compile the request to send (:attr:`request`), covering what compile leaves out. Folds never
        cover ``turn_start_id``, the message that opened the turn (``None``: no such message)."""
        self._turn_start = turn_start_id
        async for event in self._folding.maybe_fold("pre_turn", turn_start_id):
            yield event
        async for event in self._fresh_request(turn_start_id):
            yield event

    @property
    def request(self) -> Request:
        """The request to send now (as :meth:`prepare`, :meth:`recover` or :meth:`add_round` left it)."""
        return self._current().request(self.profile.name)

    def sending(self) -> RequestSent:
        """:attr:`request` goes out now: recorded (``request_sent``), told to the usage tracker; the event."""
        live = self._current()
        event = self._record(
            RequestSent(
                call=self._stats.calls,
                estimated_tokens=live.estimated_tokens,
                window=self._window.window,
                max_tokens=live.max_tokens,
                recompiled=live.recompiled,
                counted=live.counted,
                system_tokens=live.head_tokens[0],
                tools_tokens=live.head_tokens[1],
            )
        )
        self._sent = self.request
        self._calls.sending(self._sent)
        self.observer.event(event)
        return event

    def accept(self, stop: Stop, usage: Usage | None) -> list[Event]:
        """The provider answered the request sent: its usage (``None``: unreported) is accounted
        (anchor, calibration, notes, the proactive fold's baseline) and its reply stored and appended
        to the live request; a reply with no content is not stored. Returns the events to show."""
        live = self._current()
        self._stats.calls += 1
        self._calls.answered(self._sent if self._sent is not None else self.request, stop.message)
        call = self._calls.account(
            usage, max_tokens=live.max_tokens, local_estimate=live.local_estimate, multiplier=live.multiplier
        )
        rescale(live, self._window.fit.multiplier())
        if call.reported and call.prompt > 0:
            # Anchor + delta within the stream (the usage anchor, ``docs/concepts.md``): the provider
            # has just counted what was sent, so later rounds price only what they append to it.
            live.counted_as(call.prompt)
            self._calls.anchored = live.rendered.snapshot()
        live.counted = False
        self.observer.replied(stop.reason)
        events: list[Event] = [
            self.observer.event(self._record(event))
            for event in self._calls.events(
                call,
                index=self._stats.calls - 1,
                expected_input=live.local_estimate,
                first_of_send=self._first_of_send,
                append_only=not live.recompiled,
            )
        ]
        self._first_of_send = self._overflowed = False
        if stop.message.content:
            stored = self.append(stop.message).id or ""
            live.add_reply(stored, stop.message, self._window.fit.live_estimator().message(stop.message))
        self._window.accepted(
            input_tokens=call.prompt,
            output_tokens=call.usage.output,
            finish_reason=stop.reason,
            estimate=live.estimated_tokens,
        )
        return events

    @_observed
    async def recover(self, rejection: ContextOverflow) -> AsyncIterator[Event]:
        """The provider refused the request sent for its size: believe its numbers, free room (the
        escalation ladder when they alone do not) and compile the retry (:attr:`request`). A second
        rejection in a row, or nothing freed, raises ``rejection`` after the notes."""
        self._stats.calls += 1
        again, self._overflowed = self._overflowed, True
        live, turn_start = self._current(), self._turn_start or ""
        self.observer.refused(rejection)
        if again:
            self._calls.refused()
            for note in self._recovery.notes():
                yield self._record(note)
            raise rejection
        outcome = Freed()
        async for event in self._recovery.free(rejection, live, turn_start, outcome):
            yield event
        if not outcome.freed:
            for note in self._recovery.notes():
                yield self._record(note)
            raise rejection
        async for event in self._fresh_request(turn_start, retry=True):
            yield event
        if self._recovery.hold(self._current(), live):
            # The retry's content no count covers carries the uncounted margin: compile it again.
            async for event in self._fresh_request(turn_start):
                yield event
        yield self._record(OverflowRecovered(requested=rejection.requested, limit=rejection.limit))

    def reread(self, use: ToolUse) -> ToolResult:
        """The answer to a :data:`~contextwindow.compile.reread.READ_ARCHIVED` call: the original from
        the ledger as it rides into a round (within the inline cap); an unknown id is an error result."""
        return answer_reread(self.session, use, self._inline_cap())[0]

    @_observed
    async def add_round(self, results: Message, *, end_turn: bool = False) -> AsyncIterator[Event]:
        """The tool boundary: ``results`` (a user message of the reply's tool results) and the mid-turn
        messages waiting (:meth:`inject`) are stored, and the round rides on the live request
        (``stream_resumed``) unless a restart is due (``stream_restarted``: the next request is
        compiled afresh); a fold due mid-turn runs too. With ``end_turn`` (a tool ended the turn) the
        round is only stored."""
        live = self._current()
        injected = self._drain_injected()
        live.rendered[self.append(results).id or ""] = results.content
        for extra in injected:
            live.rendered[self.append(extra).id or ""] = extra.content
        round_results = [b for b in results.content if isinstance(b, ToolResult)]
        appended, round_estimate = self._window.fit.price_round(round_results, injected)
        decision = self._window.boundary(
            live,
            appended=appended,
            end_turn=end_turn,
            stream_fresh_input=self._calls.usage.stream_fresh_input,
        )
        if decision == "end_turn":
            return
        if isinstance(decision, StreamRestarted):
            self._stats.restarts += 1
            yield self._record(decision)
            async for event in self._restart():
                yield event
            return
        self._calls.round_appended(appended=appended, estimate=round_estimate)
        # The local estimate stays in compile's units (the calibrated estimator), so that the anchor's
        # payload estimate and the composition factor compare like with like; the projection's
        # price errs high on purpose and is not in those units.
        rode = [results, *injected]
        local = self._window.fit.live_estimator().messages(rode)
        live.add_round(rode, priced=appended, estimate=round_estimate, local=local)
        yield StreamResumed(injected_messages=len(injected))
        over = False
        async for event in self._next.counted(self.counter, live):
            over = isinstance(event, StreamRestarted)
            yield self._record(event) if over else event
        if over:
            # The count shows the round does not fit beside the reply: restart, as the projection
            # would have with the provider's figure.
            self._stats.restarts += 1
            async for event in self._restart():
                yield event
            return
        folded = False
        async for event in self._folding.maybe_fold("mid_turn", self._turn_start):
            folded = folded or isinstance(event, Compacted)
            yield event
        if folded:
            async for event in self._fresh_request(self._turn_start):
                yield event

    # -- one step: send, stream ---------------------------------------------------------------------

    async def _call(self, received: Received) -> AsyncIterator[Event]:
        """Send :attr:`request` and stream its reply (:func:`~contextwindow.engine.send.stream_call`)."""
        yield self.sending()
        request = self._sent
        assert request is not None
        async for event in stream_call(
            self.provider,
            request,
            received,
            max_tokens=self._current().max_tokens,
            load=self.session.read_attachment,
            notes=self._notes,
            stats=self._stats,
        ):
            yield self.observer.event(self._record(event) if isinstance(event, Note) else event)

    # -- the tool boundary ------------------------------------------------------------------------

    def _inline_cap(self) -> int:
        return inline_cap_chars(self.settings.max_message_tokens, self.settings.tool_result_inline_chars)

    @_observed
    async def _run_tools(self, tool_uses: Sequence[ToolUse], round_: ToolRound) -> AsyncIterator[Event]:
        """Run each tool use into ``round_``; re-reads are answered here when the request offered them."""
        offered = self._live is not None and READ_ARCHIVED_TOOL in self._live.tools
        cap = self._inline_cap()
        async for event in run_round(
            tool_uses,
            round_,
            runner=self.tool_runner,
            cap_chars=cap,
            reread=(lambda use: answer_reread(self.session, use, cap)) if offered else None,
            stats=self._stats,
        ):
            yield event

    # -- compiling the next request ---------------------------------------------------------------

    def _current(self) -> LiveRequest:
        return self._next.current()

    @property
    def _live(self) -> LiveRequest | None:
        return self._next.live

    async def _restart(self) -> AsyncIterator[Event]:
        """A restarted stream: the fold due mid-turn, then the next request compiled afresh."""
        async for event in self._folding.maybe_fold("mid_turn", self._turn_start):
            yield event
        async for event in self._fresh_request(self._turn_start):
            yield event

    def _fresh_request(self, turn_start_id: str | None, *, retry: bool = False) -> AsyncIterator[Event]:
        """The next request compiled afresh (:meth:`~contextwindow.engine.next_request.NextRequest.fresh`)."""
        return self._next.fresh(turn_start_id, counter=self.counter, reread=self.settings.reread, retry=retry)

    # -- the ledger -------------------------------------------------------------------------------

    def _record(self, event: _E) -> _E:
        return record_event(self.session, event)

    def _observed_record(self, event: _E) -> _E:
        self.observer.event(self._record(event))
        return event

    def _turn_ended(self, stop_reason: str) -> TurnEnded:
        stats = self._stats
        return self._observed_record(
            TurnEnded(
                stop_reason=stop_reason,
                calls=stats.calls,
                restarts=stats.restarts,
                compactions=stats.compactions,
            )
        )

    def _drain_injected(self) -> list[Message]:
        out, self._injected = self._injected, []
        return out
