"""Per-message caps: context-manager's ``truncateContent`` cut, in its text-only chars/4 units.

The cut is decided from the content it is given (an override that rewrites content has its rewrite
cut, and the render is priced as it is sent). Lengths are UTF-16 code units, as the
TypeScript source counts them, and a cut never splits a surrogate pair (``safeSlice``).
From ``autobiographical.ts`` of https://github.com/anima-research/context-manager (the PR it follows
is in ``docs/concepts.md``, "Sources"), with one change of ours: the text blocks of a tool result
whose content is a list of blocks are counted and cut as a string result is. context-manager counts
such a result as 0 and sends it whole, so the cap never reached a tool result as the Anthropic wire
often carries it (``[{"type": "text", ...}]``), and the newest one could be over the budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from ..content import Block, NestedBlock, Text, Thinking, ToolResult, ToolUse, utf16_len

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
    tool results (a string, or each text block of a list); media and everything else 0."""
    total = 0
    for block in blocks:
        if isinstance(block, Text):
            total += math.ceil(utf16_len(block.text) / 4)
        elif isinstance(block, Thinking):
            total += math.ceil(utf16_len(block.thinking) / 4)
        elif isinstance(block, ToolUse):
            total += math.ceil(_json_len(dict(block.input)) / 4) + 20
        elif isinstance(block, ToolResult):
            if isinstance(block.content, str):
                total += math.ceil(utf16_len(block.content) / 4)
            else:
                total += sum(math.ceil(utf16_len(b.text) / 4) for b in block.content if isinstance(b, Text))
    return total


def truncate_content(blocks: tuple[Block, ...], max_tokens: int) -> tuple[Block, ...]:
    """``blocks`` cut to ``max_tokens`` (chars/4 units); the very same tuple when nothing is cut.

    Text is kept within ``max_tokens × 4`` code units; the straddling text block is cut and marked,
    later text blocks are dropped; tool results are always kept — cut, or emptied to
    :data:`OMITTED_RESULT` once the budget is spent (a result of blocks: its text blocks cut as text
    is, its media kept, and :data:`OMITTED_RESULT` in place of its text when none is left); other
    blocks (media, thinking, tool uses) pass.
    """
    if max_tokens <= 0 or text_only_estimate(blocks) <= max_tokens:
        return blocks
    remaining = max_tokens * 4
    out: list[Block] = []
    for block in blocks:
        if isinstance(block, Text):
            text, remaining = _cut_text(block, remaining)
            if text is not None:  # later text blocks are dropped
                out.append(text)
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
        elif isinstance(block, ToolResult) and not isinstance(block.content, str):
            inner, remaining = _cut_result_blocks(block.content, remaining)
            if inner is not block.content:
                block = ToolResult(tool_use_id=block.tool_use_id, content=inner, is_error=block.is_error)
            out.append(block)
        else:
            out.append(block)
    return tuple(out)


def _cut_text(block: Text, remaining: int) -> tuple[Text | None, int]:
    """``block`` within ``remaining`` code units: itself when it fits, cut and marked when it
    straddles them, ``None`` when none are left; and the code units left after it."""
    if remaining <= 0:
        return None, 0
    length = utf16_len(block.text)
    if length <= remaining:
        return block, remaining - length
    return Text(text=safe_slice(block.text, remaining) + truncation_marker(length)), 0


def _cut_result_blocks(
    blocks: tuple[NestedBlock, ...], remaining: int
) -> tuple[tuple[NestedBlock, ...], int]:
    """A tool result's blocks cut within ``remaining`` code units as :func:`truncate_content` cuts
    text (the very same tuple when nothing is cut), and the code units left."""
    kept: list[NestedBlock] = []
    cut = False
    for inner in blocks:
        if not isinstance(inner, Text):
            kept.append(inner)  # media pass, as at the top level
            continue
        text, remaining = _cut_text(inner, remaining)
        cut = cut or text is not inner
        if text is not None:
            kept.append(text)
    if not cut:
        return blocks, remaining
    if not any(isinstance(b, Text) for b in kept):
        kept.insert(0, Text(text=OMITTED_RESULT))
    return tuple(kept), remaining
