"""Per-message caps: context-manager's ``truncateContent`` cut, in its text-only chars/4 units.

The cut is decided from the content it is given (an override that rewrites content has its rewrite
cut, and the render is priced as it is sent). Lengths are UTF-16 code units, as the
TypeScript source counts them, and a cut never splits a surrogate pair (``safeSlice``).
From ``autobiographical.ts`` of https://github.com/anima-research/context-manager (the PR it follows
is in ``docs/concepts.md``, "Sources").
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from ..content import Block, Text, Thinking, ToolResult, ToolUse, utf16_len

__all__ = [
    "MIN_CUT_TOKENS",
    "OMITTED_RESULT",
    "safe_slice",
    "text_only_estimate",
    "truncate_content",
    "truncation_marker",
]

MIN_CUT_TOKENS = 256
"""The smallest per-message cap (chars/4 units, about 1 KB of text) a unit is cut to so that it fits
the room left at the end of the tail (``compile``'s cut to fill): below it the unit is left out."""

OMITTED_RESULT = "[content omitted — context budget exceeded]"
"""A tool result the cut reached with no budget left: kept (pairing must survive), emptied."""


def safe_slice(text: str, units: int) -> str:
    """The first ``units`` UTF-16 code units of ``text``, one fewer if the cut would split a pair."""
    if units <= 0:
        return ""
    if text.isascii() or utf16_len(text) == len(text):
        return text[:units]
    taken = 0
    for index, char in enumerate(text):
        width = 2 if ord(char) > 0xFFFF else 1
        if taken + width > units:
            return text[:index]
        taken += width
    return text


def truncation_marker(original_units: int) -> str:
    """``"\\n\\n[truncated — original was {ceil(L/4)} tokens]"`` (41 characters at five digits)."""
    return f"\n\n[truncated — original was {math.ceil(original_units / 4)} tokens]"


def _json_len(value: object) -> int:
    return utf16_len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


def text_only_estimate(blocks: Sequence[Block]) -> int:
    """context-manager's ``estimateTextOnlyTokens``: chars/4 of text, thinking, tool-use JSON (+20) and
    string tool results; media and everything else 0."""
    total = 0
    for block in blocks:
        if isinstance(block, Text):
            total += math.ceil(utf16_len(block.text) / 4)
        elif isinstance(block, Thinking):
            total += math.ceil(utf16_len(block.thinking) / 4)
        elif isinstance(block, ToolUse):
            total += math.ceil(_json_len(dict(block.input)) / 4) + 20
        elif isinstance(block, ToolResult) and isinstance(block.content, str):
            total += math.ceil(utf16_len(block.content) / 4)
    return total


def truncate_content(blocks: tuple[Block, ...], max_tokens: int) -> tuple[Block, ...]:
    """``blocks`` cut to ``max_tokens`` (chars/4 units); the very same tuple when nothing is cut.

    Text is kept within ``max_tokens × 4`` code units; the straddling text block is cut and marked,
    later text blocks are dropped; tool results are always kept — cut, or emptied to
    :data:`OMITTED_RESULT` once the budget is spent; other blocks (media, thinking, tool uses) pass.
    """
    if max_tokens <= 0 or text_only_estimate(blocks) <= max_tokens:
        return blocks
    remaining = max_tokens * 4
    out: list[Block] = []
    for block in blocks:
        if isinstance(block, Text):
            if remaining <= 0:
                continue  # later text blocks are dropped
            length = utf16_len(block.text)
            if length <= remaining:
                out.append(block)
                remaining -= length
            else:
                out.append(Text(text=safe_slice(block.text, remaining) + truncation_marker(length)))
                remaining = 0
        elif isinstance(block, ToolResult) and isinstance(block.content, str):
            length = utf16_len(block.content)
            if remaining <= 0:
                content = OMITTED_RESULT
            elif length <= remaining:
                out.append(block)
                remaining -= length
                continue
            else:
                content = safe_slice(block.content, remaining) + truncation_marker(length)
                remaining = 0
            out.append(ToolResult(tool_use_id=block.tool_use_id, content=content, is_error=block.is_error))
        else:
            out.append(block)
    return tuple(out)
