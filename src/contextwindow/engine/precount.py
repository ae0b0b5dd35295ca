"""Counting a request before it is sent: when the engine asks the provider's own input counter.

The providers count a request's input as they will bill it, without generating (Anthropic
``messages/count_tokens``, OpenAI ``responses/input_tokens``, Gemini ``countTokens``:
:class:`~contextwindow.pricing.InputCounter`). Counting every request, as a framework's
"count before each request" option does, costs a round trip per call. The engine asks only when a
decision depends on the answer (``EngineSettings.count_before_send``):

- ``"cold"``: while the session's calibration has less than one full sample of evidence
  (:data:`~contextwindow.usage.calibration.FULL_SAMPLE_TOKENS`) and the part of the request no
  provider count covers (:attr:`PrecountState` ``uncounted``: a new large tool result, a new
  summary, a fresh compile with no anchor) is large enough to move the estimate by more than about
  3%: the estimator's rule can be a quarter off on a session's content until the provider has counted
  something of size, so a share of :data:`COLD_SHARE` of the request is enough;
- ``"auto"``: as ``cold``, and once calibrated a request whose uncounted part could plausibly push
  it over the window beside its ``max_tokens`` (:func:`near_budget`): the uncounted part priced at
  the uncounted margin, or the higher error the session's own counts showed on uncounted parts
  (:meth:`PrecountState.plausible`), no longer fits. Whether it fits is then the
  estimator's error, and the count decides it; a request far from the window is not counted however
  much of it is new. Compile may then fit to the ordinary fit margin even before the provider has
  counted anything (:meth:`~contextwindow.engine.fit.WindowFit.margin`);
- both: the retry after a rejection for size (a second rejection ends the turn), and the first
  request of a session nothing has counted yet (no usage reported, no count, no anchor) once it is
  of a calibration sample's size (:data:`~contextwindow.usage.calibration.MIN_SAMPLE_TOKENS`): all
  of it is the rule's until then, and with no usage reported nothing else would correct it;
- never: a request whose uncounted part is under :data:`MIN_COUNTED_TOKENS` (tiny requests and tiny
  changes say nothing a count would change) unless it is that first one, or after the counter failed
  in this turn.

A count is used as a reported prompt is (see ``Engine``): the request's estimate becomes the count, it
is the request's one calibration sample, it sets the composition factor and the anchor. A count that
shows the request over the window makes the engine fit by it and compile again, once.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from ..usage.calibration import FULL_SAMPLE_TOKENS, MIN_SAMPLE_TOKENS

__all__ = [
    "CHANGED_SHARE",
    "COLD_SHARE",
    "COUNT_MODES",
    "ERROR_HEADROOM",
    "ERROR_SAMPLES",
    "MIN_COUNTED_TOKENS",
    "CountMode",
    "PrecountState",
    "count_reason",
    "near_budget",
]

CountMode = Literal["off", "cold", "auto"]
"""When the engine counts a request before sending it (see the module docstring)."""
COUNT_MODES: tuple[CountMode, ...] = ("off", "cold", "auto")

COLD_SHARE = 0.12
"""A cold request is counted when its uncounted part is at least this share of its estimate (enough
to move it by about 3%; the measurement: "Count before sending" in ``docs/concepts.md``)."""

CHANGED_SHARE = 0.2
"""Once calibrated, a request whose uncounted part is at least this share of its estimate is counted
(``"auto"``) only when it could push the request over the window (:func:`near_budget`); kept for
callers that read it."""

ERROR_SAMPLES = 8
"""How many of the latest counts' errors on the uncounted part :meth:`PrecountState.plausible` reads."""

ERROR_HEADROOM = 1.5
"""The plausible error on an uncounted part is the worst of the latest ones times this."""

MIN_COUNTED_TOKENS = FULL_SAMPLE_TOKENS // 2
"""An uncounted part under this many tokens is never counted: calibration takes a sample that small at
half weight or less, and its error is a few dozen tokens."""

Reason = Literal["first", "cold", "near_budget", "retry"]


@dataclass(slots=True)
class PrecountState:
    """What the engine knows of counting: whether the counter failed in this turn (then it is not
    asked again until the next turn), how many counts were made, and how far the latest counts found
    the estimate of a request's uncounted part under the count (:meth:`observe`)."""

    failed: bool = False
    counts: int = 0
    errors: deque[float] = field(default_factory=lambda: deque(maxlen=ERROR_SAMPLES))
    """The latest counts' ``(count − estimate) / uncounted``, floored at 0 (an estimate over the count
    never pushes a request over)."""

    def start_turn(self) -> None:
        self.failed = False

    def observe(self, *, estimate: int, counted: int, uncounted: int) -> None:
        """The provider counted a request estimated at ``estimate`` with ``uncounted`` tokens of it no
        earlier count covered: the estimate's error, all of it put on the uncounted part."""
        if uncounted >= MIN_COUNTED_TOKENS:
            self.errors.append(max(0.0, (counted - estimate) / uncounted))

    def plausible(self, prior: float) -> float:
        """The error an uncounted part may plausibly have: ``prior`` (the uncounted margin), or the
        worst of the latest counts' times :data:`ERROR_HEADROOM` when that is higher (a session whose
        estimate drifts counts more; one whose estimate holds never counts less than the prior says:
        a drift no count has seen yet is what the prior is for)."""
        worst = max(self.errors, default=0.0)
        return max(prior, ERROR_HEADROOM * worst)


def near_budget(
    *, estimate: int, uncounted: int, max_tokens: int, window: int | None, uncounted_margin: float
) -> bool:
    """Whether the request fits beside ``max_tokens`` only if the estimator's error on its ``uncounted``
    part is under ``uncounted_margin`` (the error it may plausibly have): the part a count covers is
    exact, the rest errs."""
    if window is None:
        return False
    return estimate + uncounted * uncounted_margin + max_tokens > window


def count_reason(
    mode: CountMode,
    *,
    estimate: int,
    uncounted: int,
    evidence: float,
    near: bool,
    retry: bool = False,
    counted: bool = True,
) -> Reason | None:
    """Why the request should be counted before it is sent (``None``: it should not); see the module
    docstring. ``evidence`` is the calibration's samples so far (by weight), ``near`` what
    :func:`near_budget` says, ``counted`` whether anything of the session was counted yet."""
    if mode == "off":
        return None
    if not counted and estimate >= MIN_SAMPLE_TOKENS:
        return "first"
    if uncounted < MIN_COUNTED_TOKENS:
        return None
    if retry:
        return "retry"
    if evidence < 1 and uncounted >= COLD_SHARE * estimate:
        return "cold"
    if mode == "auto" and near:
        return "near_budget"
    return None
