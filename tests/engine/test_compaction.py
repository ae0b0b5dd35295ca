"""Fold selection, summary checks, triggers and the escalation ladder.

Known-answer vectors from apache/maka (https://github.com/apache/maka/pull/4559: safe prefix,
summary defects, proactive fold) and withastro/flue (https://github.com/withastro/flue/issues/531:
reserve, threshold, cut point).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.content import Message, ToolResult, ToolUse
from contextwindow.engine.events import FoldFailure
from contextwindow.engine.folding.fold_trigger import ProactiveTrigger
from contextwindow.engine.folding.ladder import EscalationLadder
from contextwindow.engine.folding.safe_prefix import select_safe_prefix
from contextwindow.engine.folding.summary_rules import (
    DEFAULT_SUMMARY_PROMPT,
    REQUIRED_SECTIONS,
    find_summary_defect,
)
from contextwindow.errors import InvalidInput


def user(text: str = "u") -> Message:
    return Message.user(text)


def assistant(text: str = "a") -> Message:
    return Message.assistant(text)


def call(*ids: str) -> Message:
    return Message.assistant(*(ToolUse(id=i, name="t") for i in ids))


def result(*ids: str) -> Message:
    return Message.user(*(ToolResult(tool_use_id=i, content="r") for i in ids))


class TestSafePrefix:
    def test_the_largest_cut_that_straddles_no_pair(self) -> None:
        history = [user(), call("a"), result("a"), assistant(), user(), call("b"), result("b"), assistant()]
        assert select_safe_prefix(history, phase="standalone") == 8
        assert select_safe_prefix(history, phase="standalone", reserve_tail=1) == 7
        assert select_safe_prefix(history, phase="standalone", max_covered=6) == 5

    def test_a_cut_between_a_call_and_its_result_is_unsafe(self) -> None:
        history = [user(), call("a"), result("a"), assistant()]
        assert select_safe_prefix(history, phase="standalone", max_covered=2) == 1

    def test_an_open_call_cannot_be_covered(self) -> None:
        history = [user(), assistant(), call("open"), user("steer"), assistant()]
        assert select_safe_prefix(history, phase="standalone") == 2

    def test_a_result_without_its_call_is_inert(self) -> None:
        history = [result("ghost"), user(), assistant()]
        assert select_safe_prefix(history, phase="standalone") == 3

    def test_parallel_calls_must_all_be_answered_inside_the_cut(self) -> None:
        history = [user(), call("a", "b"), result("a"), result("b"), assistant()]
        assert select_safe_prefix(history, phase="standalone", max_covered=3) == 1

    def test_the_cut_stops_before_partial_and_pinned_messages(self) -> None:
        history = [user(), assistant(), user(), assistant(), user(), assistant()]
        assert select_safe_prefix(history, phase="standalone", first_partial=3) == 3
        assert select_safe_prefix(history, phase="standalone", pinned=[4, 2]) == 2

    def test_pre_turn_covers_at_most_up_to_the_turn_start(self) -> None:
        history = [user(), assistant(), user(), assistant(), user("now")]
        assert select_safe_prefix(history, phase="pre_turn", turn_start=4) == 4
        assert select_safe_prefix(history, phase="pre_turn", turn_start=2) == 2

    def test_pre_turn_with_the_anchor_first_fails_open(self) -> None:
        history = [user("now"), assistant()]
        failure = select_safe_prefix(history, phase="pre_turn", turn_start=0)
        assert isinstance(failure, FoldFailure) and failure.reason == "no_safe_completed_span"

    def test_mid_turn_must_cover_past_the_anchor_and_at_least_two(self) -> None:
        history = [user(), assistant(), user("now"), call("a"), result("a"), call("b"), result("b")]
        assert select_safe_prefix(history, phase="mid_turn", turn_start=2) == 5
        failure = select_safe_prefix(history, phase="mid_turn", turn_start=2, max_covered=2)
        assert isinstance(failure, FoldFailure)
        assert isinstance(
            select_safe_prefix([user("now"), user()], phase="mid_turn", turn_start=0), FoldFailure
        )

    def test_mid_turn_with_only_an_open_call_after_the_anchor_fails_open(self) -> None:
        history = [user("now"), call("open"), user("late")]
        assert isinstance(select_safe_prefix(history, phase="mid_turn", turn_start=0), FoldFailure)

    def test_a_turn_phase_needs_its_anchor(self) -> None:
        with pytest.raises(InvalidInput, match="turn_start"):
            select_safe_prefix([user()], phase="mid_turn")

    @given(st.lists(st.sampled_from(["u", "a", "c", "r"]), max_size=30))
    def test_a_chosen_cut_never_splits_a_pair(self, shape: list[str]) -> None:
        history: list[Message] = []
        open_ids: list[str] = []
        for n, kind in enumerate(shape):
            if kind == "c":
                open_ids.append(f"id{n}")
                history.append(call(f"id{n}"))
            elif kind == "r" and open_ids:
                history.append(result(open_ids.pop(0)))
            else:
                history.append(user() if kind == "u" else assistant())
        cut = select_safe_prefix(history, phase="standalone")
        if isinstance(cut, FoldFailure):
            return
        covered_calls = {b.id for m in history[:cut] for b in m.content if isinstance(b, ToolUse)}
        covered_results = {
            b.tool_use_id for m in history[:cut] for b in m.content if isinstance(b, ToolResult)
        }
        assert covered_calls <= covered_results


def good_summary(**override: str) -> str:
    body = {s: f"content for {s}" for s in REQUIRED_SECTIONS}
    body.update(override)
    return "\n\n".join(f"## {s}\n{body[s]}" for s in REQUIRED_SECTIONS) + "\n"


class TestSummaryDefects:
    def test_a_complete_summary_passes(self) -> None:
        assert find_summary_defect(good_summary()) is None

    def test_the_default_prompt_asks_for_every_required_section(self) -> None:
        for section in REQUIRED_SECTIONS:
            assert f"## {section}\n" in DEFAULT_SUMMARY_PROMPT

    def test_the_prompts_own_template_is_not_a_summary(self) -> None:
        template = DEFAULT_SUMMARY_PROMPT[DEFAULT_SUMMARY_PROMPT.index("## Goal") :]
        template = template[: template.index("Keep exact")]
        assert find_summary_defect(template) == "malformed_summary_missing_section"

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            pytest.param(
                good_summary().replace("## Decisions", "## Choices"),
                "malformed_summary_missing_section",
                id="missing",
            ),
            pytest.param(
                good_summary()
                .replace("## Goal", "## Tmp")
                .replace("## Latest state", "## Goal\nx\n\n## Latest state"),
                "malformed_summary_missing_section",
                id="out-of-order",
            ),
            pytest.param(
                good_summary(**{"Open work": ""}), "malformed_summary_missing_section", id="empty-section"
            ),
            pytest.param(
                good_summary(**{"Open work": "---"}), "malformed_summary_missing_section", id="rule-only"
            ),
            pytest.param(
                "```\n" + good_summary() + "```\n", "malformed_summary_missing_section", id="inside-a-fence"
            ),
            pytest.param(
                good_summary() + "\n```python\nx = 1\n", "malformed_summary_truncated", id="unclosed-fence"
            ),
            pytest.param(good_summary() + "Next:", "malformed_summary_truncated", id="trailing-colon"),
            pytest.param(
                good_summary() + "次：", "malformed_summary_truncated", id="trailing-fullwidth-colon"
            ),
            pytest.param(
                good_summary() + "and then...", "malformed_summary_truncated", id="trailing-ellipsis"
            ),
            pytest.param(
                good_summary().replace("## Goal", "    ## Goal"),
                "malformed_summary_missing_section",
                id="indented-4",
            ),
            pytest.param("", "malformed_summary_missing_section", id="empty"),
        ],
    )
    def test_a_defect_is_named(self, text: str, reason: str) -> None:
        assert find_summary_defect(text) == reason

    def test_a_heading_indented_three_spaces_counts(self) -> None:
        assert find_summary_defect(good_summary().replace("## Goal", "   ## Goal")) is None

    def test_too_small_is_judged_from_real_usage(self) -> None:
        assert find_summary_defect(good_summary(), input_tokens=20_000, output_tokens=50) == (
            "malformed_summary_too_small_for_fold"
        )
        assert find_summary_defect(good_summary(), input_tokens=20_000, output_tokens=400) is None

    def test_the_floor_is_skipped_on_roll_forward_and_without_usage(self) -> None:
        assert (
            find_summary_defect(good_summary(), input_tokens=20_000, output_tokens=50, roll_forward=True)
            is None
        )
        assert find_summary_defect(good_summary()) is None


class TestProactiveTrigger:
    def test_fires_when_baseline_plus_reply_reserve_reaches_the_window(self) -> None:
        trigger = ProactiveTrigger(declared_window=100_000)
        trigger.accepted(input_tokens=89_000, output_tokens=3_000, finish_reason="end_turn")
        assert trigger.reply_reserve() == 6_000
        assert trigger.due() is None  # 98,000
        trigger.start_send()
        trigger.accepted(input_tokens=90_000, output_tokens=3_334, finish_reason="end_turn")
        assert trigger.due() == "proactive"  # 90,000 + 3,334 + 6,668 = 100,002

    def test_the_reply_reserve_is_capped_at_8000(self) -> None:
        trigger = ProactiveTrigger(declared_window=100_000)
        trigger.accepted(input_tokens=80_000, output_tokens=12_000, finish_reason="end_turn")
        assert trigger.reply_reserve() == 8_000
        assert trigger.due() == "proactive"

    def test_never_without_a_declared_window(self) -> None:
        trigger = ProactiveTrigger(declared_window=None)
        trigger.accepted(input_tokens=10**9, output_tokens=10**6, finish_reason="end_turn")
        assert trigger.due() is None

    def test_at_most_once_per_send(self) -> None:
        trigger = ProactiveTrigger(declared_window=1_000)
        trigger.accepted(input_tokens=2_000, output_tokens=0, finish_reason="end_turn")
        assert trigger.due() == "proactive"
        trigger.accepted(input_tokens=2_000, output_tokens=0, finish_reason="end_turn")
        assert trigger.due() is None
        trigger.start_send()
        assert trigger.due() == "proactive"

    def test_the_baseline_is_unknown_after_a_fold(self) -> None:
        trigger = ProactiveTrigger(declared_window=1_000)
        trigger.accepted(input_tokens=2_000, output_tokens=0, finish_reason="end_turn")
        trigger.folded()
        assert trigger.due() is None

    def test_step_zero_is_seeded_from_the_anchor(self) -> None:
        trigger = ProactiveTrigger(declared_window=1_000)
        trigger.seed(input_tokens=990, output_tokens=10)
        assert trigger.due() == "proactive"

    def test_a_reply_cut_at_the_limit_folds_once(self) -> None:
        trigger = ProactiveTrigger(declared_window=None)
        trigger.accepted(input_tokens=10, output_tokens=4_096, finish_reason="length")
        assert trigger.due() == "length"
        assert trigger.due() is None

    @pytest.mark.parametrize("reason", ["max_tokens", "context_window"])
    def test_a_normalised_cut_reply_folds_once(self, reason: str) -> None:
        trigger = ProactiveTrigger(declared_window=None)
        trigger.accepted(input_tokens=10, output_tokens=4_096, finish_reason=reason)
        assert trigger.due() == "length"
        assert trigger.due() is None


class TestEscalationLadder:
    def test_each_rung_once_in_order_then_nothing(self) -> None:
        ladder = EscalationLadder(max_compactions=10)
        rungs = [ladder.next_rung() for _ in range(5)]
        assert rungs == ["evict_media", "archive_tool_results", "fold", "hard_cut", None]
        assert ladder.exhausted

    def test_the_number_of_compactions_per_turn_is_bounded(self) -> None:
        ladder = EscalationLadder(max_compactions=2)
        assert ladder.next_rung() == "evict_media"
        assert ladder.next_rung() == "archive_tool_results"
        assert ladder.next_rung() is None

    def test_a_new_turn_starts_the_ladder_again(self) -> None:
        ladder = EscalationLadder()
        while ladder.next_rung() is not None:
            pass
        ladder.start_turn()
        assert ladder.next_rung() == "evict_media"
