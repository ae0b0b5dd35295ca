"""The physical-window projection and the appended-round estimate (agent-framework's vectors,
https://github.com/anima-research/agent-framework/pull/98 and its follow-ups)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.content import (
    AttachmentRef,
    Audio,
    Document,
    GeneratedImage,
    Image,
    Message,
    Text,
    ToolResult,
    Video,
)
from contextwindow.engine.projection import PhysicalWindow, projection
from contextwindow.engine.rounds import RoundPricer
from contextwindow.engine.tool_results import cap_tool_result, inline_cap_chars, truncation_notice
from contextwindow.errors import InvalidInput

WINDOW = 200_000
RESERVE = 32_000
ROUND = 6_043


def _ref(stamp: float | None = None, media_type: str = "image/png") -> AttachmentRef:
    return AttachmentRef(
        id="att_x", sha256="0" * 64, media_type=media_type, size_bytes=10, token_estimate=stamp
    )


def _blob_result() -> ToolResult:
    return ToolResult(tool_use_id="t1", content=json.dumps({"blob": "x" * 30_000}, separators=(",", ":")))


class TestAppendedRoundSeedRule:
    def test_the_blob_tool_result_is_30011_json_characters(self) -> None:
        assert len(_blob_result().content) == 30_011

    def test_a_30011_character_blob_capped_at_24000_prices_6043(self) -> None:
        capped = cap_tool_result(_blob_result(), inline_cap_chars(None))
        assert isinstance(capped.content, str)
        assert len(capped.content) == 24_090
        assert capped.content.endswith(truncation_notice(30_011))
        assert RoundPricer(preset="flat").price_and_estimate([capped])[0] == ROUND

    def test_the_inline_cap_is_the_smaller_of_desired_and_four_times_the_message_cap(self) -> None:
        assert inline_cap_chars(None) == 24_000
        assert inline_cap_chars(5_000) == 20_000
        assert inline_cap_chars(10_000) == 24_000
        assert inline_cap_chars(10_000, desired=5_000) == 5_000

    def test_a_result_within_the_cap_is_left_alone(self) -> None:
        result = ToolResult(tool_use_id="t", content="abc")
        assert cap_tool_result(result, 3) is result

    def test_a_cut_never_splits_a_surrogate_pair(self) -> None:
        result = ToolResult(tool_use_id="t", content="a" + "😀" * 10)
        capped = cap_tool_result(result, 4)
        assert isinstance(capped.content, str)
        assert capped.content.startswith("a😀") and not capped.content.startswith("a😀😀")

    def test_a_list_result_keeps_its_media_and_cuts_its_text(self) -> None:
        image = Image(ref=_ref())
        result = ToolResult(tool_use_id="t", content=(Text(text="x" * 30), image, Text(text="y" * 30)))
        capped = cap_tool_result(result, 40)
        assert not isinstance(capped.content, str)
        assert image in capped.content
        texts = [b.text for b in capped.content if isinstance(b, Text)]
        assert texts[0] == "x" * 30
        assert texts[1].startswith("y" * 10 + "\n\n[truncated — original was 60 chars")

    def test_tool_result_images_are_1600_each(self) -> None:
        result = ToolResult(
            tool_use_id="t", content=(Text(text="abcd"), Image(ref=_ref()), Image(ref=_ref()))
        )
        assert RoundPricer(preset="flat").price_and_estimate([result])[0] == 1 + 3_200 + 20

    @pytest.mark.parametrize(
        ("blocks", "media"),
        [
            pytest.param([Image(ref=_ref())] * 3, 4_800, id="three-unstamped-images"),
            pytest.param([GeneratedImage(ref=_ref())] * 3, 4_800, id="three-generated-images"),
            pytest.param([Image(ref=_ref(100))] * 3, 300, id="three-images-stamped-100"),
            pytest.param([Image(ref=_ref(0))] * 3, 0, id="three-images-stamped-0"),
            pytest.param([Image(ref=_ref(float("nan")))] * 3, 4_800, id="stamp-nan-priced-as-absent"),
            pytest.param([Image(ref=_ref(-1600))] * 3, 4_800, id="stamp-negative-priced-as-absent"),
            pytest.param([Image(ref=_ref(float("inf")))] * 3, 4_800, id="stamp-infinite-priced-as-absent"),
            pytest.param([Document(ref=_ref(media_type="application/pdf"))] * 4, 4_000, id="four-documents"),
            pytest.param([Audio(ref=_ref(media_type="audio/wav"))] * 4, 4_000, id="four-audio"),
            pytest.param([Video(ref=_ref(media_type="video/mp4"))] * 4, 4_000, id="four-videos"),
            pytest.param([], 0, id="text-only-control"),
        ],
    )
    def test_a_mid_turn_messages_media_are_priced(self, blocks: list[object], media: int) -> None:
        message = Message.user("look at these", *blocks)  # type: ignore[arg-type]
        result = ToolResult(tool_use_id="t", content="ok")
        expected = math.ceil((2 + len("look at these")) / 4) + media + 40
        assert RoundPricer(preset="flat").price_and_estimate([result], [message])[0] == expected

    def test_an_invalid_stamp_built_past_the_edge_is_still_priced_as_absent(self) -> None:
        # A ref constructed directly skips the edge's validation; the pricer re-checks the stamp.
        assert math.isnan(_ref(float("nan")).token_estimate or 0.0)
        message = Message.user(Image(ref=_ref(float("nan"))))
        assert RoundPricer(preset="flat").price_and_estimate([], [message])[0] == 1_600 + 20


class _FlatPricer:
    """A stand-in ruler: every block costs ``per_block`` (the engine passes the real Estimator)."""

    def __init__(self, per_block: int) -> None:
        self.per_block = per_block

    def block(self, block: object) -> int:
        return self.per_block


class TestAppendedRoundEstimatorRule:
    def test_every_result_and_injected_block_is_priced_by_the_estimator_plus_envelopes(self) -> None:
        pricer = RoundPricer(estimator=_FlatPricer(7))
        message = Message.user("a", Image(ref=_ref()))
        assert (
            pricer.price_and_estimate([ToolResult(tool_use_id="t", content="x")], [message])[0]
            == 7 + 2 * 7 + 40
        )

    def test_a_floor_ruler_only_raises_the_price(self) -> None:
        pricer = RoundPricer(estimator=_FlatPricer(7), floor_estimator=_FlatPricer(9))
        assert pricer.price_and_estimate([ToolResult(tool_use_id="t", content="x")])[0] == 9 + 20
        pricer = RoundPricer(estimator=_FlatPricer(9), floor_estimator=_FlatPricer(7))
        assert pricer.price_and_estimate([ToolResult(tool_use_id="t", content="x")])[0] == 9 + 20

    def test_the_estimator_preset_needs_an_estimator(self) -> None:
        with pytest.raises(InvalidInput, match="estimator"):
            RoundPricer()


# Per-call figures: (prompt, output). A prompt of 0 is an unreported call.
Calls = list[tuple[int, int]]

VECTORS: list[tuple[str, Calls, int, bool]] = [
    # id, calls (one per boundary), projection at the last boundary, restart?
    ("projects-from-the-latest-call", [(80_000, 20_000), (118_000, 30_000)], 186_043, False),
    ("latest-calls-output-crosses", [(120_000, 45_000)], 203_043, True),
    ("restarts-at-a-later-boundary", [(80_000, 30_000), (190_000, 10_000)], 238_043, True),
    ("cache-write-prompt-term", [(160_000, 2_000)], 200_043, True),
    ("growth-since-last-reporting-call", [(155_000, 2_000), (0, 2_000)], 203_086, True),
    ("output-of-a-call-without-prompt", [(150_000, 2_000), (0, 5_000)], 201_086, True),
    ("unreported-call-bounded-by-max-tokens", [(120_000, 5_000), (0, 0)], 201_086, True),
    ("growth-starts-again-on-a-reporting-call", [(100_000, 5_000), (0, 0), (137_000, 5_000)], 180_043, False),
    ("reported-prompt-without-output-bounded", [(150_000, 0)], 220_043, True),
]


def _drive(calls: Calls) -> tuple[PhysicalWindow, list[int | None]]:
    state = PhysicalWindow(window=WINDOW, reserve=RESERVE)
    state.start_stream()
    projections: list[int | None] = []
    for prompt, output in calls:
        state.observe_call(prompt=prompt, output=output)
        projections.append(state.project(ROUND))
        if state.over(ROUND) is None:
            state.continue_past(ROUND)
    return state, projections


class TestPhysicalWindowVectors:
    @pytest.mark.parametrize(
        ("calls", "expected", "restart"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
    )
    def test_seed_001_vector(self, calls: Calls, expected: int, restart: bool) -> None:
        _, projections = _drive(calls)
        assert projections[-1] == expected
        assert all(p is not None and p <= WINDOW for p in projections[:-1])
        assert (expected > WINDOW) is restart

    def test_a_second_calls_output_replaces_the_first(self) -> None:
        state, _ = _drive([(80_000, 30_000), (190_000, 10_000)])
        assert state.out == 10_000  # 258,043 if the first call's 30,000 had stayed

    def test_without_growth_the_unreported_output_would_be_missed(self) -> None:
        state, _ = _drive([(150_000, 2_000), (0, 5_000)])
        assert state.growth == ROUND + 5_000

    def test_a_reporting_call_restarts_the_growth(self) -> None:
        state, _ = _drive([(100_000, 5_000), (0, 0), (137_000, 5_000)])
        # Only the round continued past after call 3 remains; carried over it would project 224,129.
        assert (state.real, state.growth) == (137_000, ROUND)


class TestPhysicalWindowState:
    def test_no_window_means_no_projection(self) -> None:
        state = PhysicalWindow(window=None, reserve=RESERVE)
        state.observe_call(prompt=199_000, output=50_000)
        assert state.project(ROUND) is None
        assert state.over(ROUND) is None

    def test_no_reporting_call_means_no_projection(self) -> None:
        state = PhysicalWindow(window=WINDOW, reserve=RESERVE)
        state.observe_call(prompt=0, output=0)
        assert state.project(ROUND) is None
        assert state.growth == RESERVE

    def test_stream_start_resets_everything(self) -> None:
        state = PhysicalWindow(window=WINDOW, reserve=4_000)
        state.observe_call(prompt=200_000, output=1_000)
        state.continue_past(500)
        assert state.over(ROUND) == 200_000 + 1_000 + 500 + ROUND + 4_000
        state.start_stream()
        assert (state.real, state.out, state.growth) == (0, 0, 0)
        assert state.project(ROUND) is None

    def test_a_fresh_stream_fits_after_the_reset(self) -> None:
        state = PhysicalWindow(window=WINDOW, reserve=RESERVE)
        state.observe_call(prompt=190_000, output=10_000)
        assert state.over(ROUND) == 238_043
        state.start_stream()
        state.observe_call(prompt=137_000, output=5_000)
        assert state.over(ROUND) is None
        assert state.project(ROUND) == 180_043

    def test_a_projection_equal_to_the_window_fits(self) -> None:
        state = PhysicalWindow(window=WINDOW, reserve=RESERVE)
        state.observe_call(prompt=WINDOW - RESERVE - ROUND - 1_000, output=1_000)
        assert state.project(ROUND) == WINDOW
        assert state.over(ROUND) is None

    @pytest.mark.parametrize(
        "kwargs", [{"prompt": -1, "output": 0}, {"prompt": 0, "output": -5}], ids=["prompt", "output"]
    )
    def test_negative_usage_is_refused(self, kwargs: dict[str, int]) -> None:
        with pytest.raises(InvalidInput):
            PhysicalWindow(window=WINDOW, reserve=RESERVE).observe_call(**kwargs)

    def test_bad_configuration_is_refused(self) -> None:
        with pytest.raises(InvalidInput, match="window"):
            PhysicalWindow(window=0, reserve=1)
        with pytest.raises(InvalidInput, match="reserve"):
            PhysicalWindow(window=10, reserve=-1)
        with pytest.raises(InvalidInput, match="appended"):
            projection(real=1, out=1, growth=1, appended=-1, reserve=1)


_count = st.integers(min_value=0, max_value=2_000_000)


class TestProjectionProperties:
    @given(_count, _count, _count, _count, _count, _count)
    def test_the_projection_never_falls_when_a_term_grows(
        self, real: int, out: int, growth: int, appended: int, reserve: int, extra: int
    ) -> None:
        base = projection(real=real, out=out, growth=growth, appended=appended, reserve=reserve)
        for name in ("real", "out", "growth", "appended", "reserve"):
            terms = {"real": real, "out": out, "growth": growth, "appended": appended, "reserve": reserve}
            terms[name] += extra
            assert projection(**terms) >= base

    @given(st.lists(st.tuples(_count, _count), max_size=30), _count)
    def test_the_state_projects_the_latest_reporting_call_plus_everything_since(
        self, calls: list[tuple[int, int]], appended: int
    ) -> None:
        state = PhysicalWindow(window=10**9, reserve=RESERVE)
        expected_real = expected_out = expected_growth = 0
        for prompt, output in calls:
            state.observe_call(prompt=prompt, output=output)
            counted = output or RESERVE
            if prompt > 0:
                expected_real, expected_out, expected_growth = prompt, counted, 0
            else:
                expected_growth += counted
            state.continue_past(appended)
            expected_growth += appended
        assert (state.real, state.out, state.growth) == (expected_real, expected_out, expected_growth)
