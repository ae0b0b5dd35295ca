"""Calibration learning, persistence with pricing epochs, and the epoch-3 predicate (context-manager's
rules, https://github.com/anima-research/context-manager/pull/227)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.errors import StoreError
from contextwindow.store.slots import MemorySlot
from contextwindow.usage.calibration import (
    CALIBRATION_PRICING_EPOCH,
    Calibrator,
    MessageFigures,
    epoch3_bound,
    epoch3_discards,
)

EPOCH = CALIBRATION_PRICING_EPOCH
T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def calibrator(record: dict[str, Any] | None = None, **kw: Any) -> tuple[Calibrator, MemorySlot]:
    slot = MemorySlot(record)
    return Calibrator(slot, model="gpt-4o", clock=lambda: T0, **kw), slot


def learn(cal: Calibrator, estimate: int, real: float) -> float:
    cal.arm(estimate)
    return cal.report_real_input(real)  # type: ignore[arg-type]


class TestLearning:
    @pytest.mark.parametrize(
        ("start", "real_over_estimate", "result"),
        [
            pytest.param(1.8, 1 / 1.8, 1.64, id="1.8-decays-to-1.64"),
            pytest.param(1.0, 1.5, 1.1, id="1.5x-moves-1-to-1.1"),
            pytest.param(1.0, 3.0, 1.0, id="3x-is-rejected"),
        ],
    )
    def test_seed_vectors(self, start: float, real_over_estimate: float, result: float) -> None:
        cal, _ = calibrator({"multiplier": start, "at": "t", "pricing": EPOCH})
        estimate = 90_000
        assert learn(cal, estimate, estimate * real_over_estimate) == pytest.approx(result)

    def test_learns_once_per_armed_request(self) -> None:
        cal, _ = calibrator()
        cal.arm(1_000)
        assert cal.report_real_input(1_500) == pytest.approx(1.1)
        assert cal.report_real_input(1_500) == pytest.approx(1.1)  # a later call of the same turn is ignored
        assert not cal.armed

    @pytest.mark.parametrize("estimate", [0, -5, math.nan, math.inf], ids=["zero", "negative", "nan", "inf"])
    def test_a_non_positive_estimate_arms_nothing(self, estimate: float) -> None:
        cal, _ = calibrator()
        assert cal.arm(estimate) is False  # type: ignore[arg-type]
        assert cal.report_real_input(1_500) == 1.0

    @pytest.mark.parametrize(
        "real", [0, -1, math.nan, math.inf, -math.inf], ids=["zero", "neg", "nan", "inf", "-inf"]
    )
    def test_a_real_figure_that_is_not_finite_and_positive_is_ignored_and_keeps_the_sample_armed(
        self, real: float
    ) -> None:
        cal, _ = calibrator()
        cal.arm(1_000)
        assert cal.report_real_input(real) == 1.0  # type: ignore[arg-type]
        assert cal.armed
        assert cal.report_real_input(1_500) == pytest.approx(1.1)

    def test_accepts_by_observed_when_the_ratio_is_out_of_band(self) -> None:
        # at 0.6, real = 2.5x the estimate: ratio 2.5 is out, observed 1.5 is in
        cal, _ = calibrator({"multiplier": 0.6, "at": "t", "pricing": EPOCH})
        assert learn(cal, 1_000, 2_500) == pytest.approx(0.6 + 0.2 * (1.5 - 0.6))

    def test_accepts_by_ratio_when_observed_is_out_of_band(self) -> None:
        # at 1.8, real = 1.5x: observed 2.7 is out, ratio 1.5 is in; the update clamps at 1.8
        cal, _ = calibrator({"multiplier": 1.8, "at": "t", "pricing": EPOCH})
        assert learn(cal, 1_000, 1_500) == pytest.approx(1.8)

    @given(st.floats(0.6, 1.8), st.integers(1, 10**6), st.floats(1e-3, 1e3))
    def test_the_multiplier_stays_in_the_band_whatever_the_samples(
        self, start: float, est: int, k: float
    ) -> None:
        cal, _ = calibrator({"multiplier": start, "at": "t", "pricing": EPOCH})
        assert 0.6 <= learn(cal, est, est * k) <= 1.8


class TestSetter:
    @pytest.mark.parametrize(
        ("factor", "accepted"),
        [
            (0.25, False),
            (0.2500001, True),
            (3.999, True),
            (4.0, False),
            (math.nan, False),
            (math.inf, False),
            (-1.0, False),
            (1.5, True),
        ],
        ids=["0.25", "just-above-0.25", "3.999", "4", "nan", "inf", "negative", "1.5"],
    )
    def test_accepts_only_finite_values_strictly_between_a_quarter_and_four(
        self, factor: float, accepted: bool
    ) -> None:
        cal, _ = calibrator()
        assert cal.set(factor) is accepted
        assert cal.multiplier == (factor if accepted else 1.0)


class TestPersistence:
    """context-manager's eight ``calibration-band`` tests, adapted."""

    def test_1_a_learned_value_is_persisted_with_the_epoch(self) -> None:
        cal, slot = calibrator({"multiplier": 1.8, "at": "t", "pricing": EPOCH})
        learn(cal, 1_800, 1_000)
        assert slot.load() == {"multiplier": pytest.approx(1.64), "at": T0.isoformat(), "pricing": EPOCH}

    def test_2_a_rejected_sample_writes_nothing(self) -> None:
        cal, slot = calibrator()
        learn(cal, 1_000, 3_000)
        assert slot.history == []

    def test_3_a_same_epoch_record_is_clamped_to_the_band_on_load(self) -> None:
        assert calibrator({"multiplier": 3.0, "at": "t", "pricing": EPOCH})[0].multiplier == 1.8
        assert calibrator({"multiplier": 0.3, "at": "t", "pricing": EPOCH})[0].multiplier == 0.6

    def test_4_startup_wedge_an_unstamped_1_8_is_discarded_and_the_reset_persisted(self) -> None:
        raw, reserve = 10_000, 500
        budget = math.ceil(raw * 1.35) + reserve

        unstamped, slot = calibrator({"multiplier": 1.8, "at": "t"})
        assert unstamped.multiplier == 1.0
        assert raw * unstamped.multiplier + reserve <= budget  # the first compile fits
        assert slot.load() == {
            "multiplier": 1.0,
            "at": T0.isoformat(),
            "pricing": EPOCH,
            "reset": {"discarded_multiplier": 1.8, "from_epoch": 0, "at": T0.isoformat()},
        }
        current, _ = calibrator({"multiplier": 1.8, "at": "t", "pricing": EPOCH})
        assert raw * current.multiplier + reserve > budget  # the same budget is over with a kept 1.8

    def test_5_a_newer_epoch_record_is_not_used_and_left_untouched(self) -> None:
        newer = {"multiplier": 1.4, "at": "t", "pricing": EPOCH + 1}
        cal, slot = calibrator(newer)
        assert cal.multiplier == 1.0
        learn(cal, 1_000, 1_500)
        assert slot.history == [newer]

    def test_6_a_learned_value_survives_a_reopen(self) -> None:
        cal, slot = calibrator()
        learn(cal, 1_000, 1_500)
        assert Calibrator(slot).multiplier == pytest.approx(1.1)

    def test_7_a_discard_stays_visible_through_learning_and_restarts_until_restamped(self) -> None:
        cal, slot = calibrator({"multiplier": 0.6, "at": "t"})
        assert cal.reset is not None
        assert (cal.reset.discarded_multiplier, cal.reset.from_epoch) == (0.6, 0)
        learn(cal, 1_000, 1_500)
        reopened = Calibrator(slot)
        assert reopened.reset == cal.reset and reopened.multiplier == pytest.approx(1.1)
        reopened.restamp()
        assert "reset" not in (slot.load() or {})
        assert Calibrator(slot).reset is None

    def test_8_no_history_is_multiplier_one_at_the_current_epoch_with_no_reset(self) -> None:
        cal, slot = calibrator()
        assert cal.stats() == {"multiplier": 1.0, "pricing_epoch": EPOCH}
        assert slot.history == []

    @pytest.mark.parametrize(
        "pricing", [1, 2, None, "x", -3], ids=["epoch-1", "epoch-2", "null", "garbage", "negative"]
    )
    def test_every_older_or_unreadable_epoch_is_discarded_with_a_reset(self, pricing: object) -> None:
        cal, _ = calibrator({"multiplier": 1.3, "at": "t", "pricing": pricing})
        assert cal.multiplier == 1.0 and cal.reset is not None
        assert cal.reset.from_epoch == (pricing if isinstance(pricing, int) and pricing >= 0 else 0)

    @pytest.mark.parametrize(
        "multiplier", [math.nan, math.inf, None, "1.2"], ids=["nan", "inf", "missing", "string"]
    )
    def test_a_record_without_a_finite_multiplier_is_no_history(self, multiplier: object) -> None:
        cal, slot = calibrator({"multiplier": multiplier, "at": "t", "pricing": 0})
        assert cal.multiplier == 1.0 and cal.reset is None and len(slot.history) == 1

    def test_a_failing_slot_does_not_fail_learning(self) -> None:
        class Broken(MemorySlot):
            def save(self, record: Any) -> None:
                raise StoreError("disk full")

        cal = Calibrator(Broken(), model="m")
        assert learn(cal, 1_000, 1_500) == pytest.approx(1.1)
        assert isinstance(cal.last_save_error, StoreError)


# --- the epoch-3 discard predicate -------------------------------------------------------------------


def js_round(x: float) -> int:
    return math.floor(x + 0.5)


def prose_raw(chars: int) -> int:
    """context-manager's store prose rate, ceil(L / 2.9), for a block of ``chars`` letters."""
    return math.ceil(chars / 2.9)


def store_estimate(blocks: int, chars: int, m: float) -> int:
    """The store's estimate of ``blocks`` equal text blocks at multiplier ``m``: rounded per block."""
    return blocks * js_round(prose_raw(chars) * m)


class TestStoreStub:
    @pytest.mark.parametrize(
        ("blocks", "chars", "m", "estimate"),
        [
            (83, 1, 1, 83),
            (83, 1, 1.75, 166),
            (83, 1, 1.8, 166),
            (26, 3, 0.6, 26),
            (26, 3, 1.8, 104),
            (39, 4, 1.0, 78),
            (39, 4, 1.2, 78),
            (39, 4, 1.8, 156),
        ],
    )
    def test_the_stub_agrees_with_the_seeds_store_figures(
        self, blocks: int, chars: int, m: float, estimate: int
    ) -> None:
        assert store_estimate(blocks, chars, m) == estimate


class TestEpoch3Predicate:
    @pytest.mark.parametrize(
        ("cap", "blocks", "chars", "applied", "bound"),
        [
            pytest.param(100, 83, 1, 1.0, 265.6, id="83-one-char-blocks"),
            pytest.param(50, 26, 3, 0.6, 130, id="26-three-char-blocks"),
            pytest.param(100, 39, 4, 1.2, 165.75, id="39-four-char-blocks"),
            pytest.param(100, 60, 1, 1.0, 192, id="60-one-char-blocks-errs-high"),
        ],
    )
    def test_seed_003_vectors_are_counted(
        self, cap: int, blocks: int, chars: int, applied: float, bound: float
    ) -> None:
        estimate = store_estimate(blocks, chars, applied)
        assert epoch3_bound(estimate, blocks, applied) == pytest.approx(bound)
        assert epoch3_discards([MessageFigures(estimate=estimate, blocks=blocks)], cap=cap, applied=applied)

    def test_the_83_block_message_the_227_bound_kept_is_counted(self) -> None:
        estimate = store_estimate(83, 1, 1.0)
        assert 1.8 * estimate / 1.0 == pytest.approx(149.4)  # the first epoch-3 bound: under 150, kept
        assert store_estimate(83, 1, 1.75) > 150  # yet the store priced it past the line at 1.75
        assert epoch3_discards([MessageFigures(estimate=estimate, blocks=83)], cap=100, applied=1.0)

    def test_without_either_half_token_the_39_block_bound_is_at_most_the_line(self) -> None:
        e, n, f = 78, 39, 1.2
        assert 1.8 * e / f + n / 2 <= 150 and 1.8 * (e + n / 2) / f <= 150

    @pytest.mark.parametrize(
        "reported",
        [math.nan, 0, -1, math.inf, None, "1.0"],
        ids=["nan", "zero", "negative", "inf", "none", "string"],
    )
    def test_an_unreported_multiplier_reads_as_0_6(self, reported: object) -> None:
        estimate = store_estimate(26, 3, 0.6)  # a store running at 0.6 behind the view
        assert epoch3_bound(estimate, 26, reported) == pytest.approx(130)
        assert epoch3_discards([MessageFigures(estimate=estimate, blocks=26)], cap=50, applied=reported)
        assert epoch3_bound(estimate, 26, 1.0) == pytest.approx(83.2)  # read at 1 it would be kept

    def test_a_message_the_cut_puts_past_the_cap_discards(self) -> None:
        assert epoch3_discards([MessageFigures(estimate=1, blocks=1, past_cap=True)], cap=100, applied=1.0)

    def test_no_cap_keeps_the_multiplier(self) -> None:
        huge = [MessageFigures(estimate=10**6, blocks=1, past_cap=True)]
        assert not epoch3_discards(huge, cap=None, applied=1.0)
        assert not epoch3_discards(huge, cap=0, applied=1.0)

    def test_seed_003_sweep(self) -> None:
        """Equal text blocks of 1–12 characters, 1–80 blocks, caps 50 and 100, F from 0.6 to 1.8."""
        checked = 0
        for cap in (50, 100):
            line = cap + 50
            for step in range(25):
                f = round(0.6 + 0.05 * step, 2)
                for chars in range(1, 13):
                    for blocks in range(1, 81):
                        if blocks * math.ceil(chars / 4) > cap:  # the cut's own test: only messages it leaves
                            continue
                        e_f, e_18 = store_estimate(blocks, chars, f), store_estimate(blocks, chars, 1.8)
                        counted = epoch3_discards(
                            [MessageFigures(estimate=e_f, blocks=blocks)], cap=cap, applied=f
                        )
                        if e_18 > line:
                            assert counted, (cap, f, chars, blocks)
                        if e_18 <= line - blocks * (1 + 1.8 / f):
                            assert not counted, (cap, f, chars, blocks)
                        checked += 1
        assert checked > 10_000


class TestRetainingAnOlderMultiplier:
    def test_a_predicate_that_clears_the_store_keeps_and_restamps_the_multiplier(self) -> None:
        store = [MessageFigures(estimate=40, blocks=2)]

        def retain(from_epoch: int, multiplier: float) -> bool:
            return from_epoch < 3 and not epoch3_discards(store, cap=100, applied=multiplier)

        cal, slot = calibrator({"multiplier": 1.3, "at": "t", "pricing": 1}, retain_older=retain)
        assert cal.multiplier == 1.3 and cal.reset is None
        assert slot.load() == {"multiplier": 1.3, "at": T0.isoformat(), "pricing": EPOCH}

    def test_a_predicate_that_counts_a_message_discards_with_a_reset(self) -> None:
        store = [MessageFigures(estimate=store_estimate(83, 1, 1.0), blocks=83)]
        cal, _ = calibrator(
            {"multiplier": 1.0, "at": "t", "pricing": 1},
            retain_older=lambda _e, m: not epoch3_discards(store, cap=100, applied=m),
        )
        assert cal.multiplier == 1.0 and cal.reset is not None and cal.reset.from_epoch == 1
