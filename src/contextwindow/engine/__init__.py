"""The turn engine: compile, send, stream, run tools, append rounds, and stay inside the window.

:class:`Engine` owns the loop (:mod:`.loop`); :mod:`.settings` holds its knobs, :mod:`.compiler` the
default compiler, :mod:`.fit` and :mod:`.projection` what a request is fitted and projected against,
:mod:`.folding` and :mod:`.fold_rules` how old history becomes summary checkpoints, :mod:`.summarizer`
the summary call, and :mod:`.events` what a host is told.
"""

from __future__ import annotations

from .compiler import Compiled, Compiler, EngineCompiler
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
from .loop import Engine, ToolOutcome, ToolRunner
from .settings import EngineSettings
from .summarizer import Summarizer, Summary

__all__ = [
    "AttachmentsEvicted",
    "Compacted",
    "CompactionFailed",
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
