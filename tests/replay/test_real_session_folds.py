"""How much of the window real Claude Code sessions keep once their history no longer fits.

The first eight shared sessions (``../shared/data/claude-code-sessions``) replayed as
``benchmarks/real_sessions.py`` replays them (the engine through ``simulate``, the local provider's
prompt cache on, usage per call, the Anthropic wire): the request after a fold keeps at least 40% of
the window, and at 32k the window use once full is at least 74% with at most 10 folds per 100 calls
and 85% of the input read from the cache (at 16k the sessions grow 650–1,000 tokens a call, which at
10 folds per 100 calls leaves no room for that). The issue's goal is 75% on all forty sessions;
``benchmarks/real_sessions.py`` measures that.
"""

from __future__ import annotations

import functools
import statistics
from typing import Any

import pytest
from benchmarks._paths import CLAUDE_SESSIONS

SESSIONS = 8

pytestmark = pytest.mark.skipif(not CLAUDE_SESSIONS.is_dir(), reason="../shared/data not beside the checkout")


@functools.cache
def _runs(window: int) -> tuple[Any, ...]:
    from benchmarks import real_sessions  # imports LangChain (its trim_messages peer)

    runs = []
    for kind, ref in real_sessions._sources(SESSIONS, 0):
        scenario = real_sessions._load(kind, ref)
        model = real_sessions._model(scenario)
        scale = real_sessions._scale(kind, ref, model)
        _, full = real_sessions._peer(scenario, kind, ref, model, window, False, scale)
        runs.append(real_sessions._engine(scenario, kind, ref, model, window, "per-call", False, full, scale))
    return tuple(runs)


@pytest.mark.parametrize("window", [16_000, 32_000])
def test_the_request_after_a_fold_keeps_at_least_forty_percent_of_the_window(window: int) -> None:
    after = [u for run in _runs(window) for u in run.after_fold]
    assert after
    assert min(after) >= 0.40


def test_at_32k_most_of_the_window_is_used_with_at_most_ten_folds_per_hundred_calls() -> None:
    runs = _runs(32_000)
    full = sum(run.calls_full for run in runs)
    assert full >= 50
    assert statistics.fmean(u for run in runs for u in run.use_past) >= 0.74
    assert 100 * sum(run.folds_full for run in runs) / full <= 10
    assert sum(run.read_full for run in runs) / sum(run.input_full for run in runs) >= 0.85
