"""Replay: scripted agent runs through the engine against the local provider.

:mod:`.scenario` and :mod:`.scenario_file` hold scripted runs, :mod:`.importers` turns real
transcripts into them, :mod:`.synthetic_media` makes their screenshots and documents, :mod:`.demo`
is the bundled demo, :mod:`.simulate` runs one and records every request, and :mod:`.report`
summarises what a run did.
"""

from __future__ import annotations

from .importers import load_any
from .report import CallRecord, summarize
from .scenario import Scenario, ScenarioBuilder
from .scenario_file import dump_scenario, load_scenario

__all__ = [
    "CallRecord",
    "Scenario",
    "ScenarioBuilder",
    "dump_scenario",
    "load_any",
    "load_scenario",
    "summarize",
]
