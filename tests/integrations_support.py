"""What the framework adapters' tests share: the observed local provider and the task's material
(from ``benchmarks/_agents.py``, which the integrations benchmark runs on too), and a loop closer."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator

from benchmarks._agents import TURNS, WINDOW, Call, ObservedModel, RereadingModel, notes, png, png_data_url

__all__ = [
    "TURNS",
    "WINDOW",
    "Call",
    "ObservedModel",
    "RereadingModel",
    "close_the_loop_left_open",
    "notes",
    "png",
    "png_data_url",
]


def close_the_loop_left_open() -> Iterator[None]:
    """After a test: close the event loop a framework's sync entry point set as the thread's and left
    open (pydantic-ai's ``run_sync``, litellm's sync ``completion``)."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)
