"""How much a fold keeps: a step large enough to pay for the cache write it forces.

A fold changes the start of the request, so the next request writes all of it to the provider's
prompt cache again instead of reading it: Anthropic bills a write at 1.25× the input price and a
read at 0.1× (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#pricing), so the
forced write of the kept tail costs what reading that tail from the cache costs for 12.5 calls;
OpenAI's automatic cache has no write premium and reads at a tenth or half of the price
(https://platform.openai.com/docs/guides/prompt-caching), 2–10 calls' worth. A fold that frees room
for only a call or two (one tool result: the covering fold's fixed 90% tail on a 16k window) pays that
write again every call or two, and its summariser call with it — fold thrash. So the room a fold
frees is sized by how fast the requests grow (:meth:`~contextwindow.engine.folding.fold_trigger.ProactiveTrigger.growth`):
at least :data:`FOLD_SPAN_CALLS` calls of it, so the write is paid at most once per that many calls
and the requests between folds only grow, each reading the one before it from the cache. The tail
never drops under :data:`MIN_TAIL_SHARE` of the budget: past that, keeping the model's recent
context is worth more than the cache saves, and the fold keeps that share however fast requests grow.
"""

from __future__ import annotations

__all__ = ["FOLD_SPAN_CALLS", "MIN_TAIL_SHARE", "fold_tail_share"]

FOLD_SPAN_CALLS = 10.0
"""Calls a fold's freed room should last: the issue's bound on folds (at most 10 per 100 calls once
full). The forced write of the kept tail is worth 12.5 calls of cache reads on Anthropic (1.25 / 0.1)
and 2–10 on OpenAI; a longer span than 10 keeps less of the window for every call to save a write
that, at 10 calls, is already paid for on OpenAI and for the most part on Anthropic (on 40 real
sessions at 32k: 72.7% of the window used once full at 10, 71.8% at 12.5, 8.8 and 7.8 folds per 100
calls)."""
MIN_TAIL_SHARE = 0.65
"""The smallest share of the budget a fold keeps, whatever the growth (unless the settings' own
``cover_tail_ratio`` is smaller)."""


def fold_tail_share(ratio: float, budget: int, growth: float | None) -> float:
    """The share of the input ``budget`` a fold keeps: the configured ``ratio``
    (``EngineSettings.cover_tail_ratio``), lowered so the room it frees lasts
    :data:`FOLD_SPAN_CALLS` calls of ``growth`` tokens each (the mean growth per call; ``None``: not
    known yet, the ratio stands), but never under :data:`MIN_TAIL_SHARE` (nor over ``ratio``)."""
    if growth is None or growth <= 0 or budget <= 0:
        return ratio
    wanted = 1 - FOLD_SPAN_CALLS * growth / budget
    return min(ratio, max(MIN_TAIL_SHARE, wanted))
