"""What one turn cost (:class:`TurnStats`): calls, restarts, compactions, folds and engine time."""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["TurnStats"]


@dataclass(slots=True)
class TurnStats:
    """What one turn cost; one value for the engine's life, reset at each turn (folding updates it)."""

    calls: int = 0
    restarts: int = 0
    compactions: int = 0
    overhead_seconds: float = 0.0
    """Time spent in engine code: everything but the provider's stream, the tools and the summariser."""
    summarizer_seconds: float = 0.0
    folds: int = 0
    """Covering folds made through the summariser this turn (bounded by ``max_folds_per_turn``)."""
    summarizer_failed: bool = False
    """The summariser failed a covering fold this turn: further ones cut instead of asking again."""
    _since: float | None = None

    def reset(self) -> None:
        self.calls = self.restarts = self.compactions = self.folds = 0
        self.overhead_seconds = self.summarizer_seconds = 0.0
        self.summarizer_failed = False
        self._since = None

    def resume(self) -> None:
        """Engine code runs from now."""
        self._since = time.perf_counter()

    def pause(self) -> None:
        """Engine code stops here (the provider, a tool or the host runs next)."""
        if self._since is not None:
            self.overhead_seconds += time.perf_counter() - self._since
            self._since = None

    @property
    def engine_seconds(self) -> float:
        """Engine time alone: the overhead less the summariser's calls made within it."""
        return max(0.0, self.overhead_seconds - self.summarizer_seconds)
