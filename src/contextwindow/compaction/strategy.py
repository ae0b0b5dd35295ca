"""The body the guard sends under ``compaction="provider"`` or ``"auto"`` (:func:`guarded_body`), or
``None`` to fold locally."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..content import Request
from .anthropic import (
    ANTHROPIC_CONTEXT_BETA,
    COMPACT_BETA,
    anthropic_compaction_management,
    compaction_trigger,
    provider_plan,
)
from .cost_model import auto_choice, openai_choice
from .modes import ESTIMATE_MARGIN, PROVIDER_TRIGGER, CompactionMode
from .openai import _head, _is_compaction, openai_context_management, since_compaction
from .wire import with_extras

__all__ = [
    "guarded_body",
]


def guarded_body(
    body: Mapping[str, Any],
    request: Request,
    *,
    mode: CompactionMode,
    wire: str,
    room: int,
    count: Callable[[Request], int],
) -> dict[str, Any] | None:
    """The body the guard sends with the provider's own compaction attached, or ``None`` to fold
    locally: ``mode`` is ``"local"``; the wire has no provider compaction (Chat Completions: a warning
    once for ``"provider"``); there is nothing for the provider to do yet (the guard's own path sends
    a request that fits as it is, and keeps the ledger); what the provider would have to read cannot
    fit ``room`` (the window less the output reserve); or (``"auto"``) folding locally costs no more
    (:func:`auto_choice`)."""
    if mode == "local":
        return None
    if wire == "openai-responses":
        return _responses_body(body, request, mode=mode, room=room, count=count)
    if wire != "anthropic":
        if mode == "provider":
            from ..engine.observe import warn_once  # the engine's log helpers, imported when used

            warn_once(
                _log,
                f"compaction='provider': the {wire} wire has no provider compaction (only Anthropic "
                "Messages and OpenAI Responses have one): folded locally",
            )
        return None
    return _anthropic_body(body, request, mode=mode, room=room, count=count)


def _anthropic_body(
    body: Mapping[str, Any],
    request: Request,
    *,
    mode: CompactionMode,
    room: int,
    count: Callable[[Request], int],
) -> dict[str, Any] | None:
    """:func:`guarded_body` on the Anthropic wire. ``"provider"``: the clearing where it applies and
    makes the request fit, else Anthropic's compaction where the window takes its trigger and the
    pass can read what is there, else ``None``. ``"auto"``: of those that can serve this call and a
    local fold, the one :func:`~.cost_model.auto_choice` prices cheapest."""
    plan = provider_plan(
        request, trigger=int(room * PROVIDER_TRIGGER), limit=int(room * ESTIMATE_MARGIN), count=count
    )
    clearing = plan.fits and bool(plan.applied)
    if mode == "provider" and clearing:
        return with_extras(body, plan.extra_body["context_management"], ANTHROPIC_CONTEXT_BETA)
    # Where no edit applied the plan's count is the request's own: the whole request is not priced again.
    whole = count(request) if plan.applied else plan.input_tokens
    trigger = compaction_trigger(room)
    compactable = trigger is not None and trigger <= whole <= int(room * ESTIMATE_MARGIN)
    if mode == "provider":
        choice = "compaction" if compactable else "local"
    elif clearing or compactable:
        choice = auto_choice(
            request, plan if clearing else None, whole=whole, room=room, count=count, compaction=compactable
        )
    else:
        choice = "local"
    if choice == "provider":
        return with_extras(body, plan.extra_body["context_management"], ANTHROPIC_CONTEXT_BETA)
    if choice == "compaction" and trigger is not None:
        return with_extras(body, anthropic_compaction_management(trigger), COMPACT_BETA)
    return None


def _responses_body(
    body: Mapping[str, Any],
    request: Request,
    *,
    mode: CompactionMode,
    room: int,
    count: Callable[[Request], int],
) -> dict[str, Any] | None:
    """:func:`guarded_body` on the Responses wire: the items before the newest compaction item
    dropped (the leading instructions kept), and ``context_management`` from
    :data:`PROVIDER_TRIGGER` of the room. ``None`` when nothing is dropped and the input is under
    the threshold (nothing for the provider to do), or when what is left cannot fit the room (the
    compaction pass reads it all: folded locally instead)."""
    items = body.get("input")
    if not isinstance(items, list):
        return None
    newest = max((i for i, it in enumerate(items) if _is_compaction(it)), default=None)
    head = _head(items)
    kept = items if newest is None else [*items[:head], *items[newest:]]
    left = count(since_compaction(request))
    threshold = int(room * PROVIDER_TRIGGER)
    if left > int(room * ESTIMATE_MARGIN) or (left < threshold and len(kept) == len(items)):
        return None
    if mode == "auto" and openai_choice(request, left=left, room=room, count=count) == "local":
        return None
    return {**body, "input": kept, "context_management": openai_context_management(threshold)}


_log = logging.getLogger("contextwindow.guard")
