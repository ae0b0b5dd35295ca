"""Calibration learns from counted rounds: within a stream, each call's prompt less the previous one's is
the provider's count of what was appended, and it is learned against the estimate of the same content.

The unit tests pin the sample rules (weight, size, band, units); the engine tests run tool loops
against the local provider, counting at a scale the estimator does not know, and check what the
calibrator was handed call by call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from contextwindow.content import Message, Thinking, ToolResult, ToolUse
from contextwindow.engine.events import Event, RequestSent, StreamRestarted
from contextwindow.engine.fit import WindowFit
from contextwindow.engine.loop import Engine, EngineSettings
from contextwindow.formats import WireFormat
from contextwindow.models import get_profile
from contextwindow.pricing import MULTIPLIER_BOUNDS, Estimator, valid_multiplier
from contextwindow.replay.simulate import RecordingModel
from contextwindow.store import open_store
from contextwindow.store.slots import MemorySlot
from contextwindow.testing import LocalProvider, LocalSettings
from contextwindow.usage.calibration import (
    ALPHA,
    BAND,
    CALIBRATION_PRICING_EPOCH,
    FULL_SAMPLE_TOKENS,
    MIN_SAMPLE_TOKENS,
    ROUND_SAVE_MOVE,
    WIDEST,
    Calibrator,
)
from contextwindow.usage.tracker import UsageMode
from engine_support import local_engine

MODEL = "gpt-4o"
"""Priced exactly with o200k by the estimator; the local provider counts o200k at a scale."""
RESERVE = 1_000


def fresh() -> tuple[Calibrator, MemorySlot]:
    slot = MemorySlot()
    return Calibrator(slot, model=MODEL), slot


def stored(multiplier: float) -> Calibrator:
    return Calibrator(MemorySlot({"multiplier": multiplier, "at": "t", "pricing": CALIBRATION_PRICING_EPOCH}))


class TestRoundSamples:
    def test_a_round_moves_a_fresh_multiplier_by_its_weight(self) -> None:
        cal, _ = fresh()
        estimate = FULL_SAMPLE_TOKENS // 2  # half a sample
        assert cal.report_round(real=1_200, estimate=estimate) == pytest.approx(
            1 + 0.5 * (1_200 / estimate - 1)
        )

    def test_a_round_of_full_size_moves_a_stored_multiplier_by_the_moving_average(self) -> None:
        cal = stored(1.0)
        assert cal.report_round(real=2_400, estimate=2_000) == pytest.approx(
            1 + ALPHA * (1.2 - 1) * (2_000 / FULL_SAMPLE_TOKENS)
        )

    def test_a_round_estimated_at_another_multiplier_is_backed_out_at_that_one(self) -> None:
        cal = stored(1.2)
        # Priced at 1.0 and counted 1.2x: the multiplier 1.2 is right and stays.
        assert cal.report_round(real=2_400, estimate=2_000, multiplier=1.0) == pytest.approx(1.2)
        # The same figures read at the current multiplier would have said 1.44.
        other = stored(1.2)
        assert other.report_round(real=2_400, estimate=2_000) > 1.22

    def test_small_rounds_are_ignored_and_not_pooled(self) -> None:
        cal, slot = fresh()
        for _ in range(4):  # together they would be of size
            assert cal.report_round(real=400, estimate=MIN_SAMPLE_TOKENS - 1) == 1.0
        assert slot.history == []
        assert "too small" in cal.last_decision

    def test_an_out_of_band_round_is_held_and_a_second_that_agrees_widens_the_band(self) -> None:
        cal, _ = fresh()
        assert cal.report_round(real=2 * 2_048 * 2, estimate=2_048) == 1.0  # 4x: held, not learned
        assert cal.band == BAND and "rejected" in cal.last_decision
        assert cal.report_round(real=2_048 * 4, estimate=2_048) == pytest.approx(4.0)
        assert cal.band[1] > BAND[1]

    @pytest.mark.parametrize("observed", [30.0, 1 / 30], ids=["high", "low"])
    def test_rounds_beyond_any_band_never_widen_it_however_many_agree(self, observed: float) -> None:
        # A stream's running total read as one call's prompt: whole requests against a round's estimate.
        cal, _ = fresh()
        for _ in range(6):
            assert cal.report_round(real=round(2_048 * observed), estimate=2_048) == 1.0
        assert cal.band == BAND and "beyond any band" in cal.last_decision

    def test_a_wild_round_between_sane_ones_never_moves_the_multiplier(self) -> None:
        cal = stored(1.2)
        cal.report_round(real=9_000, estimate=2_048)
        assert cal.multiplier == 1.2
        cal.report_round(real=2_048, estimate=2_048)  # as estimated at 1.2: the held one is dropped
        assert cal.multiplier == pytest.approx(1.2, abs=1e-3)

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"real": 0, "estimate": 1_000},
            {"real": -5, "estimate": 1_000},
            {"real": float("nan"), "estimate": 1_000},
            {"real": 1_000, "estimate": 0},
            {"real": 1_000, "estimate": float("inf")},
            {"real": 1_000, "estimate": 1_000, "multiplier": 0.0},
            {"real": 1_000, "estimate": 1_000, "multiplier": float("nan")},
        ],
        ids=["zero", "negative", "nan", "no-estimate", "inf-estimate", "zero-multiplier", "nan-multiplier"],
    )
    def test_a_round_that_is_not_finite_and_positive_is_ignored(self, kwargs: dict[str, Any]) -> None:
        cal, slot = fresh()
        assert cal.report_round(**kwargs) == 1.0
        assert slot.history == []

    def test_a_round_learned_multiplier_persists_in_the_same_record_at_the_same_epoch(self) -> None:
        cal, slot = fresh()
        learned = cal.report_round(real=2_400, estimate=2_048)
        record = slot.history[-1]
        assert set(record) == {"multiplier", "at", "pricing"}
        # Learning from rounds changes no block's price: the epoch stays where the text rule left it.
        assert record["pricing"] == CALIBRATION_PRICING_EPOCH == 8
        assert Calibrator(slot, model=MODEL).multiplier == pytest.approx(learned)


# -- through the engine ---------------------------------------------------------------------------

_WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "a",
    "lazy",
    "dog",
    "while",
    "seven",
    "wizards",
    "quietly",
    "judge",
    "boxing",
]


def _prose(words: int, seed: int) -> str:
    return " ".join(_WORDS[(i * 7 + seed) % len(_WORDS)] for i in range(words))


@dataclass
class _Log:
    """What the calibrator was handed, by the call it was handed at (``engine.stats.calls``)."""

    engine: Engine
    whole: list[tuple[int, int]] = field(default_factory=list)
    rounds: list[tuple[int, dict[str, Any], float]] = field(default_factory=list)
    """``(call, report_round's arguments, multiplier after it)``."""

    def __post_init__(self) -> None:
        cal = self.engine.calibrator
        report_real_input, report_round = cal.report_real_input, cal.report_round

        def whole(real: int, **kwargs: Any) -> float:
            self.whole.append((self.engine.stats.calls, real))
            return report_real_input(real, **kwargs)

        def round_(**kwargs: Any) -> float:
            out = report_round(**kwargs)
            self.rounds.append((self.engine.stats.calls, kwargs, out))
            return out

        cal.report_real_input = whole  # type: ignore[method-assign]
        cal.report_round = round_  # type: ignore[method-assign]


def _loop(
    results: Sequence[str],
    *,
    usage: UsageMode = "per-call",
    window: int = 200_000,
    scale: float = 1.2,
    max_stream_input_tokens: int | None = None,
    learn_rounds: bool = True,
    wire: WireFormat = "anthropic",
    thinking: bool = False,
) -> tuple[list[Event], RecordingModel, Engine, _Log]:
    """One turn reading ``results`` a tool round each, against the local provider counting at ``scale``
    over ``wire`` (``learn_rounds=False``: the calibrator learns nothing from rounds; ``thinking``:
    each reply reasons first)."""
    profile = get_profile(MODEL).with_(context_window=window, max_output_tokens=RESERVE)
    reasoning = (Thinking(thinking="which part next?", signature="sig"),) if thinking else ()
    script = [
        Message.assistant(*reasoning, f"reading part {i}", ToolUse(id=f"c{i}", name="read", input={"i": i}))
        for i in range(len(results))
    ]
    script.append(Message.assistant("done"))
    local = LocalSettings(window=window, usage=usage, default_model=MODEL, count_scale=scale)
    model = RecordingModel(local, script)
    session = open_store().session("rounds")

    async def read(use: ToolUse) -> ToolResult:
        return ToolResult(tool_use_id=use.id, content=results[int(use.input["i"])])

    # Counting before sending is off: these tests are about what the engine learns from the calls'
    # own reported prompts.
    settings = EngineSettings(
        usage_mode=usage,
        max_tokens=RESERVE,
        max_stream_input_tokens=max_stream_input_tokens,
        count_before_send="off",
    )
    provider = LocalProvider(model, wire=wire)
    engine = local_engine(
        session, model, profile, read, reserve=RESERVE, settings=settings, provider=provider
    )
    if not learn_rounds:
        calibrator = engine.calibrator
        calibrator.report_round = lambda **_: calibrator.multiplier  # type: ignore[method-assign]
    log = _Log(engine)

    async def collect() -> list[Event]:
        return [event async for event in engine.run_turn(Message.user("read them all"))]

    return asyncio.run(collect()), model, engine, log


def _sent(events: Sequence[Event]) -> list[RequestSent]:
    return [e for e in events if isinstance(e, RequestSent)]


RESULTS = [_prose(1_200 + 50 * i, i) for i in range(8)]
"""Eight rounds of about 1,300-2,000 tokens of prose each."""


class TestTheEngineLearnsFromCountedRounds:
    def test_converges_within_a_few_calls_on_content_the_rule_prices_20_percent_low(self) -> None:
        events, model, _, log = _loop(RESULTS, scale=1.2)
        assert len(model.sent) == len(RESULTS) + 1 and model.rejected == 0
        assert [call for call, _ in log.whole] == [1]  # one compiled request: its first call only
        assert len(log.rounds) == len(RESULTS)  # ... and every later call by its round
        after = [m for _, _, m in log.rounds]
        # Within three rounds (the fourth call) the multiplier is within 3% of the provider's scale,
        # and it converges from below without overshooting or turning back (no oscillation).
        assert after[2] == pytest.approx(1.2, rel=0.03)
        assert after == sorted(after) and max(after) <= 1.2 * 1.01
        # So the engine's own estimate of the later requests holds within 1% of the count.
        for sent, counted in list(zip(_sent(events), model.sent, strict=True))[3:]:
            assert abs(sent.estimated_tokens - counted) / counted < 0.01

    def test_without_round_samples_the_same_loop_stays_uncalibrated_and_under(self) -> None:
        # The premise of the test above: the stream is one compiled request whose first call is too
        # small to learn from, so only the rounds can teach anything.
        events, model, engine, log = _loop(RESULTS, scale=1.2, learn_rounds=False)
        assert log.whole[0][1] < MIN_SAMPLE_TOKENS
        assert engine.calibrator.multiplier == 1.0
        # Anchored on the previous count, each request is off by its latest round's error alone:
        # still more than 2% under.
        late = list(zip(_sent(events), model.sent, strict=True))[3:]
        assert all((sent.estimated_tokens - counted) / counted < -0.02 for sent, counted in late)

    @pytest.mark.parametrize("usage", ["per-call", "cumulative"])
    def test_each_round_is_one_calls_prompt_less_the_previous_calls(self, usage: UsageMode) -> None:
        _, model, _, log = _loop(RESULTS[:5], usage=usage)
        counted = model.sent
        # A cumulative stream reports running totals; the samples are still each call's own prompt.
        assert [kwargs["real"] for _, kwargs, _ in log.rounds] == [
            counted[i] - counted[i - 1] for i in range(1, len(counted))
        ]
        assert [call for call, _, _ in log.rounds] == list(range(2, len(counted) + 1))

    @pytest.mark.parametrize("usage", ["per-call", "cumulative"])
    def test_on_chat_completions_a_reply_that_reasoned_still_continues_the_stream(
        self, usage: UsageMode
    ) -> None:
        # Chat Completions carries no thinking back: the provider sees each reply re-sent without it.
        # Both sides must still agree the stream continues, or a cumulative total is read as one
        # call's prompt (a whole request learned as a round: the multiplier ran to 4 on real sessions).
        _, model, engine, log = _loop(RESULTS[:5], usage=usage, wire="openai", thinking=True)
        counted = model.sent
        assert [kwargs["real"] for _, kwargs, _ in log.rounds] == [
            counted[i] - counted[i - 1] for i in range(1, len(counted))
        ]
        assert engine.calibrator.multiplier == pytest.approx(1.2, rel=0.05)
        # The reply arrives as over HTTP, without the thinking the wire has no form for.
        stored = [b for m in engine.session.messages() for b in m.message.content]
        assert stored and not any(isinstance(b, Thinking) for b in stored)

    def test_a_round_is_estimated_at_the_multiplier_the_call_moved_to(self) -> None:
        # The reply and the round are priced after the previous call moved the multiplier; the
        # estimate handed over is theirs at that multiplier, not the whole request's change of units.
        _events, _, engine, log = _loop(RESULTS[:5])
        messages = engine.session.messages()
        replies = [m.message for m in messages if m.message.role == "assistant"]
        rounds = [m.message for m in messages if m.message.role == "user"][1:]
        for i, (_, kwargs, _) in enumerate(log.rounds):
            estimator = Estimator(get_profile(MODEL), kwargs["multiplier"])
            priced = estimator.messages([replies[i], rounds[i]])
            assert abs(kwargs["estimate"] - priced) <= 2, i
        assert len({kwargs["multiplier"] for _, kwargs, _ in log.rounds}) > 1  # it did move

    def test_a_restart_gives_no_round_sample(self) -> None:
        # The stream budget restarts the stream every few calls: each restarted request is compiled
        # afresh and learnt whole, never as a round against the call before it.
        events, _, _, log = _loop(RESULTS, max_stream_input_tokens=6_000)
        sent = _sent(events)
        restarted = {s.call + 1 for s in sent if s.recompiled}
        assert any(isinstance(e, StreamRestarted) for e in events) and len(restarted) > 1
        round_calls = {call for call, _, _ in log.rounds}
        assert round_calls and not (round_calls & restarted)
        assert {call for call, _ in log.whole} == restarted


class TestTheStepCompileSees:
    """A multiplier learning from every round moves a little at every call; compile sees it in steps
    (``EngineSettings.multiplier_step``) so that its per-message memo holds."""

    @staticmethod
    def _fit(multiplier: float) -> WindowFit:
        profile = get_profile(MODEL)
        return WindowFit(profile, stored(multiplier), estimator=Estimator(profile), settings=EngineSettings())

    def test_a_multiplier_hovering_at_a_half_step_keeps_one_step(self) -> None:
        fit = self._fit(1.109)
        assert fit.multiplier() == 1.1
        seen = set()
        for value in (1.111, 1.109, 1.112, 1.108, 1.114, 1.106):  # around the half step 1.11
            fit.calibrator.multiplier = value
            seen.add(fit.multiplier())
        assert seen == {1.1}

    def test_a_multiplier_that_moves_on_takes_the_next_step(self) -> None:
        fit = self._fit(1.1)
        fit.calibrator.multiplier = 1.116  # three quarters of a step and more
        assert fit.multiplier() == 1.12
        fit.calibrator.multiplier = 1.2
        assert fit.multiplier() == 1.2

    @pytest.mark.parametrize("observed", WIDEST, ids=["low", "high"])
    def test_a_multiplier_learned_at_the_widest_band_prices(self, observed: float) -> None:
        """Consistent evidence takes the multiplier to the widest band's edge; the step compile sees
        is one an estimator prices at (it crashed at 4.0, and 0.25 rounds to the step 0.24)."""
        fit = self._fit(1.0)
        for _ in range(12):
            fit.calibrator.report_round(real=round(2_048 * observed), estimate=2_048)
        assert fit.calibrator.multiplier == observed
        assert valid_multiplier(fit.multiplier())
        assert fit.live_estimator().multiplier == fit.multiplier()
        assert MULTIPLIER_BOUNDS == WIDEST


class TestRoundSamplesAreWrittenWhenTheyMoveTheMultiplier:
    def test_a_round_that_barely_moves_a_stored_multiplier_is_not_written(self) -> None:
        slot = MemorySlot({"multiplier": 1.2, "at": "t", "pricing": CALIBRATION_PRICING_EPOCH})
        cal = Calibrator(slot, model=MODEL)
        cal.report_round(real=2_048, estimate=2_040)  # moves it by less than ROUND_SAVE_MOVE
        assert cal.multiplier != 1.2 and len(slot.history) == 1  # the stored record alone

    def test_moves_that_add_up_are_written(self) -> None:
        slot = MemorySlot({"multiplier": 1.2, "at": "t", "pricing": CALIBRATION_PRICING_EPOCH})
        cal = Calibrator(slot, model=MODEL)
        while len(slot.history) == 1:
            cal.report_round(real=2_048, estimate=2_040)
        assert abs(slot.history[-1]["multiplier"] - 1.2) >= ROUND_SAVE_MOVE
        assert Calibrator(slot, model=MODEL).multiplier == pytest.approx(cal.multiplier)
        cal.report_round(real=2_048, estimate=2_040)  # measured from the write, not from the load
        assert len(slot.history) == 2

    def test_a_whole_request_sample_is_always_written(self) -> None:
        slot = MemorySlot({"multiplier": 1.2, "at": "t", "pricing": CALIBRATION_PRICING_EPOCH})
        cal = Calibrator(slot, model=MODEL)
        cal.arm(2_040)
        cal.report_real_input(2_048)
        assert len(slot.history) == 2
