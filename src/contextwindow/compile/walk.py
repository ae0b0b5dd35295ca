"""The tail walk: the history after the head, taken newest first one unit at a time, within the budget.

Each unit is rendered from the walk's context and fitted to the room left (:mod:`.fit_unit`); the
walk stops at the first unit that does not fit, and the newest unit alone may use the grace over
the budget (``policy.over_budget_grace_ratio``). With a cache, the previous walk's older units are
reused from the first unit end both walks reach in equivalent contexts (:mod:`._walklog`), the cut
among them found by a binary search over their prefix sums; reuse never changes a result.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate, compress
from operator import attrgetter
from typing import Any, cast, overload

from ..content import Message
from ..errors import OverBudget
from ._render import recalibrated
from ._run import Run
from ._walklog import MIXED, Context, WalkLog, equivalent, same_turns
from .fit_unit import fit_unit
from .media import MediaBudget
from .pairing import unit_start
from .state import PricedMessage
from .unit import Spot, Unit, repair_price

__all__ = ["Bounds", "walk"]


@dataclass(frozen=True, slots=True)
class Bounds:
    """The walk's fixed limits: the first message after the checkpoint (``floor``), the head's price,
    the budget, the limit with grace (the newest unit only) and the per-message cap."""

    floor: int
    head: int
    budget: int
    limit: int
    cap: int


@dataclass(slots=True)
class _Tail:
    """The walk so far: units taken (newest first), the context before each, the running total (head
    included), the turns and depth counted, and the next unit's newest message (``end``)."""

    end: int
    total: int
    view: Sequence[Message]
    """The messages walked, as ``Message`` (for :func:`~contextwindow.compile.pairing.unit_start`)."""
    units: list[Unit] = field(default_factory=list)
    contexts: list[Context | _Reused] = field(default_factory=list)
    context: Context = (0, 0, ())
    turns: int = 0
    depth: int = 0
    exhausted: bool = True
    """The walk reached the floor rather than the budget."""
    fresh: bool = False
    """Decide the next unit afresh (reuse stopped at one it may take otherwise)."""
    largest: int = 0
    """The largest text-only estimate before the cap of the messages taken (-1: one not measured)."""


def walk(run: Run, bounds: Bounds, media: MediaBudget, makeup: dict[str, int]) -> list[Unit]:
    """The tail, newest unit first, within the budget. Raises :class:`~contextwindow.errors.OverBudget`
    (with ``makeup`` filled in) when the newest unit does not fit beside the head."""
    newest = len(run.messages) - 1
    key = (bounds.floor, media.count_cap, media.byte_budget, media.watermark, media.contiguous)
    old = run.cache.walk
    if old is not None and old.calibration != (run.m, run.framing):
        old = recalibrated_log(run, old)
    reuse_below = reusable_below(run, old, key, cap=bounds.cap)
    tail = _Tail(end=newest, total=bounds.head, view=_MessageView(run.messages))
    while tail.end >= bounds.floor:
        tail.context = (tail.turns, tail.depth, media.snapshot())
        if (
            not tail.fresh
            and old is not None
            and tail.units
            and tail.end < reuse_below
            and tail.end in old.by_end
        ):
            went_on = _reuse(run, tail, old, bounds, media)
            if went_on is not None:
                if went_on:
                    continue
                break
        tail.fresh = False
        if not _take_next(run, tail, bounds, media, makeup):
            tail.exhausted = False
            break
    # The context after the last unit taken: the refused unit's own steps do not count.
    tail.contexts.append(tail.context if not tail.exhausted else (tail.turns, tail.depth, media.snapshot()))
    if run.bound:
        run.cache.walk = log_walk(run, key, newest, tail, cap=bounds.cap)
    return tail.units


def _take_next(run: Run, tail: _Tail, bounds: Bounds, media: MediaBudget, makeup: dict[str, int]) -> bool:
    """Render and fit the unit ending at ``tail.end``; take it if it fits (``False``: it does not)."""
    policy, end, units = run.policy, tail.end, tail.units
    first = unit_start(tail.view, end, floor=bounds.floor) if run.base(end).results else end
    room = (bounds.limit - tail.total) if not units else (bounds.budget - tail.total - run.opening_for(first))
    cut = bool(units) and tail.total < policy.cut_to_fill_below * bounds.budget
    spot = Spot(first=first, end=end, turns=tail.turns, depth=tail.depth)
    unit, tail.turns, tail.depth = fit_unit(run, spot, media, cap=bounds.cap, room=room, cut=cut)
    if unit.forced:
        media.passed_over()
    if not units:
        if tail.total + unit.tokens > bounds.limit:
            _newest_does_not_fit(unit, bounds, tail.total, makeup)
    elif unit.tokens > room:
        return False
    tail.total += unit.tokens
    tail.largest = _larger(tail.largest, max(r.uncut for _, r, _, _ in unit.rendered))
    units.append(unit)
    tail.contexts.append(tail.context)
    tail.end = unit.start - 1
    return True


def _newest_does_not_fit(unit: Unit, bounds: Bounds, total: int, makeup: dict[str, int]) -> None:
    for _, rendered, _, _ in unit.rendered:
        text, results, images, other = rendered.segments
        makeup["text"] += text
        makeup["tool_results"] += results
        makeup["images"] += images
        makeup["other_media"] += other
    raise OverBudget(
        "the newest message does not fit beside the head",
        budget=bounds.budget,
        required=total + unit.tokens,
        makeup=makeup,
    )


def _reuse(run: Run, tail: _Tail, old: WalkLog, bounds: Bounds, media: MediaBudget) -> bool | None:
    """Take the previous walk's units from ``tail.end`` on when both walks reach it in equivalent
    contexts: ``None`` when they do not; else whether the walk goes on (``False``: it is done)."""
    policy = run.policy
    k, n = old.index(tail.end), old.count
    at_k = old.context(k)
    stale_turns = policy.recent_turns_full if policy.archive_stale_results else None
    same, settled = equivalent(
        tail.context, at_k, stale_turns=stale_turns, depth_limit=policy.image_depth_tokens
    )
    limit = n
    if not same:
        # Depth and the media budget decide only units with media: the units before the next of
        # those are decided as before whatever the depth, and leave the media budget as it is.
        limit = old.next_of(old.media, k)
        if limit == k or not same_turns(tail.context, at_k, stale_turns=stale_turns):
            return None
        settled = True
    if _id_in(old.source, tail.end) != run.message_id(tail.end):
        return None
    # Everything older is decided as before: take the old units that fit, and are above the floor (a
    # fold since moved it up: the unit it cuts through starts elsewhere now, the older ones are out).
    above = old.above(bounds.floor)
    m = min(limit, above, _reusable_count(run, old, k, room=bounds.budget - tail.total + old.prefix_at(k)))
    taken = old.newest_first(k, m)
    dturns, ddepth = tail.turns - at_k[0], tail.depth - at_k[1]
    tail.contexts.append(_Reused(old, k, m, dturns, ddepth, tail.context[2] if settled else None))
    tail.units.extend(taken)
    tail.largest = _larger(tail.largest, old.largest)  # of all its units: an upper bound of these
    tail.total += old.prefix_at(m) - old.prefix_at(k)
    after_turns, after_depth, after_media = old.context(m)
    tail.turns, tail.depth = after_turns + dturns, after_depth + ddepth
    if not settled:
        media.restore(after_media)
    tail.context = (tail.turns, tail.depth, media.snapshot())
    short = tail.total < policy.cut_to_fill_below * bounds.budget
    nxt = old.unit(m) if m < n else None
    if nxt is not None and (m in (limit, above) or nxt.forced or nxt.kept or short or run.lazy):
        # It did not fit (or was fitted by the room left then) with media that may go out of
        # line, or it may be cut or archived to fit, or the floor cuts through it: decide it afresh
        # (below the floor, the walk ends there).
        tail.end = nxt.end
        tail.fresh = True
        return True
    if m < n or old.exhausted:
        tail.exhausted = m == n and old.exhausted
        return False
    tail.end = taken[-1].start - 1 if taken else tail.end
    return True


def _reusable_count(run: Run, old: WalkLog, k: int, *, room: int) -> int:
    """The index past the last old unit from ``k`` on that fits in ``room`` as the walk would take
    it (room for the opening message, see :meth:`Run.opening_for`) and is not ``forced`` (a unit
    decided by the room left then is decided again)."""
    m = max(k, old.fitting(room, k) - 1)
    if run.opening_room:
        # Only the units whose prefix is within the opening's price of the room may lack room for it.
        first = max(k, old.fitting(room - run.opening_room, k) - 1)
        for j in range(first, m):
            if old.prefix_at(j + 1) + run.opening_for(old.unit(j).start) > room:
                m = j
                break
    return min(m, old.next_of(old.forced, k))


def reusable_below(run: Run, old: WalkLog | None, key: tuple[Any, ...], *, cap: int) -> int:
    """Unit ends below this index may be reused from ``old`` (-1: none may).

    The previous walk must have had the same fixed inputs (but for a floor a fold has since moved
    up: its units above the new floor are decided as before, :meth:`WalkLog.above`) and a
    per-message ``cap`` that cut no message it took differently (none is over either cap, so every
    render is the same), and its units must sit below its own newest message and below every message
    whose archive records changed since.
    """
    if old is None or old.key[1:] != key[1:] or old.key[0] > key[0]:
        return -1
    if old.cap != cap and not (old.largest >= 0 and all(c <= 0 or old.largest <= c for c in (old.cap, cap))):
        return -1
    below = old.newest
    if old.archives != run.archived_by:
        changed = {
            k
            for k in old.archives.keys() | run.archived_by.keys()
            if old.archives.get(k) != run.archived_by.get(k)
        }
        for message_id, _ in changed:
            position = run.position_of(message_id) if message_id is not None else None
            if position is None:
                return -1
            below = min(below, position)
    return below


@dataclass(frozen=True, slots=True)
class _Reused:
    """In :attr:`_Tail.contexts`, the contexts of ``old``'s units ``k`` to ``m`` (newest first) as the
    walk took them: shifted by the turns and depth the new messages add; with ``media`` (the media
    budget was settled), each one's media state replaced by it. :func:`log_walk` reads them."""

    old: WalkLog
    k: int
    m: int
    dturns: int
    ddepth: int
    media: Any


def log_walk(run: Run, key: tuple[Any, ...], newest: int, tail: _Tail, *, cap: int) -> WalkLog:
    """The log of this walk (under the per-message ``cap``), for the next compile to reuse: the
    previous log with the units decided again replaced by the new ones, when this walk took new
    units and then every older unit of it (:func:`_appended`); else built from the walk."""
    pieces = tail.contexts
    scalars: dict[str, Any] = {
        "key": key,
        "newest": newest,
        "exhausted": tail.exhausted,
        "archives": dict(run.archived_by),
        "source": run.messages,
        "calibration": (run.m, run.framing),
        "cap": cap,
        "largest": tail.largest,
    }
    reused = pieces[-2] if len(pieces) >= 2 else None
    if (
        isinstance(reused, _Reused)
        and reused.m == reused.old.count
        and (reused.media is None or reused.media == _uniform(reused.old))
        and not any(isinstance(p, _Reused) for p in pieces[:-2])
    ):
        return _appended(reused, tail, scalars)
    end = cast(Context, pieces[-1])
    et, ed, _ = end
    offsets: list[Context] = []
    stop = len(pieces)
    for at in [*[i for i, piece in enumerate(pieces) if isinstance(piece, _Reused)][::-1], -1]:
        fresh = cast(list[Context], pieces[at + 1 : stop])  # the contexts of units decided now
        offsets.extend([(et - t, ed - d, ms) for t, d, ms in reversed(fresh)])
        if at >= 0:
            offsets.extend(_offsets(cast(_Reused, pieces[at]), end))
        stop = at
    units = tail.units[::-1]
    indexes = range(len(units))
    return WalkLog(
        units=units,
        offsets=offsets,
        end=end,
        prefix=_prefix(units),
        by_end=dict(zip(map(_END, units), indexes, strict=True)),
        forced=list(compress(indexes, map(_FORCED, units))),
        media=list(compress(indexes, map(_MEDIA, units))),
        **scalars,
    )


def _appended(reused: _Reused, tail: _Tail, scalars: dict[str, Any]) -> WalkLog:
    """``reused.old`` made the log of this walk in place: its ``reused.k`` newest units dropped (this
    walk decided them again) and this walk's new units (``tail.units`` before the reused ones)
    appended; the older contexts, counted back from the end, stay as they are."""
    old, f = reused.old, len(tail.contexts) - 2
    fresh = cast(list[Context], tail.contexts[:f])  # the new units' contexts, newest first
    units, prefix, offsets, by_end = old.units, old.prefix, old.offsets, old.by_end
    cut = old.count - reused.k
    for unit in units[cut:]:
        del by_end[unit.end]
    del units[cut:], prefix[cut + 1 :], offsets[cut + 1 :]
    del old.forced[bisect_left(old.forced, cut) :], old.media[bisect_left(old.media, cut) :]
    end = cast(Context, tail.contexts[-1])
    uniform = _uniform(old)
    for i in range(f - 1, -1, -1):  # the new units, oldest first
        unit, (turns, depth, state) = tail.units[i], fresh[i]
        at = len(units)
        units.append(unit)
        prefix.append(prefix[-1] + unit.tokens)
        offsets.append((end[0] - turns, end[1] - depth, state))
        by_end[unit.end] = at
        if unit.forced:
            old.forced.append(at)
        if unit.media:
            old.media.append(at)
        if state != uniform:
            uniform = MIXED
    return WalkLog(
        units=units,
        offsets=offsets,
        end=end,
        prefix=prefix,
        by_end=by_end,
        forced=old.forced,
        media=old.media,
        uniform=uniform,
        **scalars,
    )


def recalibrated_log(run: Run, old: WalkLog) -> WalkLog:
    """``old`` priced at this compile's multiplier: its units' renders calibrated again (the same
    decisions, the same messages), their prices, cuts' figures, the depths and prefix sums summed
    again. A unit with media read the old depth, so it is marked ``forced``: decided again."""
    units: list[Unit] = []
    depths = [0]  # counted back from the end: the depth of the units older than each boundary
    for unit in old.units:
        rendered = [(p, recalibrated(r, run.m, run.framing), ev, ar) for p, r, ev, ar in unit.rendered]
        cuts = iter(unit.truncations)
        truncations = [
            replace(
                next(cuts),
                original_tokens=run.render(p, ar, ev, 0).tokens,
                rendered_tokens=r.tokens,
            )
            for p, r, ev, ar in rendered
            if r.truncated
        ]
        again = replace(unit, rendered=rendered, truncations=truncations, forced=unit.forced or unit.media)
        again.tokens = sum(r.tokens for _, r, _, _ in rendered)
        if unit.repaired:  # pairing is the same at any multiplier; only what it adds is priced again
            again.tokens += repair_price(run, again)
        units.append(again)
        depths.append(depths[-1] + sum(run.base(p).tokens for p in range(unit.start, unit.end + 1)))
    newest_depth = old.context(0)[1]  # the walk's first context keeps its depth
    offsets = [(turns, depth, state) for (turns, _, state), depth in zip(old.offsets, depths, strict=True)]
    return replace(
        old,
        units=units,
        offsets=offsets,
        end=(old.end[0], newest_depth + depths[-1], old.end[2]),
        prefix=_prefix(units),
        by_end=dict(old.by_end),
        forced=list(compress(range(len(units)), map(_FORCED, units))),
        media=list(old.media),
        calibration=(run.m, run.framing),
    )


_END, _FORCED, _MEDIA, _TOKENS = (attrgetter(name) for name in ("end", "forced", "media", "tokens"))


def _prefix(units: Sequence[Unit]) -> list[int]:
    """``prefix[k]``: the tokens of ``units[:k]`` (a log's prefix sums, built at C speed: the log of a
    2,000-message walk is built on every compile)."""
    return list(accumulate(map(_TOKENS, units), initial=0))


def _offsets(piece: _Reused, end: Context) -> list[Context]:
    """The offsets (:attr:`WalkLog.offsets`, oldest first) of the contexts a :class:`_Reused` stands
    for, counted back from ``end``: the old log's, moved by how far its end is from ``end``."""
    old, media = piece.old, piece.media
    n = old.count
    offsets = old.offsets[n - piece.m + 1 : n - piece.k + 1]
    dturns, ddepth = end[0] - old.end[0] - piece.dturns, end[1] - old.end[1] - piece.ddepth
    if media is not None:
        return [(t + dturns, d + ddepth, media) for t, d, _ in offsets]
    if not dturns and not ddepth:
        return offsets
    return [(t + dturns, d + ddepth, ms) for t, d, ms in offsets]


def _uniform(log: WalkLog) -> Any:
    """:attr:`WalkLog.uniform`, found the first time it is asked for."""
    if log.uniform is None:
        first = log.offsets[0][2]
        log.uniform = first if all(o[2] == first for o in log.offsets) else MIXED
    return log.uniform


class _MessageView(Sequence[Message]):
    """The stored messages as a sequence of ``Message`` without copying 10,000 references."""

    def __init__(self, priced: Sequence[PricedMessage]) -> None:
        self._priced = priced

    def __len__(self) -> int:
        return len(self._priced)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return [pm.message for pm in self._priced[index]]
        return self._priced[index].message


def _larger(a: int, b: int) -> int:
    """The larger of two text-only estimates, -1 (not measured) if either is."""
    return -1 if a < 0 or b < 0 else max(a, b)


def _id_in(messages: Sequence[PricedMessage], position: int) -> str | None:
    id_at = getattr(messages, "id_at", None)
    return str(id_at(position)) if id_at is not None else messages[position].message.id
