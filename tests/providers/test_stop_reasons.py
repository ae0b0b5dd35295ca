"""One stop-reason vocabulary: providers' own words normalised, and which ones mean a cut reply."""

from __future__ import annotations

from typing import get_args

import pytest

from contextwindow.providers.base import StopReason, normalise_stop_reason, output_limit_hit


class TestNormalisedStopReasons:
    @pytest.mark.parametrize("reason", get_args(StopReason))
    def test_a_normalised_reason_is_itself(self, reason: str) -> None:
        assert normalise_stop_reason(reason) == reason

    @pytest.mark.parametrize(
        ("raw", "normalised"),
        [
            ("stop", "end_turn"),
            ("tool_calls", "tool_use"),
            ("length", "max_tokens"),
            ("MAX_TOKENS", "max_tokens"),
            ("model_context_window_exceeded", "context_window"),
            ("SAFETY", "content_filter"),
            ("something new", "other"),
            (None, "other"),
        ],
    )
    def test_a_providers_own_word_is_normalised(self, raw: str | None, normalised: str) -> None:
        assert normalise_stop_reason(raw) == normalised


class TestOutputLimitHit:
    @pytest.mark.parametrize(
        "reason",
        [
            "max_tokens",
            "model_context_window_exceeded",
            "length",
            "max_output_tokens",
            "MAX_TOKENS",
            "context_window",
        ],
    )
    def test_stop_reasons_that_mean_cut_at_the_limit(self, reason: str) -> None:
        assert output_limit_hit(reason)

    @pytest.mark.parametrize("reason", ["end_turn", "stop", "tool_use", "tool_calls", "STOP", None])
    def test_stop_reasons_that_mean_finished(self, reason: str | None) -> None:
        assert not output_limit_hit(reason)
