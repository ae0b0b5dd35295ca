"""The media window: which media may be inline this compile, and where it starts for the next.

:func:`media_budget` sets the compile's :class:`~contextwindow.compile.media.MediaBudget`; with
hysteresis (``policy.media_hysteresis_ratio``) it measures the media from the newest back to the
watermark and trims the limits when one binds, so the inline set moves in steps rather than on
every append. :func:`watermark_after` says where the inline media begin after this compile.
"""

from __future__ import annotations

from ._run import Run, result_id
from .media import MediaBudget, MediaItem, hysteresis_limits
from .state import MediaWatermark
from .unit import Unit

__all__ = ["media_budget", "watermark_after"]


def media_budget(run: Run, start: int) -> tuple[MediaBudget, MediaWatermark | None, bool]:
    """``(budget, watermark in force, whether a limit binds)`` for the media from ``start`` on."""
    policy, state = run.policy, run.state
    watermark_at: tuple[int, int] | None = None
    if state.watermark is not None:
        pos = run.position_of(state.watermark.message_id)
        if pos is not None:
            watermark_at = (pos, state.watermark.index)
    ratio = policy.media_hysteresis_ratio
    cap, byte_budget = policy.max_inline_images, policy.inline_media_bytes
    if ratio is None:
        return MediaBudget(count_cap=cap, byte_budget=byte_budget, watermark=watermark_at), None, False
    eligible = _eligible_media(run, start, watermark_at)
    new_cap, new_bytes, bound = hysteresis_limits(
        eligible, count_cap=cap, byte_budget=byte_budget, ratio=ratio
    )
    budget = MediaBudget(count_cap=new_cap, byte_budget=new_bytes, watermark=watermark_at, contiguous=True)
    return budget, state.watermark, bound


def _eligible_media(run: Run, start: int, watermark_at: tuple[int, int] | None) -> list[MediaItem]:
    """The media items, newest first, that could be inline: from the newest back to the watermark,
    within the depth limit, up to the first item past a limit."""
    policy = run.policy
    cap, byte_budget = policy.max_inline_images, policy.inline_media_bytes
    eligible: list[MediaItem] = []
    images = total = depth = turns = 0
    newest = len(run.messages) - 1
    for position in range(newest, start - 1, -1):
        base = run.base(position)
        turn = turns
        if base.human:
            turns += 1
        depth += base.tokens
        if not base.media:
            continue
        if bool(policy.image_depth_tokens) and position != newest and depth > policy.image_depth_tokens:
            break
        archived, _ = run.archives_for(position, base, turn, new_allowed=not run.lazy)
        content = run.messages[position].message.content
        archived_tops = {i for i in base.results if result_id(content[i]) in archived}
        stop = False
        for top, _, item in reversed(base.media):
            if top in archived_tops:
                continue
            if watermark_at is not None and (item.position, item.ordinal) < watermark_at:
                stop = True
                break
            eligible.append(item)
            images += item.image
            total += item.wire_bytes
        if stop or (cap and images > cap) or total > byte_budget:
            break
    return eligible


def watermark_after(run: Run, units: list[Unit]) -> MediaWatermark | None:
    """The oldest media item inline in ``units``, or just past the newest one out of line when none
    is; the watermark in force when the units hold no media."""
    kept = [k for u in units for k in u.kept]
    if kept:
        pos, ordinal = min(kept)
    else:
        items = [(e.position, e.ordinal) for u in units for e in u.evictions]
        if not items:
            return run.state.watermark
        pos, ordinal = max(items)
        ordinal += 1
    message_id = run.message_id(pos)
    return MediaWatermark(message_id=message_id, index=ordinal) if message_id else None
