"""The turn engine: compile, send, stream, run tools, append rounds, and stay inside the window.

``async for event in engine.run_turn(message)`` runs one user turn to its end. Within a turn the
rounds (tool results and mid-turn messages from :meth:`Engine.inject`) are appended to the request
already sent, without recompiling, so the provider's prompt cache stays warm, until one of these says
recompile (in the order of agent-framework's tool boundary,
https://github.com/anima-research/agent-framework/pull/98; the words are defined in ``docs/concepts.md``):

1. ``end_turn`` from a tool ends the turn (it wins over both restarts);
2. the stream's accumulated fresh input passes ``max_stream_input_tokens``:
   ``stream_restarted(reason="context_budget")`` (takes precedence);
3. the physical-window projection (:class:`~contextwindow.engine.projection.PhysicalWindow`) crosses the
   window: ``stream_restarted(reason="physical_window", projected, window)``;
4. the provider rejects for size: compact (the escalation ladder) and retry once; a second rejection
   raises :class:`~contextwindow.errors.ContextOverflow` with the provider's numbers, after the notes.

Every compile is *covered* (nothing compile leaves out goes without a checkpoint), the proactive
fold runs when the last request plus its reply reserve reaches the window, and compaction after a
rejection escalates and is bounded per turn: :mod:`~contextwindow.engine.folding`. What compile fits
against (window, fit margin, lessons from rejections): :mod:`~contextwindow.engine.fit`. Everything is
recorded in the ledger as it happens: messages, usage, anchors, checkpoints, and each engine event
as a ``note`` record.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from ..compile import Policy
from ..compile.reread import READ_ARCHIVED, READ_ARCHIVED_TOOL, names_reread, read_archived
from ..content import Block, Message, Request, Text, ToolResult, ToolSpec, ToolUse
from ..errors import (
    ContextOverflow,
    ContextWindowError,
    InvalidInput,
    OverBudget,
    ProviderError,
    UsageError,
)
from ..formats import ToolDefinition
from ..models import ModelProfile, get_profile
from ..pricing import Estimator
from ..pricing.counters import InputCounter
from ..providers import Provider, Stop, TextDelta, ThinkingDelta, ToolCall, UsageSample
from ..providers.overflow import output_cap_error
from ..store import Session
from ..store.slots import LedgerSlot
from ..usage.calibration import Calibrator, stored_prices_unchanged
from ..usage.tracker import Anchor, AnchorBook, Usage
from .accounting import CallAccounting
from .compiler import (
    Compiled,
    Compiler,
    EngineCompiler,
    RequestCompiler,
    SystemPrompt,
)
from .events import (
    AttachmentsEvicted,
    Compacted,
    Event,
    Note,
    NoteBook,
    OverflowRecovered,
    RequestSent,
    StreamRestarted,
    StreamResumed,
    ToolResultReady,
    ToolResultsArchived,
    TurnEnded,
    UsageReported,
    decide_boundary,
    record_event,
)
from .fit import WindowFit
from .fold_trigger import ProactiveTrigger
from .folding import COVER_ROUNDS, Folding
from .precount import PrecountState, count_reason, near_budget
from .projection import PhysicalWindow
from .settings import EngineSettings
from .summarizer import Summarizer
from .tool_results import (
    ToolOutcome,
    ToolRunner,
    cap_tool_result,
    inline_cap_chars,
    run_tool,
    storable_tool_result,
)

_E = TypeVar("_E", bound=Event)

__all__ = [
    "Compiled",
    "Compiler",
    "Engine",
    "EngineSettings",
    "ToolOutcome",
    "ToolRunner",
]


@dataclass(slots=True)
class _Live:
    """The request being extended within one stream."""

    system: tuple[Text, ...]
    tools: tuple[ToolSpec, ...]
    messages: list[Message]
    estimated_tokens: int
    local_estimate: int
    max_tokens: int
    output_reserve: int
    multiplier: float = 1.0
    """The calibration multiplier the request was compiled at: the units of ``local_estimate``."""
    omitted: tuple[str, ...] = ()
    """Ids compile left out for the budget that no checkpoint covers (see :meth:`Engine._fresh_request`)."""
    recompiled: bool = True
    uncounted: int = 0
    """The part of ``estimated_tokens`` no provider count covers (what a count before sending would
    correct, :mod:`~contextwindow.engine.precount`)."""
    counted: bool = False
    """``estimated_tokens`` is the provider's count of this very request (made before sending it)."""
    rendered: dict[str, tuple[Block, ...]] = field(default_factory=dict)
    """The messages the request holds, by ledger id, as they render in it (what the next compile shares
    with it: the same id rendered otherwise, capped or archived, is not shared)."""
    margins: int = 0
    """What the projection priced the rounds appended since the last reported prompt above their
    estimates (``estimated_tokens`` carries the estimates): the unreported path projects with it."""


@dataclass(slots=True)
class _TurnStats:
    """What one turn cost; one value for the engine's life, reset at each turn (folding updates it)."""

    calls: int = 0
    restarts: int = 0
    compactions: int = 0
    overhead_seconds: float = 0.0
    """Time spent in engine code: everything but the provider's stream, the tools and the summariser."""
    summarizer_seconds: float = 0.0
    folds: int = 0
    """Covering folds made through the summariser this turn (bounded by ``max_folds_per_turn``)."""
    summarizer_failed: bool = False
    """The summariser failed a covering fold this turn: further ones cut instead of asking again."""
    _since: float | None = None

    def reset(self) -> None:
        self.calls = self.restarts = self.compactions = self.folds = 0
        self.overhead_seconds = self.summarizer_seconds = 0.0
        self.summarizer_failed = False
        self._since = None

    def resume(self) -> None:
        """Engine code runs from now."""
        self._since = time.perf_counter()

    def pause(self) -> None:
        """Engine code stops here (the provider, a tool or the host runs next)."""
        if self._since is not None:
            self.overhead_seconds += time.perf_counter() - self._since
            self._since = None

    @property
    def engine_seconds(self) -> float:
        """Engine time alone: the overhead less the summariser's calls made within it."""
        return max(0.0, self.overhead_seconds - self.summarizer_seconds)


@dataclass(slots=True)
class _Received:
    """What one call's stream delivered besides the events passed on."""

    stop: Stop | None = None
    sample: Usage | None = None


@dataclass(slots=True)
class _Round:
    """The tool boundary's round: the capped results, whether a tool ended the turn."""

    results: list[ToolResult] = field(default_factory=list)
    end_turn: bool = False


def _shared(anchored: dict[str, tuple[Block, ...]], message: Message) -> bool:
    """Whether ``message`` is in the anchored request, rendered as it was there."""
    if message.id is None:
        return False
    content = anchored.get(message.id)
    return content is not None and (content is message.content or content == message.content)


class Engine:
    """Runs turns for one session against one provider (see the module docstring).

    ``Engine(session, provider, model, system=..., tools=..., tool_runner=..., summarizer=...)``
    compiles with the default :class:`~contextwindow.engine.compiler.EngineCompiler` (``system`` a
    string or text blocks, ``tools`` specs or Anthropic/OpenAI wire dicts, ``policy`` compile's
    policy); pass ``compiler=`` for another one (then those three are its business). ``counter``
    counts a request before it is sent when ``settings.count_before_send`` says a decision depends on
    it (:mod:`~contextwindow.engine.precount`; default: the provider itself when it has
    ``count_input_tokens``).
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
    ) -> None:
        profile = get_profile(model)
        if compiler is None:
            compiler = EngineCompiler(policy or Policy(), system=system, tools=tools)
        elif system or tools or policy is not None:
            raise UsageError(
                "system, tools and policy are the default compiler's: give them to your compiler"
            )
        # What the host set (and may swap between turns).
        self.session = session
        self.provider = provider
        self.profile = profile
        self.settings = settings = settings or EngineSettings()
        self.tool_runner = tool_runner
        self.counter: InputCounter | None = (
            counter if counter is not None else provider if isinstance(provider, InputCounter) else None
        )
        """Counts a request before it is sent when ``settings.count_before_send`` says a decision
        depends on it (default: the provider's own ``count_input_tokens``, when it has one)."""
        self._precount = PrecountState()
        self._anchored: dict[str, tuple[Block, ...]] = {}
        """The messages of the request the newest anchor counted, by ledger id, as rendered in it."""
        self._estimator = estimator or Estimator(profile)
        # What the engine knows of the window and of pricing: the window, calibration, anchors.
        declared = settings.physical_window or profile.context_window
        self._window: int | None = declared if settings.use_physical_window else None
        connection = settings.connection
        self._calibrator = Calibrator(
            LedgerSlot(session, "calibration", match={"model": profile.name, "connection": connection}),
            model=profile.name,
            connection=connection,
            prices_unchanged=lambda: stored_prices_unchanged(session.messages(), self._estimator.raw_block),
        )
        self._fit = WindowFit(profile, self._calibrator, estimator=self._estimator, settings=settings)
        self._anchors = AnchorBook(LedgerSlot(session, "anchor"))
        self._requests = RequestCompiler(
            session,
            compiler,
            self._fit,
            self._anchors,
            window=self._window or profile.context_window,
            connection=connection,
        )
        # The calls: each call's own usage and what it teaches; the projection at tool boundaries.
        self._notes = NoteBook(declared_window=self._window)
        self._physical = PhysicalWindow(window=self._window, reserve=0)
        self._calls = CallAccounting(
            session,
            profile,
            connection=connection,
            usage_mode=settings.usage_mode,
            fit=self._fit,
            calibrator=self._calibrator,
            anchors=self._anchors,
            physical=self._physical,
            notes=self._notes,
        )
        self._last_projection: int | None = None
        # Keeping history inside the window: the folds (with their trigger and ladder).
        self._stats = _TurnStats()
        self._folding = Folding(
            session,
            self._requests,
            estimator=self._estimator,
            limits=settings,
            counters=self._stats,
            notes=self._notes,
            declared_window=self._window,
            summarizer=summarizer,
        )
        stored = self._anchors.latest
        if stored is not None and stored.model == profile.name and stored.connection == connection:
            # Step 0 of the first send seeds the proactive baseline from the stored anchor.
            self._folding.trigger.seed(
                input_tokens=stored.input_tokens, output_tokens=stored.output_tokens or 0
            )
            self._fit.counted = True  # the provider counted this route's requests before
            if stored.payload_estimate:
                # ... and its count against the estimate sizes this engine's fit from the first compile.
                self._fit.observe(
                    prompt=stored.input_tokens,
                    local_estimate=stored.payload_estimate,
                    multiplier=self._fit.multiplier(),
                )
        # The turn.
        self._injected: list[Message] = []
        self._live: _Live | None = None
        self._sent: Request | None = None
        self._turn_start: str | None = None
        self._first_of_send = True
        self._overflowed = False

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
    def fit(self) -> WindowFit:
        """What compile fits against (the fit margin, what rejections taught, round ratios)."""
        return self._fit

    @property
    def trigger(self) -> ProactiveTrigger:
        """When the next fold is due (its baseline is the last accepted request)."""
        return self._folding.trigger

    @property
    def stats(self) -> _TurnStats:
        """What the latest turn cost: calls, restarts, compactions, engine time."""
        return self._stats

    @property
    def window(self) -> int | None:
        """The physical window the projection guards (``None``: no projection), as the provider proved it."""
        return self._window

    @property
    def last_projection(self) -> int | None:
        """The projection at the latest tool boundary (``None`` when none could be made)."""
        return self._last_projection

    def fit_profile(self) -> ModelProfile:
        """The profile compile fits against (:class:`~contextwindow.engine.fit.WindowFit`): the window as
        known (declared, or as the provider proved it), less the fit margin and what it taught."""
        return self._requests.fit_profile()

    # -- host API -------------------------------------------------------------------------------

    def inject(self, message: Message) -> None:
        """A mid-turn message: it rides into the next round (or the next turn's request)."""
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
            received = _Received()
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

            # -- the tool boundary --------------------------------------------------------------
            round_ = _Round()
            async for event in self._run_tools(tool_uses, round_):
                yield event
            results = Message(role="user", content=tuple(round_.results))
            async for event in self.add_round(results, end_turn=round_.end_turn):
                yield event
            if round_.end_turn:
                stats.pause()
                yield self._turn_ended("end_turn_by_tool")
                return
        yield self._record(Note(kind="step_limit", data={"steps": self.settings.max_steps_per_turn}))

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
        self._precount.start_turn()
        self._fit.counts_near_budget = self._counting("auto")
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
        """The request to send now (what :meth:`prepare`, :meth:`recover` or :meth:`add_round` left)."""
        live = self._current()
        return Request(
            model=self.profile.name,
            system=live.system,
            tools=live.tools,
            messages=tuple(live.messages),
            max_tokens=live.max_tokens,
        )

    def sending(self) -> RequestSent:
        """:attr:`request` goes out now: recorded (a ``request_sent`` note), and the usage tracker
        told whether it continues the previous call's stream. Returns the event to show."""
        live = self._current()
        event = self._record(
            RequestSent(
                call=self._stats.calls,
                estimated_tokens=live.estimated_tokens,
                window=self._window,
                max_tokens=live.max_tokens,
                recompiled=live.recompiled,
                counted=live.counted,
            )
        )
        self._sent = self.request
        self._calls.sending(self._sent)
        return event

    def accept(self, stop: Stop, usage: Usage | None) -> list[Event]:
        """The provider answered the request sent: its usage (``None``: unreported) is accounted
        (anchor, calibration, notes, the proactive fold's baseline) and its reply stored and appended
        to the live request; a reply with no content is not stored. Returns the events to show."""
        live = self._current()
        self._stats.calls += 1
        self._calls.answered(self._sent if self._sent is not None else self.request, stop.message)
        call = self._calls.account(
            usage,
            max_tokens=live.max_tokens,
            local_estimate=live.local_estimate,
            multiplier=live.multiplier,
        )
        self._rescale(live)
        if call.reported and call.prompt > 0:
            # Anchor + delta within the stream (the usage anchor, ``docs/concepts.md``): the provider has just counted
            # what was sent, so later rounds of this stream price only what they append to it.
            live.estimated_tokens = call.prompt
            live.margins = live.uncounted = 0
            self._anchored = dict(live.rendered)
        live.counted = False
        events: list[Event] = [
            self._record(
                UsageReported(
                    call=self._stats.calls - 1,
                    usage=call.usage,
                    reported=call.reported,
                    stream_total=self._calls.usage.total,
                )
            )
        ]
        for note in self._calls.usage_notes(
            call,
            expected_input=live.local_estimate,
            first_of_send=self._first_of_send,
            append_only=not live.recompiled,
        ):
            events.append(self._record(note))
        self._first_of_send = self._overflowed = False
        self._fit.release()
        if stop.message.content:
            live.rendered[self.append(stop.message).id or ""] = stop.message.content
            live.messages.append(stop.message)
            reply_tokens = self._fit.live_estimator().message(stop.message)
            live.estimated_tokens += reply_tokens
            live.local_estimate += reply_tokens
            live.uncounted += reply_tokens
        self._folding.trigger.accepted(
            input_tokens=call.prompt, output_tokens=call.usage.output, finish_reason=stop.reason
        )
        return events

    async def recover(self, rejection: ContextOverflow) -> AsyncIterator[Event]:
        """The provider refused the request sent for its size: believe its numbers, free room (the
        escalation ladder when they alone do not) and compile the retry (:attr:`request`). A second
        rejection in a row, or nothing freed, raises ``rejection`` after the notes."""
        self._stats.calls += 1
        again, self._overflowed = self._overflowed, True
        async for event in self._recover(rejection, self._current(), self._turn_start or "", again=again):
            yield event

    def reread(self, use: ToolUse) -> ToolResult:
        """The answer to a :data:`~contextwindow.compile.reread.READ_ARCHIVED` call: the original from
        the ledger (:func:`~contextwindow.compile.reread.read_archived`) as it rides into a round
        (within the inline cap); an unknown id is an error result."""
        return self._reread(use)[0]

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
        appended, round_estimate = self._fit.price_round(round_results, injected)
        decision = decide_boundary(
            end_turn=end_turn,
            stream_fresh_input=self._calls.usage.stream_fresh_input,
            max_stream_input_tokens=self.settings.max_stream_input_tokens,
            projected_over=self._projected_over(live, appended),
            window=self._window,
        )
        if decision == "end_turn":
            return
        turn_start = self._turn_start
        if isinstance(decision, StreamRestarted):
            self._stats.restarts += 1
            yield self._record(decision)
            async for event in self._folding.maybe_fold("mid_turn", turn_start):
                yield event
            async for event in self._fresh_request(turn_start):
                yield event
            return
        self._continue_stream(live, results, injected, appended, round_estimate)
        yield StreamResumed(injected_messages=len(injected))
        over = False
        async for event in self._count_before_send(live):
            over = isinstance(event, StreamRestarted)
            yield self._record(event) if over else event
        if over:
            # The count shows the round does not fit beside the reply: restart, as the projection
            # would have with the provider's figure.
            self._stats.restarts += 1
            async for event in self._folding.maybe_fold("mid_turn", turn_start):
                yield event
            async for event in self._fresh_request(turn_start):
                yield event
            return
        folded = False
        async for event in self._folding.maybe_fold("mid_turn", turn_start):
            folded = folded or isinstance(event, Compacted)
            yield event
        if folded:
            async for event in self._fresh_request(turn_start):
                yield event

    # -- one step: send, stream, account ----------------------------------------------------------

    async def _call(self, received: _Received) -> AsyncIterator[Event]:
        """Send :attr:`request` and pass the stream's text, thinking and tool calls on; the stop and
        the usage sample land in ``received``. A rejection for size is raised as it came; any other
        provider error is raised after a note when it names the model's output cap."""
        yield self.sending()
        self._stats.pause()
        request = self._sent
        assert request is not None
        try:
            async for event in self.provider.stream(
                request, max_tokens=self._current().max_tokens, load=self.session.read_attachment
            ):
                if isinstance(event, TextDelta | ThinkingDelta | ToolCall):
                    yield event
                elif isinstance(event, UsageSample):
                    received.sample = event.usage
                elif isinstance(event, Stop):
                    received.stop = event
        except ContextOverflow:
            raise
        except ProviderError as failure:
            refused = output_cap_error(
                failure.status, failure.body if failure.body is not None else str(failure)
            )
            if refused is not None:
                yield self._record(
                    self._notes.output_cap(max_tokens=refused.requested, output_cap=refused.cap)
                )
            raise
        if received.stop is None:
            raise UsageError("the provider's stream ended without a stop event")

    async def _recover(
        self, rejection: ContextOverflow, live: _Live, turn_start_id: str, *, again: bool
    ) -> AsyncIterator[Event]:
        """A rejection for size: believe its numbers, free room (the ladder when they alone do not),
        and compile the retry; a second rejection in a row, or nothing freed, raises it after the
        notes."""
        self._calls.refused()
        if again:
            for note in self._calls.overflow_notes(compacted=self._stats.compactions > 0):
                yield self._record(note)
            raise rejection
        # First, believe the provider's numbers: fit the next compile to them. That alone usually
        # frees enough (compile leaves out the oldest turns); the ladder is for when not.
        refit = self._learn_from_rejection(rejection, live)
        freed = refit and self._requests().local_estimate < live.local_estimate
        if not freed:
            async for event in self._folding.escalate(turn_start_id, mid_turn=len(live.messages) > 0):
                if isinstance(event, Compacted | AttachmentsEvicted | ToolResultsArchived):
                    freed = True
                yield event
        if not freed:
            for note in self._calls.overflow_notes(compacted=self._stats.compactions > 0):
                yield self._record(note)
            raise rejection
        async for event in self._fresh_request(turn_start_id, retry=True):
            yield event
        if self._fit.hold_for(self._unshared(self._current().messages, live.rendered)):
            # The retry's content no count covers carries the uncounted margin: compile it again.
            async for event in self._fresh_request(turn_start_id):
                yield event
        yield self._record(OverflowRecovered(requested=rejection.requested, limit=rejection.limit))

    def _unshared(self, messages: Sequence[Message], counted: dict[str, tuple[Block, ...]]) -> int:
        """The estimate of those of ``messages`` that a counted request (its messages as rendered
        there, :attr:`_Live.rendered`) did not hold: new, or rendered otherwise (:func:`_shared`).
        The retry after a rejection measures it against the refused request (the rejection counted
        it); a fresh compile against the anchored one (:meth:`_uncounted`)."""
        fresh = [m for m in messages if not _shared(counted, m)]
        return self._fit.live_estimator().messages(fresh) if fresh else 0

    # -- the tool boundary ------------------------------------------------------------------------

    async def _run_tools(self, tool_uses: Sequence[ToolUse], round_: _Round) -> AsyncIterator[Event]:
        """Run each tool use; its result rides into the round with storable text, within the inline cap
        (:meth:`_round_result`). Re-reads are answered here (:meth:`reread`) when the request offered them."""
        offered = self._live is not None and READ_ARCHIVED_TOOL in self._live.tools
        for use in tool_uses:
            if use.name == READ_ARCHIVED and offered:
                capped, truncated, end_turn = self._reread(use)
            else:
                self._stats.pause()
                if self.tool_runner is None:
                    raise UsageError("the model called a tool and the engine has no tool_runner")
                outcome = await run_tool(self.tool_runner, use)
                self._stats.resume()
                capped, truncated = self._round_result(outcome.result)
                end_turn = outcome.end_turn
            round_.end_turn = round_.end_turn or end_turn
            round_.results.append(capped)
            yield ToolResultReady(tool_use_id=use.id, truncated=truncated, end_turn=end_turn)

    def _round_result(self, result: ToolResult) -> tuple[ToolResult, bool]:
        """A tool result as it rides into a round: text the ledger can store, within the inline cap;
        and whether the cap cut it."""
        cap = inline_cap_chars(self.settings.max_message_tokens, self.settings.tool_result_inline_chars)
        stored = storable_tool_result(result)
        capped = cap_tool_result(stored, cap)
        return capped, capped is not stored

    def _reread(self, use: ToolUse) -> tuple[ToolResult, bool, bool]:
        """:meth:`reread`'s answer as a round's result: ``(result, whether the cap cut it, end_turn)``."""
        try:
            content = read_archived(self.session, str(use.input.get("id", "")))
        except InvalidInput as exc:
            return ToolResult(tool_use_id=use.id, content=str(exc), is_error=True), False, False
        capped, truncated = self._round_result(ToolResult(tool_use_id=use.id, content=content))
        return capped, truncated, False

    def _projected_over(self, live: _Live, appended: int) -> int | None:
        """The projection of the request with the round appended when it crosses the window, else
        ``None``; keeps the projection for :attr:`last_projection`."""
        self._last_projection = self._physical.project(appended)
        if self._last_projection is not None or self._window is None:
            return self._physical.over(appended)
        # No call on this stream reported a prompt (usage off, or output only): the projection has
        # no real figure to start from, so the engine's own estimate of the live request stands in for
        # it, raised as compile fits it (the estimator's error on the whole request) or by the rounds'
        # own margins, whichever is higher. It can only ask for a recompile, never refuse.
        # A count before sending covers its part of the request exactly: only the rest is raised.
        covered = live.estimated_tokens - live.uncounted
        whole = covered + max(self._fit.fitted_estimate(live.uncounted), live.uncounted + live.margins)
        estimated = whole + appended + live.max_tokens
        return estimated if estimated > self._window else None

    def _continue_stream(
        self, live: _Live, results: Message, injected: Sequence[Message], appended: int, round_estimate: int
    ) -> None:
        """The round rides on the live request: append it and keep the stream's figures."""
        self._calls.round_appended(appended=appended, estimate=round_estimate)
        live.messages.append(results)
        live.messages.extend(injected)
        live.estimated_tokens += round_estimate
        live.uncounted += round_estimate
        live.margins += appended - round_estimate
        # The local estimate stays in compile's units (the calibrated estimator), so that the
        # anchor's payload estimate and the composition factor compare like with like; the
        # projection's figure above errs high on purpose and is not in those units.
        live.local_estimate += self._fit.live_estimator().messages([results, *injected])
        live.recompiled = False

    # -- compiling the next request ---------------------------------------------------------------

    def _current(self) -> _Live:
        if self._live is None:
            raise UsageError("no request is prepared yet: call Engine.prepare first")
        return self._live

    async def _fresh_request(self, turn_start_id: str | None, *, retry: bool = False) -> AsyncIterator[Event]:
        """Compile the next request afresh, covering what compile would leave out
        (:meth:`~contextwindow.engine.folding.Folding.cover`) and compiling again: ``[summary] + tail``,
        at most ``COVER_ROUNDS`` rounds, the last one a cut: bounded, never looping. A new stream
        starts on it: the projection starts from nothing (a restarted stream must not inherit its numbers); the usage tracker follows the
        provider's own notion of a stream, decided when the request is sent."""
        async for event in self._compile_covered(turn_start_id):
            yield event
        live = self._current()
        over = False
        async for event in self._count_before_send(live, retry=retry):
            over = isinstance(event, StreamRestarted)
            if not over:
                yield event
        if over:
            # The count shows the request over the window: the fit has learned by how much (the
            # composition factor, the anchor); compile again, once, and send that. When the newest
            # message alone no longer fits the tighter budget, the counted request goes as it is:
            # the provider's answer decides, and a rejection is recovered as any other.
            try:
                async for event in self._compile_covered(turn_start_id):
                    yield event
            except OverBudget:
                self._live = live

    async def _compile_covered(self, turn_start_id: str | None) -> AsyncIterator[Event]:
        """Compile the next request (:attr:`_live`) and cover what it leaves out (see
        :meth:`_fresh_request`)."""
        live = self._compile()
        for round_ in range(COVER_ROUNDS):
            if not live.omitted:
                break
            changed = False
            async for event in self._folding.cover(
                turn_start_id, live.omitted, live.output_reserve, cut_only=round_ == COVER_ROUNDS - 1
            ):
                changed = changed or isinstance(event, Compacted)
                yield event
            if not changed:
                break
            live = self._compile()
        self._live = live
        self._calls.stream_started()

    # -- counting before sending ------------------------------------------------------------------

    def _counting(self, mode: str) -> bool:
        """Whether the engine may count before sending in ``mode`` (or a wider one) this turn."""
        wanted = self.settings.count_before_send
        allowed = ("cold", "auto") if mode == "cold" else ("auto",)
        return self.counter is not None and wanted in allowed and not self._precount.failed

    async def _count_before_send(self, live: _Live, *, retry: bool = False) -> AsyncIterator[Event]:
        """Count ``live`` with the provider's counter when the policy says a decision depends on it
        (:mod:`~contextwindow.engine.precount`) and learn from the count as from a reported prompt.
        Yields a ``StreamRestarted`` (not recorded: the caller decides) when the count shows the
        request over the window beside its ``max_tokens``; a failed counter yields a note, once, and
        is not asked again this turn."""
        counter = self.counter
        if counter is None or not self._counting("cold"):
            return
        window = self._window
        reason = count_reason(
            self.settings.count_before_send,
            estimate=live.estimated_tokens,
            uncounted=live.uncounted,
            evidence=self._calibrator.evidence,
            near=near_budget(
                estimate=live.estimated_tokens,
                uncounted=live.uncounted,
                max_tokens=live.max_tokens,
                window=window,
                uncounted_margin=self._fit.uncounted_margin,
            ),
            retry=retry,
            counted=self._fit.counted,
        )
        if reason is None:
            return
        self._stats.pause()
        try:
            counted = await counter.count_input_tokens(self.request, load=self.session.read_attachment)
        except (ContextWindowError, TimeoutError, OSError) as failure:
            self._stats.resume()
            self._precount.failed = True
            self._fit.counts_near_budget = False
            yield self._record(
                Note(
                    kind="context_count_failed",
                    data={"counter": counter.name, "reason": reason, "error": str(failure)[:500]},
                )
            )
            return
        self._stats.resume()
        if counted <= 0:
            return  # a provider that counted nothing said nothing (as a prompt of 0 is unreported)
        self._precount.counts += 1
        self._learn_from_count(live, counted)
        if window is not None and counted + live.max_tokens > window:
            yield StreamRestarted(
                reason="physical_window", input_tokens=counted + live.max_tokens, budget=window
            )

    def _rescale(self, live: _Live) -> None:
        """The live request's local estimate in the units the calibration multiplier may just have
        moved to: what is appended to it from now on is priced at the new multiplier, and the anchor's
        payload is in those units too (left in the old ones, the next fresh compile's anchored delta
        carried the change of units over the whole request: 10% under on a real session)."""
        now = self._fit.multiplier()
        if live.multiplier > 0 and now != live.multiplier:
            live.local_estimate = round(live.local_estimate * now / live.multiplier)
            live.multiplier = now

    def _sample(self, live: _Live, counted: int) -> None:
        """One calibration sample from the provider's count of ``live`` itself (a count before sending,
        or a rejection's input count): this very request against its own estimate, never a grown
        request against an older one, and only while the multiplier is the one it was estimated at."""
        if live.multiplier == self._fit.multiplier() and self._calibrator.arm(live.local_estimate):
            self._calibrator.report_real_input(counted)

    def _learn_from_count(self, live: _Live, counted: int) -> None:
        """The provider counted ``live`` before it was sent: its estimate is the count, and the count
        teaches as a reported prompt does (the composition factor, one calibration sample: this very
        request against its own estimate, and the anchor)."""
        fit = self._fit
        low, high = self._calibrator.band
        if live.local_estimate > 0 and low <= counted / live.local_estimate <= high:
            fit.observe(prompt=counted, local_estimate=live.local_estimate, multiplier=live.multiplier)
        else:
            fit.counted = True  # a ratio calibration would not believe is no composition factor either
        # Learning disarms, so the call's reported prompt is not a second sample of this request.
        self._sample(live, counted)
        self._rescale(live)
        self._anchors.record(
            Anchor(
                model=self.profile.name,
                connection=self.settings.connection,
                input_tokens=max(1, counted),
                payload_estimate=live.local_estimate or None,
            )
        )
        self._anchored = dict(live.rendered)
        live.estimated_tokens = counted
        live.uncounted = live.margins = 0
        live.counted = True

    def _compile(self) -> _Live:
        compiled = self._requests()
        self._fit.live_estimator()
        # One calibration sample per compiled request, learned from its first call (the later calls of
        # its stream are learned by what each appended: CallAccounting).
        self._calibrator.arm(compiled.local_estimate)
        max_tokens = self.settings.max_tokens or compiled.output_reserve
        tools, extra = compiled.tools, 0
        if (
            self.settings.reread
            and all(t.name != READ_ARCHIVED for t in tools)
            and names_reread(compiled.messages)
        ):
            tools = (*tools, READ_ARCHIVED_TOOL)
            extra = self._fit.live_estimator().tool_spec(READ_ARCHIVED_TOOL)
        self._physical.reserve = max_tokens
        self._folding.trigger.max_tokens = max_tokens
        self._fit.reserve = compiled.output_reserve
        estimated = compiled.estimated_tokens + extra
        return _Live(
            system=compiled.system,
            tools=tools,
            messages=list(compiled.messages),
            estimated_tokens=estimated,
            uncounted=self._uncounted(compiled, estimated),
            rendered={m.id: m.content for m in compiled.messages if m.id is not None},
            local_estimate=compiled.local_estimate + extra,
            max_tokens=max_tokens,
            output_reserve=compiled.output_reserve,
            multiplier=self._fit.multiplier(),
            omitted=tuple(compiled.decisions.omitted),
        )

    def _uncounted(self, compiled: Compiled, estimated: int) -> int:
        """The part of a fresh compile's estimate no provider count covers. Anchored, the estimate is
        the anchored request's count plus the estimated change since: what was added (messages the
        anchored request did not hold, at their price) and what was taken out (a fold's span, earlier
        thinking the API strips), whose errors need not cancel. Unanchored, all of it."""
        anchor = self._anchors.latest
        if anchor is None or compiled.estimated_tokens == compiled.local_estimate:
            return estimated
        added = self._unshared(compiled.messages, self._anchored)
        removed = max(0, anchor.input_tokens + added - estimated)
        return min(estimated, added + removed)

    def _learn_from_rejection(self, rejection: ContextOverflow, live: _Live) -> bool:
        """Take in a rejection's numbers; return whether they changed what compile fits against. A
        ``limit`` below the window we believed is adopted for the projection, the trigger and compile.

        A rejection that counts the rejected request's input (``input_tokens``) is a real input count
        of a request whose estimate is known (``live``): it calibrates (one sample, the request's own
        estimate, never a grown request against an older one) and sets the composition factor, as a
        reported prompt would, so the retry and the rest of the session fit by it."""
        counted = rejection.input_tokens
        if counted is not None and counted > 0 and live.local_estimate > 0:
            had = self.fit_profile().context_window
            self._fit.observe(prompt=counted, local_estimate=live.local_estimate, multiplier=live.multiplier)
            self._sample(live, counted)
            refit = self.fit_profile().context_window != had
        else:
            refit = False
        limit = rejection.limit
        learned = self._fit.learn(known=self._requests.window, limit=limit, requested=rejection.requested)
        if learned == "window" and limit is not None:
            self._window = limit
            self._requests.window = limit
            self._physical.window = limit
            self._folding.trigger.declared_window = limit
        return learned is not None or refit

    # -- the ledger -------------------------------------------------------------------------------

    def _record(self, event: _E) -> _E:
        return record_event(self.session, event)

    def _turn_ended(self, stop_reason: str) -> TurnEnded:
        stats = self._stats
        return self._record(
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
