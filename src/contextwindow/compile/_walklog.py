"""What one compile's tail walk did, kept so the next compile can reuse the part that cannot change.

What the walk (:func:`.walk.walk`) decides for a unit depends on its messages and on the walk's
*context* there: the turns counted (staleness), the depth in tokens (media depth) and the media
budget's state. Once two walks reach the same unit end in *equivalent* contexts (:func:`equivalent`:
every later decision the same), everything older is decided as before and is reused as it is.
Reuse never changes a result: the tests compare incremental compiles with cold ones, byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Context", "WalkLog", "equivalent", "same_turns"]

Context = tuple[int, int, tuple[Any, ...]]
"""``(turns, depth, media budget state)`` when the walk reaches a unit boundary."""


@dataclass(slots=True)
class WalkLog:
    """One walk: its units (newest first), the context before each and after the last, and what it
    was decided under (anything in ``key`` that differs makes the log useless)."""

    key: tuple[Any, ...]
    """``(floor, media limits, watermark)``: the walk's fixed inputs besides the messages and the cap."""
    newest: int
    """Index of the newest message then; units containing it were decided as the newest unit."""
    units: list[Any]
    contexts: list[Context]
    """``contexts[k]``: before ``units[k]``; ``contexts[len(units)]``: after the last one."""
    prefix: list[int]
    """``prefix[k]``: tokens of ``units[:k]``."""
    by_end: dict[int, int]
    """Unit index by the index of its newest message."""
    forced: list[int]
    """Indices of the units whose media went out of line for the room left then (ascending): they are
    decided again, never reused."""
    media: list[int]
    """Indices of the units holding media (ascending): only they read the depth and the media budget,
    so up to the next one a walk in another depth or media state decides every unit as this one did."""
    exhausted: bool
    """The walk reached the floor (no older unit was left), rather than the budget."""
    archives: dict[Any, Any]
    """The archive records in force then, by (message id, tool-use id)."""
    source: Any
    """The messages walked, to check a unit end is still the same message before reusing it."""
    calibration: tuple[float, int] = (1.0, 0)
    """``(multiplier, framing)`` its prices were calibrated with (:func:`.walk.recalibrated_log`)."""
    cap: int = 0
    """The per-message cap it rendered under."""
    largest: int = -1
    """The largest text-only estimate before the cap of any message it took (-1: not measured): a
    walk under another cap that neither cuts it renders every unit the same."""


def equivalent(
    new: Context,
    old: Context,
    *,
    stale_turns: int | None,
    depth_limit: int,
) -> tuple[bool, bool]:
    """``(equivalent, media_settled)``: whether every later decision is the same from these contexts.

    ``stale_turns`` is ``policy.recent_turns_full`` (``None`` when nothing is archived);
    ``depth_limit`` is ``policy.image_depth_tokens`` (0 = off). ``media_settled`` means both walks are
    past the depth limit, so the media budget's state no longer decides anything.
    """
    _, new_depth, new_media = new
    _, old_depth, old_media = old
    if not same_turns(new, old, stale_turns=stale_turns):
        return False, False
    settled = bool(depth_limit) and new_depth > depth_limit and old_depth > depth_limit
    if depth_limit and new_depth != old_depth and not settled:
        return False, False
    if not settled and new_media != old_media:
        return False, False
    return True, settled


def same_turns(new: Context, old: Context, *, stale_turns: int | None) -> bool:
    """Whether the turns counted decide the same from these contexts: equal, or both past
    ``stale_turns`` (``None``: nothing is archived, turns decide nothing)."""
    if stale_turns is None or new[0] == old[0]:
        return True
    return new[0] >= stale_turns and old[0] >= stale_turns
