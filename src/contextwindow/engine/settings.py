"""The turn engine's own knobs (:class:`EngineSettings`); compile's live in ``compile.Policy``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidInput
from ..usage.tracker import UsageMode
from .precount import COUNT_MODES, CountMode
from .rounds import ROUND_TEXT_MARGIN
from .safe_prefix import COVER_TAIL_RATIO

__all__ = ["DEFAULT_MAX_STREAM_INPUT_TOKENS", "EngineSettings"]

# agent-framework's maxStreamTokens default (https://github.com/anima-research/agent-framework).
DEFAULT_MAX_STREAM_INPUT_TOKENS = 150_000


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineSettings:
    """The engine's own knobs (compile's live in ``compile.Policy``)."""

    declared_window: int | None = None
    """The window the host declares (the projection, the proactive fold and the notes measure
    against it); ``None`` takes the model window."""
    use_physical_window: bool = True
    """False: no projection at all (agent-framework with ``physicalWindowTokens`` unset)."""
    max_stream_input_tokens: int | None = DEFAULT_MAX_STREAM_INPUT_TOKENS
    max_tokens: int | None = None
    """Each call's output bound; ``None`` takes the compiled output reserve."""
    usage_mode: UsageMode = "per-call"
    """How the provider's usage samples count: per call, or a running total across the stream. A
    running total restarts at each new stream, and a request starts a new stream unless it continues
    the previous one (:func:`~contextwindow.providers.streams.continues_stream`): the same rule the
    local provider's ``cumulative`` mode follows, so both sides agree without a setting."""
    connection: str = "default"
    """The connection (route) the calibration multiplier and the anchors are kept for."""
    fit_margin: float = 0.05
    """Compile fits within ``(1 − fit_margin) × window``: a calibrated estimate is right on average,
    so a request filled to the last token is refused about half the time; 5% covers the spread of the
    estimator's error on whole requests measured by ``benchmarks/sessions.py`` once compile fits by
    the last request's own real/estimate ratio (:meth:`~contextwindow.engine.fit.WindowFit.composition_factor`). Before that, 8%
    was not enough: the spread between content kinds under one multiplier reached 11%."""
    uncounted_margin: float = 0.13
    """The fit margin while the provider has counted no request of this session (no usage reported,
    no rejection with numbers, no stored anchor for this model and connection): compile fits the
    input part within ``(1 − uncounted_margin) × (window − output reserve)`` and the projection
    without a reported prompt raises the live request's estimate by it. Without a count nothing
    corrects the estimator's error on a whole request. ``benchmarks/real_sessions.py`` measures it on
    real Claude Code sessions, against a provider counting each session in the units its own recorded
    usage shows: the Claude rule was up to 16% low on whole early requests of a few of the 40 sessions;
    with the text rule priced against the vocabulary (pricing epoch 7), 10% let one request a window
    be refused (16k and 32k, no usage reported) and 13% none, for about one point of window use.
    Once a count is known, ``fit_margin`` applies (this is never less than it)."""
    count_before_send: CountMode = "auto"
    """When the engine asks the provider's own input counter (the engine's ``counter``: the provider's
    ``count_input_tokens`` when it has one) to count a request before sending it
    (:mod:`~contextwindow.engine.precount`): ``"off"`` never; ``"cold"`` while calibration has less than
    one full sample of evidence and a large part of the request is not covered by any count (a new
    large tool result, a new summary, a fresh compile with no anchor), and the retry after a rejection
    for size; ``"auto"`` as ``cold``, and a request that fits beside its ``max_tokens`` only if the
    estimator's error on its uncounted part is under ``uncounted_margin``, so that compile fits to
    ``fit_margin`` whether or not the provider reports usage. A count is used as a reported prompt is
    (the estimate, one calibration sample, the composition factor, the anchor); tiny requests are
    never counted; a counter that fails leaves the turn on its estimate and margins, with a note.

    ``"auto"`` is the default by measurement (``benchmarks/real_sessions.py``, 40 real Claude Code
    sessions at 16k and 32k): it is the setting that holds the estimate within 5% at p95 and never
    more than 3% under from the second request on (counting off: up to 16% under, on a session's first
    large tool result), and keeps 70% of the window or more with no usage reported (off: 66–69%), at
    about 16–22 counts per 100 calls with usage reported and 27–33 without. ``"cold"`` counts less
    (about 6–7 per 100) but leaves the later fresh compiles to the rule, and without usage reported
    it is refused now and then. Each count is a round trip to the provider's count endpoint (free,
    rate-limited on its own), not a generation."""
    multiplier_step: float = 0.02
    """Compile sees the calibration multiplier rounded to this step (0: exact)."""
    tool_result_inline_chars: int = 24_000
    max_message_tokens: int | None = None
    round_pricing: Literal["estimator", "flat"] = "estimator"
    round_text_margin: float = ROUND_TEXT_MARGIN
    """The projection prices an appended round's text this much over the estimate (media and the
    rest at ``fit_margin``): one chunk's error is wider than a request's (see
    :data:`~contextwindow.engine.rounds.ROUND_TEXT_MARGIN`)."""
    max_compactions_per_turn: int = 4
    max_steps_per_turn: int = 1_000
    max_fold_halvings: int = 4
    reread: bool = True
    """Offer the model ``read_archived`` when a placeholder in the request names it, and answer its
    calls from the ledger (the host's tool runner never sees them); ``False`` turns it off."""
    max_folds_per_turn: int = 32
    """Summariser calls for covering folds per turn (each compile that leaves history out folds it,
    see :meth:`Engine._fresh_request`). A long tool loop on a small window legitimately folds every few
    calls; past this bound the turn's further overflow is cut with a note instead (no more summariser
    cost). A summariser that fails once is not asked again in the same turn."""
    cover_tail_ratio: float = COVER_TAIL_RATIO
    """A covering fold keeps the newest history that fills this share of compile's input budget and
    folds the rest (see :data:`~contextwindow.engine.safe_prefix.COVER_TAIL_RATIO`)."""

    def __post_init__(self) -> None:
        for name in (
            "max_compactions_per_turn",
            "max_steps_per_turn",
            "tool_result_inline_chars",
            "max_folds_per_turn",
        ):
            if getattr(self, name) <= 0:
                raise InvalidInput("must be > 0", path=name)
        if not 0.1 <= self.cover_tail_ratio < 1:
            raise InvalidInput("must be in [0.1, 1)", path="cover_tail_ratio")
        if not 0 <= self.round_text_margin < 1:
            raise InvalidInput("must be in [0, 1)", path="round_text_margin")
        if not 0 <= self.fit_margin < 0.5:
            raise InvalidInput("must be in [0, 0.5)", path="fit_margin")
        if not 0 <= self.uncounted_margin < 0.5:
            raise InvalidInput("must be in [0, 0.5)", path="uncounted_margin")
        if self.count_before_send not in COUNT_MODES:
            raise InvalidInput("must be off, cold or auto", path="count_before_send")
        if not 0 <= self.multiplier_step <= 0.2:
            raise InvalidInput("must be in [0, 0.2]", path="multiplier_step")
