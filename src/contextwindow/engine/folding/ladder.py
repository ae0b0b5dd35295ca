"""The escalation ladder: compaction that frees nothing must not loop.

Each rung (evict media, archive tool results, fold, hard cut of the oldest turns) is tried at most
once per turn, a rung that freed nothing moves to the next, and the number of compactions per turn is
bounded; past the last rung the engine raises. :func:`hard_cut_text` is the checkpoint text the last
rung leaves in place of what it cut.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

__all__ = ["RUNGS", "EscalationLadder", "Rung", "hard_cut_text"]

_CUT_NOTE = re.compile(
    r"\n*\[(\d+) earlier messages were cut to fit the context window without a summary; "
    r"ids (\S+) … (\S+) remain in the ledger\]\s*$"
)


def hard_cut_text(previous: str | None, count: int, first_id: str, last_id: str) -> str:
    """The checkpoint text of a hard cut: the previous summary, and one note naming what was cut.

    Consecutive cuts merge into one note (the counts add up, the first id stays), so a session that
    is cut again and again without a summariser keeps one line, not one per cut.
    """
    base = previous or ""
    match = _CUT_NOTE.search(base)
    if match is not None:
        count += int(match.group(1))
        first_id = match.group(2)
        base = base[: match.start()]
    note = (
        f"[{count} earlier messages were cut to fit the context window without a summary; "
        f"ids {first_id} … {last_id} remain in the ledger]"
    )
    return f"{base}\n\n{note}" if base else note


Rung: TypeAlias = Literal["evict_media", "archive_tool_results", "fold", "hard_cut"]
"""One way of freeing room after a rejection for size (see :class:`EscalationLadder`)."""
RUNGS: tuple[Rung, ...] = ("evict_media", "archive_tool_results", "fold", "hard_cut")
"""The rungs in the order the ladder climbs them, each at most once per turn."""


@dataclass(slots=True)
class EscalationLadder:
    """The no-loop guarantee: each rung at most once per turn, and a bounded number of compactions.

    The engine asks :meth:`next_rung` each time the request is still too big; it gets the next rung
    not yet tried this turn (evict media → archive tool results → fold → hard cut), or ``None`` when
    every rung is spent or ``max_compactions`` is reached — then it must raise, never retry.
    """

    max_compactions: int = 4
    tried: list[Rung] = field(default_factory=list)

    def start_turn(self) -> None:
        self.tried.clear()

    def next_rung(self) -> Rung | None:
        if self.exhausted:
            return None
        for rung in RUNGS:
            if rung not in self.tried:
                self.tried.append(rung)
                return rung
        return None

    @property
    def exhausted(self) -> bool:
        return len(self.tried) >= self.max_compactions or all(r in self.tried for r in RUNGS)
