"""Fitting a unit to the room the tail has left, rather than ending the tail at it.

When a unit does not fit as it is, :func:`fit_unit` tries, in turn: cutting it to fill the room
(only while the tail is short, ``policy.cut_to_fill_below``); archiving its stale results (when
archives are taken as needed, ``policy.archive_as_needed``); putting the fewest of its media out of
line, oldest first. One large message or screenshot then never ends the tail. A unit fitted this
way is marked ``forced``: a later compile decides it again. When nothing fits, the unit comes back
with all its media out of line, and the walk refuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..content import Text
from ._run import Run
from .media import MediaBudget, manifest_text
from .truncate import MIN_CUT_TOKENS, text_only_estimate
from .unit import Rendering, Spot, Unit, render_unit

__all__ = ["fit_unit"]

_NONE_OUT: frozenset[tuple[int, int]] = frozenset()


@dataclass(frozen=True, slots=True)
class _Fitting:
    """One unit being fitted: where it is, the media budget and its state before the unit, the
    per-message cap and the room."""

    run: Run
    spot: Spot
    media: MediaBudget
    before: tuple[int, int, str | None]
    cap: int
    room: int

    def render(
        self,
        *,
        archive_new: bool,
        out_of_line: frozenset[tuple[int, int]] = _NONE_OUT,
        cap: int | None = None,
    ) -> Rendering:
        """The unit rendered afresh from the media state before it."""
        self.media.restore(self.before)
        limit = self.cap if cap is None else cap
        return render_unit(
            self.run, self.spot, self.media, limit, out_of_line=out_of_line, archive_new=archive_new
        )


def fit_unit(run: Run, spot: Spot, media: MediaBudget, *, cap: int, room: int, cut: bool) -> Rendering:
    """The unit at ``spot`` as rendered, fitted to ``room`` when it does not fit as it is (see the
    module docstring); ``cut``: the tail is short, so the unit may be cut to the room left."""
    before = media.snapshot()
    archive_new = not run.lazy
    rendering = render_unit(run, spot, media, cap, archive_new=archive_new)
    if rendering[0].tokens <= room:  # the common case: it fits as it is
        return rendering
    fitting = _Fitting(run, spot, media, before, cap, room)
    if cut:
        fitted = _cut_to_room(fitting, out_of_line=_NONE_OUT, archive_new=archive_new)
        if fitted[0].tokens <= room:
            return fitted
    if run.lazy:
        archived = fitting.render(archive_new=True)
        if archived[0].new_archives:
            archive_new = True
            rendering = archived
            archived[0].forced = True
            if archived[0].tokens <= room:
                return archived
    if not rendering[0].kept:
        return fitting.render(archive_new=archive_new)
    return _media_out_of_line(fitting, rendering[0], archive_new=archive_new, cut=cut)


def _media_out_of_line(fitting: _Fitting, unit: Unit, *, archive_new: bool, cut: bool) -> Rendering:
    """The unit with the fewest of its inline media out of line (oldest first) that let it fit, a
    bisection since each one more out only lowers the price; else cut (``cut``); else all out."""
    inline = list(reversed(unit.kept))
    max_entries, reread = fitting.run.policy.manifest_max_entries, fitting.run.policy.reread_tool
    est = fitting.run.est

    def without(count: int) -> Rendering:
        return fitting.render(out_of_line=frozenset(inline[:count]), archive_new=archive_new)

    def fits(count: int) -> bool:
        # What it puts out of line is listed in the manifest, which the request carries too.
        taken = without(count)[0]
        refs = [e.ref for e in taken.evictions if e.ref is not None]
        listed = manifest_text(refs, max_entries=max_entries, reread=reread) if refs else ""
        return taken.tokens + (est.block(Text(text=listed)) if listed else 0) <= fitting.room

    high = len(inline)
    if fits(high):
        high = _least(fits, 0, high)
    elif cut:
        fitted = _cut_to_room(fitting, out_of_line=frozenset(inline), archive_new=archive_new)
        if fitted[0].tokens <= fitting.room:
            return fitted
    return without(high)


def _cut_to_room(
    fitting: _Fitting, *, out_of_line: frozenset[tuple[int, int]], archive_new: bool
) -> Rendering:
    """The unit cut to the room: its messages rendered under the largest per-message cap (at least
    :data:`~contextwindow.compile.truncate.MIN_CUT_TOKENS`) with which it fits, marked and priced as
    a message over the cap is, and marked ``forced``. When even the smallest cap does not fit, the
    unit under the usual cap (the walk refuses it)."""

    def at(limit: int) -> Rendering:
        return fitting.render(cap=limit, out_of_line=out_of_line, archive_new=archive_new)

    def fits(limit: int) -> bool:
        return at(limit)[0].tokens <= fitting.room

    cap, spot, messages = fitting.cap, fitting.spot, fitting.run.messages
    high = (
        cap
        if cap > 0
        else max(text_only_estimate(messages[p].message.content) for p in range(spot.first, spot.end + 1))
    )
    low = MIN_CUT_TOKENS
    if high <= low or not fits(low):
        return at(cap)
    low = _most(fits, low, high)
    rendering = at(low)
    rendering[0].forced = True
    return rendering


def _least(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The least ``n`` in ``(low, high]`` with ``fits(n)``, given ``fits(high)`` and a monotone ``fits``."""
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            high = mid
        else:
            low = mid
    return high


def _most(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The greatest ``n`` in ``[low, high)`` with ``fits(n)``, given ``fits(low)`` and a monotone ``fits``."""
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low
