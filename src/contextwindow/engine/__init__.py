"""The turn engine: compile, send, stream, run tools, append rounds, and stay inside the window.

:class:`Engine` owns the loop (:mod:`.loop`); :mod:`.settings` holds its knobs, :mod:`.compiler` the
default compiler, :mod:`.fit` what a request is fitted against, :mod:`.projection` the physical-window
projection at a tool boundary, :mod:`.rounds` the price of an appended round, :mod:`.tool_results`
a tool result as it rides into the next round; :mod:`.folding` folds old history into summary
checkpoints: :mod:`.safe_prefix` which prefix may be folded, :mod:`.fold_trigger` when a fold is due,
:mod:`.ladder` how compaction escalates, :mod:`.summary_rules` what a good summary looks like,
:mod:`.summarizer` the summary call; :mod:`.events` what a host is told.
"""

from __future__ import annotations

from .compiler import CompileContext, Compiled, Compiler, EngineCompiler
from .events import (
    AttachmentsEvicted,
    Compacted,
    CompactionFailed,
    Event,
    Note,
    OverflowRecovered,
    RequestSent,
    StreamRestarted,
    StreamResumed,
    ToolResultReady,
    ToolResultsArchived,
    TurnEnded,
    UsageReported,
)
from .folding.summarizer import Summarizer, Summary
from .loop import Engine, ToolOutcome, ToolRunner
from .settings import EngineSettings

__all__ = [
    "AttachmentsEvicted",
    "Compacted",
    "CompactionFailed",
    "CompileContext",
    "Compiled",
    "Compiler",
    "Engine",
    "EngineCompiler",
    "EngineSettings",
    "Event",
    "Note",
    "OverflowRecovered",
    "RequestSent",
    "StreamRestarted",
    "StreamResumed",
    "Summarizer",
    "Summary",
    "ToolOutcome",
    "ToolResultReady",
    "ToolResultsArchived",
    "ToolRunner",
    "TurnEnded",
    "UsageReported",
]
