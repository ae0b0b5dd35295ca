"""The turn engine's own knobs (:class:`EngineSettings`); compile's live in ``compile.Policy``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidInput
from ..usage.tracker import UsageMode
from .folding.safe_prefix import COVER_TAIL_RATIO
from .precount import COUNT_MODES, CountMode
from .rounds import ROUND_TEXT_MARGIN

__all__ = ["DEFAULT_MAX_STREAM_INPUT_TOKENS", "EngineSettings"]

# agent-framework's maxStreamTokens default (Sources in docs/concepts.md).
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
    """Compile fits within ``(1 − fit_margin) × window`` once the provider has counted a request of
    this session (:meth:`~contextwindow.engine.fit.WindowFit.margin`); in ``[0, 0.5)``. Why 5%:
    "Fit margin" in ``docs/concepts.md``."""
    uncounted_margin: float = 0.13
    """The fit margin while the provider has counted no request of this session: compile fits the
    input part within ``(1 − uncounted_margin) × (window − output reserve)``, and the projection
    without a reported prompt raises the live request's estimate by it; never less than
    ``fit_margin``; in ``[0, 0.5)``. Why 13%: "Uncounted margin" in ``docs/concepts.md``."""
    count_before_send: CountMode = "auto"
    """When the engine asks its ``counter`` to count a request before sending it
    (:mod:`~contextwindow.engine.precount`): ``"off"`` never; ``"cold"`` while calibration is cold
    and much of the request is uncounted, and the retry after a rejection; ``"auto"`` as ``cold``,
    and a request whose fit depends on the estimator's error. Why ``"auto"``: "Count before
    sending" in ``docs/concepts.md``."""
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
    """Summariser calls for covering folds per turn; past it the turn's further overflow is cut with
    a note instead. A summariser that fails once is not asked again in the same turn."""
    cover_tail_ratio: float = COVER_TAIL_RATIO
    """A covering fold keeps the newest history that fills this share of compile's input budget and
    folds the rest (:data:`~contextwindow.engine.folding.safe_prefix.COVER_TAIL_RATIO`); in ``[0.1, 1)``."""

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
