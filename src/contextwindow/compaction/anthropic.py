"""Anthropic's context editing and server-side compaction: the ``context_management`` the guard
sends, what the clearing edits leave of a request (:func:`apply_anthropic_edits`, the one
implementation: the guard plans with it, the local provider serves with it), and whether a body
already holds a ``compaction`` block."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..content import Message, RedactedThinking, Request, Text, Thinking, ToolResult, ToolUse
from .modes import PROVIDER_TRIGGER

__all__ = [
    "ANTHROPIC_CONTEXT_BETA",
    "CLEARED_TOOL_RESULT",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT",
    "COMPACTION_MINIMUM_TRIGGER",
    "COMPACT_BETA",
    "DEFAULT_CLEAR_TRIGGER",
    "DEFAULT_KEEP_TOOL_USES",
    "AppliedEdit",
    "ProviderPlan",
    "anthropic_compaction_management",
    "anthropic_context_management",
    "apply_anthropic_edits",
    "compaction_in",
    "compaction_trigger",
    "holds_compaction",
    "provider_plan",
]

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
    return isinstance(messages, list) and compaction_in(messages)


def compaction_in(messages: Sequence[Any]) -> bool:
    """Whether any of ``messages`` (Anthropic Messages items) holds a ``compaction`` block (the
    guard asks it of the messages it has not read before: :func:`holds_compaction` of the rest was
    asked when they were new)."""
    # A plain loop, ``dict`` tested before ``Mapping``: the generator and ``Mapping`` checks alone
    # cost ~0.3 ms on 2,000 messages.
    for m in messages:
        content = m.get("content") if isinstance(m, (dict, Mapping)) else None
        if isinstance(content, list):
            for b in content:
                if isinstance(b, (dict, Mapping)) and b.get("type") == "compaction":
                    return True
    return False
