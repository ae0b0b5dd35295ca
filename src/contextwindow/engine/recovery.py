"""Recovering from a rejection for size: believe the provider's numbers, and free room when they
alone do not (:class:`Recovery`).

What the numbers teach is the window's (:meth:`~contextwindow.engine.window.WindowState.learn_from_rejection`);
this module decides whether that freed room (compile at the new fit holds less than the refused
request) and otherwise climbs the escalation ladder (:meth:`~contextwindow.engine.folding.folds.Folding.escalate`).
The engine compiles the retry; a second rejection in a row ends the turn with the notes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..errors import ContextOverflow
from .accounting import CallAccounting
from .compiler import RequestCompiler
from .events import (
    AttachmentsEvicted,
    Compacted,
    Event,
    Note,
    ToolResultsArchived,
    WindowLearned,
    record_event,
)
from .folding.folds import Folding
from .live import LiveRequest
from .stats import TurnStats

__all__ = ["Freed", "Recovery"]


@dataclass(slots=True)
class Freed:
    """Whether :meth:`Recovery.free` freed room for the retry."""

    freed: bool = False


class Recovery:
    """The engine's answer to a rejection for size, over its ``requests``, ``folding`` and the
    books of its ``calls``; the turn's ``stats`` say whether it compacted."""

    def __init__(
        self, requests: RequestCompiler, folding: Folding, calls: CallAccounting, stats: TurnStats
    ) -> None:
        self.requests = requests
        self.folding = folding
        self.calls = calls
        self.stats = stats

    def notes(self) -> list[Note]:
        """The notes an unrecovered overflow gives (unrecorded)."""
        return self.calls.overflow_notes(compacted=self.stats.compactions > 0)

    async def free(
        self, rejection: ContextOverflow, live: LiveRequest, turn_start_id: str, outcome: Freed
    ) -> AsyncIterator[Event]:
        """Free room after ``rejection`` of ``live``: first the provider's numbers (compile fits to
        them, which usually frees enough: compile leaves the oldest turns out), then the ladder's
        rungs until one frees something. ``outcome.freed`` says whether anything did. Yields the
        ladder's events (recorded), after a ``window_learned`` when the rejection taught a smaller
        window."""
        self.calls.refused()
        window = self.requests.window_state
        known = window.window
        refit = window.learn_from_rejection(rejection, live)
        if window.window is not None and window.window != known:
            yield record_event(self.calls.session, WindowLearned(window=window.window, previous=known))
        freed = refit and self.requests().local_estimate < live.local_estimate
        if not freed:
            async for event in self.folding.escalate(turn_start_id, mid_turn=len(live.messages) > 0):
                if isinstance(event, Compacted | AttachmentsEvicted | ToolResultsArchived):
                    freed = True
                yield event
        outcome.freed = freed

    def hold(self, retry: LiveRequest, refused: LiveRequest) -> bool:
        """Whether the retry's content no count covers (what the refused request did not hold as it
        is rendered now) tightens the fit (:meth:`~contextwindow.engine.fit.WindowFit.hold_for`):
        then the retry is compiled again."""
        return self.requests.window_state.fit.hold_for(
            self.requests.unshared(retry.messages, refused.rendered)
        )
