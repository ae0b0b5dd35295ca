"""The providers' own compaction as a strategy: what to send, what it leaves, and which costs less.

``compaction="local" | "provider" | "auto"`` (:class:`~contextwindow.guard.GuardOptions`) chooses who
makes a long conversation fit:

- ``"local"``: the engine folds (summary checkpoints, evictions), as it always has;
- ``"provider"``: the request goes out as the agent wrote it, with the provider's own context editing
  attached, when what that editing leaves fits the window (:func:`provider_plan`); when it cannot bring
  the request under the window the engine folds locally instead, so a history already over the window
  never deadlocks;
- ``"auto"``: whichever of the two costs less in dollars for this call (:func:`cheaper`), the prompt
  cache's reads and writes priced by :mod:`contextwindow.cost`.

The wire semantics are the providers' own, as documented:

- Anthropic context editing (https://platform.claude.com/docs/en/build-with-claude/context-editing):
  beta header ``context-management-2025-06-27``; ``context_management.edits`` of
  ``clear_tool_uses_20250919`` (trigger ``input_tokens`` or ``tool_uses``, default 100,000 input
  tokens; ``keep`` the newest 3 tool uses; ``clear_at_least``; ``exclude_tools``;
  ``clear_tool_inputs``) and ``clear_thinking_20251015`` (``keep`` the newest ``thinking_turns``,
  default 1, or ``"all"``). Edits apply server-side before the prompt reaches the model; the client
  keeps its full history; the response reports ``context_management.applied_edits`` with
  ``cleared_input_tokens`` and ``cleared_tool_uses`` / ``cleared_thinking_turns``. A cleared tool
  result invalidates the prompt cache from where it was.
- Anthropic server-side compaction (https://platform.claude.com/docs/en/build-with-claude/compaction):
  beta header ``compact-2026-01-12``, edit ``compact_20260112`` with an ``input_tokens`` trigger of at
  least 50,000 (default 150,000); once the input reaches it the server summarises the conversation,
  the response opens with a ``compaction`` block, and a request carrying the block back is read from
  it on. ``"provider"`` sends it (trigger: :data:`PROVIDER_TRIGGER` of the room) when clearing cannot
  make the request fit and what is there can still be read whole, never below a 50k trigger
  (:func:`compaction_trigger`); from a body that holds a block on (:func:`holds_compaction`) the guard
  sends the conversation as written with the edit attached (its canonical content has no compaction
  block: the conversation is the provider's). ``"auto"`` does not choose it (no cost model yet).
- OpenAI Responses compaction (https://developers.openai.com/api/docs/guides/compaction):
  ``context_management=[{"type": "compaction", "compact_threshold": N}]`` on ``responses.create``: once
  the rendered input crosses N the server compacts it, the output starts with an opaque
  ``compaction`` item (``encrypted_content``) and inference goes on from the pruned context; or
  ``POST /responses/compact``, whose output is the input's user messages and one compaction item.
  The agent appends the output to its input as usual. The docs let the client drop the items before
  the newest compaction item, and it must: OpenAI does not ignore them, it reads and bills them
  (a live probe, pydantic/pydantic-ai#7224). The guard drops them (keeping the leading
  system/developer items, the agent's instructions) and sends :func:`openai_context_management`.
- Chat Completions has no provider compaction: ``"provider"`` there folds locally, and says so once
  on the ``contextwindow.guard`` logger (``"auto"`` folds locally without a word).

:func:`apply_anthropic_edits` is the one implementation of what Anthropic's edits leave: the guard
uses it to know, before sending, whether the provider's edits make the request fit; the local
provider (:mod:`contextwindow.testing.context_management`) uses it to serve them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .content import Message, RedactedThinking, Request, Text, Thinking, ToolResult, ToolUse
from .formats.responses import COMPACTION_ITEM

__all__ = [
    "ANTHROPIC_CONTEXT_BETA",
    "CLEARED_TOOL_RESULT",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT",
    "COMPACTION_MINIMUM_TRIGGER",
    "COMPACTION_MODES",
    "COMPACT_BETA",
    "OPENAI_COMPACTION",
    "AppliedEdit",
    "CompactionMode",
    "ProviderPlan",
    "anthropic_compaction_management",
    "anthropic_context_management",
    "apply_anthropic_edits",
    "auto_choice",
    "cheaper",
    "compaction_trigger",
    "guarded_body",
    "holds_compaction",
    "merged_betas",
    "merged_headers",
    "on_the_wire",
    "openai_choice",
    "openai_context_management",
    "per_call_dollars",
    "provider_plan",
    "since_compaction",
    "with_extras",
]

CompactionMode = Literal["local", "provider", "auto"]
"""Who makes a long conversation fit: the engine, the provider's own editing, or the cheaper."""
COMPACTION_MODES: tuple[CompactionMode, ...] = ("local", "provider", "auto")
"""Every :data:`CompactionMode`."""

ANTHROPIC_CONTEXT_BETA = "context-management-2025-06-27"
"""The ``anthropic-beta`` header Anthropic's context editing (the clearing edits) needs."""
COMPACT_BETA = "compact-2026-01-12"
"""The ``anthropic-beta`` header Anthropic's server-side compaction (:data:`COMPACT`) needs."""
CLEAR_TOOL_USES = "clear_tool_uses_20250919"
"""The edit that clears old tool results (and optionally their calls' inputs)."""
CLEAR_THINKING = "clear_thinking_20251015"
"""The edit that clears thinking blocks of older assistant turns."""
COMPACT = "compact_20260112"
"""The edit that has the server summarise older context into a ``compaction`` block."""
OPENAI_COMPACTION = "compaction"
"""The one ``context_management`` entry type OpenAI's Responses API takes, and its output item's type."""
COMPACTION_MINIMUM_TRIGGER = 50_000
"""The smallest ``input_tokens`` trigger ``compact_20260112`` accepts (the docs' parameter table)."""
DEFAULT_CLEAR_TRIGGER = 100_000
DEFAULT_KEEP_TOOL_USES = 3
CLEARED_TOOL_RESULT = "[Tool result cleared to save context]"
"""What a cleared tool result reads (the docs say only "placeholder text"; the exact words are ours)."""


@dataclass(frozen=True, slots=True)
class AppliedEdit:
    """One edit the provider applied, as ``context_management.applied_edits`` reports it."""

    type: str
    cleared_input_tokens: int
    cleared: int
    """Tool uses (``clear_tool_uses_20250919``) or thinking turns (``clear_thinking_20251015``)."""

    def wire(self) -> dict[str, Any]:
        """The edit as the response carries it."""
        unit = "cleared_tool_uses" if self.type == CLEAR_TOOL_USES else "cleared_thinking_turns"
        return {"type": self.type, "cleared_input_tokens": self.cleared_input_tokens, unit: self.cleared}


def anthropic_context_management(trigger: int, *, keep: int = DEFAULT_KEEP_TOOL_USES) -> dict[str, Any]:
    """The ``context_management`` the guard sends on the Anthropic wire: clear tool results once the
    input reaches ``trigger`` tokens, keeping the newest ``keep`` tool uses, and only when at least a
    tenth of the trigger is freed (a cleared result costs a cache write from there on: clearing a
    little at a time would pay it on every call)."""
    return {
        "edits": [
            {
                "type": CLEAR_TOOL_USES,
                "trigger": {"type": "input_tokens", "value": trigger},
                "keep": {"type": "tool_uses", "value": keep},
                "clear_at_least": {"type": "input_tokens", "value": max(1, trigger // 10)},
            }
        ]
    }


def apply_anthropic_edits(
    request: Request, edits: Sequence[Mapping[str, Any]], count: Callable[[Request], int]
) -> tuple[Request, tuple[AppliedEdit, ...]]:
    """What Anthropic's ``edits`` (already valid) leave of ``request``, in order, and the edits that
    applied; ``count`` is the input count of a request. ``compact_20260112`` is not applied here."""
    applied: list[AppliedEdit] = []
    for edit in edits:
        kind = edit.get("type")
        if kind == CLEAR_TOOL_USES:
            request, done = _clear_tool_uses(request, edit, count)
        elif kind == CLEAR_THINKING:
            request, done = _clear_thinking(request, edit, count)
        else:
            continue
        if done is not None:
            applied.append(done)
    return request, tuple(applied)


def _tool_uses(request: Request) -> list[ToolUse]:
    return [b for m in request.messages if m.role == "assistant" for b in m.content if isinstance(b, ToolUse)]


def _clear_tool_uses(
    request: Request, edit: Mapping[str, Any], count: Callable[[Request], int]
) -> tuple[Request, AppliedEdit | None]:
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": DEFAULT_CLEAR_TRIGGER}
    before = count(request)
    uses = _tool_uses(request)
    reached = len(uses) if trigger["type"] == "tool_uses" else before
    if reached < int(trigger["value"]):
        return request, None
    keep = int((edit.get("keep") or {}).get("value", DEFAULT_KEEP_TOOL_USES))
    excluded = set(edit.get("exclude_tools") or ())
    inputs = edit.get("clear_tool_inputs") or False
    older = uses[: max(0, len(uses) - keep)]
    clear = {u.id: u for u in older if u.name not in excluded}
    clear_input = {
        i for i, u in clear.items() if inputs is True or (isinstance(inputs, list) and u.name in inputs)
    }
    cleared: set[str] = set()

    def edit_block(block: Any) -> Any:
        if (
            isinstance(block, ToolResult)
            and block.tool_use_id in clear
            and block.content != CLEARED_TOOL_RESULT
        ):
            cleared.add(block.tool_use_id)
            return replace(block, content=CLEARED_TOOL_RESULT)
        if isinstance(block, ToolUse) and block.id in clear_input and block.input:
            cleared.add(block.id)
            return replace(block, input={})
        return block

    messages = tuple(replace(m, content=tuple(edit_block(b) for b in m.content)) for m in request.messages)
    if not cleared:
        return request, None
    edited = replace(request, messages=messages)
    freed = before - count(edited)
    least = edit.get("clear_at_least")
    if least is not None and freed < int(least["value"]):
        return request, None  # "context will only be modified if at least this many tokens can be removed"
    return edited, AppliedEdit(type=CLEAR_TOOL_USES, cleared_input_tokens=freed, cleared=len(cleared))


def _clear_thinking(
    request: Request, edit: Mapping[str, Any], count: Callable[[Request], int]
) -> tuple[Request, AppliedEdit | None]:
    keep = edit.get("keep", {"type": "thinking_turns", "value": 1})
    if keep == "all" or (isinstance(keep, Mapping) and keep.get("type") == "all"):
        return request, None
    kept = int(keep["value"])
    thinking = [
        i
        for i, m in enumerate(request.messages)
        if m.role == "assistant" and any(isinstance(b, Thinking | RedactedThinking) for b in m.content)
    ]
    older = set(thinking[: max(0, len(thinking) - kept)])
    if not older:
        return request, None
    before = count(request)

    def cleared(i: int, m: Message) -> Message:
        if i not in older:
            return m
        rest = tuple(b for b in m.content if not isinstance(b, Thinking | RedactedThinking))
        return replace(m, content=rest or (Text(text="[thinking cleared]"),))

    edited = replace(request, messages=tuple(cleared(i, m) for i, m in enumerate(request.messages)))
    return edited, AppliedEdit(
        type=CLEAR_THINKING, cleared_input_tokens=before - count(edited), cleared=len(older)
    )


@dataclass(frozen=True, slots=True)
class ProviderPlan:
    """What sending a request with the provider's own editing would do: the fields to add to the
    body, what the provider would count after its edits, and whether that fits."""

    extra_body: Mapping[str, Any]
    extra_headers: Mapping[str, str]
    input_tokens: int
    """The input the provider counts after its edits."""
    fits: bool
    applied: tuple[AppliedEdit, ...] = ()


def provider_plan(
    request: Request, *, trigger: int, limit: int, count: Callable[[Request], int]
) -> ProviderPlan:
    """The provider-side plan for ``request`` on the Anthropic wire: tool results cleared from
    ``trigger`` input tokens; it fits when what the edits leave is at most ``limit`` (the window less
    the output reserve)."""
    management = anthropic_context_management(trigger)
    edited, applied = apply_anthropic_edits(request, management["edits"], count)
    left = count(edited)
    return ProviderPlan(
        extra_body={"context_management": management},
        extra_headers={"anthropic-beta": ANTHROPIC_CONTEXT_BETA},
        input_tokens=left,
        fits=left <= limit,
        applied=applied,
    )


def cheaper(local_dollars: float, provider_dollars: float) -> Literal["local", "provider"]:
    """``"auto"``'s choice: the provider's editing when it costs less than folding locally (ties go
    to local folding, which keeps the prompt cache's prefix the engine chose)."""
    return "provider" if provider_dollars < local_dollars else "local"


PROVIDER_TRIGGER = 0.8
"""``"provider"`` asks the provider to clear tool results from this share of the room for input."""
ESTIMATE_MARGIN = 0.95
"""What the provider's edits leave must fit in this share of the room: the guard's estimate, not the
provider's count, decides before sending."""
SUMMARY_TOKENS = 1_024
"""What ``"auto"`` assumes a local fold's summary costs in output."""


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
            from .engine.observe import warn_once  # the engine's log helpers, imported when used

            warn_once(
                _log,
                f"compaction='provider': the {wire} wire has no provider compaction (only Anthropic "
                "Messages and OpenAI Responses have one): folded locally",
            )
        return None
    plan = provider_plan(
        request, trigger=int(room * PROVIDER_TRIGGER), limit=int(room * ESTIMATE_MARGIN), count=count
    )
    if not plan.fits or not plan.applied:
        # Nothing for the provider to clear, or clearing cannot make it fit: Anthropic's compaction
        # where the window takes its trigger and the pass can read what is there, else folded locally.
        whole = count(request)
        trigger = compaction_trigger(room)
        if mode != "provider" or trigger is None or not trigger <= whole <= int(room * ESTIMATE_MARGIN):
            return None
        return with_extras(body, anthropic_compaction_management(trigger), COMPACT_BETA)
    if mode == "auto":
        whole = count(request)
        if auto_choice(request, plan, whole=whole, room=room, count=count) == "local":
            return None
    return with_extras(body, plan.extra_body["context_management"], ANTHROPIC_CONTEXT_BETA)


def with_extras(body: Mapping[str, Any], management: Mapping[str, Any], beta: str) -> dict[str, Any]:
    """``body`` with Anthropic's ``context_management`` in its ``extra_body`` and ``beta`` in its
    ``anthropic-beta`` header (the agent's own extras and betas kept)."""
    extra_body = {**dict(body.get("extra_body") or {}), "context_management": dict(management)}
    headers = dict(body.get("extra_headers") or {})
    headers["anthropic-beta"] = merged_betas(headers.get("anthropic-beta"), beta)
    return {**body, "extra_body": extra_body, "extra_headers": headers}


def compaction_trigger(room: int) -> int | None:
    """The ``compact_20260112`` trigger the guard sends for ``room`` (:data:`PROVIDER_TRIGGER` of it),
    or ``None`` where that is under the API's minimum (a window under about 62,500 tokens of room)."""
    trigger = int(room * PROVIDER_TRIGGER)
    return trigger if trigger >= COMPACTION_MINIMUM_TRIGGER else None


def anthropic_compaction_management(trigger: int) -> dict[str, Any]:
    """The ``context_management`` asking Anthropic to compact once the input reaches ``trigger``."""
    return {"edits": [{"type": COMPACT, "trigger": {"type": "input_tokens", "value": trigger}}]}


def holds_compaction(body: Mapping[str, Any]) -> bool:
    """Whether an Anthropic Messages body carries a ``compaction`` block back: the conversation is
    the provider's from there (it drops what is before the block), and the guard sends it as written
    (with the compaction edit under ``"provider"``/``"auto"``, so the provider compacts again)."""
    messages = body.get("messages")
    return isinstance(messages, list) and any(
        isinstance(b, Mapping) and b.get("type") == "compaction"
        for m in messages
        if isinstance(m, Mapping) and isinstance(m.get("content"), list)
        for b in m["content"]
    )


def openai_context_management(threshold: int) -> list[dict[str, Any]]:
    """The ``context_management`` the guard sends on the Responses wire: compact once the rendered
    input crosses ``threshold`` tokens."""
    return [{"type": OPENAI_COMPACTION, "compact_threshold": threshold}]


def _head(items: Sequence[Any]) -> int:
    """How many leading items of a Responses ``input`` are system/developer messages (the agent's
    instructions)."""
    n = 0
    for item in items:
        if not (
            isinstance(item, Mapping)
            and item.get("type", "message") == "message"
            and item.get("role") in ("system", "developer")
        ):
            break
        n += 1
    return n


def since_compaction(request: Request) -> Request:
    """``request`` from its newest ``compaction`` item on (all of it when it has none): what the
    provider needs of it (see the module docstring)."""
    marks = [i for i, m in enumerate(request.messages) if COMPACTION_ITEM in m.metadata]
    return replace(request, messages=request.messages[marks[-1] :]) if marks else request


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


def _is_compaction(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == OPENAI_COMPACTION


def merged_betas(given: str | None, *betas: str) -> str:
    """An ``anthropic-beta`` header value: ``given``'s betas, then each of ``betas`` it lacks."""
    names = [b.strip() for b in (given or "").split(",") if b.strip()]
    names.extend(b for b in betas if b not in names)
    return ",".join(names)


def merged_headers(agent: Mapping[str, str], added: Mapping[str, str]) -> dict[str, str]:
    """The agent's own headers with the ones a provider body adds (:func:`on_the_wire`): the added
    ``anthropic-beta`` betas join the agent's (a header's name read in any case)."""
    out = dict(agent)
    for name, value in added.items():
        same = [k for k in out if k.lower() == name.lower()]
        if name.lower() == "anthropic-beta":
            value = merged_betas(",".join(out[k] for k in same), *value.split(","))
        for k in same:
            del out[k]
        out[name] = value
    return out


_log = logging.getLogger("contextwindow.guard")


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
    from . import cost
    from .engine.folding.fold_step import fold_tail_share
    from .engine.settings import EngineSettings
    from .usage.tracker import Usage

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


def on_the_wire(body: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A body :func:`guarded_body` made, as an HTTP client sends it: ``extra_body`` merged into the
    JSON and ``extra_headers`` apart (what the SDKs do with them). For senders that are not an SDK
    (the proxy's upstream, an adapter's raw call)."""
    json_body = {k: v for k, v in body.items() if k not in ("extra_body", "extra_headers")}
    json_body.update(body.get("extra_body") or {})
    return json_body, {str(k): str(v) for k, v in (body.get("extra_headers") or {}).items()}
