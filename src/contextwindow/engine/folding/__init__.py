"""Keeping history inside the window by folding it into summary checkpoints.

One package, one concept: when a fold is due (:mod:`.fold_trigger`), which prefix may be folded
(:mod:`.safe_prefix`), how compaction escalates after a rejection (:mod:`.ladder`), the summary call
(:mod:`.summarizer`) and what a usable summary is (:mod:`.summary_rules`). The folds themselves
(:class:`~contextwindow.engine.folding.folds.Folding`, which compiles through the engine's request
compiler) live in :mod:`.folds`, imported from there: this package's own names are its leaves,
so the window state can own the trigger without importing the folds.
"""

from __future__ import annotations

from .fold_trigger import REPLY_RESERVE_CAP, ProactiveTrigger
from .ladder import RUNGS, EscalationLadder, Rung, hard_cut_text
from .safe_prefix import COVER_TAIL_RATIO, select_safe_prefix
from .summarizer import Summarizer, Summary, render_transcript
from .summary_rules import (
    DEFAULT_SUMMARY_PROMPT,
    REQUIRED_SECTIONS,
    SUMMARY_MAX_OUTPUT_TOKENS,
    find_summary_defect,
)

__all__ = [
    "COVER_TAIL_RATIO",
    "DEFAULT_SUMMARY_PROMPT",
    "REPLY_RESERVE_CAP",
    "REQUIRED_SECTIONS",
    "RUNGS",
    "SUMMARY_MAX_OUTPUT_TOKENS",
    "EscalationLadder",
    "ProactiveTrigger",
    "Rung",
    "Summarizer",
    "Summary",
    "find_summary_defect",
    "hard_cut_text",
    "render_transcript",
    "select_safe_prefix",
]
