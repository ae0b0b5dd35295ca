"""The turn engine: compile, send, stream, run tools, append rounds, and stay inside the window.

:class:`Engine` sequences the step API (:mod:`.loop`). What fits is the window's
(:mod:`.window`, :class:`~contextwindow.engine.window.WindowState`: its limits :mod:`.limits`, the fit
:mod:`.fit`, the projection :mod:`.projection`, the count-before-send policy :mod:`.precount`). The
steps: the next request (:mod:`.next_request`, through :mod:`.compiler`), counting it
(:mod:`.counting`), sending it (:mod:`.send`), a call's usage (:mod:`.accounting`), a rejection
(:mod:`.recovery`), a reply's tools (:mod:`.tool_results`, the price of their round :mod:`.rounds`)
and re-reads (:mod:`.rereads`). :mod:`.folding` keeps history inside the window (trigger, safe
prefix, ladder, summariser, summary rules, folds); :mod:`.settings` holds the knobs and
:mod:`.events` what a host is told.
"""

from __future__ import annotations

from .compiler import CompileContext, Compiled, Compiler, EngineCompiler
from .events import (
    AttachmentsEvicted,
    Compacted,
    CompactionFailed,
    Event,
    MaxTokensLowered,
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
    "MaxTokensLowered",
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
