"""Which prefix of the history a fold may cover.

:func:`select_safe_prefix` gives the largest prefix that does not straddle a tool pair, stops before
partial and pinned messages, and is valid for the fold's phase (maka's ``selectSafeCompactionPrefix``);
otherwise the fold fails open with ``no_safe_completed_span``.
:data:`COVER_TAIL_RATIO` is how far a covering fold reaches past what compile left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...content import Message, ToolResult, ToolUse
from ...errors import InvalidInput
from ..events import FoldFailure, FoldPhase

__all__ = ["COVER_TAIL_RATIO", "select_safe_prefix"]

COVER_TAIL_RATIO = 0.9
"""A covering fold keeps the newest history that fills this share of compile's input budget and
folds the rest, leaving a tenth of the budget for growth before the next fold (the measurement
behind the figure: "Cover / covering fold" in ``docs/concepts.md``)."""


def _tool_positions(messages: Sequence[Message]) -> tuple[dict[str, int], dict[str, int]]:
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for i, message in enumerate(messages):
        for block in message.content:
            if isinstance(block, ToolUse):
                calls.setdefault(block.id, i)
            elif isinstance(block, ToolResult):
                results.setdefault(block.tool_use_id, i)
    return calls, results


def _straddles(cut: int, calls: dict[str, int], results: dict[str, int]) -> bool:
    """Covering messages ``[0, cut)`` splits a pair, or covers an open call (no response yet)."""
    for call_id, at in calls.items():
        if at >= cut:
            continue
        answered = results.get(call_id)
        if answered is None or answered >= cut:
            return True
    # A response whose call is covered but which itself is not is caught above; a response without
    # any call is inert.
    return False


def select_safe_prefix(
    messages: Sequence[Message],
    *,
    phase: FoldPhase,
    turn_start: int | None = None,
    reserve_tail: int | None = None,
    max_covered: int | None = None,
    first_partial: int | None = None,
    pinned: Sequence[int] = (),
) -> int | FoldFailure:
    """How many leading messages a fold may cover, or why none (maka ``selectSafeCompactionPrefix``).

    ``maxCut = min(len − reserve_tail, max_covered, first_partial, first pinned)``; cuts are tried from
    there down to 1 and the first that straddles no tool pair wins. ``turn_start`` is the index of
    the message that opened the current turn: pinned in ``pre_turn`` (the fold must stop at or before
    it: ``0 < covered ≤ turn_start``) and to be passed in ``mid_turn`` (``covered > turn_start`` and
    ``covered ≥ 2``). ``reserve_tail`` is 1 by default and 0 for ``standalone``.
    """
    if reserve_tail is None:
        reserve_tail = 0 if phase == "standalone" else 1
    if reserve_tail < 0:
        raise InvalidInput("must be ≥ 0", path="reserve_tail")
    if phase in ("pre_turn", "mid_turn") and turn_start is None:
        raise InvalidInput(
            f"a {phase} fold needs the index of the message that opened the turn", path="turn_start"
        )
    limits = [len(messages) - reserve_tail]
    if max_covered is not None:
        limits.append(max_covered)
    if first_partial is not None:
        limits.append(first_partial)
    pins = list(pinned)
    if phase == "pre_turn" and turn_start is not None:
        pins.append(turn_start)
    if pins:
        limits.append(min(pins))
    calls, results = _tool_positions(messages)
    for cut in range(min(limits), 0, -1):
        if _straddles(cut, calls, results):
            continue
        if _valid_coverage(cut, phase, turn_start):
            return cut
        break  # the largest safe cut is not valid for the phase; smaller ones are no better
    return FoldFailure("no_safe_completed_span", f"phase {phase}, {len(messages)} messages")


def _valid_coverage(covered: int, phase: FoldPhase, turn_start: int | None) -> bool:
    if phase == "mid_turn":
        assert turn_start is not None
        return covered > turn_start and covered >= 2
    if phase == "pre_turn":
        assert turn_start is not None
        return 0 < covered <= turn_start
    return covered > 0
