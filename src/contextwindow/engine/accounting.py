"""What the provider's count of each call teaches the engine.

Each call's usage arrives as the provider reported it (per call, or a running total across a stream).
:class:`CallAccounting` turns it into the call's own usage (:class:`~contextwindow.usage.tracker.UsageTracker`,
following the provider's notion of a stream: :func:`~contextwindow.providers.streams.continues_stream`)
and hands the real figures on: to the physical-window projection, to the round ratios (what the
round appended before the call cost), to the fit (the composition factor), to calibration (the first
call of a compiled request against its estimate, each later call of the stream by what was appended
since the previous one: :meth:`CallAccounting._calibrate`), to the anchors, and to the ledger as a
``usage`` record, and prices it in dollars (:mod:`contextwindow.cost`, when genai-prices is
installed and knows the model: :attr:`CallAccounting.spent` is the session's sum). It also says which host notes a call's usage gives, and which notes an unrecovered
overflow gives.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import cost as dollars
from ..content import Message, Request
from ..errors import InvalidInput
from ..models import ModelProfile
from ..providers.streams import continues_stream
from ..store import Session
from ..usage.tracker import Anchor, AnchorBook, CallUsage, Usage, UsageMode, UsageTracker
from .events import Note, NoteBook, UsageReported
from .live import Held
from .window import WindowState

__all__ = ["CallAccounting"]


@dataclass(slots=True)
class _Calls:
    """What the engine remembers of the calls it made: the stream they belong to, and the figures
    the next call's notes and round learning compare with."""

    request: Request | None = None
    """The previous request and its reply: whether the next request continues their stream."""
    reply: Message | None = None
    round_base: int | None = None
    """The latest call's prompt + output when it reported both (see :meth:`CallAccounting._learn_round`)."""
    round_probe: tuple[int, int] | None = None
    """``(base, estimate)`` of the round appended after that call, awaiting the next prompt."""
    counted: tuple[int, int, float] | None = None
    """``(prompt, local estimate, multiplier)`` of the latest reported call of the live stream: the next
    call's prompt and estimate less these are a counted round (see :meth:`CallAccounting._calibrate`)."""
    prior_input: int | None = None
    """The latest reported prompt (``context_provider_dropping``)."""
    previous_used: int | None = None
    """The latest reported prompt + output (``context_reported_window_exceeded``)."""
    last_accepted: Usage | None = None
    """The latest reported call's usage (``context_window_suggestion``)."""


class CallAccounting:
    """The engine's books of its provider calls (see the module docstring)."""

    def __init__(
        self,
        session: Session,
        profile: ModelProfile,
        *,
        connection: str,
        usage_mode: UsageMode,
        window: WindowState,
        anchors: AnchorBook,
        notes: NoteBook,
    ) -> None:
        self.session = session
        self.profile = profile
        self.connection = connection
        self.usage = UsageTracker(usage_mode)
        self.window = window
        self.fit = window.fit
        self.calibrator = window.calibrator
        self.anchors = anchors
        self.physical = window.projection
        self.notes = notes
        self.spent: dollars.Cost | None = None
        """What this engine's calls cost in dollars so far (``None``: none priced)."""
        self._priced = dollars.available()
        self.anchored = Held()
        """The messages of the request the newest anchor counted, by ledger id, as rendered in it."""
        self._calls = _Calls()

    # -- the stream -------------------------------------------------------------------------------

    def sending(self, request: Request) -> None:
        """``request`` is about to go: a new stream unless it continues the previous one."""
        if not continues_stream(self._calls.request, self._calls.reply, request):
            self.usage.start_stream()
            self._calls.counted = None

    def answered(self, request: Request, reply: Message) -> None:
        """The provider answered ``request`` with ``reply``."""
        self._calls.request, self._calls.reply = request, reply

    def refused(self) -> None:
        """The provider refused the request for its size: a refused attempt is no stream, its anchor
        goes, and no calibration sample is compared with it."""
        self._calls.request = self._calls.reply = None
        self._calls.round_base = self._calls.round_probe = self._calls.counted = None
        self.anchors.clear("the provider rejected the request for its size")
        self.calibrator.arm(0)

    def stream_started(self) -> None:
        """A recompiled request: the projection starts from nothing (it must not inherit the figure
        that restarted it), and no round is measured across it."""
        self.physical.start_stream()
        self._calls.round_base = self._calls.round_probe = self._calls.counted = None

    def round_appended(self, *, appended: int, estimate: int) -> None:
        """A round rides on the live request: it is growth for the projection, and the next call's
        prompt, less this one's prompt and output, is what it cost (learnt when this call reported
        both and nothing else grew the stream since)."""
        base = self._calls.round_base
        self._calls.round_probe = (base, estimate) if base is not None and self.physical.growth == 0 else None
        self.physical.continue_past(appended)

    # -- one call's usage -------------------------------------------------------------------------

    def account(
        self, sample: Usage | None, *, max_tokens: int, local_estimate: int, multiplier: float
    ) -> CallUsage:
        """One accepted call: its own usage from ``sample`` (``None``: unreported), learnt from and
        recorded. ``local_estimate`` is compile's estimate of the request, made at ``multiplier``."""
        if sample is None:
            call = self.usage.unreported(max_tokens=max_tokens)
        else:
            try:
                call = self.usage.feed(sample, max_tokens=max_tokens)
            except InvalidInput:
                # A running total that went backwards: the provider layer restarted its count (a new
                # stream by its own reckoning). Take the sample as this call's own, erring high.
                self.usage.start_stream()
                call = self.usage.feed(sample, max_tokens=max_tokens)
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
            self.fit.observe(prompt=call.prompt, local_estimate=local_estimate, multiplier=multiplier)
            self._calls.last_accepted = call.usage
            self._calibrate(call, local_estimate=local_estimate, multiplier=multiplier)
            # The anchor's payload in the units the next compile prices in: the multiplier this
            # call may just have moved. Left at the old one, the next delta would carry the change of
            # units over the whole payload (35% under on a real session while calibration converged).
            now = self.fit.multiplier()
            rescaled = round(local_estimate * now / multiplier) if multiplier > 0 else local_estimate
            self.anchors.record(
                Anchor(
                    model=self.profile.name,
                    connection=self.connection,
                    input_tokens=call.prompt,
                    output_tokens=call.usage.output,
                    payload_estimate=rescaled,
                )
            )
        else:
            self.calibrator.arm(0)  # a grown request must never be compared with the first estimate
            self._calls.counted = None
        return call

    def _calibrate(self, call: CallUsage, *, local_estimate: int, multiplier: float) -> None:
        """A reported call's sample for calibration: the whole request against its estimate when it
        is the first call of a compiled request (the armed sample); otherwise, within a stream whose
        previous call reported its prompt, what was appended since (the reply and the round) as the
        provider counted it, ``prompt − previous prompt``, against the estimate of the same content,
        ``estimate − previous estimate`` in the same units. Both are one call's own figures (a
        cumulative stream's per-call prompts), never a stream's total."""
        calls = self._calls
        if self.calibrator.armed:
            self.calibrator.report_real_input(call.prompt, made_at=multiplier)
        elif calls.counted is not None and multiplier > 0:
            prompt, estimate, made_at = calls.counted
            appended = local_estimate - round(estimate * multiplier / made_at)
            grown = call.prompt - prompt
            if appended > 0 and grown > 0:
                self.calibrator.report_round(real=grown, estimate=appended, multiplier=multiplier)
        calls.counted = (call.prompt, local_estimate, multiplier)

    def _learn_round(self, call: CallUsage) -> None:
        """Learn what the round appended before ``call`` cost by the provider's count, and keep this
        call's figures as the base for the next round (:class:`~contextwindow.engine.rounds.RoundRatios`).
        Only a continued request whose previous call reported its prompt and output measures a round."""
        calls = self._calls
        probe, calls.round_probe = calls.round_probe, None
        if not (call.reported and call.prompt > 0):
            calls.round_base = None
            return
        if probe is not None:
            base, estimate = probe
            if call.prompt >= base:
                self.fit.observe_round(real=call.prompt - base, estimate=estimate)
        calls.round_base = call.prompt + call.usage.output if call.usage.output > 0 else None

    # -- events and notes -------------------------------------------------------------------------

    def events(
        self, call: CallUsage, *, index: int, expected_input: int, first_of_send: bool, append_only: bool
    ) -> list[UsageReported | Note]:
        """The events an accepted call gives, unrecorded: its ``usage_reported`` (call ``index``),
        then the notes its usage gives (:meth:`usage_notes`)."""
        cost = self.price(call.usage) if call.reported else None
        reported = UsageReported(
            call=index, usage=call.usage, reported=call.reported, stream_total=self.usage.total, cost=cost
        )
        notes = self.usage_notes(
            call, expected_input=expected_input, first_of_send=first_of_send, append_only=append_only
        )
        return [reported, *notes]

    def price(self, usage: Usage) -> dollars.Cost | None:
        """What ``usage`` cost on this engine's model, added to :attr:`spent`; ``None`` when
        genai-prices is not installed or does not know the model."""
        if not self._priced:
            return None
        cost = dollars.price(usage, self.profile.name)
        if cost is not None:
            self.spent = cost if self.spent is None else self.spent + cost
        return cost

    def usage_notes(
        self, call: CallUsage, *, expected_input: int, first_of_send: bool, append_only: bool
    ) -> list[Note]:
        """The notes a reported call's usage gives: the provider dropping or truncating input, a call
        over the declared window, or over the model's reported one."""
        if not call.reported:
            return []
        calls = self._calls
        dropping = self.notes.provider_dropping(
            input_tokens=call.prompt,
            prior_input_tokens=calls.prior_input,
            first_of_send=first_of_send,
            append_only=append_only or first_of_send,
        )
        overrun = self.notes.window_overrun(input_tokens=call.prompt, output_tokens=call.usage.output)
        used = call.prompt + call.usage.output
        exceeded = self.notes.reported_window_exceeded(
            used_tokens=used, previous_used=calls.previous_used, reported_window=self.profile.context_window
        )
        truncated = self.notes.provider_truncated(input_tokens=call.prompt, expected_input=expected_input)
        calls.prior_input = call.prompt
        calls.previous_used = used
        return [n for n in (dropping, overrun, exceeded, truncated) if n is not None]

    def overflow_notes(self, *, compacted: bool) -> list[Note]:
        """The notes an unrecovered overflow gives: it came after a fold (``compacted``), and the
        window to declare that the provider has proved it serves."""
        notes: list[Note] = []
        if compacted:
            note = self.notes.overflow_after_compaction()
            if note is not None:
                notes.append(note)
        last = self._calls.last_accepted
        suggestion = self.notes.window_suggestion(
            last_accepted_total=last.total if last is not None else None
        )
        if suggestion is not None:
            notes.append(suggestion)
        return notes
