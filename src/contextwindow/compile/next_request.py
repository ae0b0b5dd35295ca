"""``compile(state, profile, policy)``: the next request for a session's state. A pure function.

In four steps: the budget and the head (:mod:`.head`); the tail walked newest first, one unit at a
time, each fitted to the room left (:mod:`.walk`, :mod:`.fit_unit`); the media window for the next
compile (:mod:`.watermark`); the result assembled with every decision and its ids (:mod:`.assemble`).

Nothing here reads a byte of an attachment: ``CompiledRequest.inline_attachments`` lists the only
refs whose bytes rendering may load. A :class:`~contextwindow.compile.CompileCache` memoises the
per-message work across calls; it never changes a result.
"""

from __future__ import annotations

import math

from ..content import Message, Text
from ..errors import InvalidInput
from ..models import ModelProfile
from ._render import Pricer
from ._run import Run
from .assemble import OPENING, Opening, assemble
from .cache import CompileCache, make_estimator
from .head import measure_head
from .policy import Policy
from .state import CompiledRequest, CompileState
from .walk import walk
from .watermark import media_budget, watermark_after

__all__ = ["compile"]


def compile(
    state: CompileState,
    profile: ModelProfile,
    policy: Policy | None = None,
    *,
    estimator: Pricer | None = None,
    cache: CompileCache | None = None,
) -> CompiledRequest:
    """The next request for ``state`` on ``profile`` under ``policy`` (default ``Policy()``).

    Deterministic: the same inputs give the same request, with or without ``cache``. Raises
    :class:`~contextwindow.errors.OverBudget` (with the makeup) when the head or the newest message
    does not fit, or the byte wall is crossed; :class:`~contextwindow.errors.InvalidInput` for a
    multiplier that is not a finite number > 0 or a checkpoint not in the session.
    """
    policy = policy or Policy()
    multiplier = state.multiplier
    if (
        isinstance(multiplier, bool)
        or not isinstance(multiplier, int | float)
        or not (math.isfinite(multiplier) and multiplier > 0)
    ):
        raise InvalidInput(f"must be a finite number > 0, got {multiplier!r}", path="state.multiplier")
    if estimator is None:
        estimator = cache.estimator(profile, multiplier) if cache else make_estimator(profile, multiplier)
    run = Run(state, profile, policy, estimator, cache or CompileCache(), bind=cache is not None)
    head = measure_head(run)
    # With no summary to lead, a tail that opens on the assistant gets a short user message first:
    # the walk leaves room for it (``Run.opening_for``).
    message = Message(role="user", content=(Text(text=OPENING),))
    opening = Opening(message=message, tokens=run.est.message(message))
    run.opening_room = opening.tokens if head.summary is None else 0
    media, _, bound = media_budget(run, head.bounds.floor)
    units = walk(run, head.bounds, media, head.makeup)
    watermark = state.watermark
    moved = False
    if bound:
        watermark = watermark_after(run, units)
        moved = watermark != state.watermark
    return assemble(run, head, units, opening=opening, watermark=watermark, moved=moved)
