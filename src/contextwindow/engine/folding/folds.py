"""Keeping history covered: covering folds, roll-forward, proactive and reactive folds, hard cuts.

Compile fits the newest history into the budget and leaves the oldest out (``decisions.omitted``).
Left out silently, the model forgets the task's beginning; so what compile leaves out is *covered*:
folded into a summary checkpoint through the summariser (rolling the previous summary forward), or,
when the summariser cannot (it failed, the turn is past ``max_folds_per_turn``, no room for a
summary), cut with a note in its place. Every original stays in the ledger; a checkpoint only moves
the start of what compile reads (``docs/concepts.md``, "Folding and recovery").

Besides the covering folds (:meth:`Folding.cover`, driven by the engine's compile loop), this module
holds the engine's other ways of freeing room: the proactive fold when the last request plus its
reply reserve reaches the window (:meth:`Folding.maybe_fold`), and the escalation ladder after a
provider rejection (:meth:`Folding.escalate`: evict media → archive tool results → fold → hard cut,
bounded per turn, so it cannot loop). The engine hands it what it works with: the session, its
request compiler, the estimator, the trigger, the ladder, the notes and the turn's counters.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator, Sequence
from typing import Protocol, TypeVar

from ...content import AttachmentRef, Message, media_refs
from ...errors import OverBudget
from ...pricing import Estimator
from ...store import MessageLog, Session
from ..compiler import RequestCompiler
from ..events import (
    AttachmentsEvicted,
    Compacted,
    CompactionFailed,
    Event,
    FoldFailure,
    FoldPhase,
    Note,
    NoteBook,
    ToolResultsArchived,
    record_event,
)
from ..window import WindowState
from .ladder import EscalationLadder, Rung, hard_cut_text
from .safe_prefix import select_safe_prefix
from .summarizer import Summarizer, Summary
from .task import with_task

__all__ = ["COVER_ROUNDS", "FoldCounters", "FoldLimits", "Folding"]

# Covering folds per compile: a fold, a second one when the summariser's own window let the first
# cover only part of what compile left out (rolling the first forward), then a hard cut for whatever
# is still left out. Three rounds at most, so a compile can never loop on its folds.
COVER_ROUNDS = 3
# The smallest output cap worth giving the summariser (the local and real summaries of five short
# sections need a few hundred tokens); below it the fold is not tried and the prefix is cut.
_MIN_SUMMARY_TOKENS = 256
# A covering fold's tail under this share of its target has hit a large message just outside it
# (see ``Folding._cover_target``): four fifths of the tail it meant to keep. At two thirds, a tail
# of 0.65 × 2/3 of the budget was kept: 36% of a 16k window, the smallest request after a fold on
# 40 real sessions; at four fifths it is 42.6%.
_CLIFF_SHARE = 0.8

_E = TypeVar("_E", bound=Event)


class FoldLimits(Protocol):
    """The engine settings folding reads (``EngineSettings``)."""

    @property
    def max_fold_halvings(self) -> int: ...
    @property
    def max_folds_per_turn(self) -> int: ...
    @property
    def cover_tail_ratio(self) -> float: ...
    @property
    def max_compactions_per_turn(self) -> int: ...


class FoldCounters(Protocol):
    """The turn's counters folding updates (the engine resets them at each turn)."""

    compactions: int
    folds: int
    summarizer_failed: bool
    summarizer_seconds: float


class Folding:
    """The engine's folds and cuts over one session (see the module docstring).

    It compiles through the engine's :class:`~contextwindow.engine.compiler.RequestCompiler` (whose
    escalations it adds to), records its events in the session and updates the turn's ``counters``.
    It asks the engine's ``window`` whether a fold is due and tells it when one moved the history,
    and keeps the escalation :attr:`ladder`. ``summarizer`` may be swapped between turns.
    """

    def __init__(
        self,
        session: Session,
        requests: RequestCompiler,
        *,
        estimator: Estimator,
        limits: FoldLimits,
        counters: FoldCounters,
        notes: NoteBook,
        window: WindowState,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.session = session
        self.requests = requests
        self.estimator = estimator
        self.limits = limits
        self.counters = counters
        self.notes = notes
        self.window = window
        self.ladder = EscalationLadder(max_compactions=limits.max_compactions_per_turn)
        self.summarizer = summarizer
        self._log_cache: MessageLog | None = None

    def start_turn(self) -> None:
        """A new user turn: the ladder's rungs all untried."""
        self.ladder.start_turn()

    def _record(self, event: _E) -> _E:
        return record_event(self.session, event)

    async def maybe_fold(self, phase: FoldPhase, turn_start_id: str | None) -> AsyncIterator[Event]:
        """The fold the trigger asks for (after a reply cut at its limit, or when the last request
        neared the window), unless the request compile would send now leaves nothing out: it fits
        with its whole output reserve, so the fold would free room nothing needs yet, and the next
        compile that does leave history out folds it then."""
        reason = self.window.fold_due()
        if reason is None:
            return
        try:
            fits = not self.requests().decisions.omitted
        except OverBudget:
            fits = False
        if fits:
            return
        async for event in self.fold(phase, turn_start_id):
            yield event

    async def escalate(self, turn_start_id: str | None, *, mid_turn: bool) -> AsyncIterator[Event]:
        """Climb the ladder until one rung frees something, within the turn's compaction bound."""
        while True:
            rung = self.ladder.next_rung()
            if rung is None:
                return
            freed = False
            async for event in self._apply_rung(rung, turn_start_id, mid_turn=mid_turn):
                freed = freed or not isinstance(event, CompactionFailed | Note)
                yield event
            if freed:
                return

    async def _apply_rung(
        self, rung: Rung, turn_start_id: str | None, *, mid_turn: bool
    ) -> AsyncIterator[Event]:
        self.counters.compactions += 1
        if rung in ("evict_media", "archive_tool_results"):
            before = self.requests()
            self.requests.overrides.add(rung)
            after = self.requests()
            freed = before.local_estimate - after.local_estimate
            if freed <= 0:
                yield self._record(CompactionFailed(phase="reactive", reason="nothing_to_free"))
                return
            if rung == "evict_media":
                kept = _media_ids(after.messages)
                ids = tuple(i for i in _media_ids(before.messages) if i not in kept)
                yield self._record(AttachmentsEvicted(attachment_ids=ids))
            else:
                archived_before = {a.tool_use_id for a in before.decisions.archived}
                ids = tuple(
                    a.tool_use_id for a in after.decisions.archived if a.tool_use_id not in archived_before
                )
                yield self._record(ToolResultsArchived(tool_use_ids=ids))
            return
        if rung == "fold":
            async for event in self.fold(
                "mid_turn" if mid_turn else "pre_turn", turn_start_id, phase_tag="reactive"
            ):
                yield event
            return
        async for event in self.hard_cut(turn_start_id):
            yield event

    def visible(self) -> tuple[list[Message], str | None]:
        """Messages after the latest checkpoint, and that checkpoint's summary (read incrementally)."""
        self._log_cache = log = self.session.message_log(into=self._log_cache)
        checkpoint = self.session.latest("checkpoint")
        if checkpoint is None:
            return [s.message for s in log], None
        last = log.index_of(str(checkpoint.payload["last_id"]))
        start = 0 if last is None else last + 1
        return [s.message for s in log[start:]], str(checkpoint.payload["summary"])

    # -- covering folds: nothing left out of the request without a checkpoint -----------------------

    def _cover_target(self, output_reserve: int) -> tuple[str, ...] | None:
        """What compile would leave out if the request might fill only the fold's tail share of its
        budget (``cover_tail_ratio``, lowered by the requests' growth: :meth:`WindowState.tail_share`):
        the ids a covering fold takes. Priced by compile itself (archives, media placeholders,
        per-message caps, anchored on the provider's last count), at a window whose budget is that
        share of the real one; ``None`` when even the newest message does not fit there.

        No cliff at one large message: the tail is contiguous, so a message just outside it that does
        not fit the share would leave the tail far below it (27k → 9k tokens at 32k). When the share's
        tail is under :data:`_CLIFF_SHARE` of that share, the tail compile fits at the whole budget is
        kept instead (the large message taken in): the request stays full, and the next fold, with
        newer history after that message, finds a fuller tail."""
        fit = self.requests.fit_profile()
        reserve = output_reserve
        budget = fit.context_window - reserve
        share = self.window.tail_share(budget)
        window = reserve + max(1, math.floor(share * budget))
        profile = fit.with_(context_window=window, max_output_tokens=min(fit.max_output_tokens, window))
        try:
            probe = self.requests(profile)
        except OverBudget:
            return None
        omitted = tuple(probe.decisions.omitted)
        if omitted and probe.estimated_tokens < _CLIFF_SHARE * share * budget:
            try:
                whole = self.requests()
            except OverBudget:
                return omitted
            if whole.estimated_tokens > probe.estimated_tokens:
                return tuple(whole.decisions.omitted)
        return omitted

    def _summary_room(self, output_reserve: int) -> int:
        """The output cap for a covering summary: the share of the budget the kept tail leaves free."""
        budget = self.requests.fit_profile().context_window - output_reserve
        return math.floor((1 - self.limits.cover_tail_ratio) * budget)

    async def cover(
        self,
        turn_start_id: str | None,
        omitted: Sequence[str],
        output_reserve: int,
        *,
        cut_only: bool,
        tag: FoldPhase | None = None,
    ) -> AsyncIterator[Event]:
        """One covering round: fold (or cut) a prefix reaching past every id compile left out
        (``omitted``), and enough more that the tail fills ``cover_tail_ratio`` of the budget, so the
        next calls need none. ``cut_only``: the compile's last round, cut without the summariser;
        ``tag``: the phase the events carry (default: by where the cut falls against the turn)."""
        messages, previous = self.visible()
        ids = [m.id for m in messages]
        index = {message_id: i for i, message_id in enumerate(ids)}
        left_out = [index[i] for i in omitted if i in index]
        if not left_out or len(messages) < 2:
            return
        need = max(left_out) + 1
        target = need
        wider = self._cover_target(output_reserve)
        if wider:
            target = max(target, max((index[i] for i in wider if i in index), default=-1) + 1)
        target = min(target, len(messages) - 1)  # the newest message is never covered
        need = min(need, target)
        turn_start = index.get(turn_start_id) if turn_start_id is not None else None
        room = self._summary_room(output_reserve)
        stats = self.counters
        cut: int | FoldFailure = select_safe_prefix(messages, phase="standalone", max_covered=target)
        if isinstance(cut, FoldFailure):
            yield self._record(CompactionFailed(phase="reactive", reason=cut.reason))
            return
        use_summarizer = (
            not cut_only
            and self.summarizer is not None
            and not stats.summarizer_failed
            and stats.folds < self.limits.max_folds_per_turn
            and room >= _MIN_SUMMARY_TOKENS
        )
        if use_summarizer:
            folded = 0
            async for event in self._cover_fold(messages, previous, cut, room, turn_start, tag):
                if isinstance(event, Compacted):
                    folded = len(event.covered_ids)
                yield event
            if folded >= need:
                return
            if folded:  # partial (the summariser's window): the next round rolls it forward
                return
        phase: FoldPhase = tag or ("pre_turn" if turn_start is not None and cut <= turn_start else "mid_turn")
        async for event in self._record_cut(messages, previous, cut, phase):
            yield event

    async def _cover_fold(
        self,
        messages: list[Message],
        previous: str | None,
        cut: int,
        room: int,
        turn_start: int | None,
        phase: FoldPhase | None = None,
    ) -> AsyncIterator[Event]:
        """Fold ``messages[:cut]`` (or the largest safe prefix of it the summariser can read)."""
        summarizer = self.summarizer
        assert summarizer is not None
        # The largest safe prefix the summariser's own window takes, by its estimate.
        low = summarizer.fitting(messages[:cut], previous, max_output_tokens=room)
        if low < cut:
            safe = select_safe_prefix(messages, phase="standalone", max_covered=max(1, low))
            cut = safe if not isinstance(safe, FoldFailure) else cut
        summary: Summary | FoldFailure = FoldFailure("no_safe_completed_span")
        self.counters.folds += 1
        for _ in range(self.limits.max_fold_halvings + 1):
            started = time.perf_counter()
            summary = await summarizer.summarize(messages[:cut], previous=previous, max_output_tokens=room)
            self.counters.summarizer_seconds += time.perf_counter() - started
            if not (isinstance(summary, FoldFailure) and summary.reason == "input_too_large"):
                break
            smaller = select_safe_prefix(messages, phase="standalone", max_covered=max(1, cut // 2))
            if isinstance(smaller, FoldFailure) or smaller >= cut:
                break
            cut = smaller
        tag: FoldPhase = phase or ("pre_turn" if turn_start is not None and cut <= turn_start else "mid_turn")
        if isinstance(summary, FoldFailure):
            self.counters.summarizer_failed = True
            yield self._record(CompactionFailed(phase=tag, reason=summary.reason))
            return
        self.counters.compactions += 1
        yield self._checkpoint(
            messages[:cut],
            summary.text,
            tag,
            tag,
            summarizer_calls=summary.calls,
            summary_tokens=summary.output_tokens,
        )

    async def _record_cut(
        self,
        messages: list[Message],
        previous: str | None,
        cut: int,
        tag: FoldPhase,
        *,
        counted: bool = False,
    ) -> AsyncIterator[Event]:
        """Cut ``messages[:cut]`` without a summary: a checkpoint carrying the previous summary and a
        note naming what was cut (the originals stay in the ledger). ``counted``: the ladder's rung
        already counted this compaction."""
        covered = messages[:cut]
        assert covered[0].id is not None and covered[-1].id is not None
        text = hard_cut_text(previous, len(covered), covered[0].id, covered[-1].id)
        self.counters.compactions += 0 if counted else 1
        yield self._checkpoint(covered, text, "hard_cut", tag, summarizer_calls=0)
        yield self._record(Note(kind="context_hard_cut", data={"messages": len(covered)}))

    async def fold(
        self, phase: FoldPhase, turn_start_id: str | None, *, phase_tag: FoldPhase | None = None
    ) -> AsyncIterator[Event]:
        """An ordinary fold, whatever asks for it (a reply cut at its limit, the proactive trigger, a
        restart, the rejection ladder): it keeps the newest history that fills ``cover_tail_ratio`` of
        the budget and folds only what is older, as a covering fold does (:meth:`cover`: the same
        target, sized by compile from the provider's last count, and the same room for the summary).
        When the history already fits that share it folds nothing, except after a rejection
        (``phase_tag="reactive"``), where the provider said the request does not fit: then it folds
        everything before the turn, as far as the summariser's window allows."""
        tag = phase_tag or phase
        if self.summarizer is None:
            yield self._record(CompactionFailed(phase=tag, reason="provider_error"))
            return
        reserve = self._output_reserve()
        target = self._cover_target(reserve) if reserve is not None else None
        if target is None and reserve is not None:
            # Not even the newest message fits the target tail (as the provider counts): the tail is
            # the newest message alone, and everything older folds.
            messages, _ = self.visible()
            target = tuple(m.id for m in messages[:-1] if m.id is not None)
        if target and reserve is not None:
            folded = False
            async for event in self.cover(turn_start_id, target, reserve, cut_only=False, tag=phase_tag):
                folded = folded or isinstance(event, Compacted)
                yield event
            if folded:
                if phase_tag == "reactive":
                    self.counters.compactions -= 1  # the ladder's rung counted this compaction
                note = self.notes.compacted({"phase": tag})
                if note is not None:
                    yield self._record(note)
            return
        if phase_tag != "reactive":
            return  # the history fits the target tail: nothing to fold
        async for event in self._fold_before_turn(phase, turn_start_id, tag):
            yield event

    def _output_reserve(self) -> int | None:
        """The output reserve of the request compile would send now (``None``: nothing fits)."""
        try:
            return self.requests().output_reserve
        except OverBudget:
            return None

    async def _fold_before_turn(
        self, phase: FoldPhase, turn_start_id: str | None, tag: FoldPhase
    ) -> AsyncIterator[Event]:
        """Fold everything a ``phase`` fold may cover (halving while the summariser cannot read it)."""
        assert self.summarizer is not None
        messages, previous = self.visible()
        ids = [m.id for m in messages]
        turn_start = ids.index(turn_start_id) if turn_start_id in ids else None
        if turn_start is None:
            phase = "standalone"
        cut = select_safe_prefix(messages, phase=phase, turn_start=turn_start)
        summary: Summary | FoldFailure = FoldFailure("no_safe_completed_span")
        for _ in range(self.limits.max_fold_halvings + 1):
            if isinstance(cut, FoldFailure):
                summary = cut
                break
            started = time.perf_counter()
            summary = await self.summarizer.summarize(messages[:cut], previous=previous)
            self.counters.summarizer_seconds += time.perf_counter() - started
            if not (isinstance(summary, FoldFailure) and summary.reason == "input_too_large"):
                break
            cut = select_safe_prefix(
                messages, phase=phase, turn_start=turn_start, max_covered=max(1, cut // 2)
            )
        if isinstance(summary, FoldFailure):
            yield self._record(CompactionFailed(phase=tag, reason=summary.reason))
            note = self.notes.compaction_failed_open({"reason": summary.reason})
            if note is not None:
                yield self._record(note)
            return
        assert not isinstance(cut, FoldFailure)
        yield self._checkpoint(
            messages[:cut],
            summary.text,
            tag,
            tag,
            summarizer_calls=summary.calls,
            summary_tokens=summary.output_tokens,
        )
        note = self.notes.compacted({"phase": tag})
        if note is not None:
            yield self._record(note)

    def _checkpoint(
        self,
        covered: Sequence[Message],
        text: str,
        recorded_phase: str,
        tag: FoldPhase,
        *,
        summarizer_calls: int,
        summary_tokens: int | None = None,
    ) -> Compacted:
        """Record a checkpoint whose ``text`` stands for ``covered`` (from the first message the
        previous checkpoint covered, so one checkpoint always covers all that is folded) and the
        ``compacted`` event saying so; the trigger's baseline is unknown until the next accepted
        request. ``summary_tokens`` is the summariser's output count of ``text`` (the provider's own
        units): stored with the checkpoint, compile prices the summary by it; else the text's estimate."""
        previous = self.session.latest("checkpoint")
        first_id = str(previous.payload["first_id"]) if previous is not None else covered[0].id
        last_id = covered[-1].id
        assert first_id is not None and last_id is not None
        said, text = (
            text,
            with_task(text, None if previous is None else str(previous.payload["summary"]), covered),
        )
        if summary_tokens:  # the summariser counted its own words; the section it ends with is estimated
            summary_tokens += self.estimator.text(text[len(said) :]) if text.startswith(said) else 0
        counted = {"summary_tokens": summary_tokens} if summary_tokens else {}
        self.session.record_checkpoint(
            text, first_id=first_id, last_id=last_id, phase=recorded_phase, **counted
        )
        self.window.folded()
        # The summary at the price compile gives it (its count, else its estimate): what the fold frees.
        summary_price = summary_tokens if summary_tokens else self.estimator.text(text)
        return self._record(
            Compacted(
                phase=tag,
                covered_ids=tuple(m.id for m in covered if m.id is not None),
                summary_tokens=summary_price,
                tokens_freed=self.estimator.messages(covered) - summary_price,
                summarizer_calls=summarizer_calls,
            )
        )

    async def hard_cut(self, turn_start_id: str | None) -> AsyncIterator[Event]:
        """The last rung: cut the oldest turns without a summary, leaving a note in their place."""
        messages, previous = self.visible()
        ids = [m.id for m in messages]
        turn_start = ids.index(turn_start_id) if turn_start_id in ids else len(messages)
        # The current turn's own message is never cut: with nothing before it there is nothing to cut.
        cut: int | FoldFailure = (
            select_safe_prefix(messages, phase="standalone", max_covered=turn_start)
            if turn_start > 0
            else FoldFailure("no_safe_completed_span", "only the current turn is left")
        )
        if isinstance(cut, FoldFailure):
            yield self._record(CompactionFailed(phase="reactive", reason=cut.reason))
            return
        async for event in self._record_cut(messages, previous, cut, "reactive", counted=True):
            yield event


def _media_ids(messages: Sequence[Message]) -> dict[str, None]:
    """The media ids of ``messages`` once each, in order of appearance: an ordered dict, not a set,
    because a set of strings iterates in an order ``PYTHONHASHSEED`` picks per process, and these
    ids go out in events and the ledger."""
    out: dict[str, None] = {}
    for message in messages:
        refs: list[AttachmentRef] = media_refs(message.content)
        out.update(dict.fromkeys(r.id for r in refs))
    return out
