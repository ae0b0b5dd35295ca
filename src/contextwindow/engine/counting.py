"""Counting a request before it is sent, as a step of the engine (:class:`CountBeforeSend`).

When to count is the window's policy (:meth:`~contextwindow.engine.window.WindowState.count_reason`,
:mod:`~contextwindow.engine.precount`); this module asks the provider's counter and learns from its
answer as from a reported prompt: the request's estimate becomes the count, it is the request's one
calibration sample, it sets the composition factor and the anchor.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from ..content import Request
from ..errors import ContextWindowError
from ..formats import AttachmentLoader
from ..pricing.counters import InputCounter
from ..usage.tracker import Anchor
from .accounting import CallAccounting
from .events import Note, StreamRestarted
from .live import LiveRequest
from .stats import TurnStats
from .window import WindowState

__all__ = ["CountBeforeSend"]


class CountBeforeSend:
    """Counts the live request with the engine's counter when the window says a decision depends on
    it. ``calls`` keeps the anchors and what the newest anchor counted; ``stats`` is the turn's clock."""

    def __init__(
        self, window: WindowState, calls: CallAccounting, stats: TurnStats, *, model: str, connection: str
    ) -> None:
        self.window = window
        self.calls = calls
        self.stats = stats
        self.model = model
        self.connection = connection

    async def __call__(
        self,
        counter: InputCounter | None,
        live: LiveRequest,
        request: Callable[[], Request],
        *,
        load: AttachmentLoader,
        retry: bool = False,
    ) -> AsyncIterator[Note | StreamRestarted]:
        """Count ``live`` (sent as ``request()``) when :meth:`WindowState.count_reason` gives a reason.
        Yields a ``context_count_failed`` note (unrecorded) when the counter fails, which is then not
        asked again this turn, and a ``StreamRestarted`` (unrecorded: the caller decides) when the
        count shows the request over the window beside its ``max_tokens``. Never raises for the
        counter's own failures (a provider error, a timeout, an OS error)."""
        reason = self.window.count_reason(live, has_counter=counter is not None, retry=retry)
        if counter is None or reason is None:
            return
        self.stats.pause()
        try:
            counted = await counter.count_input_tokens(request(), load=load)
        except (ContextWindowError, TimeoutError, OSError) as failure:
            self.stats.resume()
            self.window.count_failed()
            data = {"counter": counter.name, "reason": reason, "error": str(failure)[:500]}
            yield Note(kind="context_count_failed", data=data)
            return
        self.stats.resume()
        if counted <= 0:
            return  # a provider that counted nothing said nothing (as a prompt of 0 is unreported)
        self.window.precount.counts += 1
        self.learn(live, counted)
        over = self.window.over_after_count(counted, live.max_tokens)
        if over is not None:
            yield over

    def learn(self, live: LiveRequest, counted: int) -> None:
        """The provider counted ``live`` before it was sent: the window learns from it
        (:meth:`WindowState.learn_from_count`), ``live`` is re-expressed at the multiplier that may
        just have moved, anchored at the count, and its estimate becomes the count."""
        self.window.learn_from_count(counted, live)
        rescale(live, self.window.fit.multiplier())
        self.calls.anchors.record(
            Anchor(
                model=self.model,
                connection=self.connection,
                input_tokens=max(1, counted),
                payload_estimate=live.local_estimate or None,
            )
        )
        self.calls.anchored = live.rendered.snapshot()
        live.counted_as(counted)
        live.counted = True


def rescale(live: LiveRequest, now: float) -> None:
    """``live``'s local estimate in the units of the calibration multiplier ``now``: what is appended
    to it from now on is priced at the new multiplier, and the anchor's payload is in those units
    too (left in the old ones, the next fresh compile's anchored delta carried the change of units
    over the whole request: 10% under on a real session)."""
    if live.multiplier > 0 and now != live.multiplier:
        live.local_estimate = round(live.local_estimate * now / live.multiplier)
        live.multiplier = now
