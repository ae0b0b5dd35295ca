"""The local provider's ``context_management``: refused as the APIs refuse it, else applied.

Anthropic (https://platform.claude.com/docs/en/build-with-claude/context-editing and
https://platform.claude.com/docs/en/build-with-claude/compaction):

- the clearing edits need the beta header ``context-management-2025-06-27``, ``compact_20260112``
  needs ``compact-2026-01-12`` ("Include the beta header ... in all API requests to use this
  feature"); without it the field is an extra input and the call is refused;
- ``edits`` is a list of the three documented types; any other ``type`` is refused;
- triggers are ``input_tokens`` or ``tool_uses`` (clearing) and only ``input_tokens`` of at least
  50,000 (compaction); ``keep`` is ``tool_uses`` (clearing) or ``thinking_turns`` / ``"all"``
  (thinking); ``clear_at_least`` is ``input_tokens``; values are whole numbers;
- ``clear_thinking_20251015`` combined with other edits must come first.

The refusal texts follow the API's validation style (``field: problem``); their exact words are
ours. What applies is :func:`contextwindow.compaction.apply_anthropic_edits`; ``compact_20260112``
is checked here and served over HTTP by :mod:`.anthropic_compaction` (its trigger, ``pause_after_compaction``
and ``instructions``; the ``compaction`` blocks sent back).

OpenAI (https://developers.openai.com/api/docs/guides/context-management): ``context_management``
on ``/responses`` is a list of ``{"type": "compaction", "compact_threshold": N}``; another type is
refused (``invalid_value``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..compaction import (
    ANTHROPIC_CONTEXT_BETA,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    COMPACT,
    COMPACT_BETA,
    COMPACTION_MINIMUM_TRIGGER,
)

__all__ = ["anthropic_refusal", "betas_of", "openai_refusal"]

_TYPES = (CLEAR_TOOL_USES, CLEAR_THINKING, COMPACT)
_COMPACT_FIELDS = frozenset({"type", "trigger", "pause_after_compaction", "instructions"})
_BETA = {
    CLEAR_TOOL_USES: ANTHROPIC_CONTEXT_BETA,
    CLEAR_THINKING: ANTHROPIC_CONTEXT_BETA,
    COMPACT: COMPACT_BETA,
}


def betas_of(header: str | None) -> tuple[str, ...]:
    """The betas an ``anthropic-beta`` header names (comma-separated)."""
    return tuple(b.strip() for b in (header or "").split(",") if b.strip())


def _count(value: Any, path: str, *, kinds: Sequence[str], minimum: int = 1) -> str | None:
    if not isinstance(value, Mapping):
        return f"{path}: Input should be a valid dictionary"
    if value.get("type") not in kinds:
        expected = ", ".join(repr(k) for k in kinds)
        return f"{path}.type: Input should be {expected}"
    number = value.get("value")
    if isinstance(number, bool) or not isinstance(number, int):
        return f"{path}.value: Input should be a valid integer"
    if number < minimum:
        return f"{path}.value: Input should be greater than or equal to {minimum}"
    return None


def _edit(edit: Any, path: str) -> str | None:
    if not isinstance(edit, Mapping):
        return f"{path}: Input should be a valid dictionary"
    kind = edit.get("type")
    if kind not in _TYPES:
        tags = ", ".join(repr(t) for t in _TYPES)
        return (
            f"{path}: Input tag {kind!r} found using 'type' does not match any of the expected tags: {tags}"
        )
    checks: list[str | None] = []
    if kind == CLEAR_TOOL_USES:
        for key, kinds, minimum in (
            ("trigger", ("input_tokens", "tool_uses"), 1),
            ("keep", ("tool_uses",), 0),
            ("clear_at_least", ("input_tokens",), 0),
        ):
            if edit.get(key) is not None:
                checks.append(_count(edit[key], f"{path}.{key}", kinds=kinds, minimum=minimum))
        tools = edit.get("exclude_tools")
        if tools is not None and not (isinstance(tools, list) and all(isinstance(t, str) for t in tools)):
            checks.append(f"{path}.exclude_tools: Input should be a valid list of strings")
    elif kind == CLEAR_THINKING:
        keep = edit.get("keep")
        if (
            keep is not None
            and keep != "all"
            and not (isinstance(keep, Mapping) and keep.get("type") == "all")
        ):
            checks.append(_count(keep, f"{path}.keep", kinds=("thinking_turns",), minimum=0))
    else:
        checks.extend(_compact_checks(edit, path))
    return next((c for c in checks if c is not None), None)


def _compact_checks(edit: Mapping[str, Any], path: str) -> list[str | None]:
    """What is wrong with a ``compact_20260112`` edit's fields (the SDK's
    ``BetaCompact20260112EditParam``: ``trigger``, ``pause_after_compaction``, ``instructions``)."""
    extra = sorted(str(k) for k in edit if k not in _COMPACT_FIELDS)
    checks: list[str | None] = [f"{path}.{extra[0]}: Extra inputs are not permitted" if extra else None]
    if edit.get("trigger") is not None:
        checks.append(
            _count(
                edit["trigger"],
                f"{path}.trigger",
                kinds=("input_tokens",),
                minimum=COMPACTION_MINIMUM_TRIGGER,
            )
        )
    if not isinstance(edit.get("pause_after_compaction", False), bool):
        checks.append(f"{path}.pause_after_compaction: Input should be a valid boolean")
    if edit.get("instructions") is not None and not isinstance(edit["instructions"], str):
        checks.append(f"{path}.instructions: Input should be a valid string")
    return checks


def anthropic_refusal(management: Any, betas: Sequence[str]) -> str | None:
    """Why Anthropic refuses this ``context_management`` sent with ``betas`` (``None``: it does not)."""
    if not isinstance(management, Mapping):
        return "context_management: Input should be a valid dictionary"
    edits = management.get("edits", [])
    if not isinstance(edits, list):
        return "context_management.edits: Input should be a valid list"
    for i, edit in enumerate(edits):
        problem = _edit(edit, f"context_management.edits.{i}")
        if problem is not None:
            return problem
        beta = _BETA[edit["type"]]
        if beta not in betas:
            return (
                f"context_management: Extra inputs are not permitted ({edit['type']} needs the beta "
                f"header 'anthropic-beta: {beta}')"
            )
    kinds = [e["type"] for e in edits]
    if CLEAR_THINKING in kinds and kinds[0] != CLEAR_THINKING:
        return f"context_management.edits: {CLEAR_THINKING} must be the first edit when combined with others"
    if kinds.count(COMPACT) > 1:
        return f"context_management.edits: at most one {COMPACT} edit"
    return None


def openai_refusal(management: Any) -> tuple[str, str] | None:
    """Why OpenAI's Responses API refuses this ``context_management``: (message, param), or ``None``."""
    if not isinstance(management, list):
        return "Invalid type for 'context_management': expected an array.", "context_management"
    for i, entry in enumerate(management):
        param = f"context_management[{i}]"
        if not isinstance(entry, Mapping):
            return f"Invalid type for '{param}': expected an object.", param
        if entry.get("type") != "compaction":
            return (
                f"Invalid value: {entry.get('type')!r}. Supported values are: 'compaction'.",
                f"{param}.type",
            )
        threshold = entry.get("compact_threshold")
        if threshold is not None and (
            isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1
        ):
            return (
                f"Invalid '{param}.compact_threshold': expected a positive integer.",
                f"{param}.compact_threshold",
            )
    return None
