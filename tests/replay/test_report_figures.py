"""The run report's figures the demo showed wrong, each fixed: counts per 100 calls, count rows, the window."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextwindow.replay.report import SUMMARY_ROWS, format_value
from contextwindow.replay.scenario import Scenario
from contextwindow.replay.simulate import simulate_sync
from replay_support import coding_scenario


def _scenario(turns: int = 4) -> Scenario:
    return coding_scenario(turns, result="lorem ipsum " * 400)


class TestSummaryFigures:
    def test_counts_per_100_calls_is_a_figure_not_a_percentage(self) -> None:
        assert format_value(25.0, "counts_per_100_calls") == "25.0"
        assert format_value(0.69, "window_use_mean") == "69.0%"

    def test_the_two_count_rows_say_what_each_counts(self) -> None:
        labels = dict(SUMMARY_ROWS)
        assert labels["counted"] != labels["counts"]
        assert "sent" in labels["counted"] and "calls" in labels["counts"]

    def test_the_html_summary_shows_counts_per_100_calls_as_a_number(self, tmp_path: Path) -> None:
        pytest.importorskip("matplotlib")
        from contextwindow.replay.report import write_report

        result = simulate_sync(_scenario(), model="claude-sonnet-4-5", window=8_000)
        result.summary["counts_per_100_calls"] = 25.0
        page = write_report(result.records, result.summary, tmp_path, title="t", subtitle="s").read_text()
        assert "2500.0%" not in page and "<td>25.0</td>" in page


class TestWindowAsKnown:
    def test_each_record_is_against_the_window_as_known_when_it_was_sent(self) -> None:
        result = simulate_sync(
            _scenario(),
            model="claude-sonnet-4-5",
            window=12_000,
            provider_window=9_000,
        )
        windows = [r.window for r in result.records]
        assert any(r.rejected for r in result.records)
        assert windows[0] == 12_000 and windows[-1] == 9_000
        assert windows == sorted(windows, reverse=True)  # it steps down once learned, never back up
