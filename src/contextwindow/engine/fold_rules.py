"""Compaction: which prefix may be folded, when a fold is due, and what a good summary looks like.

A fold replaces a prefix of the history with a summary checkpoint written by a summariser (an LLM
call, see :mod:`contextwindow.engine.summarizer`). The rules here are pure:

- :func:`select_safe_prefix`: the largest prefix that does not straddle a tool pair, stops before
  partial and pinned messages, and is valid for the fold's phase (maka ``selectSafeCompactionPrefix``,
  seed-behaviours §10, acceptance 32). Otherwise the fold fails open with ``no_safe_completed_span``.
- :func:`find_summary_defect`: required sections in order, each with content, outside code fences;
  truncation markers rejected; the too-small floor judged from the summariser call's real usage
  (maka ``findCheckpointSummaryDefect``, seed 002, acceptance 33).
- :class:`ProactiveTrigger`: fold before a request when the last accepted request's real input +
  output + reply reserve (``min(2 × last output, 8000)``) reaches the *declared* window; at most
  once per send; once after a reply cut at the output limit (maka #4559/#4634, acceptance 30).
- :class:`EscalationLadder`: compaction that frees nothing must not loop. Each rung (evict media,
  archive tool results, fold, hard cut of the oldest turns) is tried at most once per turn, a rung
  that freed nothing moves to the next, and the number of compactions per turn is bounded; past the
  last rung the engine raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from ..content import Message, ToolResult, ToolUse
from ..errors import InvalidInput
from ..providers.base import output_limit_hit
from .events import FoldFailureReason, FoldPhase

__all__ = [
    "COVER_TAIL_RATIO",
    "DEFAULT_SUMMARY_PROMPT",
    "REPLY_RESERVE_CAP",
    "REQUIRED_SECTIONS",
    "SUMMARY_MAX_OUTPUT_TOKENS",
    "EscalationLadder",
    "FoldFailure",
    "ProactiveTrigger",
    "Rung",
    "find_summary_defect",
    "hard_cut_text",
    "select_safe_prefix",
]

# maka history-compact-summarizer.ts: "applies the default output cap" (seed-behaviours §10).
SUMMARY_MAX_OUTPUT_TOKENS = 8_000
# maka #4634: replyReserve = min(2 × lastOutput, 8000) (seed-behaviours §9).
REPLY_RESERVE_CAP = 8_000
# Too-small floor (seed 002, #4559): judged from the summariser's real usage. The earlier rule was
# "< 800 characters while the covered span is over 10,000 tokens"; 800 characters ≈ 200 tokens.
TOO_SMALL_INPUT_TOKENS = 10_000
TOO_SMALL_OUTPUT_TOKENS = 200

# Covering fold (engine): when compile leaves history out that no checkpoint covers, the engine folds
# enough that the kept tail (with the head) fills at most this share of compile's input budget. Folding
# only what compile left out would fold again on the very next call (the tail sits at the budget's
# edge); folding to 90% leaves a tenth of the budget (1–2 tool rounds at 16k, 3 at 32k) for growth
# before the next fold. Lower shares fold less often but waste the window: once history exceeds it,
# window use swings between this share of the budget (after a fold) and the projection's limit
# (window − output reserve), so the share sets the floor of the swing. Measured with the sessions
# benchmark (`--scenarios 4`, usage reported): 0.7 → 64% mean use at 16k/32k; 0.8 → 67.9% / 67.9%
# (31.8 / 16.5 folds per ~209 calls); 0.85 → 69.8% / 68.8% (38 / 20 folds); 0.9 → 71.9% / 70.5%
# (47 / 24.5 folds), no rejections with a true window in any. flue keeps a fixed recent budget instead
# (seed §12), maka folds everything before the turn (seed 002); neither leaves a measured headroom.
COVER_TAIL_RATIO = 0.9

# The required sections (issue 8): goal, decisions, files and artefacts, open work, latest
# state. maka's seed-002 set (Goal/Progress/Next Steps) plays the same role.
REQUIRED_SECTIONS: tuple[str, ...] = (
    "Goal",
    "Decisions",
    "Files and artefacts",
    "Open work",
    "Latest state",
)

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

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^ {0,3}([-*_])([ \t]*\1){2,}[ \t]*$")
_TEMPLATE = re.compile(r"^\s*<[^<>]*>\s*$")


@dataclass(frozen=True, slots=True)
class FoldFailure:
    """Why a fold did not happen; the engine fails open (the request goes out unchanged)."""

    reason: FoldFailureReason
    detail: str = ""


def _tool_positions(messages: Sequence[Message]) -> tuple[dict[str, int], dict[str, int]]:
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for i, message in enumerate(messages):
        for block in message.content:
            if isinstance(block, ToolUse):
                calls.setdefault(block.id, i)
            elif isinstance(block, ToolResult):
                results.setdefault(block.tool_use_id, i)
    return calls, results


def _straddles(cut: int, calls: dict[str, int], results: dict[str, int]) -> bool:
    """Covering messages ``[0, cut)`` splits a pair, or covers an open call (no response yet)."""
    for call_id, at in calls.items():
        if at >= cut:
            continue
        answered = results.get(call_id)
        if answered is None or answered >= cut:
            return True
    # A response whose call is covered but which itself is not is caught above; a response without
    # any call is inert.
    return False


def select_safe_prefix(
    messages: Sequence[Message],
    *,
    phase: FoldPhase,
    head_anchor: int | None = None,
    reserve_tail: int | None = None,
    max_covered: int | None = None,
    first_partial: int | None = None,
    pinned: Sequence[int] = (),
) -> int | FoldFailure:
    """How many leading messages a fold may cover, or why none (maka ``selectSafeCompactionPrefix``).

    ``maxCut = min(len − reserve_tail, max_covered, first_partial, first pinned)``; cuts are tried from
    there down to 1 and the first that straddles no tool pair wins. ``head_anchor`` is the index of
    the message that opened the current turn: pinned in ``pre_turn`` (the fold must stop at or before
    it: ``0 < covered ≤ head_anchor``) and to be passed in ``mid_turn`` (``covered > head_anchor`` and
    ``covered ≥ 2``). ``reserve_tail`` is 1 by default and 0 for ``standalone``.
    """
    if reserve_tail is None:
        reserve_tail = 0 if phase == "standalone" else 1
    if reserve_tail < 0:
        raise InvalidInput("must be ≥ 0", path="reserve_tail")
    if phase in ("pre_turn", "mid_turn") and head_anchor is None:
        raise InvalidInput(f"a {phase} fold needs the head anchor's index", path="head_anchor")
    limits = [len(messages) - reserve_tail]
    if max_covered is not None:
        limits.append(max_covered)
    if first_partial is not None:
        limits.append(first_partial)
    pins = list(pinned)
    if phase == "pre_turn" and head_anchor is not None:
        pins.append(head_anchor)
    if pins:
        limits.append(min(pins))
    calls, results = _tool_positions(messages)
    for cut in range(min(limits), 0, -1):
        if _straddles(cut, calls, results):
            continue
        if _valid_coverage(cut, phase, head_anchor):
            return cut
        break  # the largest safe cut is not valid for the phase; smaller ones are no better
    return FoldFailure("no_safe_completed_span", f"phase {phase}, {len(messages)} messages")


def _valid_coverage(covered: int, phase: FoldPhase, head_anchor: int | None) -> bool:
    if phase == "mid_turn":
        assert head_anchor is not None
        return covered > head_anchor and covered >= 2
    if phase == "pre_turn":
        assert head_anchor is not None
        return 0 < covered <= head_anchor
    return covered > 0


def _content_lines(lines: Sequence[str]) -> bool:
    for line in lines:
        if not line.strip() or _RULE.match(line) or _TEMPLATE.match(line):
            continue
        return True
    return False


def find_summary_defect(
    text: str,
    *,
    sections: Sequence[str] = REQUIRED_SECTIONS,
    input_tokens: int | None = None,
    output_tokens: int | None = None,
    roll_forward: bool = False,
) -> FoldFailureReason | None:
    """The first defect of a summary, or ``None`` when it is usable (acceptance 33).

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
    headings: list[tuple[str, int]] = []
    lines = text.splitlines()
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
    if fence is not None:
        return "malformed_summary_truncated"
    wanted = [s.lower() for s in sections]
    positions: list[int] = []
    at = 0
    for name in wanted:
        while at < len(headings) and headings[at][0] != name:
            at += 1
        if at == len(headings):
            return "malformed_summary_missing_section"
        positions.append(at)
        at += 1
    for index in positions:
        start = headings[index][1] + 1
        end = headings[index + 1][1] if index + 1 < len(headings) else len(lines)
        if not _content_lines(lines[start:end]):
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


@dataclass(slots=True)
class ProactiveTrigger:
    """maka's proactive fold (acceptance 30), kept per engine; :meth:`start_send` per user turn.

    ``baseline`` is the last accepted request's ``input + max(0, output)`` as the provider counted
    them; it is unknown until a request is accepted, and again after a fold. The fold is due when a
    window is declared and ``baseline + min(2 × last output, 8000) ≥ window``, at most once per send;
    and, separately, once before the next request after a reply cut at the output limit. The reply
    reserve never exceeds ``max_tokens``, the next call's own output bound when the engine knows it:
    a reply cannot be longer, so a larger reserve would fold before anything needs the room.
    """

    declared_window: int | None
    max_tokens: int | None = None
    baseline_input: int | None = None
    baseline_output: int = 0
    _fired_this_send: bool = False
    _length_pending: bool = False

    def start_send(self) -> None:
        self._fired_this_send = False

    def seed(self, *, input_tokens: int, output_tokens: int) -> None:
        """Step 0 of a send: seed the baseline from the persisted anchor of the last accepted request."""
        self.accepted(input_tokens=input_tokens, output_tokens=output_tokens, finish_reason=None)

    def accepted(self, *, input_tokens: int, output_tokens: int, finish_reason: str | None) -> None:
        """A request was accepted: its real prompt and output become the baseline."""
        self.baseline_input = input_tokens if input_tokens > 0 else None
        self.baseline_output = max(0, output_tokens)
        if output_limit_hit(finish_reason):
            self._length_pending = True

    def folded(self) -> None:
        """After a fold the baseline is unknown until the next accepted request."""
        self.baseline_input = None
        self._length_pending = False

    def reply_reserve(self) -> int:
        reserve = min(2 * self.baseline_output, REPLY_RESERVE_CAP)
        return reserve if self.max_tokens is None else min(reserve, self.max_tokens)

    def due(self) -> Literal["proactive", "length"] | None:
        """Whether to fold before the next request, and why (marks the once-per-send budget spent)."""
        if self._length_pending:
            self._length_pending = False
            return "length"
        if self.declared_window is None or self.baseline_input is None or self._fired_this_send:
            return None
        if self.baseline_input + self.baseline_output + self.reply_reserve() >= self.declared_window:
            self._fired_this_send = True
            return "proactive"
        return None


_CUT_NOTE = re.compile(
    r"\n*\[(\d+) earlier messages were cut to fit the context window without a summary; "
    r"ids (\S+) … (\S+) remain in the ledger\]\s*$"
)


def hard_cut_text(previous: str | None, count: int, first_id: str, last_id: str) -> str:
    """The checkpoint text of a hard cut: the previous summary, and one note naming what was cut.

    Consecutive cuts merge into one note (the counts add up, the first id stays), so a session that
    is cut again and again without a summariser keeps one line, not one per cut.
    """
    base = previous or ""
    match = _CUT_NOTE.search(base)
    if match is not None:
        count += int(match.group(1))
        first_id = match.group(2)
        base = base[: match.start()]
    note = (
        f"[{count} earlier messages were cut to fit the context window without a summary; "
        f"ids {first_id} … {last_id} remain in the ledger]"
    )
    return f"{base}\n\n{note}" if base else note


Rung: TypeAlias = Literal["evict_media", "archive_tool_results", "fold", "hard_cut"]
RUNGS: tuple[Rung, ...] = ("evict_media", "archive_tool_results", "fold", "hard_cut")


@dataclass(slots=True)
class EscalationLadder:
    """The no-loop guarantee: each rung at most once per turn, and a bounded number of compactions.

    The engine asks :meth:`next_rung` each time the request is still too big; it gets the next rung
    not yet tried this turn (evict media → archive tool results → fold → hard cut), or ``None`` when
    every rung is spent or ``max_compactions`` is reached — then it must raise, never retry.
    """

    max_compactions: int = 4
    tried: list[Rung] = field(default_factory=list)

    def start_turn(self) -> None:
        self.tried.clear()

    def next_rung(self) -> Rung | None:
        if self.exhausted:
            return None
        for rung in RUNGS:
            if rung not in self.tried:
                self.tried.append(rung)
                return rung
        return None

    @property
    def exhausted(self) -> bool:
        return len(self.tried) >= self.max_compactions or all(r in self.tried for r in RUNGS)
