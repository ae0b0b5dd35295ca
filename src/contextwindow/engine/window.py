"""What is known about the window for one session on one provider endpoint and model.

:class:`WindowState` is the one owner of it: the declared and the learned window, each call's output
bound (``max_tokens``) and the compiled output reserve (its :class:`~contextwindow.engine.limits.WindowLimits`),
the margins and the fit (:class:`~contextwindow.engine.fit.WindowFit`), the physical-window projection
(:class:`~contextwindow.engine.projection.PhysicalWindow`), the proactive fold trigger
(:class:`~contextwindow.engine.folding.fold_trigger.ProactiveTrigger`) and the count-before-send policy
(:mod:`~contextwindow.engine.precount`). Those parts read its limits; only it writes them. It
answers the four questions the engine's loop asks:

(a) what to compile against: :meth:`WindowState.fit_profile`;
(b) at a tool boundary, continue or restart (:meth:`WindowState.boundary`), and whether to count
    before sending (:meth:`WindowState.count_reason`);
(c) after a reply, is a fold due: :meth:`WindowState.accepted`, then :meth:`WindowState.fold_due`;
(d) after a rejection, what the provider's numbers taught: :meth:`WindowState.learn_from_rejection`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

from ..errors import ContextOverflow, InvalidInput
from ..models import ModelProfile
from ..pricing import Estimator
from ..usage.calibration import Calibrator
from ..usage.tracker import Anchor
from .events import StreamRestarted
from .fit import WindowFit
from .folding.fold_step import fold_tail_share
from .folding.fold_trigger import ProactiveTrigger
from .limits import WindowLimits
from .live import LiveRequest
from .precount import CountMode, PrecountState, Reason, count_reason, near_budget
from .projection import PhysicalWindow
from .settings import EngineSettings

__all__ = ["BoundaryDecision", "WindowState", "decide_boundary"]

BoundaryDecision: TypeAlias = Literal["end_turn", "continue"] | StreamRestarted


def decide_boundary(
    *,
    end_turn: bool,
    stream_fresh_input: int,
    max_stream_input_tokens: int | None,
    projected_over: int | None,
    window: int | None,
) -> BoundaryDecision:
    """What happens at a tool boundary: ``end_turn`` wins over both restarts; then accumulated fresh
    input over ``max_stream_input_tokens`` restarts with ``context_budget``; then a projection over
    the window (``projected_over``, from :meth:`PhysicalWindow.over`) restarts with
    ``physical_window``; else the stream continues."""
    if end_turn:
        return "end_turn"
    if (
        max_stream_input_tokens is not None
        and stream_fresh_input > 0
        and stream_fresh_input > max_stream_input_tokens
    ):
        return StreamRestarted(
            reason="context_budget", input_tokens=stream_fresh_input, budget=max_stream_input_tokens
        )
    if projected_over is not None and window is not None:
        return StreamRestarted(reason="physical_window", input_tokens=projected_over, budget=window)
    return "continue"


class WindowState:
    """The window for one engine (see the module docstring): built from the model's ``profile`` and
    the ``settings``; ``calibrator`` and ``estimator`` are the engine's. Every figure about the
    window is written here, once; the fit, the projection, the trigger, the notes and the request
    compiler read :attr:`limits`. Raises :class:`~contextwindow.errors.InvalidInput` for a guarded
    window ≤ 0."""

    def __init__(
        self,
        profile: ModelProfile,
        calibrator: Calibrator,
        *,
        estimator: Estimator,
        settings: EngineSettings,
    ) -> None:
        declared = settings.declared_window or profile.context_window
        guarded = declared if settings.use_physical_window else None
        if guarded is not None and guarded <= 0:
            raise InvalidInput("must be > 0", path="window")
        self.settings = settings
        self.calibrator = calibrator
        self.limits = WindowLimits(model_window=profile.context_window, declared=guarded, window=guarded)
        self.fit = WindowFit(profile, calibrator, estimator=estimator, settings=settings, limits=self.limits)
        self.projection = PhysicalWindow(limits=self.limits)
        self.trigger = ProactiveTrigger(limits=self.limits)
        self.precount = PrecountState()
        self.last_projection: int | None = None
        """The projection at the latest tool boundary (``None`` when none could be made)."""

    @property
    def window(self) -> int | None:
        """The window guarded (``None``: no projection): declared, or as the provider proved it."""
        return self.limits.window

    def resume(self, stored: Anchor, history: Sequence[int | None] = ()) -> None:
        """The route's stored anchor, before the first send: the trigger's baseline starts from it
        (its growth from the session's ``history`` before it, :func:`~.folding.fold_trigger.accepted_history`),
        the session counts as counted, and its count against its estimate sizes the first fit."""
        self.trigger.replay(history)
        self.trigger.seed(input_tokens=stored.input_tokens, output_tokens=stored.output_tokens or 0)
        self.fit.counted = True
        if stored.payload_estimate:
            self.fit.observe(
                prompt=stored.input_tokens,
                local_estimate=stored.payload_estimate,
                multiplier=self.fit.multiplier(),
            )

    def start_turn(self, *, has_counter: bool) -> None:
        """A new turn: a new send for the trigger, the counter trusted again."""
        self.trigger.start_send()
        self.precount.start_turn()
        self.fit.counts_near_budget = self.counting("auto", has_counter=has_counter)

    # -- (a) what to compile against --------------------------------------------------------------

    def fit_profile(self) -> ModelProfile:
        """The profile compile fits against: the window as known, less the fit margin and what the
        provider taught (:meth:`WindowFit.fit_profile`)."""
        return self.fit.fit_profile()

    def compiled(self, output_reserve: int) -> int:
        """A request was compiled with ``output_reserve``: it is the reserve from now on, and each
        call's output bound unless ``settings.max_tokens`` names one. Returns that bound."""
        max_tokens = self.settings.max_tokens or output_reserve
        self.limits.max_tokens = max_tokens
        self.limits.reserve = output_reserve
        return max_tokens

    # -- (b) at a tool boundary -------------------------------------------------------------------

    def boundary(
        self, live: LiveRequest, *, appended: int, end_turn: bool, stream_fresh_input: int
    ) -> BoundaryDecision:
        """Continue the stream with a round of ``appended`` tokens, restart it, or end the turn
        (:func:`decide_boundary`); keeps the projection for :attr:`last_projection`."""
        return decide_boundary(
            end_turn=end_turn,
            stream_fresh_input=stream_fresh_input,
            max_stream_input_tokens=self.settings.max_stream_input_tokens,
            projected_over=self._projected_over(live, appended),
            window=self.window,
        )

    def _projected_over(self, live: LiveRequest, appended: int) -> int | None:
        """The projection of ``live`` with the round appended when it crosses the window, else
        ``None``."""
        self.last_projection = self.projection.project(appended)
        window = self.window
        if self.last_projection is not None or window is None:
            return self.projection.over(appended)
        # No call on this stream reported a prompt (usage off, or output only): the projection has
        # no real figure to start from, so the engine's own estimate of the live request stands in for
        # it, raised as compile fits it (the estimator's error on the whole request) or by the rounds'
        # own margins, whichever is higher. It can only ask for a recompile, never refuse.
        # A count before sending covers its part of the request exactly: only the rest is raised.
        covered = live.estimated_tokens - live.uncounted
        whole = covered + max(self.fit.fitted_estimate(live.uncounted), live.uncounted + live.margins)
        estimated = whole + appended + live.max_tokens
        return estimated if estimated > window else None

    def counting(self, mode: CountMode, *, has_counter: bool) -> bool:
        """Whether the engine may count before sending in ``mode`` (or a wider one) this turn."""
        wanted = self.settings.count_before_send
        allowed = ("cold", "auto") if mode == "cold" else ("auto",)
        return has_counter and wanted in allowed and not self.precount.failed

    def count_reason(self, live: LiveRequest, *, has_counter: bool, retry: bool = False) -> Reason | None:
        """Why ``live`` should be counted before it is sent (``None``: it should not,
        :func:`~contextwindow.engine.precount.count_reason`)."""
        if not self.counting("cold", has_counter=has_counter):
            return None
        return count_reason(
            self.settings.count_before_send,
            estimate=live.estimated_tokens,
            uncounted=live.uncounted,
            evidence=self.calibrator.evidence,
            near=near_budget(
                estimate=live.estimated_tokens,
                uncounted=live.uncounted,
                max_tokens=live.max_tokens,
                window=self.window,
                uncounted_margin=self.precount.plausible(self.fit.uncounted_margin),
            ),
            retry=retry,
            counted=self.fit.counted,
        )

    def count_failed(self) -> None:
        """The counter failed: it is not asked again this turn, and compile stops relying on it."""
        self.precount.failed = True
        self.fit.counts_near_budget = False

    def over_after_count(self, counted: int, max_tokens: int) -> StreamRestarted | None:
        """A count of ``counted`` tokens beside ``max_tokens`` over the window: the restart it asks
        for (not recorded), else ``None``."""
        window = self.window
        if window is not None and counted + max_tokens > window:
            return StreamRestarted(reason="physical_window", input_tokens=counted + max_tokens, budget=window)
        return None

    # -- (c) after a reply ------------------------------------------------------------------------

    def accepted(
        self, *, input_tokens: int, output_tokens: int, finish_reason: str | None, estimate: int = 0
    ) -> None:
        """The provider answered: the retry's hold is over and the reply is the trigger's baseline
        (``estimate``: the engine's estimate of the request, its size for the growth when the
        provider reported no prompt)."""
        self.fit.release()
        self.trigger.accepted(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            finish_reason=finish_reason,
            estimate=estimate,
        )

    def fold_due(self) -> Literal["proactive", "length"] | None:
        """Whether a fold is due before the next request, and why (:meth:`ProactiveTrigger.due`)."""
        return self.trigger.due()

    def tail_share(self, budget: int) -> float:
        """The share of the input ``budget`` a fold keeps: ``settings.cover_tail_ratio``, lowered so
        the room it frees lasts for the calls that pay for its cache write
        (:func:`~contextwindow.engine.folding.fold_step.fold_tail_share`, at the trigger's growth)."""
        return fold_tail_share(self.settings.cover_tail_ratio, budget, self.trigger.growth())

    def folded(self) -> None:
        """A fold moved the history's start: the trigger's baseline is unknown until a reply."""
        self.trigger.folded()

    # -- (d) what the provider's numbers taught ---------------------------------------------------

    def sample(self, counted: int, live: LiveRequest) -> None:
        """One calibration sample from the provider's count of ``live`` itself (a count before sending,
        or a rejection's input count): this very request against its own estimate, never a grown
        request against an older one, and only while the multiplier is the one it was estimated at."""
        if live.multiplier == self.fit.multiplier() and self.calibrator.arm(live.local_estimate):
            self.calibrator.report_real_input(counted)

    def learn_from_count(self, counted: int, live: LiveRequest) -> None:
        """The provider counted ``live`` before it was sent: the count sets the composition factor
        (when calibration would believe its ratio) and is the request's one calibration sample."""
        self.precount.observe(estimate=live.estimated_tokens, counted=counted, uncounted=live.uncounted)
        low, high = self.calibrator.band
        if live.local_estimate > 0 and low <= counted / live.local_estimate <= high:
            self.fit.observe(prompt=counted, local_estimate=live.local_estimate, multiplier=live.multiplier)
        else:
            self.fit.counted = True  # a ratio calibration would not believe is no composition factor either
        # Learning disarms, so the call's reported prompt is not a second sample of this request.
        self.sample(counted, live)

    def learn_from_rejection(self, rejection: ContextOverflow, live: LiveRequest) -> bool:
        """Take in a rejection's numbers; return whether they changed what compile fits against.

        A ``limit`` below the window as known is adopted, here and only here, for compile, the
        projection and the trigger. A rejection that counts the rejected request's input
        (``input_tokens``) is a real count of ``live``: one calibration sample and the composition
        factor, as a reported prompt would be, so the retry and the rest of the session fit by it."""
        counted = rejection.input_tokens
        refit = False
        if counted is not None and counted > 0 and live.local_estimate > 0:
            had = self.fit_profile().context_window
            self.fit.observe(prompt=counted, local_estimate=live.local_estimate, multiplier=live.multiplier)
            self.sample(counted, live)
            refit = self.fit_profile().context_window != had
        limit = rejection.limit
        learned = self.fit.learn(known=self.limits.known, limit=limit, requested=rejection.requested)
        if learned == "window" and limit is not None:
            self.limits.window = limit
        return learned is not None or refit
