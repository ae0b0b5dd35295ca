"""Tool results: from the host's tool runner to the next round, as storable text within the inline cap.

:func:`run_tool` runs one tool use through the host's runner (sync or async, returning a
:class:`~contextwindow.content.ToolResult`, a :class:`ToolOutcome` or the result's text; a tool that
raises becomes an error result). The result then goes into the request the engine is extending
within a turn. Two things are settled before it does: its text must be storable (a lone surrogate, a tool's undecodable byte, becomes U+FFFD:
:func:`storable_tool_result`), and text past the inline cap is cut with a notice naming the original
length (:func:`cap_tool_result`, at :func:`inline_cap_chars`). Lengths are UTF-16 code units, and a
cut never splits a surrogate pair.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeAlias

from ..compile.reread import READ_ARCHIVED
from ..compile.truncate import safe_slice
from ..content import Block, Text, ToolResult, ToolUse, utf16_len
from ..errors import InvalidInput, UsageError
from .events import ToolResultReady
from .stats import TurnStats

__all__ = [
    "DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS",
    "ToolOutcome",
    "ToolReturn",
    "ToolRound",
    "ToolRunner",
    "cap_tool_result",
    "inline_cap_chars",
    "round_result",
    "run_round",
    "run_tool",
    "storable_tool_result",
    "truncation_notice",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolOutcome:
    """A tool's result and whether it ends the turn (agent-framework ``endTurn``)."""

    result: ToolResult
    end_turn: bool = False


ToolReturn: TypeAlias = ToolResult | ToolOutcome | str
"""What a tool runner may return: a result, a result that may end the turn, or the result's text."""
ToolRunner: TypeAlias = Callable[[ToolUse], Awaitable[ToolReturn] | ToolReturn]
"""Runs one tool use: a plain or an ``async`` function returning a :data:`ToolReturn`."""


async def run_tool(runner: ToolRunner, use: ToolUse) -> ToolOutcome:
    """Run one tool use through the host's runner, sync or async, as a :class:`ToolOutcome`.

    A tool that raises is the model's to know about, not the turn's end: the exception becomes an
    error result naming its type and message (``is_error=True``), and the turn goes on. A runner
    that returns something other than a :data:`ToolReturn` is the host's mistake: ``UsageError``."""
    try:
        value = runner(use)
        if inspect.isawaitable(value):
            value = await value
    except Exception as error:
        detail = str(error)
        text = f"{type(error).__name__}: {detail}" if detail else type(error).__name__
        return ToolOutcome(result=ToolResult(tool_use_id=use.id, content=text, is_error=True))
    if isinstance(value, ToolOutcome):
        return value
    if isinstance(value, ToolResult):
        return ToolOutcome(result=value)
    if isinstance(value, str):
        return ToolOutcome(result=ToolResult(tool_use_id=use.id, content=value))
    raise UsageError(
        f"the tool runner returned {type(value).__name__} for {use.name!r}: it returns a ToolResult,"
        " a ToolOutcome or a str"
    )


# agent-framework's DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS (5000 earlier, 24000 now).
DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS = 24_000


def truncation_notice(original_chars: int) -> str:
    """agent-framework's notice for a tool result cut with no writable workspace."""
    return (
        f"\n\n[truncated — original was {original_chars} chars; "
        "no writable workspace, full content not retained]"
    )


def inline_cap_chars(
    max_message_tokens: int | None, desired: int = DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS
) -> int:
    """The inline cap of a tool result: ``min(desired, max_message_tokens × 4)`` (agent-framework's)."""
    if desired <= 0:
        raise InvalidInput("must be > 0", path="desired")
    if max_message_tokens is None:
        return desired
    if max_message_tokens <= 0:
        raise InvalidInput("must be > 0", path="max_message_tokens")
    return min(desired, max_message_tokens * 4)


def _valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate (a tool's undecodable byte, ``"\\udcff"``) as U+FFFD; a
    surrogate pair written as two code points becomes its character."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable_tool_result(result: ToolResult) -> ToolResult:
    """The result with text the ledger can store: a lone surrogate, which no UTF-8 store accepts,
    becomes U+FFFD (the tool's own output is kept; only the undecodable unit is replaced)."""
    if isinstance(result.content, str):
        text = _valid_unicode(result.content)
        return result if text is result.content else replace(result, content=text)
    blocks = tuple(
        replace(b, text=_valid_unicode(b.text)) if isinstance(b, Text) and not b.text.isascii() else b
        for b in result.content
    )
    changed = any(a is not b for a, b in zip(blocks, result.content, strict=True))
    return replace(result, content=blocks) if changed else result


def cap_tool_result(result: ToolResult, cap_chars: int) -> ToolResult:
    """The result as it rides into the next round: text beyond ``cap_chars`` cut with the notice.

    A string result is cut at the cap; a list result keeps its text blocks in order within the cap
    (the block that straddles it is cut, later text dropped) and keeps every media block, which is
    priced by its own rule. The notice names the original length so the model knows what it lost.
    """
    if isinstance(result.content, str):
        total = utf16_len(result.content)
        if total <= cap_chars:
            return result
        return replace(result, content=safe_slice(result.content, cap_chars) + truncation_notice(total))
    total = sum(utf16_len(b.text) for b in result.content if isinstance(b, Text))
    if total <= cap_chars:
        return result
    kept: list[Block] = []
    room = cap_chars
    cut = False
    for block in result.content:
        if not isinstance(block, Text):
            kept.append(block)
            continue
        if cut:
            continue
        length = utf16_len(block.text)
        if length <= room:
            kept.append(block)
            room -= length
            continue
        kept.append(Text(text=safe_slice(block.text, room) + truncation_notice(total)))
        cut = True
    return replace(result, content=tuple(kept))  # type: ignore[arg-type]


@dataclass(slots=True)
class ToolRound:
    """The tool boundary's round: the capped results, whether a tool ended the turn."""

    results: list[ToolResult] = field(default_factory=list)
    end_turn: bool = False


def round_result(result: ToolResult, cap_chars: int) -> tuple[ToolResult, bool]:
    """A tool result as it rides into a round: text the ledger can store, within ``cap_chars``; and
    whether the cap cut it."""
    stored = storable_tool_result(result)
    capped = cap_tool_result(stored, cap_chars)
    return capped, capped is not stored


async def run_round(
    tool_uses: Sequence[ToolUse],
    round_: ToolRound,
    *,
    runner: ToolRunner | None,
    cap_chars: int,
    reread: Callable[[ToolUse], tuple[ToolResult, bool]] | None,
    stats: TurnStats,
) -> AsyncIterator[ToolResultReady]:
    """Run each of a reply's ``tool_uses`` into ``round_`` (:func:`round_result`) and yield a
    ``tool_result_ready`` event for each. ``reread`` answers the ``read_archived`` calls when the
    request offered that tool (``None``: it did not). The runner's time is off the engine's clock
    (``stats``). Raises :class:`~contextwindow.errors.UsageError` for a tool call with no runner."""
    for use in tool_uses:
        if use.name == READ_ARCHIVED and reread is not None:
            capped, truncated = reread(use)
            end_turn = False
        else:
            stats.pause()
            if runner is None:
                raise UsageError("the model called a tool and the engine has no tool_runner")
            outcome = await run_tool(runner, use)
            stats.resume()
            capped, truncated = round_result(outcome.result, cap_chars)
            end_turn = outcome.end_turn
        round_.end_turn = round_.end_turn or end_turn
        round_.results.append(capped)
        yield ToolResultReady(tool_use_id=use.id, truncated=truncated, end_turn=end_turn)
