"""What one compile's tail walk did, kept so the next compile can reuse the part that cannot change.

What the walk (:func:`.walk.walk`) decides for a unit depends on its messages and on the walk's
*context* there: the turns counted (staleness), the depth in tokens (media depth) and the media
budget's state. Once two walks reach the same unit end in *equivalent* contexts (:func:`equivalent`:
every later decision the same), everything older is decided as before and is reused as it is.
Reuse never changes a result: the tests compare incremental compiles with cold ones, byte for byte.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

__all__ = ["MIXED", "Context", "WalkLog", "equivalent", "same_turns"]

Context = tuple[int, int, tuple[Any, ...]]
"""``(turns, depth, media budget state)`` when the walk reaches a unit boundary."""


_START = attrgetter("start")

MIXED: Any = object()
""":attr:`WalkLog.uniform` when its contexts hold more than one media budget state."""


@dataclass(slots=True)
class WalkLog:
    """One walk: its units, the context before each and after the last, and what it was decided
    under (anything in ``key`` that differs makes the log useless).

    Stored **oldest first**, the contexts counted back from the walk's end, so that a walk whose
    history only grew (new units, then every older unit reused as it was) is logged by dropping the
    units it decided again and appending the new ones: work proportional to what is new. Read it
    newest first, as the walk goes, through :meth:`unit`, :meth:`context`, :meth:`prefix_at`.
    """

    key: tuple[Any, ...]
    """``(floor, media limits, watermark)``: the walk's fixed inputs besides the messages and the cap."""
    newest: int
    """Index of the newest message then; units containing it were decided as the newest unit."""
    units: list[Any]
    """Oldest first."""
    offsets: list[Context]
    """``offsets[j]``: the context before ``units[j]`` (after ``units[j-1]``; ``offsets[0]``: after
    the oldest one) as ``(end turns - turns, end depth - depth, media budget state)``: the same when
    newer messages shift every context alike."""
    end: Context
    """The context after the oldest unit (the walk's last context)."""
    prefix: list[int]
    """``prefix[j]``: tokens of ``units[:j]``."""
    by_end: dict[int, int]
    """Index in ``units`` by the index of the unit's newest message."""
    forced: list[int]
    """Indices (in ``units``, ascending) of the units whose media went out of line for the room left
    then: they are decided again, never reused."""
    media: list[int]
    """Indices (in ``units``, ascending) of the units holding media: only they read the depth and the
    media budget, so up to the next one a walk in another depth or media state decides every unit as
    this one did."""
    exhausted: bool
    """The walk reached the floor (no older unit was left), rather than the budget."""
    archives: dict[Any, Any]
    """The archive records in force then, by (message id, tool-use id)."""
    source: Any
    """The messages walked, to check a unit end is still the same message before reusing it."""
    uniform: Any = None
    """The media budget state every one of ``offsets`` holds (:data:`MIXED`: not one; ``None``: not
    found yet)."""
    calibration: tuple[float, int] = (1.0, 0)
    """``(multiplier, framing)`` its prices were calibrated with (:func:`.walk.recalibrated_log`)."""
    cap: int = 0
    """The per-message cap it rendered under."""
    largest: int = -1
    """The largest text-only estimate before the cap of any message it took (-1: not measured): a
    walk under another cap that neither cuts it renders every unit the same."""

    @property
    def count(self) -> int:
        return len(self.units)

    def index(self, end: int) -> int:
        """The newest-first index of the unit whose newest message is ``end`` (in :attr:`by_end`)."""
        return len(self.units) - 1 - self.by_end[end]

    def unit(self, k: int) -> Any:
        """The ``k``-th unit, newest first."""
        return self.units[len(self.units) - 1 - k]

    def context(self, k: int) -> Context:
        """The context before the ``k``-th unit, newest first (``k == count``: after the last)."""
        turns, depth, state = self.offsets[len(self.units) - k]
        return (self.end[0] - turns, self.end[1] - depth, state)

    def prefix_at(self, k: int) -> int:
        """Tokens of the ``k`` newest units."""
        return self.prefix[-1] - self.prefix[len(self.units) - k]

    def newest_first(self, k: int, m: int) -> list[Any]:
        """Units ``k`` to ``m`` (excluded), newest first."""
        n = len(self.units)
        return self.units[n - m : n - k][::-1]

    def above(self, floor: int) -> int:
        """How many units, newest first, start at or above message ``floor`` (all of them under the
        floor the walk had; fewer once a fold moved it up)."""
        return len(self.units) - bisect_left(self.units, floor, key=_START)

    def fitting(self, room: int, lo: int) -> int:
        """``bisect_right`` over the newest-first prefix sums from ``lo``: past the last ``k`` whose
        :meth:`prefix_at` is within ``room``."""
        return max(lo, len(self.prefix) - bisect_left(self.prefix, self.prefix[-1] - room))

    def next_of(self, indices: list[int], k: int) -> int:
        """The newest-first index of the first unit from ``k`` on in ``indices`` (:attr:`forced` or
        :attr:`media`), :attr:`count` if none."""
        n = len(self.units)
        at = bisect_right(indices, n - 1 - k) - 1
        return n - 1 - indices[at] if at >= 0 else n


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
