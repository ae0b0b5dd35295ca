"""Usage normalisation and per-call usage; the projection's vectors from agent-framework's per-call
usage change (https://github.com/anima-research/agent-framework)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.errors import InvalidInput, UsageError
from contextwindow.usage.tracker import CallUsage, Usage, UsageMode, UsageTracker


def cumulative(*calls: Usage) -> list[Usage]:
    """The running totals a cumulative provider layer emits for these per-call usages."""
    out, acc = [], Usage()
    for call in calls:
        acc = acc + call
        out.append(acc)
    return out


class TestUsageShape:
    def test_prompt_is_fresh_plus_cache_read_plus_cache_write(self) -> None:
        assert Usage(fresh_input=20, cache_read=78, cache_write=20, output=30).prompt == 118

    def test_total_is_prompt_plus_output(self) -> None:
        assert Usage(fresh_input=5, cache_read=5, output=7).total == 17

    @pytest.mark.parametrize(
        "bad", [-1, 1.5, math.nan, True, "3"], ids=["negative", "fraction", "nan", "bool", "str"]
    )
    def test_rejects_counts_that_are_not_whole_non_negative_numbers(self, bad: object) -> None:
        with pytest.raises(InvalidInput) as err:
            Usage(fresh_input=bad)  # type: ignore[arg-type]
        assert err.value.path == "usage.fresh_input"

    def test_the_bound_and_an_integral_float_are_decided_as_before(self) -> None:
        from contextwindow.limits import MAX_TOKENS

        assert Usage(fresh_input=MAX_TOKENS).fresh_input == MAX_TOKENS
        assert Usage(output=7.0).output == 7 and type(Usage(output=7.0).output) is int  # type: ignore[arg-type]
        with pytest.raises(InvalidInput) as err:
            Usage(cache_read=MAX_TOKENS + 1)
        assert err.value.path == "usage.cache_read"

    def test_rejects_reasoning_larger_than_output(self) -> None:
        with pytest.raises(InvalidInput, match="reasoning"):
            Usage(output=10, reasoning=11)


class TestAnthropicUsage:
    def test_cache_fields_sit_beside_input_tokens_and_are_summed(self) -> None:
        u = Usage.from_anthropic(
            {
                "input_tokens": 20,
                "cache_creation_input_tokens": 30,
                "cache_read_input_tokens": 110,
                "output_tokens": 5,
            }
        )
        assert (u.fresh_input, u.cache_write, u.cache_read, u.output, u.prompt) == (20, 30, 110, 5, 160)

    def test_reads_the_sdk_usage_model(self) -> None:
        from anthropic.types import Usage as AnthropicUsage

        sdk = AnthropicUsage(
            input_tokens=12, output_tokens=7, cache_creation_input_tokens=None, cache_read_input_tokens=100
        )
        assert Usage.from_anthropic(sdk) == Usage(fresh_input=12, cache_read=100, output=7)

    def test_reads_a_whole_message_through_its_usage(self) -> None:
        message = {"id": "msg_1", "type": "message", "usage": {"input_tokens": 3, "output_tokens": 4}}
        assert Usage.from_anthropic(message).prompt == 3

    def test_names_the_bad_field(self) -> None:
        with pytest.raises(InvalidInput) as err:
            Usage.from_anthropic({"input_tokens": -5, "output_tokens": 1})
        assert err.value.path == "usage.input_tokens"

    def test_refuses_an_object_with_no_counts(self) -> None:
        with pytest.raises(InvalidInput, match="no usage counts"):
            Usage.from_anthropic({"id": "x"})


class TestOpenAIUsage:
    def test_chat_cached_tokens_are_inside_the_prompt_not_added_to_it(self) -> None:
        u = Usage.from_openai(
            {
                "prompt_tokens": 2006,
                "completion_tokens": 300,
                "total_tokens": 2306,
                "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 192},
            }
        )
        assert (u.prompt, u.fresh_input, u.cache_read, u.output, u.reasoning) == (2006, 86, 1920, 300, 192)

    def test_responses_fields_are_detected(self) -> None:
        u = Usage.from_openai(
            {
                "input_tokens": 500,
                "input_tokens_details": {"cached_tokens": 128},
                "output_tokens": 50,
                "output_tokens_details": {"reasoning_tokens": 20},
                "total_tokens": 550,
            }
        )
        assert (u.prompt, u.cache_read, u.output, u.reasoning) == (500, 128, 50, 20)

    def test_reads_the_chat_sdk_model_with_null_details(self) -> None:
        from openai.types import CompletionUsage

        sdk = CompletionUsage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
        assert Usage.from_openai(sdk) == Usage(fresh_input=10, output=2)

    def test_reads_the_responses_sdk_model(self) -> None:
        from openai.types.responses import ResponseUsage

        sdk = ResponseUsage.model_validate(
            {
                "input_tokens": 40,
                "input_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 6},
                "output_tokens": 9,
                "output_tokens_details": {"reasoning_tokens": 4},
                "total_tokens": 49,
            }
        )
        # the SDK's input_tokens_details is "a detailed breakdown of the input tokens": both are subsets
        assert Usage.from_openai(sdk) == Usage(
            fresh_input=4, cache_read=30, cache_write=6, output=9, reasoning=4
        )

    def test_cached_tokens_larger_than_the_prompt_are_bad_input(self) -> None:
        with pytest.raises(InvalidInput) as err:
            Usage.from_openai(
                {"prompt_tokens": 10, "completion_tokens": 0, "prompt_tokens_details": {"cached_tokens": 11}}
            )
        assert err.value.path == "usage.prompt_tokens_details.cached_tokens"

    def test_reasoning_larger_than_completion_is_bad_input(self) -> None:
        with pytest.raises(InvalidInput, match="reasoning"):
            Usage.from_openai(
                {
                    "prompt_tokens": 1,
                    "completion_tokens": 3,
                    "completion_tokens_details": {"reasoning_tokens": 4},
                }
            )


# --- per-call usage ---------------------------------------------------------------------------------


class TestCumulativeSamples:
    def test_a_calls_usage_is_the_difference_between_consecutive_samples(self) -> None:
        tracker = UsageTracker("cumulative")
        first = Usage(fresh_input=20_000, cache_write=20_000, cache_read=40_000, output=20_000)
        second = Usage(fresh_input=20_000, cache_write=20_000, cache_read=78_000, output=30_000)
        s1, s2 = cumulative(first, second)
        assert tracker.feed(s1, max_tokens=32_000).usage == first
        call2 = tracker.feed(s2, max_tokens=32_000)
        assert call2.usage == second
        assert call2.prompt == 118_000  # Δin + ΔcacheCreation + ΔcacheRead

    def test_a_repeated_sample_is_an_unreported_call_whose_output_is_bounded_by_max_tokens(self) -> None:
        tracker = UsageTracker("cumulative")
        sample = Usage(fresh_input=100, output=10)
        tracker.feed(sample, max_tokens=500)
        call = tracker.feed(sample, max_tokens=500)
        assert (call.reported, call.prompt, call.output_counted) == (False, 0, 500)

    def test_a_call_reporting_output_but_no_prompt_is_unreported_with_its_own_output(self) -> None:
        tracker = UsageTracker("cumulative")
        tracker.feed(Usage(fresh_input=100, output=10), max_tokens=500)
        call = tracker.feed(Usage(fresh_input=100, output=12), max_tokens=500)
        assert (call.reported, call.output_counted) == (False, 2)

    def test_an_output_of_zero_counts_as_max_tokens_even_when_a_prompt_is_reported(self) -> None:
        call = UsageTracker("cumulative").feed(Usage(fresh_input=150_000), max_tokens=32_000)
        assert (call.reported, call.output_counted) == (True, 32_000)

    def test_a_sample_that_goes_backwards_is_bad_input_and_leaves_the_tracker_as_it_was(self) -> None:
        tracker = UsageTracker("cumulative")
        tracker.feed(Usage(fresh_input=100, cache_read=50, output=10), max_tokens=5)
        with pytest.raises(InvalidInput) as err:
            tracker.feed(Usage(fresh_input=100, cache_read=40, output=20), max_tokens=5)
        assert err.value.path == "usage.cache_read"
        assert len(tracker.calls) == 1
        assert tracker.feed(Usage(fresh_input=130, cache_read=50, output=10), max_tokens=5).prompt == 30

    def test_the_stream_start_forgets_the_previous_stream(self) -> None:
        tracker = UsageTracker("cumulative")
        tracker.feed(Usage(fresh_input=190_000, output=9_000), max_tokens=5)
        tracker.start_stream()
        assert tracker.calls == () and tracker.total == Usage()
        assert tracker.feed(Usage(fresh_input=1_000, output=3), max_tokens=5).prompt == 1_000

    def test_stream_fresh_input_is_the_accumulated_fresh_input(self) -> None:
        tracker = UsageTracker("cumulative")
        for sample in cumulative(Usage(fresh_input=5, cache_read=100), Usage(fresh_input=7, cache_read=105)):
            tracker.feed(sample, max_tokens=1)
        assert tracker.stream_fresh_input == 12
        assert tracker.total == Usage(fresh_input=12, cache_read=205)


class TestRefusedAttempts:
    def test_a_refused_attempts_usage_is_kept_out_of_the_calls_and_totals(self) -> None:
        tracker = UsageTracker("cumulative")
        tracker.feed(Usage(fresh_input=100, output=5), max_tokens=9)
        tracker.feed(Usage(fresh_input=300, output=6), max_tokens=9)
        marked = tracker.refused()
        assert marked.refused and marked.usage == Usage(fresh_input=200, output=1)
        assert tracker.total == Usage(fresh_input=100, output=5)
        # the layer left the attempt out of its running total; the retry is measured from before it
        retry = tracker.feed(Usage(fresh_input=310, output=8), max_tokens=9)
        assert retry.usage == Usage(fresh_input=210, output=3)
        assert [c.index for c in tracker.calls] == [0, 2]

    def test_refusing_twice_or_with_nothing_fed_is_a_usage_error(self) -> None:
        tracker = UsageTracker("per-call")
        with pytest.raises(UsageError):
            tracker.refused()
        tracker.feed(Usage(fresh_input=1), max_tokens=1)
        tracker.refused()
        with pytest.raises(UsageError):
            tracker.refused()


class TestPerCallSamples:
    def test_each_sample_is_the_calls_own_usage(self) -> None:
        tracker = UsageTracker("per-call")
        a = tracker.feed(Usage(fresh_input=100, output=4), max_tokens=9)
        b = tracker.feed(Usage(fresh_input=100, output=4), max_tokens=9)
        assert a.usage == b.usage and b.reported  # a repeat is a real call here, not an unreported one
        assert tracker.total == Usage(fresh_input=200, output=8)

    def test_a_call_with_no_usage_at_all_is_unreported(self) -> None:
        call = UsageTracker("per-call").unreported(max_tokens=4096)
        assert (call.reported, call.output_counted) == (False, 4096)

    def test_unknown_mode_and_negative_max_tokens_are_refused(self) -> None:
        with pytest.raises(UsageError):
            UsageTracker("running")  # type: ignore[arg-type]
        with pytest.raises(InvalidInput) as err:
            UsageTracker("per-call").feed(Usage(), max_tokens=-1)
        assert err.value.path == "max_tokens"

    @pytest.mark.parametrize("mode", ["output-only", "none"])
    def test_modes_other_than_cumulative_take_each_sample_as_the_calls_own(self, mode: UsageMode) -> None:
        tracker = UsageTracker(mode)
        a = tracker.feed(Usage(output=4), max_tokens=9)
        b = tracker.feed(Usage(output=4), max_tokens=9)
        assert (a.reported, b.usage) == (False, Usage(output=4))
        assert tracker.total == Usage(output=8)


_usages = st.builds(
    lambda f, r, w, o, k: Usage(fresh_input=f, cache_read=r, cache_write=w, output=o, reasoning=min(k, o)),
    *(st.integers(0, 10**7) for _ in range(5)),
)


class TestProperties:
    @given(st.lists(_usages, max_size=30), st.integers(0, 10**5))
    def test_cumulative_samples_give_back_each_calls_usage(self, calls: list[Usage], bound: int) -> None:
        tracker = UsageTracker("cumulative")
        got = [tracker.feed(s, max_tokens=bound) for s in cumulative(*calls)]
        assert [c.usage for c in got] == calls
        assert [c.reported for c in got] == [c.prompt > 0 for c in calls]
        assert all(c.output_counted == (c.usage.output or bound) for c in got)
        assert tracker.total == sum(calls, Usage())

    @given(st.lists(_usages, min_size=2, max_size=10), st.data())
    def test_no_sample_order_ever_gives_a_negative_count(
        self, samples: list[Usage], data: st.DataObject
    ) -> None:
        tracker = UsageTracker("cumulative")
        for sample in data.draw(st.permutations(samples)):
            try:
                call = tracker.feed(sample, max_tokens=1)
            except InvalidInput:
                continue
            assert (
                min(call.usage.fresh_input, call.usage.cache_read, call.usage.cache_write, call.usage.output)
                >= 0
            )


# --- what the physical-window projection reads (agent-framework's per-call usage vectors) ------------

WINDOW, RESERVE, APPENDED = 200_000, 32_000, 6_043


@dataclass
class Outcome:
    projections: list[int]
    restarted: bool


def project(samples: list[Usage | None], *, reserve: int = RESERVE, window: int = WINDOW) -> Outcome:
    """The projection driven by the tracker: the state rules the engine's projection applies.

    A ``None`` sample is a call that reported nothing at all.
    """
    tracker = UsageTracker("cumulative")
    real = out = growth = 0
    projections: list[int] = []
    for sample in samples:
        call: CallUsage = (
            tracker.unreported(max_tokens=reserve)
            if sample is None
            else tracker.feed(sample, max_tokens=reserve)
        )
        if call.reported:
            real, out, growth = call.prompt, call.output_counted, 0
        else:
            growth += call.output_counted
        if real > 0:
            projection = real + out + growth + APPENDED + reserve
            projections.append(projection)
            if projection > window:
                return Outcome(projections, True)
        growth += APPENDED
    return Outcome(projections, False)


def u(fresh: int = 0, read: int = 0, write: int = 0, out: int = 0) -> Usage:
    return Usage(fresh_input=fresh, cache_read=read, cache_write=write, output=out)


PROJECTION_VECTORS = [
    pytest.param(
        cumulative(u(20_000, 40_000, 20_000, 20_000), u(20_000, 78_000, 20_000, 30_000)),
        186_043,
        False,
        id="projects-from-the-latest-call-not-the-running-total",
    ),
    pytest.param(
        cumulative(u(120_000, out=45_000)), 203_043, True, id="latest-calls-output-crosses-the-window"
    ),
    pytest.param(
        cumulative(u(80_000, out=30_000), u(190_000, out=10_000)),
        238_043,
        True,
        id="later-boundary-own-figures",
    ),
    pytest.param(
        cumulative(u(130_000, write=30_000, out=2_000)), 200_043, True, id="cache-write-prompt-term"
    ),
    pytest.param(
        cumulative(u(155_000, out=2_000), u(out=2_000)), 203_086, True, id="growth-since-last-reporting-call"
    ),
    pytest.param(
        cumulative(u(150_000, out=2_000), u(out=5_000)), 201_086, True, id="output-without-prompt-counts"
    ),
    pytest.param(
        [u(120_000, out=5_000), u(120_000, out=5_000)],
        201_086,
        True,
        id="repeated-sample-output-bounded-by-max-tokens",
    ),
    pytest.param(
        [u(100_000, out=2_000), u(100_000, out=2_000), u(240_000, out=4_000)],
        180_043,
        False,
        id="growth-starts-again-when-a-later-call-reports",
    ),
    pytest.param(cumulative(u(150_000)), 220_043, True, id="prompt-but-no-output-bounded-by-max-tokens"),
]


class TestWhatTheProjectionReads:
    @pytest.mark.parametrize(("samples", "last_projection", "restarted"), PROJECTION_VECTORS)
    def test_seed_001_projection_vectors(
        self, samples: list[Usage], last_projection: int, restarted: bool
    ) -> None:
        outcome = project(samples)
        assert outcome.projections[-1] == last_projection
        assert outcome.restarted is restarted

    def test_the_running_total_would_have_read_286043(self) -> None:
        running = cumulative(u(20_000, 40_000, 20_000, 20_000), u(20_000, 78_000, 20_000, 30_000))[-1]
        assert running.prompt + running.output + APPENDED + RESERVE == 286_043

    def test_a_call_with_no_sample_at_all_is_bounded_like_a_repeated_one(self) -> None:
        assert project([u(120_000, out=5_000), None]).projections[-1] == 201_086

    def test_first_restart_vector_reads_the_physical_window(self) -> None:
        outcome = project([u(5_000, read=195_000)], reserve=4_000)
        assert outcome.restarted and outcome.projections[-1] > WINDOW
