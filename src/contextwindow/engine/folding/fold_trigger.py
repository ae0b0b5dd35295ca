"""When a fold is due before the next request: the proactive trigger.

:class:`ProactiveTrigger` folds before a request when the last accepted request's real input +
output + reply reserve (``min(2 × last output, 8000)``) reaches the *declared* window, at most once
per send; and once after a reply cut at its limit (maka's proactive fold).

It also measures how fast the requests grow between folds (:meth:`ProactiveTrigger.growth`): the
fold step (:meth:`~contextwindow.engine.window.WindowState.tail_share`) is sized by it. An engine
built on a stored session (a new process, a branch) learns it again from the session's anchors and
checkpoints (:func:`accepted_history`, :meth:`ProactiveTrigger.replay`), so it folds in the steps the
engine that wrote the session would have.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from ...providers.base import output_limit_hit
from ..limits import WindowLimits

if TYPE_CHECKING:
    from ...store import Session

__all__ = ["GROWTH_SAMPLES", "REPLY_RESERVE_CAP", "ProactiveTrigger", "accepted_history"]

# maka's later proactive trigger: replyReserve = min(2 × lastOutput, 8000).
REPLY_RESERVE_CAP = 8_000
"""The largest reply reserve: the trigger forecasts ``min(2 × last output, this)``."""
GROWTH_SAMPLES = 16
"""Consecutive accepted requests the growth per call is the mean of (the newest ones)."""


class ProactiveTrigger:
    """maka's proactive fold, kept per engine; :meth:`start_send` per user turn.

    ``baseline`` is the last accepted request's ``input + max(0, output)`` as the provider counted
    them; it is unknown until a request is accepted, and again after a fold. The fold is due when a
    window is guarded and ``baseline + min(2 × last output, 8000) ≥ window``, at most once per send;
    and, separately, once before the next request after a reply cut at the output limit. The reply
    reserve never exceeds ``max_tokens``, the next call's own output bound when the engine knows it:
    a reply cannot be longer, so a larger reserve would fold before anything needs the room.
    The window and ``max_tokens`` are read from ``limits`` (the engine's
    :class:`~contextwindow.engine.limits.WindowLimits`); given as numbers, the trigger keeps its own.
    """

    __slots__ = (
        "_fired_this_send",
        "_growth",
        "_has_folded",
        "_last_size",
        "_length_pending",
        "baseline_input",
        "baseline_output",
        "limits",
    )

    def __init__(
        self,
        declared_window: int | None = None,
        max_tokens: int | None = None,
        *,
        limits: WindowLimits | None = None,
    ) -> None:
        self.limits = limits or WindowLimits(
            model_window=declared_window or 1,
            declared=declared_window,
            window=declared_window,
            max_tokens=max_tokens,
        )
        self.baseline_input: int | None = None
        self.baseline_output = 0
        self._fired_this_send = False
        self._length_pending = False
        self._growth: deque[int] = deque(maxlen=GROWTH_SAMPLES)
        self._has_folded = False
        self._last_size: int | None = None

    @property
    def window(self) -> int | None:
        """The window the fold measures against: the declared one, or the limit a rejection taught."""
        return self.limits.window

    @property
    def max_tokens(self) -> int | None:
        return self.limits.max_tokens

    def start_send(self) -> None:
        self._fired_this_send = False

    def seed(self, *, input_tokens: int, output_tokens: int) -> None:
        """Step 0 of a send: seed the baseline from the persisted anchor of the last accepted request."""
        self.accepted(input_tokens=input_tokens, output_tokens=output_tokens, finish_reason=None)

    def accepted(
        self, *, input_tokens: int, output_tokens: int, finish_reason: str | None, estimate: int = 0
    ) -> None:
        """A request was accepted: its real prompt and output become the baseline, and what it grew
        by over the previous one (unless a fold came between) is a sample of :meth:`growth`. Its size
        for the growth is the prompt, or the engine's ``estimate`` of it when none was reported (the
        baseline stays unknown then: only a real count can say the window is reached)."""
        size = input_tokens if input_tokens > 0 else estimate
        if self._has_folded and self._last_size is not None and size > 0:
            self._growth.append(size - self._last_size)
        self._last_size = size if size > 0 else None
        self.baseline_input = input_tokens if input_tokens > 0 else None
        self.baseline_output = max(0, output_tokens)
        if output_limit_hit(finish_reason):
            self._length_pending = True

    def replay(self, history: Iterable[int | None]) -> None:
        """What an engine that ran the session learned of its growth: ``history`` is the prompts of its
        accepted requests in order, ``None`` for each fold (:func:`accepted_history`). The baseline
        is left to :meth:`seed`."""
        for size in history:
            if size is None:
                self.folded()
            else:
                self.accepted(input_tokens=size, output_tokens=0, finish_reason=None)
        self.baseline_input, self.baseline_output = None, 0

    def folded(self) -> None:
        """After a fold the baseline is unknown until the next accepted request."""
        self.baseline_input = None
        self._last_size = None
        self._length_pending = False
        self._has_folded = True

    def growth(self) -> float | None:
        """The mean growth of the provider's input per call over the newest accepted requests after a
        fold, with no fold between them (``None`` before the first fold and a request after it): how
        fast the room a fold frees fills. Only after a fold: while the history still fits, its growth
        (the large first reads of a session) is not the pace at which a fold's room fills."""
        return statistics.fmean(self._growth) if self._growth else None

    def reply_reserve(self) -> int:
        reserve = min(2 * self.baseline_output, REPLY_RESERVE_CAP)
        return reserve if self.max_tokens is None else min(reserve, self.max_tokens)

    def due(self) -> Literal["proactive", "length"] | None:
        """Whether to fold before the next request, and why (marks the once-per-send budget spent)."""
        if self._length_pending:
            self._length_pending = False
            return "length"
        window = self.window
        if window is None or self.baseline_input is None or self._fired_this_send:
            return None
        if self.baseline_input + self.baseline_output + self.reply_reserve() >= window:
            self._fired_this_send = True
            return "proactive"
        return None


def accepted_history(session: Session) -> list[int | None]:
    """The prompts of the requests the provider accepted on ``session`` (its anchors, oldest first),
    ``None`` for each fold (a checkpoint), up to its newest anchor (exclusive: the engine seeds from
    that one): what :meth:`ProactiveTrigger.replay` takes. One read of the session's anchors and
    checkpoints."""
    events: list[int | None] = []
    newest = 0
    for entry in session.entries(["anchor", "checkpoint"]):
        if entry.kind == "checkpoint":
            events.append(None)
            continue
        inner = entry.payload.get("anchor")
        size = inner.get("input_tokens") if isinstance(inner, Mapping) else None
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            events.append(size)
            newest = len(events) - 1
    return events[:newest]
