"""What compile fits against: the window as known, less the fit margin and what the provider taught.

A part of the engine's :class:`~contextwindow.engine.window.WindowState`, reading its limits. The
engine's compile fits the session's next request into a profile whose window is the one known
(declared, or as a rejection proved it) less these, each for a measured reason:

* ``fit_margin`` of the window: a calibrated estimate is right on average, so a request filled to
  the last token would be refused about half the time;
* ``shrink``: what rejections at the window we believed taught (the estimate was low by
  ``requested − limit``), bounded at a quarter of the window;
* the composition factor: the last reported request's own real/estimate ratio, when above 1
  (the calibration multiplier is one number across content kinds; the next request shares most of
  its content with the last one);
* ``held``: for the retry after a rejection, the uncounted margin's excess over the fit margin on
  the part of the retry no provider count covers (:meth:`WindowFit.hold_for`).

It also rounds the calibration multiplier compile sees to ``multiplier_step`` so that compile's
per-message memo survives the EMA's small moves, and keeps the estimator (and the round pricer) at
that multiplier for the live request, and learns from the provider's counts of appended rounds how
high to price the next one (:class:`~contextwindow.engine.rounds.RoundRatios`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from ..content import Message, ToolResult
from ..models import ModelProfile
from ..pricing import Estimator, clamp_multiplier
from ..usage.calibration import BAND, Calibrator
from .limits import WindowLimits
from .rounds import RoundPricer, RoundRatios
from .settings import EngineSettings

__all__ = ["WindowFit"]

HOLD_STEP = 0.75
"""How far, in steps, the multiplier moves from the step compile sees before that step changes."""


class WindowFit:
    """The fit profile for one engine (see the module docstring)."""

    def __init__(
        self,
        profile: ModelProfile,
        calibrator: Calibrator,
        *,
        estimator: Estimator,
        settings: EngineSettings,
        limits: WindowLimits | None = None,
    ) -> None:
        fit_margin = settings.fit_margin
        uncounted_margin = settings.uncounted_margin
        multiplier_step = settings.multiplier_step
        round_pricing = settings.round_pricing
        round_text_margin = settings.round_text_margin
        self.profile = profile
        self.calibrator = calibrator
        self.fit_margin = fit_margin
        self.uncounted_margin = max(fit_margin, uncounted_margin)
        """The margin while no provider input count is known (see :meth:`margin`)."""
        self.counted = False
        """Whether the provider has counted a request's input in this session: a reported prompt, a
        rejection that carried the rejected input's count, or a stored anchor for this route."""
        self.counts_near_budget = False
        """Whether the engine counts a request near the budget before sending it (``count_before_send``
        ``"auto"`` with a counter that has not failed this turn): then a request the estimator's error
        could push over is counted first, and compile fits to ``fit_margin`` before any count."""
        self.multiplier_step = multiplier_step
        self.shrink = 0
        """Tokens taken off the budget by rejections at the window we believed."""
        self.held = 0
        """Tokens held back for the retry's uncounted part (:meth:`hold_for`), until a request is
        accepted."""
        self.limits = limits or WindowLimits(
            model_window=profile.context_window,
            declared=profile.context_window,
            window=profile.context_window,
        )
        """The window's figures (the engine's, read here, written by its window state)."""
        self._stepped: float | None = None
        """The step :meth:`multiplier` last gave."""
        self._composition: tuple[float, float] | None = None
        """The last reported request's real prompt over its local estimate, and the multiplier that
        estimate was made at (see :meth:`composition_factor`)."""
        self._cached: ModelProfile | None = None
        self.estimator = estimator
        self.round_pricing = round_pricing
        self.round_text_margin = round_text_margin
        self.pricer = (
            RoundPricer(preset="flat")
            if round_pricing == "flat"
            else RoundPricer(estimator=estimator, margin=fit_margin, text_margin=round_text_margin)
        )
        """Prices an appended round for the projection (at the live multiplier, see :meth:`live_estimator`)."""
        self.rounds = RoundRatios()
        """The provider's counts of recent appended rounds over their estimates."""
        self._base_pricer = self.pricer
        self._pricer_multiplier = 1.0
        self._calibrated = estimator

    @property
    def reserve(self) -> int:
        """The output reserve of the latest compile (the composition factor scales the input part)."""
        return self.limits.reserve

    def fit_profile(self, known: int | None = None) -> ModelProfile:
        """The profile compile fits against for a window of ``known`` tokens (default: the window
        as known, :attr:`WindowLimits.known <contextwindow.engine.limits.WindowLimits.known>`);
        cached while the figure holds."""
        if known is None:
            known = self.limits.known
        if self.counted or not 0 < self.reserve < known:
            target = max(1, math.floor(known * (1 - self.margin())) - self.shrink - self.held)
        else:
            # Uncounted, the margin is for the estimate's error, so it takes its share of the input
            # part only: the output reserve is a bound the request names, not an estimate.
            input_part = math.floor((known - self.reserve) * (1 - self.margin()))
            target = max(1, self.reserve + input_part - self.shrink)
        factor = self.composition_factor()
        if factor > 1 and target > self.reserve:
            target = self.reserve + math.floor((target - self.reserve) / factor)
        if self._cached is None or self._cached.context_window != target:
            if target == self.profile.context_window:
                self._cached = self.profile
            else:
                self._cached = self.profile.with_(
                    context_window=target, max_output_tokens=min(self.profile.max_output_tokens, target)
                )
        return self._cached

    def margin(self) -> float:
        """The share of the window kept free for the estimator's error: ``fit_margin`` once the
        provider has counted a request in this session (the calibration multiplier, the composition
        factor and the anchors then carry what it taught), or while the engine counts requests near
        the budget before sending them (:attr:`counts_near_budget`), ``uncounted_margin`` otherwise
        (nothing then corrects the estimate of a whole request)."""
        return self.fit_margin if self.counted or self.counts_near_budget else self.uncounted_margin

    def hold_for(self, uncounted: int) -> bool:
        """The retry after a rejection: ``uncounted`` tokens of it (by the estimate) are content no
        provider count covers (a new summary, a message rendered otherwise than in the refused
        request, a fresh tool result), so they carry ``uncounted_margin`` where the counted rest
        keeps ``fit_margin``: compile fits that much tighter until a request is accepted. Returns
        whether the fit tightened (the retry is compiled again); see "Retry hold" in
        ``docs/concepts.md``."""
        if not self.counted:
            return False  # the uncounted margin applies to the whole request already
        extra = math.ceil(max(0.0, self.uncounted_margin - self.fit_margin) * max(0, uncounted))
        if extra <= self.held:
            return False
        self.held = extra
        return True

    def release(self) -> None:
        """A request was accepted: the retry's hold is over."""
        self.held = 0

    def fitted_estimate(self, estimate: int) -> int:
        """The live request's ``estimate`` as the projection takes it when no call on the stream
        reported a prompt: raised by the last counted request's own real/estimate ratio (when above
        1, :meth:`composition_factor`; a ratio beyond the calibration band is a confounded sample, as
        :mod:`~contextwindow.usage.calibration` rejects it, and is not used) and by :meth:`margin`, as
        compile fits it."""
        factor = self.composition_factor()
        if factor > BAND[1]:
            factor = 1.0
        return math.ceil(estimate * factor * (1 + self.margin()))

    def observe(self, *, prompt: int, local_estimate: int, multiplier: float) -> None:
        """A counted request (a reported call, a count before sending, or a rejection carrying its
        input count): its real
        ``prompt`` against compile's ``local_estimate`` of the request (made at ``multiplier``)."""
        self.counted = True
        if local_estimate > 0:
            self._composition = (prompt / local_estimate, multiplier)

    def composition_factor(self) -> float:
        """How far the last reported request's real prompt exceeded compile's estimate of it, at
        today's multiplier (1 when it did not, or nothing was reported), in steps of 2%. It only
        ever tightens the fit; why: "Composition factor" in ``docs/concepts.md``."""
        if self._composition is None:
            return 1.0
        ratio, multiplier = self._composition
        factor = ratio * multiplier / self.multiplier()
        return math.ceil(factor * 50) / 50 if factor > 1 else 1.0

    def multiplier(self) -> float:
        """The calibration multiplier in steps of ``multiplier_step``: the EMA moves a little on every
        sample, and each move would discard compile's per-message memo; a step of 2% is below the
        estimator's own noise. A step once taken is kept until the multiplier is three quarters of a
        step away from it (plain rounding flips at the half), so a multiplier that hovers at a half
        step, as one learning from every counted round does, does not flip between two steps."""
        step = self.multiplier_step
        value = self.calibrator.multiplier
        if step <= 0:
            return value
        kept = self._stepped
        if kept is None or abs(value - kept) > HOLD_STEP * step:
            # Held in the estimator's range: a step rounded from a multiplier at the band's edge
            # (0.25 → 0.24 at a step of 0.02) would be one no estimator prices at.
            kept = self._stepped = clamp_multiplier(round(round(value / step) * step, 6))
        return kept

    def learn(
        self, *, known: int, limit: int | None, requested: int | None
    ) -> Literal["window", "shrink"] | None:
        """Take in a rejection's numbers against the ``known`` window: ``"window"`` when ``limit`` is
        below it (the window the provider really serves: the caller adopts it), ``"shrink"`` when the
        limit equals it and the estimate was low by ``requested − limit`` (compile fits that much
        tighter, and 1% more, from now on, bounded at a quarter of the window), ``None`` when
        nothing changed."""
        if limit is None or limit <= 0:
            return None
        if limit < known:
            return "window"
        if requested is not None and requested > limit:
            before = self.shrink
            self.shrink = min(known // 4, self.shrink + (requested - limit) + known // 100)
            return "shrink" if self.shrink > before else None
        return None

    def price_round(
        self, tool_results: Sequence[ToolResult], injected: Sequence[Message] = ()
    ) -> tuple[int, int]:
        """The appended round's price for the projection and its plain estimate (the units
        :meth:`observe_round` learns in): the estimate raised by the fit margin, or by the largest
        ratio the provider recently counted a round at over its estimate, whichever is higher."""
        return self.pricer.price_and_estimate(tool_results, injected, factor=self.rounds.factor())

    def observe_round(self, *, real: int, estimate: int) -> bool:
        """The provider counted a round estimated at ``estimate`` (:meth:`price_round`) as ``real``."""
        if self.round_pricing == "flat":
            return False  # the flat rule is fixed, never learned
        return self.rounds.observe(real=real, estimate=estimate)

    def live_estimator(self) -> Estimator:
        """The estimator at the multiplier the live request was compiled with (cached per multiplier);
        keeps :attr:`pricer` at that multiplier too."""
        multiplier = self.multiplier()
        if multiplier != self._pricer_multiplier:
            self._pricer_multiplier = multiplier
            self._calibrated = Estimator(self.profile, multiplier)
            if self.round_pricing == "estimator":
                # Calibration may only raise a round's price: a multiplier below 1 must not let it slip.
                self.pricer = RoundPricer(
                    estimator=self._calibrated,
                    floor_estimator=self.estimator,
                    margin=self.fit_margin,
                    text_margin=self.round_text_margin,
                )
        if multiplier == 1.0:
            self.pricer = self._base_pricer
            return self.estimator
        return self._calibrated
