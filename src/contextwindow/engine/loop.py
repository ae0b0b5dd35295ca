"""The turn engine: compile, send, stream, run tools, append rounds, and stay inside the window.

``async for event in engine.run_turn(message)`` runs one user turn to its end. Within a turn the
rounds (tool results and mid-turn messages from :meth:`Engine.inject`) are appended to the request
already sent, without recompiling, so the provider's prompt cache stays warm, until one of these says
recompile (DESIGN.md "Turn engine"; seed-behaviours §6, §9):

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
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..content import Message, Request, Text, ToolResult, ToolSpec, ToolUse
from ..errors import ContextOverflow, InvalidInput, OverBudget, ProviderError, UsageError
from ..models import ModelProfile
from ..pricing import Estimator
from ..providers import Provider, Stop, TextDelta, ThinkingDelta, ToolCall, UsageSample
from ..providers.overflow import output_cap_error
from ..providers.streams import continues_stream
from ..store import Session
from ..store.slots import LedgerSlot
from ..usage.calibration import Calibrator, stored_prices_unchanged
from ..usage.tracker import Anchor, AnchorBook, CallUsage, Usage, UsageTracker
from .compiler import Compiled, Compiler
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
    event_to_dict,
)
from .fit import WindowFit
from .fold_rules import (
    EscalationLadder,
    ProactiveTrigger,
)
from .folding import COVER_ROUNDS, Folding
from .projection import PhysicalWindow, cap_tool_result, inline_cap_chars, storable_tool_result
from .settings import EngineSettings
from .summarizer import Summarizer

_E = TypeVar("_E", bound=Event)

__all__ = [
    "Compiled",
    "Compiler",
    "Engine",
    "EngineSettings",
    "ToolOutcome",
    "ToolRunner",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutcome:
    """A tool's result and whether it ends the turn (agent-framework ``endTurn``)."""

    result: ToolResult
    end_turn: bool = False


ToolRunner = Callable[[ToolUse], Awaitable[ToolResult | ToolOutcome]]


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
    """Ids compile left out for the budget that no checkpoint covers (see :meth:`Engine._prepare`)."""
    recompiled: bool = True
    margins: int = 0
    """What the projection priced the rounds appended since the last reported prompt above their
    estimates (``estimated_tokens`` carries the estimates): the unreported path projects with it."""


@dataclass(slots=True)
class _TurnStats:
    calls: int = 0
    restarts: int = 0
    compactions: int = 0
    overhead_seconds: float = 0.0
    """Time spent in engine code: everything but the provider's stream, the tools and the summariser."""
    summarizer_seconds: float = 0.0
    overrides: set[str] = field(default_factory=set)
    folds: int = 0
    """Covering folds made through the summariser this turn (bounded by ``max_folds_per_turn``)."""
    summarizer_failed: bool = False
    """The summariser failed a covering fold this turn: further ones cut instead of asking again."""

    @property
    def engine_seconds(self) -> float:
        """Engine time alone: the overhead less the summariser's calls made within it."""
        return max(0.0, self.overhead_seconds - self.summarizer_seconds)


class Engine:
    """Runs turns for one session against one provider (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        provider: Provider,
        profile: ModelProfile,
        *,
        compiler: Compiler,
        tool_runner: ToolRunner | None = None,
        summarizer: Summarizer | None = None,
        settings: EngineSettings | None = None,
        estimator: Estimator | None = None,
    ) -> None:
        self.session = session
        self.provider = provider
        self.profile = profile
        self.compiler = compiler
        self.tool_runner = tool_runner
        self.summarizer = summarizer
        self.settings = settings or EngineSettings()
        self.estimator = estimator or Estimator(profile)
        window = self.settings.physical_window or profile.context_window
        self.window: int | None = window if self.settings.use_physical_window else None
        self.tracker = UsageTracker(self.settings.usage_mode)
        self.physical = PhysicalWindow(window=self.window, reserve=0)
        self.notes = NoteBook(declared_window=self.window)
        self.reported_window: int = profile.context_window
        """The model's own reported window, for ``context_reported_window_exceeded`` when none is declared."""
        self.trigger = ProactiveTrigger(declared_window=self.window)
        self.ladder = EscalationLadder(max_compactions=self.settings.max_compactions_per_turn)
        self.folding = Folding(self)
        connection = self.settings.connection
        self.calibrator = Calibrator(
            LedgerSlot(session, "calibration", match={"model": profile.name, "connection": connection}),
            model=profile.name,
            connection=connection,
            prices_unchanged=lambda: stored_prices_unchanged(session.messages(), self.estimator.raw_block),
        )
        self.fit = WindowFit(
            profile,
            self.calibrator,
            fit_margin=self.settings.fit_margin,
            multiplier_step=self.settings.multiplier_step,
            estimator=self.estimator,
            round_pricing=self.settings.round_pricing,
            round_text_margin=self.settings.round_text_margin,
            uncounted_margin=self.settings.uncounted_margin,
        )
        self.anchors = AnchorBook(LedgerSlot(session, "anchor"))
        stored = self.anchors.latest
        if stored is not None and stored.model == profile.name and stored.connection == connection:
            # Step 0 of the first send seeds the proactive baseline from the stored anchor (seed 002).
            self.trigger.seed(input_tokens=stored.input_tokens, output_tokens=stored.output_tokens or 0)
            self.fit.counted = True  # the provider counted this route's requests before
            if stored.payload_estimate:
                # ... and its count against the estimate sizes this engine's fit from the first compile.
                self.fit.observe(
                    prompt=stored.input_tokens,
                    local_estimate=stored.payload_estimate,
                    multiplier=self.fit.multiplier(),
                )
        self._previous_request: Request | None = None
        self._previous_reply: Message | None = None
        self._previous_used: int | None = None
        self._injected: list[Message] = []
        self._prepared: _Live | None = None
        self._last_accepted: Usage | None = None
        self._prior_input: int | None = None
        self._round_base: int | None = None
        """The latest call's prompt + output when it reported both (see :meth:`_learn_round`)."""
        self._round_probe: tuple[int, int] | None = None
        """``(base, estimate)`` of the round appended after that call, awaiting the next prompt."""
        self.stats = _TurnStats()
        self.last_projection: int | None = None
        """The projection at the latest tool boundary (``None`` when none could be made)."""
        self.last_sent_tokens: list[int] = []
        """The provider's real prompt of each reporting call, for window-use figures."""

    # -- host API -------------------------------------------------------------------------------

    def inject(self, message: Message) -> None:
        """A mid-turn message: it rides into the next round (or the next turn's request)."""
        if message.role != "user" or any(isinstance(b, ToolUse | ToolResult) for b in message.content):
            raise InvalidInput("a mid-turn message is a user message without tool blocks", path="message")
        self._injected.append(message)

    async def run_turn(self, message: Message) -> AsyncIterator[Event]:
        """Run one user turn; yields events as they happen; raises ``ContextOverflow`` when unrecoverable."""
        clock = time.perf_counter()
        self.stats = _TurnStats()
        self.notes.start_send()
        self.trigger.start_send()
        self.ladder.start_turn()
        anchor = self._append(message)
        for pending in self._drain_injected():
            self._append(pending)
        first_of_send = True

        async for event in self.folding.maybe_fold("pre_turn", anchor.id):
            yield event
        async for event in self._prepare(anchor.id):
            yield event
        live = self._take_prepared()
        self._start_stream()
        overflowed_this_step = False

        for _ in range(self.settings.max_steps_per_turn):
            sent = RequestSent(
                call=self.stats.calls,
                estimated_tokens=live.estimated_tokens,
                window=self.window,
                max_tokens=live.max_tokens,
                recompiled=live.recompiled,
            )
            yield self.record_event(sent)
            stop: Stop | None = None
            sample: Usage | None = None
            self.stats.overhead_seconds += time.perf_counter() - clock
            request = Request(
                model=self.profile.name,
                system=live.system,
                tools=live.tools,
                messages=tuple(live.messages),
                max_tokens=live.max_tokens,
            )
            if not continues_stream(self._previous_request, self._previous_reply, request):
                self.tracker.start_stream()
            try:
                async for pevent in self.provider.stream(
                    request, max_tokens=live.max_tokens, load=self.session.read_attachment
                ):
                    if isinstance(pevent, TextDelta | ThinkingDelta | ToolCall):
                        yield pevent
                    elif isinstance(pevent, UsageSample):
                        sample = pevent.usage
                    elif isinstance(pevent, Stop):
                        stop = pevent
            except ContextOverflow as rejection:
                clock = time.perf_counter()
                self.stats.calls += 1
                self._previous_request = self._previous_reply = None  # a refused attempt is no stream
                self._round_base = self._round_probe = None
                self.anchors.clear("the provider rejected the request for its size")
                self.calibrator.arm(0)
                if overflowed_this_step:
                    for note in self._overflow_notes():
                        yield note
                    raise
                overflowed_this_step = True
                # First, believe the provider's numbers: fit the next compile to them. That alone
                # usually frees enough (compile leaves out the oldest turns); the ladder is for when not.
                refit = self._learn_from_rejection(rejection, live)
                freed = refit and self.compile_request().local_estimate < live.local_estimate
                if not freed:
                    async for event in self.folding.escalate(anchor.id, mid_turn=len(live.messages) > 0):
                        if isinstance(event, Compacted | AttachmentsEvicted | ToolResultsArchived):
                            freed = True
                        yield event
                if not freed:
                    for note in self._overflow_notes():
                        yield note
                    raise
                async for event in self._prepare(anchor.id):
                    yield event
                live = self._take_prepared()
                self._start_stream()
                yield self.record_event(
                    OverflowRecovered(requested=rejection.requested, limit=rejection.limit)
                )
                continue
            except ProviderError as failure:
                refused = output_cap_error(
                    failure.status, failure.body if failure.body is not None else str(failure)
                )
                if refused is not None:
                    yield self.record_event(
                        self.notes.output_cap(max_tokens=refused.requested, output_cap=refused.cap)
                    )
                raise
            clock = time.perf_counter()
            self.stats.calls += 1
            overflowed_this_step = False
            if stop is None:
                raise UsageError("the provider's stream ended without a stop event")

            self._previous_request, self._previous_reply = request, stop.message
            call = self._account(sample, live)
            if call.reported and call.prompt > 0:
                # Anchor + delta within the stream (DESIGN principle 2): the provider has just counted
                # what was sent, so later rounds of this stream price only what they append to it.
                live.estimated_tokens = call.prompt
                live.margins = 0
            yield self.record_event(
                UsageReported(
                    call=self.stats.calls - 1,
                    usage=call.usage,
                    reported=call.reported,
                    stream_total=self.tracker.total,
                )
            )
            for note in self._usage_notes(
                call, live.local_estimate, first_of_send=first_of_send, append_only=not live.recompiled
            ):
                yield note
            first_of_send = False
            self._append(stop.message)
            live.messages.append(stop.message)
            reply_tokens = self.fit.live_estimator().message(stop.message)
            live.estimated_tokens += reply_tokens
            live.local_estimate += reply_tokens
            self.trigger.accepted(
                input_tokens=call.prompt, output_tokens=call.usage.output, finish_reason=stop.reason
            )

            tool_uses = [b for b in stop.message.content if isinstance(b, ToolUse)]
            if stop.reason != "tool_use" or not tool_uses:
                self.stats.overhead_seconds += time.perf_counter() - clock
                yield self._turn_ended(stop.reason)
                return

            # -- the tool boundary --------------------------------------------------------------
            results, end_turn = [], False
            cap = inline_cap_chars(self.settings.max_message_tokens, self.settings.tool_result_inline_chars)
            for use in tool_uses:
                if self.tool_runner is None:
                    raise UsageError("the model called a tool and the engine has no tool_runner")
                self.stats.overhead_seconds += time.perf_counter() - clock
                outcome = await self.tool_runner(use)
                clock = time.perf_counter()
                if isinstance(outcome, ToolResult):
                    outcome = ToolOutcome(result=outcome)
                stored = storable_tool_result(outcome.result)
                capped = cap_tool_result(stored, cap)
                end_turn = end_turn or outcome.end_turn
                results.append(capped)
                yield ToolResultReady(
                    tool_use_id=use.id, truncated=capped is not stored, end_turn=outcome.end_turn
                )
            injected = self._drain_injected()
            results_message = Message(role="user", content=tuple(results))
            self._append(results_message)
            for extra in injected:
                self._append(extra)
            appended, round_estimate = self.fit.price_round(results, injected)
            self.last_projection = self.physical.project(appended)
            over = self.physical.over(appended)
            if self.last_projection is None and self.window is not None:
                # No call on this stream reported a prompt (usage off, or output only): the seed's
                # projection has no real figure to start from, so the engine's own estimate of the
                # live request stands in for it, raised as compile fits it (the estimator's error on
                # the whole request) or by the rounds' own margins, whichever is higher. It can only
                # ask for a recompile, never refuse.
                whole = max(self.fit.unanchored(live.estimated_tokens), live.estimated_tokens + live.margins)
                estimated = whole + appended + live.max_tokens
                over = estimated if estimated > self.window else None
            decision = decide_boundary(
                end_turn=end_turn,
                stream_fresh_input=self.tracker.stream_fresh_input,
                max_stream_input_tokens=self.settings.max_stream_input_tokens,
                projected_over=over,
                window=self.window,
            )
            if decision == "end_turn":
                self.stats.overhead_seconds += time.perf_counter() - clock
                yield self._turn_ended("end_turn_by_tool")
                return
            if isinstance(decision, StreamRestarted):
                self.stats.restarts += 1
                yield self.record_event(decision)
                async for event in self.folding.maybe_fold("mid_turn", anchor.id):
                    yield event
                async for event in self._prepare(anchor.id):
                    yield event
                live = self._take_prepared()
                self._start_stream()
                continue
            # The next call's prompt, less this one's prompt and output, is what the round cost:
            # learnt when this call reported both and nothing else grew the stream since.
            self._round_probe = (
                (self._round_base, round_estimate)
                if self._round_base is not None and self.physical.growth == 0
                else None
            )
            self.physical.continue_past(appended)
            live.messages.append(results_message)
            live.messages.extend(injected)
            live.estimated_tokens += round_estimate
            live.margins += appended - round_estimate
            # The local estimate stays in compile's units (the calibrated estimator), so that the
            # anchor's payload estimate and the composition factor compare like with like; the
            # projection's figure above errs high on purpose and is not in those units.
            live.local_estimate += self.fit.live_estimator().messages([results_message, *injected])
            live.recompiled = False
            yield StreamResumed(injected_messages=len(injected))
            folded = False
            async for event in self.folding.maybe_fold("mid_turn", anchor.id):
                folded = folded or isinstance(event, Compacted)
                yield event
            if folded:
                async for event in self._prepare(anchor.id):
                    yield event
                live = self._take_prepared()
                self._start_stream()
        yield self.record_event(Note(kind="step_limit", data={"steps": self.settings.max_steps_per_turn}))

    # -- internals ------------------------------------------------------------------------------

    def _append(self, message: Message) -> Message:
        prices = [self.estimator.raw_block(b) for b in message.content]
        return self.session.append(message, block_prices=prices).message

    def _turn_ended(self, stop_reason: str) -> TurnEnded:
        stats = self.stats
        return self.record_event(
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

    def record_event(self, event: _E) -> _E:
        """Record ``event`` in the ledger as a ``note`` record and return it (for the engine's parts)."""
        self.session.record("note", {"event": event_to_dict(event)})
        return event

    def fit_profile(self) -> ModelProfile:
        """The profile compile fits against (:class:`~contextwindow.engine.fit.WindowFit`): the window as
        known (declared, or as the provider proved it), less the fit margin and what it taught."""
        return self.fit.fit_profile(self.window or self.profile.context_window)

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
            self.fit.observe(prompt=counted, local_estimate=live.local_estimate, multiplier=live.multiplier)
            if live.multiplier == self.fit.multiplier() and self.calibrator.arm(live.local_estimate):
                self.calibrator.report_real_input(counted)
            refit = self.fit_profile().context_window != had
        else:
            refit = False
        limit = rejection.limit
        known = self.window or self.profile.context_window
        learned = self.fit.learn(known=known, limit=limit, requested=rejection.requested)
        if learned == "window" and limit is not None:
            self.window = limit
            self.physical.window = limit
            self.trigger.declared_window = limit
        return learned is not None or refit

    def compile_request(self, profile: ModelProfile | None = None) -> Compiled:
        """Compile the session's next request with the turn's overrides at ``profile`` (default: the
        profile compile fits against, :meth:`fit_profile`)."""
        return self.compiler(
            self.session,
            self.fit_profile() if profile is None else profile,
            frozenset(self.stats.overrides),
            multiplier=self.fit.multiplier(),
            anchor=self.anchors.latest,
            connection=self.settings.connection,
        )

    def _compile(self) -> _Live:
        try:
            compiled = self.compile_request()
        except OverBudget:
            # The newest message does not fit beside the head as things stand: take the cheap rungs
            # (media out of line, stale results archived, then no media inline at all) for the rest of
            # the turn; if even that does not fit, the message alone is too large and it raises.
            for rung in ("evict_media", "archive_tool_results", "evict_all_media"):
                self.stats.overrides.add(rung)
                try:
                    compiled = self.compile_request()
                    break
                except OverBudget:
                    continue
            else:
                raise
        self.fit.live_estimator()
        # One calibration sample per compiled request, learned from its first call (seed §2).
        self.calibrator.arm(compiled.local_estimate)
        max_tokens = self.settings.max_tokens or compiled.output_reserve
        self.physical.reserve = max_tokens
        self.trigger.max_tokens = max_tokens
        self.fit.reserve = compiled.output_reserve
        return _Live(
            system=compiled.system,
            tools=compiled.tools,
            messages=list(compiled.messages),
            estimated_tokens=compiled.estimated_tokens,
            local_estimate=compiled.local_estimate,
            max_tokens=max_tokens,
            output_reserve=compiled.output_reserve,
            multiplier=self.fit.multiplier(),
            omitted=tuple(compiled.decisions.omitted),
        )

    def _start_stream(self) -> None:
        """A recompiled request: the projection starts from nothing (seed 001). The usage tracker
        follows the provider's own notion of a stream, decided when the request is sent."""
        self.physical.start_stream()
        self._round_base = self._round_probe = None

    def _learn_round(self, call: CallUsage) -> None:
        """Learn what the round appended before ``call`` cost by the provider's count, and keep this
        call's figures as the base for the next round (:class:`~contextwindow.engine.projection.RoundRatios`).
        Only a continued request whose previous call reported its prompt and output measures a round."""
        probe, self._round_probe = self._round_probe, None
        if not (call.reported and call.prompt > 0):
            self._round_base = None
            return
        if probe is not None:
            base, estimate = probe
            if call.prompt >= base:
                self.fit.observe_round(real=call.prompt - base, estimate=estimate)
        self._round_base = call.prompt + call.usage.output if call.usage.output > 0 else None

    def _account(self, sample: Usage | None, live: _Live) -> CallUsage:
        max_tokens = live.max_tokens
        if sample is None:
            call = self.tracker.unreported(max_tokens=max_tokens)
        else:
            try:
                call = self.tracker.feed(sample, max_tokens=max_tokens)
            except InvalidInput:
                # A running total that went backwards: the provider layer restarted its count (a new
                # stream by its own reckoning). Take the sample as this call's own, erring high.
                self.tracker.start_stream()
                call = self.tracker.feed(sample, max_tokens=max_tokens)
        self.physical.observe_call(prompt=call.prompt, output=call.usage.output, max_tokens=max_tokens)
        self._learn_round(call)
        payload = {
            "fresh_input": call.usage.fresh_input,
            "cache_read": call.usage.cache_read,
            "cache_write": call.usage.cache_write,
            "output": call.usage.output,
            "reported": call.reported,
        }
        self.session.record("usage", payload)
        if call.reported:
            self.last_sent_tokens.append(call.prompt)
            self.fit.observe(
                prompt=call.prompt, local_estimate=live.local_estimate, multiplier=live.multiplier
            )
            self._last_accepted = call.usage
            if self.calibrator.armed:
                self.calibrator.report_real_input(call.prompt)
            self.anchors.record(
                Anchor(
                    model=self.profile.name,
                    connection=self.settings.connection,
                    input_tokens=call.prompt,
                    output_tokens=call.usage.output,
                    payload_estimate=live.local_estimate,
                )
            )
        else:
            self.calibrator.arm(0)  # a grown request must never be compared with the first estimate
        return call

    def _usage_notes(
        self, call: CallUsage, expected_input: int, *, first_of_send: bool, append_only: bool
    ) -> list[Note]:
        notes: list[Note] = []
        if call.reported:
            dropping = self.notes.provider_dropping(
                input_tokens=call.prompt,
                prior_input_tokens=self._prior_input,
                first_of_send=first_of_send,
                append_only=append_only or first_of_send,
            )
            overrun = self.notes.window_overrun(input_tokens=call.prompt, output_tokens=call.usage.output)
            used = call.prompt + call.usage.output
            exceeded = self.notes.reported_window_exceeded(
                used_tokens=used, previous_used=self._previous_used, reported_window=self.reported_window
            )
            truncated = self.notes.provider_truncated(input_tokens=call.prompt, expected_input=expected_input)
            notes.extend(n for n in (dropping, overrun, exceeded, truncated) if n is not None)
            self._prior_input = call.prompt
            self._previous_used = used
        return [self.record_event(n) for n in notes]

    def _overflow_notes(self) -> list[Note]:
        notes: list[Note] = []
        if self.stats.compactions:
            note = self.notes.overflow_after_compaction()
            if note is not None:
                notes.append(note)
        total = self._last_accepted.total if self._last_accepted is not None else None
        suggestion = self.notes.window_suggestion(last_accepted_total=total)
        if suggestion is not None:
            notes.append(suggestion)
        return [self.record_event(n) for n in notes]

    def _take_prepared(self) -> _Live:
        live, self._prepared = self._prepared, None
        assert live is not None
        return live

    async def _prepare(self, anchor_id: str | None) -> AsyncIterator[Event]:
        """Compile the next request into ``self._prepared``, covering what compile would leave out
        (:meth:`~contextwindow.engine.folding.Folding.cover`) and compiling again: ``[summary] + tail``. At
        most ``COVER_ROUNDS`` rounds per compile, the last one a cut: bounded, never looping."""
        live = self._compile()
        for round_ in range(COVER_ROUNDS):
            if not live.omitted:
                break
            changed = False
            async for event in self.folding.cover(
                anchor_id, live.omitted, live.output_reserve, cut_only=round_ == COVER_ROUNDS - 1
            ):
                changed = changed or isinstance(event, Compacted)
                yield event
            if not changed:
                break
            live = self._compile()
        self._prepared = live
