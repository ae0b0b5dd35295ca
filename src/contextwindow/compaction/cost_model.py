"""``"auto"``'s cost model: the dollars per agent call of folding locally and of each provider
strategy once a conversation is full, and the cheaper of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Literal

from ..content import Request
from .anthropic import ProviderPlan
from .modes import PROVIDER_TRIGGER

__all__ = [
    "OPENAI_COMPACTED_SHARE",
    "SUMMARY_TOKENS",
    "auto_choice",
    "cheaper",
    "openai_choice",
    "per_call_dollars",
]


def cheaper(local_dollars: float, provider_dollars: float) -> Literal["local", "provider"]:
    """``"auto"``'s choice: the provider's editing when it costs less than folding locally (ties go
    to local folding, which keeps the prompt cache's prefix the engine chose)."""
    return "provider" if provider_dollars < local_dollars else "local"


SUMMARY_TOKENS = 1_024
"""What ``"auto"`` assumes a local fold's summary costs in output."""


def auto_choice(
    request: Request, plan: ProviderPlan, *, whole: int, room: int, count: Callable[[Request], int]
) -> Literal["local", "provider"]:
    """``"auto"`` on the Anthropic wire: the provider's clearing or a local fold, whichever costs
    less per call (:func:`per_call_dollars`; without prices, local). ``whole`` is the request's count
    before the edits."""
    head, growth = _shape(request, count)
    dollars = per_call_dollars(
        request.model,
        wire="anthropic",
        room=room,
        head=head,
        growth=growth,
        whole=whole,
        cleared=plan.input_tokens,
    )
    if dollars is None:
        return "local"
    return cheaper(dollars["local"], dollars["provider"])


def openai_choice(
    request: Request, *, left: int, room: int, count: Callable[[Request], int]
) -> Literal["local", "provider"]:
    """``"auto"`` on the Responses wire: OpenAI's compaction or a local fold, whichever costs less per
    call (:func:`per_call_dollars`; without prices, local). ``left`` is the count of what the provider
    reads."""
    head, growth = _shape(request, count)
    dollars = per_call_dollars(
        request.model, wire="openai-responses", room=room, head=head, growth=growth, whole=left
    )
    if dollars is None:
        return "local"
    return cheaper(dollars["local"], dollars["provider"])


def _shape(request: Request, count: Callable[[Request], int]) -> tuple[int, int]:
    """The request's system prompt and tools (its head), and its growth per call, taken as its newest
    message."""
    head = count(replace(request, messages=()))
    return head, max(1, count(replace(request, messages=request.messages[-1:])) - head)


OPENAI_COMPACTED_SHARE = 0.1
"""What an OpenAI compaction item costs as input, as a share of the threshold it was made at (the
local provider's compaction summary is written to this target)."""


def per_call_dollars(
    model: str | None,
    *,
    wire: str,
    room: int,
    head: int,
    growth: int,
    whole: int,
    cleared: int | None = None,
    output: int = 0,
) -> dict[str, float] | None:
    """The dollars per agent call of each strategy once a conversation is full, at ``model``'s prices
    with cache reads and writes (:mod:`contextwindow.cost`); ``None`` without prices. ``head``: the
    system prompt and tools; ``growth``: what each call adds; ``whole``: the request's count now;
    ``cleared``: what Anthropic's clearing leaves of it (Anthropic only); ``output``: the agent's own
    output per call (the same for both: it changes no choice, only the figures).

    - **local** (the engine's fold, as :func:`~contextwindow.engine.folding.fold_step.fold_tail_share`
      sizes it): the summariser reads the span it folds (not cached: its request is a transcript of
      its own) and writes :data:`SUMMARY_TOKENS`; the folded request (the kept tail and the summary)
      is written to the cache; the next fold is due when the growth has filled the room again;
      between folds each call reads its prefix and writes its growth.
    - **provider**, Anthropic clearing: the agent sends its whole history every call, so past the
      trigger the edits apply on every call and each new tool use moves the clearing one result on;
      Anthropic reads the cache only at a breakpoint it wrote before, so every call reads the system
      prompt and tools and writes the rest (measured on the real sessions: 4–7% of the input read
      from the cache, ``benchmarks/provider_compaction.py``).
    - **provider**, OpenAI compaction: once the input crosses the threshold the server reads it (its
      prefix from the cache: the call before sent it) and writes a compaction item
      (:data:`OPENAI_COMPACTED_SHARE` of the threshold), and the reply is made from the instructions,
      the item and the newest items (not cached yet); the next compaction is due when the growth has
      filled it back to the threshold, each call between reading its prefix from the cache."""
    from .. import cost
    from ..engine.folding.fold_step import fold_tail_share
    from ..engine.settings import EngineSettings
    from ..usage.tracker import Usage

    if model is None or not cost.available():
        return None

    def dollars(*usages: Usage) -> float | None:
        priced = cost.price_all(usages, model)
        return None if priced is None else float(priced.total)

    kept = int(room * fold_tail_share(EngineSettings().cover_tail_ratio, room, growth)) + SUMMARY_TOKENS
    span = max(1, (room - kept) // growth)
    fold = dollars(
        Usage(fresh_input=max(0, whole - kept), output=SUMMARY_TOKENS),
        Usage(cache_read=head, cache_write=max(0, kept - head)),
    )
    between = dollars(Usage(cache_read=(kept + room) // 2, cache_write=growth, output=output))
    if fold is None or between is None:
        return None
    out = {"local": fold / span + between}
    if wire == "anthropic":
        left = whole if cleared is None else cleared
        provider = dollars(Usage(cache_read=min(head, left), cache_write=max(0, left - head), output=output))
    else:
        threshold = int(room * PROVIDER_TRIGGER)
        item = int(threshold * OPENAI_COMPACTED_SHARE)
        calls = max(1, (threshold - head - item) // growth)
        # The compaction pass reads what crossed the threshold (all but the newest growth cached).
        compacted = dollars(
            Usage(cache_read=threshold, fresh_input=growth, output=item),
            Usage(cache_read=head, fresh_input=item + growth),
        )
        grown = dollars(Usage(cache_read=(head + item + threshold) // 2, fresh_input=growth, output=output))
        provider = None if compacted is None or grown is None else compacted / calls + grown
    if provider is None:
        return None
    out["provider"] = provider
    return out
