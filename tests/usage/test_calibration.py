"""Calibration learning, persistence with pricing epochs, and the rule that keeps a multiplier across
an epoch change that changes no stored price."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.content import Message, Text
from contextwindow.engine import Engine, EngineCompiler
from contextwindow.errors import StoreError
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
from contextwindow.store import Session, open_store
from contextwindow.store.slots import LedgerSlot, MemorySlot
from contextwindow.testing import LocalProvider
from contextwindow.usage.calibration import (
    CALIBRATION_PRICING_EPOCH,
    FULL_SAMPLE_TOKENS,
    MIN_SAMPLE_TOKENS,
    Calibrator,
    stored_prices_unchanged,
)

EPOCH = CALIBRATION_PRICING_EPOCH
T0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)
FIRST = 1 + (1_000 / FULL_SAMPLE_TOKENS) * (1.5 - 1)
"""A fresh multiplier after its first sample, a 1,000-token request counted 1.5x: a running mean's first
step (alpha 1) weighted by the sample's size."""


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
        assert cal.report_real_input(1_500) == pytest.approx(FIRST)
        assert cal.report_real_input(1_500) == pytest.approx(
            FIRST
        )  # a later call of the same turn is ignored
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
        assert cal.report_real_input(1_500) == pytest.approx(FIRST)

    def test_accepts_by_observed_when_the_ratio_is_out_of_band(self) -> None:
        # at 0.6, real = 2.5x the estimate: ratio 2.5 is out, observed 1.5 is in
        cal, _ = calibrator({"multiplier": 0.6, "at": "t", "pricing": EPOCH})
        assert learn(cal, 4_000, 10_000) == pytest.approx(0.6 + 0.2 * (1.5 - 0.6))

    def test_accepts_by_ratio_when_observed_is_out_of_band(self) -> None:
        # at 1.8, real = 1.5x: observed 2.7 is out, ratio 1.5 is in; the update clamps at 1.8
        cal, _ = calibrator({"multiplier": 1.8, "at": "t", "pricing": EPOCH})
        assert learn(cal, 1_000, 1_500) == pytest.approx(1.8)

    def test_a_sample_is_backed_out_at_the_multiplier_its_estimate_was_made_at(self) -> None:
        # The engine prices at a step of the multiplier (1.0 here, the multiplier being 0.99): a
        # request counted exactly as estimated there says 1.0, not 0.99 (backed out at 0.99, every
        # such sample pulled the multiplier away from the step, and it cycled between two steps).
        cal, _ = calibrator({"multiplier": 0.99, "at": "t", "pricing": EPOCH})
        cal.arm(90_000)
        assert cal.report_real_input(90_000, made_at=1.0) == pytest.approx(0.99 + 0.2 * (1.0 - 0.99))
        unstepped, _ = calibrator({"multiplier": 0.99, "at": "t", "pricing": EPOCH})
        assert learn(unstepped, 90_000, 90_000) == pytest.approx(0.99)  # made at the multiplier itself

    @given(st.floats(0.6, 1.8), st.integers(1, 10**6), st.floats(1e-3, 1e3))
    def test_the_multiplier_stays_in_the_band_whatever_the_samples(
        self, start: float, est: int, k: float
    ) -> None:
        cal, _ = calibrator({"multiplier": start, "at": "t", "pricing": EPOCH})
        assert 0.6 <= learn(cal, est, est * k) <= 1.8


class TestConvergence:
    def test_a_sample_too_small_to_say_anything_is_ignored(self) -> None:
        cal, slot = calibrator()
        assert learn(cal, 4, 7) == 1.0  # a 4-token estimate against a count of 7
        assert learn(cal, MIN_SAMPLE_TOKENS - 1, 2 * MIN_SAMPLE_TOKENS) == 1.0
        assert slot.history == [] and not cal.armed

    def test_a_small_sample_counts_in_proportion_to_its_size(self) -> None:
        small, _ = calibrator()
        large, _ = calibrator()
        assert 1.0 < learn(small, FULL_SAMPLE_TOKENS // 4, FULL_SAMPLE_TOKENS // 4 * 0.8 + 300) < 1.2
        assert learn(large, 4 * FULL_SAMPLE_TOKENS, 4 * FULL_SAMPLE_TOKENS * 1.2) == pytest.approx(1.2)

    def test_a_fresh_multiplier_converges_within_a_few_calls(self) -> None:
        cal, _ = calibrator()
        for estimate in (3_000, 5_000, 8_000):  # each request counted at 0.8 of its estimate at 1.0
            learn(cal, round(estimate * cal.multiplier), estimate * 0.8)
        assert cal.multiplier == pytest.approx(0.8, abs=0.01)

    def test_a_stored_multiplier_moves_by_the_moving_average(self) -> None:
        cal, _ = calibrator({"multiplier": 1.0, "at": "t", "pricing": EPOCH})
        assert learn(cal, 10_000, 8_000) == pytest.approx(0.96)


class TestConsistentEvidence:
    """A provider whose counts keep showing one ratio outside the band is believed; one wild sample is not."""

    def test_two_agreeing_samples_outside_the_band_are_learned(self) -> None:
        cal, slot = calibrator()
        assert learn(cal, 10_000, 4_300) == 1.0  # 0.43: held, not learned
        assert slot.history == []
        assert learn(cal, 12_000, 5_200) == pytest.approx((0.43 + 5_200 / 12_000) / 2, abs=1e-3)
        assert cal.band[0] < 0.43
        assert slot.load()["band"] == list(cal.band)

    def test_learning_goes_on_around_the_learned_ratio(self) -> None:
        cal, _ = calibrator()
        for estimate in (10_000, 12_000, 9_000, 15_000):  # each request counted at 0.43 of its price at 1.0
            learn(cal, round(estimate * cal.multiplier), estimate * 0.43)
        assert cal.multiplier == pytest.approx(0.43, abs=0.005)

    def test_a_ratio_above_the_band_is_learned_too(self) -> None:
        cal, _ = calibrator()
        for estimate in (10_000, 12_000, 9_000):
            learn(cal, round(estimate * cal.multiplier), estimate * 2.3)
        assert cal.multiplier == pytest.approx(2.3, abs=0.01)

    def test_one_wild_sample_between_ordinary_ones_moves_nothing(self) -> None:
        cal, _ = calibrator({"multiplier": 1.0, "at": "t", "pricing": EPOCH})
        assert learn(cal, 10_000, 30_000) == 1.0
        assert learn(cal, 10_000, 10_000) == 1.0  # in band: the held wild sample is dropped
        assert learn(cal, 10_000, 30_000) == 1.0  # held again, alone
        assert cal.band == (0.6, 1.8)

    def test_two_wild_samples_that_disagree_move_nothing(self) -> None:
        cal, _ = calibrator()
        assert learn(cal, 10_000, 30_000) == 1.0
        assert learn(cal, 10_000, 4_000) == 1.0
        assert cal.band == (0.6, 1.8)

    def test_a_widened_band_survives_a_reopen(self) -> None:
        cal, slot = calibrator()
        learn(cal, 10_000, 4_300)
        learn(cal, 10_000, 4_300)
        again = Calibrator(slot, model="gpt-4o", clock=lambda: T0)
        assert again.multiplier == pytest.approx(0.43) and again.band == cal.band

    @pytest.mark.parametrize("band", [[0.1, 1.8], [0.6, 9.0], [0.7, 1.8], ["a", 2], [0.5], None], ids=str)
    def test_a_stored_band_that_is_not_valid_is_the_starting_band(self, band: object) -> None:
        cal, _ = calibrator({"multiplier": 0.3, "at": "t", "pricing": EPOCH, "band": band})
        assert cal.band == (0.6, 1.8) and cal.multiplier == 0.6

    def test_a_multiplier_set_by_hand_outside_the_band_is_kept_by_learning(self) -> None:
        cal, _ = calibrator()
        assert cal.set(0.4)
        assert learn(cal, 10_000, 4_000) == pytest.approx(0.4)


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
    """context-manager's eight ``calibration-band`` tests, adapted
    (https://github.com/anima-research/context-manager/pull/227)."""

    def test_1_a_learned_value_is_persisted_with_the_epoch(self) -> None:
        cal, slot = calibrator({"multiplier": 1.8, "at": "t", "pricing": EPOCH})
        learn(cal, 18_000, 10_000)
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
        assert Calibrator(slot).multiplier == pytest.approx(FIRST)

    def test_7_a_discard_stays_visible_through_learning_and_restarts_until_restamped(self) -> None:
        cal, slot = calibrator({"multiplier": 0.6, "at": "t"})
        assert cal.reset is not None
        assert (cal.reset.discarded_multiplier, cal.reset.from_epoch) == (0.6, 0)
        learn(cal, 1_000, 1_500)
        reopened = Calibrator(slot)
        assert reopened.reset == cal.reset and reopened.multiplier == pytest.approx(FIRST)
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
        assert learn(cal, 1_000, 1_500) == pytest.approx(FIRST)
        assert isinstance(cal.last_save_error, StoreError)


# --- an epoch change that changes no stored price keeps the multiplier -----------------------------


OLDER = {"multiplier": 1.3, "at": "t", "pricing": EPOCH - 1}


class TestAnOlderEpochWhosePricesHold:
    def test_a_check_that_passes_keeps_and_restamps_the_multiplier(self) -> None:
        cal, slot = calibrator(OLDER, prices_unchanged=lambda: True)
        assert cal.multiplier == 1.3 and cal.reset is None
        assert slot.load() == {"multiplier": 1.3, "at": T0.isoformat(), "pricing": EPOCH}

    def test_a_check_that_fails_discards_with_a_reset(self) -> None:
        cal, slot = calibrator(OLDER, prices_unchanged=lambda: False)
        assert cal.multiplier == 1.0 and cal.reset is not None and cal.reset.from_epoch == EPOCH - 1
        assert slot.load()["reset"]["discarded_multiplier"] == 1.3  # type: ignore[index]

    def test_the_check_is_not_asked_for_a_same_epoch_record(self) -> None:
        def never() -> bool:
            raise AssertionError("asked")

        cal, _ = calibrator({"multiplier": 1.3, "at": "t", "pricing": EPOCH}, prices_unchanged=never)
        assert cal.multiplier == 1.3


def _priced_session(*messages: Message) -> tuple[Session, Estimator]:
    session = open_store().session("s")
    estimator = Estimator(get_profile("gpt-4o"))
    for message in messages:
        session.append(message, block_prices=[estimator.raw_block(b) for b in message.content])
    return session, estimator


class TestStoredPricesUnchanged:
    def test_prices_stored_by_todays_rules_are_unchanged(self) -> None:
        session, estimator = _priced_session(Message.user("hello there"), Message.assistant("hi", "again"))
        assert stored_prices_unchanged(session.messages(), estimator.raw_block)

    def test_a_price_todays_rules_give_differently_is_a_change(self) -> None:
        session, estimator = _priced_session(Message.user("hello there"))
        session.append(Message.assistant("hi"), block_prices=[estimator.raw_block(Text(text="hi")) + 1])
        assert not stored_prices_unchanged(session.messages(), estimator.raw_block)

    def test_a_message_stored_without_prices_cannot_show_it(self) -> None:
        session, estimator = _priced_session(Message.user("hello there"))
        session.append(Message.assistant("hi"))
        assert not stored_prices_unchanged(session.messages(), estimator.raw_block)


class TestTheEngineKeepsAMultiplierItsPricesStillHold:
    def _engine(self, session: Session) -> Engine:
        profile = get_profile("gpt-4o")
        return Engine(session, LocalProvider(), profile, compiler=EngineCompiler())

    def _older_record(self, session: Session) -> None:
        match = {"model": "gpt-4o", "connection": "default"}
        LedgerSlot(session, "calibration", match=match).save(OLDER)

    def test_an_epoch_change_that_changes_no_stored_price_keeps_it(self) -> None:
        session, _ = _priced_session(Message.user("hello there"), Message.assistant("hi"))
        self._older_record(session)
        engine = self._engine(session)
        assert engine.calibrator.multiplier == 1.3 and engine.calibrator.reset is None

    def test_an_epoch_change_that_changes_a_stored_price_discards_it_with_a_reset(self) -> None:
        session, estimator = _priced_session(Message.user("hello there"))
        session.append(Message.assistant("hi"), block_prices=[estimator.raw_block(Text(text="hi")) * 2 + 1])
        self._older_record(session)
        engine = self._engine(session)
        assert engine.calibrator.multiplier == 1.0
        assert engine.calibrator.reset is not None and engine.calibrator.reset.discarded_multiplier == 1.3
        stored = session.latest("calibration")
        assert stored is not None and stored.payload["reset"]["from_epoch"] == EPOCH - 1
