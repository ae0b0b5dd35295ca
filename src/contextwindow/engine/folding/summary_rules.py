"""What a good summary checkpoint looks like, and what the summariser is asked for.

:func:`find_summary_defect` checks a summary: the required sections in order, each with content,
outside code fences; truncation markers rejected; the too-small floor judged from the summariser
call's real usage (maka's ``findCheckpointSummaryDefect``).
:data:`DEFAULT_SUMMARY_PROMPT` asks for those sections; :data:`SUMMARY_MAX_OUTPUT_TOKENS` caps the call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..events import FoldFailureReason

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "REQUIRED_SECTIONS",
    "SUMMARY_MAX_OUTPUT_TOKENS",
    "find_summary_defect",
]

# maka's history-compact summariser "applies the default output cap".
SUMMARY_MAX_OUTPUT_TOKENS = 8_000
"""The summariser call's output cap."""
# Too-small floor (maka's second rule): judged from the summariser's real usage.
TOO_SMALL_INPUT_TOKENS = 10_000
TOO_SMALL_OUTPUT_TOKENS = 200

# The sections a checkpoint needs for the agent to carry on: goal, decisions, files and artefacts, open work, latest
# state. maka's set (Goal/Progress/Next Steps) plays the same role.
REQUIRED_SECTIONS: tuple[str, ...] = (
    "Goal",
    "Decisions",
    "Files and artefacts",
    "Open work",
    "Latest state",
)
"""The sections a checkpoint summary must have, in order, each with content."""

DEFAULT_SUMMARY_PROMPT = """\
You are compacting the earlier part of a conversation between a user and an AI agent so the agent can \
continue the work without it. Write a checkpoint summary in Markdown with exactly these sections, in \
this order, each a level-2 heading followed by its content:

## Goal
<what the user wants, in their terms, with every constraint they stated>

## Decisions
<decisions taken and why, including approaches tried and rejected>

## Files and artefacts
<every file, path, URL, identifier, attachment id and command that matters, with its current state>

## Open work
<what remains to do, in order; questions still open>

## Latest state
<where the work stood at the end of the covered span: the last action and its result>

Keep exact names, numbers and identifiers. Do not invent anything. If a section has nothing, write \
"none". Do not wrap the summary in a code block.\
"""
"""What the summariser asks for: the :data:`REQUIRED_SECTIONS`, in order, in Markdown."""

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^ {0,3}([-*_])([ \t]*\1){2,}[ \t]*$")
_TEMPLATE = re.compile(r"^\s*<[^<>]*>\s*$")


def _content_lines(lines: Sequence[str]) -> bool:
    for line in lines:
        if not line.strip() or _RULE.match(line) or _TEMPLATE.match(line):
            continue
        return True
    return False


def _headings(lines: Sequence[str]) -> list[tuple[str, int]] | None:
    """The headings outside code fences, as ``(lowercased title, line index)``; ``None`` when a
    fence is left open (the summary was cut)."""
    headings: list[tuple[str, int]] = []
    fence: str | None = None
    for i, line in enumerate(lines):
        opened = _FENCE.match(line)
        if opened:
            marker = opened.group(1)
            if fence is None:
                fence = marker[0] * len(marker)
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is not None:
            continue
        heading = _HEADING.match(line)
        if heading:
            headings.append((heading.group(2).strip().lower(), i))
    return None if fence is not None else headings


def _sections_present(lines: Sequence[str], headings: list[tuple[str, int]], wanted: list[str]) -> bool:
    """Whether each of the ``wanted`` headings appears, in order, followed by content."""
    positions: list[int] = []
    at = 0
    for name in wanted:
        while at < len(headings) and headings[at][0] != name:
            at += 1
        if at == len(headings):
            return False
        positions.append(at)
        at += 1
    for index in positions:
        start = headings[index][1] + 1
        end = headings[index + 1][1] if index + 1 < len(headings) else len(lines)
        if not _content_lines(lines[start:end]):
            return False
    return True


def find_summary_defect(
    text: str,
    *,
    sections: Sequence[str] = REQUIRED_SECTIONS,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    roll_forward: bool = False,
) -> FoldFailureReason | None:
    """The first defect of a summary, or ``None`` when it is usable.

    - Truncated (``malformed_summary_truncated``): ends in ``:``/``：``/``...``/``…``, or leaves a
      code fence open.
    - Missing section (``malformed_summary_missing_section``): each required heading must appear
      outside code fences, as a whole line indented by at most 3 spaces, in order, followed by
      content (blank lines, horizontal rules and echoed ``<template>`` lines do not count).
    - Too small (``malformed_summary_too_small_for_fold``): the summariser read over 10,000 tokens and
      wrote under 200. Skipped on a roll-forward and when no usage was reported.
    """
    stripped = text.rstrip()
    if not stripped:
        return "malformed_summary_missing_section"
    if stripped.endswith((":", "：", "...", "…")):
        return "malformed_summary_truncated"
    lines = text.splitlines()
    headings = _headings(lines)
    if headings is None:
        return "malformed_summary_truncated"
    if not _sections_present(lines, headings, [s.lower() for s in sections]):
        return "malformed_summary_missing_section"
    if (
        not roll_forward
        and input_tokens is not None
        and output_tokens is not None
        and input_tokens > TOO_SMALL_INPUT_TOKENS
        and output_tokens < TOO_SMALL_OUTPUT_TOKENS
    ):
        return "malformed_summary_too_small_for_fold"
    return None
