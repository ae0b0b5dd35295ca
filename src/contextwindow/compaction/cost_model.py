"""``"auto"``'s cost model: the dollars per agent call of folding locally and of each provider
strategy once a conversation is full, and the cheaper of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Literal

from ..content import Request
from .anthropic import ProviderPlan, compaction_trigger
from .modes import PROVIDER_TRIGGER

__all__ = [
    "ANTHROPIC_COMPACTED_SHARE",
    "OPENAI_COMPACTED_SHARE",
    "SUMMARY_TOKENS",
    "Choice",
    "auto_choice",
    "cheaper",
    "cheapest",
    "openai_choice",
    "per_call_dollars",
]


Choice = Literal["local", "provider", "compaction"]
"""What ``"auto"`` sends: a local fold, the provider's clearing (Anthropic) or compaction (OpenAI), or
Anthropic's server-side compaction (``compact_20260112``)."""


def cheaper(local_dollars: float, provider_dollars: float) -> Literal["local", "provider"]:
    """``"auto"``'s choice: the provider's editing when it costs less than folding locally (ties go
    to local folding, which keeps the prompt cache's prefix the engine chose)."""
    return "provider" if provider_dollars < local_dollars else "local"


def cheapest(dollars: Mapping[str, float]) -> Choice:
    """The strategy of ``dollars`` (per call, keyed by :data:`Choice`) that costs least; ties go to
    local folding, then to the provider's clearing."""
    best: Choice = "local"
    for name in ("provider", "compaction"):
        if name in dollars and dollars[name] < dollars.get(best, float("inf")):
            best = name
    return best


SUMMARY_TOKENS = 1_024
"""What ``"auto"`` assumes a local fold's summary costs in output."""


def auto_choice(
    request: Request,
    plan: ProviderPlan | None,
    *,
    whole: int,
    room: int,
    count: Callable[[Request], int],
    compaction: bool = False,
) -> Choice:
    """``"auto"`` on the Anthropic wire: a local fold, the provider's clearing (``plan``; ``None``
    where clearing cannot make the request fit) or, where ``compaction`` (the window takes the
    ``compact_20260112`` trigger and the pass can read the request), Anthropic's server-side
    compaction, whichever costs least per call (:func:`per_call_dollars`; without prices, local).
    ``whole`` is the request's count before the edits."""
    head, growth = _shape(request, count)
    dollars = per_call_dollars(
        request.model,
        wire="anthropic",
        room=room,
        head=head,
        growth=growth,
        whole=whole,
        cleared=None if plan is None else plan.input_tokens,
    )
    if dollars is None:
        return "local"
    offered = {k: v for k, v in dollars.items() if k == "local" or (k == "provider" and plan is not None)}
    if compaction and "compaction" in dollars:
        offered["compaction"] = dollars["compaction"]
    return cheapest(offered)


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


ANTHROPIC_COMPACTED_SHARE = 0.05
"""What Anthropic's ``compaction`` block costs as input, as a share of the input it closes (the docs
give no size; the local provider's summary is written to this target)."""


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
    output per call (the same for every strategy: it changes no choice, only the figures).

    Keys: ``"local"``, ``"provider"`` (Anthropic's clearing, OpenAI's compaction) and, on the
    Anthropic wire where the room takes its trigger (:func:`~.anthropic.compaction_trigger`),
    ``"compaction"`` (``compact_20260112``).

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
    - **provider**, OpenAI compaction, and **compaction**, Anthropic's: once the input crosses the
      trigger the server's compaction pass reads it (billed as input, its prefix from the cache: the
      call before sent it) and writes a summary as output (:data:`OPENAI_COMPACTED_SHARE`,
      :data:`ANTHROPIC_COMPACTED_SHARE` of the trigger), and the reply is made from the head, the
      summary and the newest message (not cached yet); the next compaction is due when the growth
      has filled it back to the trigger, each call between reading its prefix from the cache and
      paying for its growth (a cache write on Anthropic, fresh input on OpenAI)."""
    from .. import cost
    from ..usage.tracker import Usage

    if model is None or not cost.available():
        return None

    def dollars(*usages: Usage) -> float | None:
        priced = cost.price_all(usages, model)
        return None if priced is None else float(priced.total)

    out = {"local": _local(dollars, room=room, head=head, growth=growth, whole=whole, output=output)}
    if wire == "anthropic":
        left = whole if cleared is None else cleared
        out["provider"] = dollars(
            Usage(cache_read=min(head, left), cache_write=max(0, left - head), output=output)
        )
        trigger = compaction_trigger(room)
        if trigger is not None:
            out["compaction"] = _compacting(
                dollars,
                trigger=trigger,
                share=ANTHROPIC_COMPACTED_SHARE,
                head=head,
                growth=growth,
                output=output,
                written=True,
            )
    else:
        out["provider"] = _compacting(
            dollars,
            trigger=int(room * PROVIDER_TRIGGER),
            share=OPENAI_COMPACTED_SHARE,
            head=head,
            growth=growth,
            output=output,
            written=False,
        )
    if any(v is None for v in out.values()):
        return None
    return {k: float(v) for k, v in out.items() if v is not None}


Priced = Callable[..., "float | None"]


def _local(dollars: Priced, *, room: int, head: int, growth: int, whole: int, output: int) -> float | None:
    """A local fold's share of each call, and the call itself (:func:`per_call_dollars`)."""
    from ..engine.folding.fold_step import fold_tail_share
    from ..engine.settings import EngineSettings
    from ..usage.tracker import Usage

    kept = int(room * fold_tail_share(EngineSettings().cover_tail_ratio, room, growth)) + SUMMARY_TOKENS
    span = max(1, (room - kept) // growth)
    fold = dollars(
        Usage(fresh_input=max(0, whole - kept), output=SUMMARY_TOKENS),
        Usage(cache_read=head, cache_write=max(0, kept - head)),
    )
    between = dollars(Usage(cache_read=(kept + room) // 2, cache_write=growth, output=output))
    return None if fold is None or between is None else fold / span + between


def _compacting(
    dollars: Priced, *, trigger: int, share: float, head: int, growth: int, output: int, written: bool
) -> float | None:
    """A provider compaction's share of each call, and the call itself (:func:`per_call_dollars`);
    ``written``: each call's growth is a cache write (Anthropic's breakpoints), else fresh input
    (OpenAI's automatic prefix cache)."""
    from ..usage.tracker import Usage

    summary = int(trigger * share)
    calls = max(1, (trigger - head - summary) // growth)
    new = {"cache_write": growth} if written else {"fresh_input": growth}
    # The compaction pass reads what crossed the trigger (its prefix cached by the call before).
    compacted = dollars(
        Usage(cache_read=trigger, output=summary, **new),
        Usage(cache_read=head, fresh_input=summary + growth),
    )
    grown = dollars(Usage(cache_read=(head + summary + trigger) // 2, output=output, **new))
    return None if compacted is None or grown is None else compacted / calls + grown
