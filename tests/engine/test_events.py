"""Events, boundary precedence (agent-framework's order, https://github.com/anima-research/agent-framework)
and host notes (maka's ``system_note`` rules, https://github.com/apache/maka/pull/4559)."""

from __future__ import annotations

import json

import pytest

from contextwindow.engine.events import (
    Note,
    NoteBook,
    StreamRestarted,
    UsageReported,
    event_to_dict,
)
from contextwindow.engine.window import decide_boundary
from contextwindow.usage.tracker import Usage


class TestBoundaryPrecedence:
    @pytest.mark.parametrize(
        ("end_turn", "fresh", "budget", "over", "expected"),
        [
            pytest.param(True, 200_000, 150_000, 250_000, "end_turn", id="end-turn-wins-both"),
            pytest.param(
                False,
                160_000,
                150_000,
                250_000,
                StreamRestarted(reason="context_budget", input_tokens=160_000, budget=150_000),
                id="budget-over-physical",
            ),
            pytest.param(
                False,
                100_000,
                150_000,
                203_043,
                StreamRestarted(reason="physical_window", input_tokens=203_043, budget=200_000),
                id="physical-window",
            ),
            pytest.param(False, 150_000, 150_000, None, "continue", id="budget-equal-continues"),
            pytest.param(False, 0, 0, None, "continue", id="no-fresh-input-never-trips-the-budget"),
            pytest.param(False, 10**9, None, None, "continue", id="no-budget-configured"),
        ],
    )
    def test_decision(
        self, end_turn: bool, fresh: int, budget: int | None, over: int | None, expected: object
    ) -> None:
        got = decide_boundary(
            end_turn=end_turn,
            stream_fresh_input=fresh,
            max_stream_input_tokens=budget,
            projected_over=over,
            window=200_000,
        )
        assert got == expected


class TestNotes:
    def test_the_window_suggestion_is_the_last_accepted_total_when_no_window_is_declared(self) -> None:
        note = NoteBook(declared_window=None).window_suggestion(last_accepted_total=123_000)
        assert note == Note(kind="context_window_suggestion", data={"suggested_context_window": 123_000})

    def test_the_suggestion_is_emitted_only_when_smaller_than_the_declared_window(self) -> None:
        book = NoteBook(declared_window=200_000)
        assert book.window_suggestion(last_accepted_total=200_000) is None
        note = book.window_suggestion(last_accepted_total=150_000)
        assert note is not None
        assert note.data == {"suggested_context_window": 150_000, "declared_context_window": 200_000}

    def test_the_suggestion_fires_once_per_send(self) -> None:
        book = NoteBook(declared_window=None)
        assert book.window_suggestion(last_accepted_total=1_000) is not None
        assert book.window_suggestion(last_accepted_total=1_000) is None
        book.start_send()
        assert book.window_suggestion(last_accepted_total=1_000) is not None

    def test_provider_dropping_within_a_send_uses_less_or_equal(self) -> None:
        book = NoteBook(declared_window=None)
        assert (
            book.provider_dropping(
                input_tokens=5_001, prior_input_tokens=5_000, first_of_send=False, append_only=True
            )
            is None
        )
        note = book.provider_dropping(
            input_tokens=5_000, prior_input_tokens=5_000, first_of_send=False, append_only=True
        )
        assert note is not None and note.kind == "context_provider_dropping"

    def test_provider_dropping_across_sends_needs_equality(self) -> None:
        book = NoteBook(declared_window=None)
        assert (
            book.provider_dropping(
                input_tokens=4_000, prior_input_tokens=5_000, first_of_send=True, append_only=True
            )
            is None
        )
        assert (
            book.provider_dropping(
                input_tokens=5_000, prior_input_tokens=5_000, first_of_send=True, append_only=True
            )
            is not None
        )

    def test_provider_dropping_fires_once_per_session_and_only_for_append_only_steps(self) -> None:
        book = NoteBook(declared_window=None)
        kwargs = {"input_tokens": 10, "prior_input_tokens": 20, "first_of_send": False}
        assert book.provider_dropping(**kwargs, append_only=False) is None  # type: ignore[arg-type]
        assert book.provider_dropping(**kwargs, append_only=True) is not None  # type: ignore[arg-type]
        book.start_send()
        assert book.provider_dropping(**kwargs, append_only=True) is None  # type: ignore[arg-type]

    def test_overrun_fires_past_the_declared_window_once_per_send(self) -> None:
        book = NoteBook(declared_window=100)
        assert book.window_overrun(input_tokens=90, output_tokens=10) is None
        note = book.window_overrun(input_tokens=90, output_tokens=11)
        assert note is not None and note.data == {"used_tokens": 101, "declared_context_window": 100}
        assert book.window_overrun(input_tokens=90, output_tokens=11) is None

    def test_reported_window_exceeded_needs_a_crossing_and_no_declaration(self) -> None:
        assert (
            NoteBook(declared_window=None).reported_window_exceeded(
                used_tokens=101, previous_used=100, reported_window=100
            )
            is not None
        )
        assert (
            NoteBook(declared_window=None).reported_window_exceeded(
                used_tokens=102, previous_used=101, reported_window=100
            )
            is None
        )
        assert (
            NoteBook(declared_window=50).reported_window_exceeded(
                used_tokens=101, previous_used=100, reported_window=100
            )
            is None
        )


class TestSilentOverflowNotes:
    def test_an_input_count_far_below_what_was_sent_is_a_truncation_note(self) -> None:
        note = NoteBook(declared_window=None).provider_truncated(input_tokens=2048, expected_input=3940)
        assert note is not None and note.kind == "context_provider_truncated"
        assert note.data == {"input_tokens": 2048, "expected_input_tokens": 3940}

    def test_a_count_within_the_calibration_band_is_not_truncation(self) -> None:
        assert (
            NoteBook(declared_window=None).provider_truncated(input_tokens=3000, expected_input=4000) is None
        )

    def test_an_unreported_count_is_not_truncation(self) -> None:
        assert NoteBook(declared_window=None).provider_truncated(input_tokens=0, expected_input=4000) is None

    def test_once_per_send(self) -> None:
        book = NoteBook(declared_window=None)
        assert book.provider_truncated(input_tokens=10, expected_input=4000) is not None
        assert book.provider_truncated(input_tokens=10, expected_input=4000) is None
        book.start_send()
        assert book.provider_truncated(input_tokens=10, expected_input=4000) is not None

    def test_usage_above_the_window_is_the_overrun_note(self) -> None:
        note = NoteBook(declared_window=200_000).window_overrun(input_tokens=210_000, output_tokens=0)
        assert note is not None and note.data["declared_context_window"] == 200_000


class TestEventForms:
    def test_an_event_serialises_to_json(self) -> None:
        event = UsageReported(
            call=0, usage=Usage(fresh_input=3, output=2), reported=True, stream_total=Usage()
        )
        data = event_to_dict(event)
        assert json.loads(json.dumps(data))["usage"]["fresh_input"] == 3
        assert data["type"] == "usage"
