"""The engine counts a request before sending it only when a decision depends on the count, and learns
from the count as from a reported prompt; a counter that fails leaves the turn on its estimate."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from test_engine_uncounted import _near

from contextwindow.content import Message, Request, Text, ToolResult, ToolUse
from contextwindow.engine.events import Event, Note, RequestSent, StreamRestarted, UsageReported
from contextwindow.engine.loop import Engine, EngineSettings
from contextwindow.engine.precount import (
    CHANGED_SHARE,
    COLD_SHARE,
    MIN_COUNTED_TOKENS,
    count_reason,
    near_budget,
)
from contextwindow.errors import InvalidInput, ProviderError
from contextwindow.formats import AttachmentLoader
from contextwindow.models import get_profile
from contextwindow.providers import Stop, normalise_stop_reason
from contextwindow.replay.simulate import RecordingModel
from contextwindow.store import open_store
from contextwindow.testing import LocalProvider, LocalSettings
from contextwindow.usage.calibration import MIN_SAMPLE_TOKENS
from contextwindow.usage.tracker import UsageMode
from engine_support import PROVIDER_TOKENIZER, gibberish, local_engine

MODEL = "claude-sonnet-4-5"
RESERVE = 1_000


class TestCountReason:
    @pytest.mark.parametrize(
        ("mode", "estimate", "uncounted", "evidence", "near", "retry", "reason"),
        [
            ("off", 5_000, 5_000, 0.0, True, True, None),
            ("cold", 5_000, MIN_COUNTED_TOKENS - 1, 0.0, True, True, None),
            ("cold", 900, 900, 0.0, False, False, None),
            ("cold", 5_000, 2_000, 0.0, False, False, "cold"),
            ("cold", 20_000, round(20_000 * COLD_SHARE) - 1, 0.0, False, False, None),
            ("cold", 5_000, 2_000, 1.0, False, False, None),
            ("cold", 5_000, 2_000, 1.0, True, False, None),
            ("cold", 5_000, 2_000, 1.0, False, True, "retry"),
            ("auto", 5_000, 2_000, 1.0, False, False, None),
            ("auto", 10_000, round(10_000 * CHANGED_SHARE) - 1, 1.0, False, False, None),
            ("auto", 10_000, 1_500, 1.0, True, False, "near_budget"),
        ],
        ids=[
            "off-never",
            "tiny-part-never",
            "tiny-request-never",
            "cold-large-part",
            "cold-small-share",
            "calibrated-cold-stops",
            "cold-ignores-the-budget",
            "retry-after-a-rejection",
            "auto-large-change-far-from-the-window",
            "auto-small-change",
            "auto-near-the-budget",
        ],
    )
    def test_counts_only_when_a_decision_depends_on_it(
        self,
        mode: Any,
        estimate: int,
        uncounted: int,
        evidence: float,
        near: bool,
        retry: bool,
        reason: str | None,
    ) -> None:
        got = count_reason(
            mode, estimate=estimate, uncounted=uncounted, evidence=evidence, near=near, retry=retry
        )
        assert got == reason

    @pytest.mark.parametrize("mode", ["cold", "auto"])
    def test_the_first_request_of_sample_size_in_a_session_nothing_counted_is_counted(
        self, mode: Any
    ) -> None:
        # With no usage reported, nothing else would correct a request that is all the rule's: once it
        # is of a calibration sample's size, the first one is counted, however small.
        small = {"uncounted": MIN_SAMPLE_TOKENS, "evidence": 0.0, "near": False}
        assert count_reason(mode, estimate=MIN_SAMPLE_TOKENS, counted=False, **small) == "first"
        assert count_reason(mode, estimate=MIN_SAMPLE_TOKENS - 1, counted=False, **small) is None
        assert count_reason(mode, estimate=MIN_SAMPLE_TOKENS, counted=True, **small) is None
        assert count_reason("off", estimate=5_000, counted=False, **small) is None

    def test_near_the_budget_means_the_uncounted_parts_error_decides(self) -> None:
        common = {"max_tokens": 1_000, "window": 10_000, "uncounted_margin": 0.13}
        assert not near_budget(estimate=8_000, uncounted=5_000, **common)  # 8000 + 650 + 1000 fits
        assert near_budget(estimate=8_500, uncounted=5_000, **common)  # 8500 + 650 + 1000 does not
        assert not near_budget(estimate=8_900, uncounted=0, **common)  # a counted request is exact
        assert not near_budget(
            estimate=10**6, uncounted=10**6, max_tokens=1, window=None, uncounted_margin=0.1
        )

    def test_the_setting_is_checked(self) -> None:
        with pytest.raises(InvalidInput):
            EngineSettings(count_before_send="always")  # type: ignore[arg-type]


def _script(rounds: int) -> list[Message]:
    calls = [
        Message.assistant(f"r{i}", ToolUse(id=f"c{i}", name="read", input={"i": i})) for i in range(rounds)
    ]
    return [*calls, Message.assistant("done")]


class _Failing:
    """A counter that fails (a rate limit), counting how often it was asked."""

    name = "failing"

    def __init__(self) -> None:
        self.asked = 0

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int:
        self.asked += 1
        raise ProviderError("rate limited", status=429, body={"error": {"type": "rate_limit_error"}})


def _engine(
    count: Any,
    *,
    usage: UsageMode = "per-call",
    rounds: int = 3,
    result_chars: int = 12_000,
    window: int = 60_000,
    counter: Any = None,
    tokenizer: Any = None,
    scale: float = 1.25,
    text: Any = None,
) -> tuple[Engine, RecordingModel, LocalProvider]:
    profile = get_profile(MODEL).with_(context_window=window, max_output_tokens=RESERVE)
    model = RecordingModel(
        LocalSettings(
            window=window, usage=usage, default_model=MODEL, tokenizer=tokenizer, count_scale=scale
        ),
        _script(rounds),
    )
    provider = LocalProvider(model)

    async def read(use: ToolUse) -> ToolResult:
        make = text or gibberish
        return ToolResult(tool_use_id=use.id, content=make(result_chars, f"r{use.input['i']}"))

    engine = local_engine(
        open_store().session("precount"),
        model,
        profile,
        read,
        reserve=RESERVE,
        settings=EngineSettings(
            max_tokens=RESERVE, max_stream_input_tokens=None, usage_mode=usage, count_before_send=count
        ),
        provider=provider,
    )
    if counter is not None:
        engine.counter = counter
    return engine, model, provider


def _turn(engine: Engine, text: str = "read them") -> list[Event]:
    async def collect() -> list[Event]:
        return [event async for event in engine.run_turn(Message.user(text))]

    return asyncio.run(collect())


def _sent(events: Sequence[Event]) -> list[RequestSent]:
    return [e for e in events if isinstance(e, RequestSent)]


class TestEngineCounts:
    def test_off_never_asks_the_counter(self) -> None:
        engine, _, provider = _engine("off")
        events = _turn(engine)
        assert provider.counts == 0 and not any(e.counted for e in _sent(events))
        assert engine.counter is provider  # the provider's own counter is the default

    def test_cold_counts_the_first_large_round_and_not_the_tiny_first_request(self) -> None:
        engine, model, provider = _engine("cold")
        sent = _sent(_turn(engine))
        assert [e.counted for e in sent[:2]] == [False, True]
        # The request's estimate is the provider's count of exactly what was sent.
        assert sent[1].estimated_tokens == model.sent[1]
        # Once calibration has a full sample, cold counting stops.
        assert provider.counts < len(sent) - 1

    def test_a_count_calibrates_once(self) -> None:
        engine, model, _ = _engine("cold", rounds=1)
        calibrator = engine.calibrator
        learned: list[tuple[int, str]] = []
        inner = calibrator.report_real_input

        def spy(real: int, **kwargs: Any) -> float:
            out = inner(real, **kwargs)
            learned.append((real, calibrator.last_decision))
            return out

        calibrator.report_real_input = spy  # type: ignore[method-assign]
        # The later calls' rounds are samples of their own (Calibrator.report_round): left out here,
        # so that the evidence is the whole request's samples only.
        calibrator.report_round = lambda **_: calibrator.multiplier  # type: ignore[method-assign]
        _turn(engine)
        accepted = [real for real, decision in learned if decision.startswith("accepted")]
        assert accepted == [model.sent[1]]  # the count, and not the call's reported prompt again
        assert calibrator.evidence == pytest.approx(1.0)

    def test_a_count_anchors_the_next_compile_and_marks_the_session_counted(self) -> None:
        engine, model, _ = _engine("cold", usage="none", rounds=1)
        _turn(engine)
        assert engine.fit.counted
        anchor = engine._anchors.latest
        assert anchor is not None and anchor.input_tokens == model.sent[1]

    @pytest.mark.parametrize("usage", ["per-call", "none"])
    def test_a_failing_counter_leaves_the_turn_on_its_estimate_with_one_note(self, usage: UsageMode) -> None:
        failing = _Failing()
        engine, model, _ = _engine("auto", usage=usage, counter=failing)
        events = _turn(engine)
        notes = [e for e in events if isinstance(e, Note) and e.kind == "context_count_failed"]
        assert len(notes) == 1 and notes[0].data["counter"] == "failing"
        assert failing.asked == 1  # not asked again in the turn
        assert sum(isinstance(e, UsageReported) for e in events) == len(model.calls) == 4
        assert not any(e.counted for e in _sent(events))
        if usage == "none":  # nothing counted yet: the next turn asks again, once
            model.enqueue(*_script(1))
            _turn(engine, "again")
            assert failing.asked == 2

    def test_the_step_api_counts_as_run_turn_does(self) -> None:
        stepped, stepped_model, stepped_provider = _engine("cold", rounds=2)
        ran, ran_model, ran_provider = _engine("cold", rounds=2)
        _turn(ran)

        async def by_hand() -> None:
            stepped.start_turn()
            start = stepped.append(Message.user("read them"))
            assert start.id is not None
            async for _ in stepped.prepare(start.id):
                pass
            while True:
                stepped.sending()
                outcome = stepped_model.handle(
                    stepped.request,
                    wire="anthropic",
                    max_tokens=RESERVE,
                    load=stepped.session.read_attachment,
                )
                assert not isinstance(outcome, type(None)) and hasattr(outcome, "message")
                stop_events = stepped.accept(
                    _stop(outcome.message, outcome.stop_reason),
                    outcome.reported,  # type: ignore[union-attr]
                )
                assert stop_events
                uses = [b for b in outcome.message.content if isinstance(b, ToolUse)]  # type: ignore[union-attr]
                if not uses:
                    return
                results = Message.user(
                    *[
                        ToolResult(tool_use_id=u.id, content=gibberish(12_000, f"r{u.input['i']}"))
                        for u in uses
                    ]
                )
                async for _ in stepped.add_round(results):
                    pass

        asyncio.run(by_hand())
        assert stepped_provider.counts == ran_provider.counts > 0

        def sent(model: RecordingModel) -> list[list[tuple[str, object]]]:
            return [[(m.role, m.content) for m in r.messages] for r, *_ in model.calls]

        assert sent(stepped_model) == sent(ran_model)


def _stop(message: Message, reason: str) -> Stop:
    return Stop(reason=normalise_stop_reason(reason), raw_reason=reason, message=message)


class TestAutoNearTheBudget:
    def test_counts_a_request_near_the_budget_when_no_usage_is_reported_and_is_never_refused(self) -> None:
        # Text the rule prices about 9% under the provider's count: fitted at fit_margin without a
        # count, a request near the window could be refused; counted first, it restarts or is
        # recompiled to fit instead.
        def under(chars: int, seed: str) -> str:
            return _near(1.09, chars, seed)

        for window in range(9_000, 12_000, 500):
            engine, model, provider = _engine(
                "auto",
                usage="none",
                rounds=2,
                result_chars=2_500,
                window=window,
                tokenizer=PROVIDER_TOKENIZER,
                scale=1.0,
                text=under,
            )
            events = _turn(engine)
            for turn in range(5):
                model.enqueue(*_script(2))
                events += _turn(engine, f"turn {turn}: read them again")
            assert model.rejected == 0, window
            assert provider.counts > 0
            assert any(e.counted for e in _sent(events))

    def test_compile_fits_to_the_fit_margin_only_while_the_counter_answers(self) -> None:
        engine, _, _ = _engine("auto", usage="none")
        engine.start_turn()
        assert not engine.fit.counted and engine.fit.margin() == engine.settings.fit_margin
        cold, _, _ = _engine("cold", usage="none")
        cold.start_turn()
        assert cold.fit.margin() == cold.settings.uncounted_margin
        failing, _, _ = _engine("auto", usage="none", counter=_Failing())
        _turn(failing)
        assert not failing.fit.counted and failing.fit.margin() == failing.settings.uncounted_margin


class TestUnitsOfTheLiveEstimate:
    def test_a_fresh_compile_after_calibration_moved_mid_stream_is_anchored_in_one_unit(self) -> None:
        # The provider counts 1.5 times the rule's price: the first call's sample moves the multiplier
        # far, and the rounds appended after it are priced at the new one. The live request's own
        # estimate must follow (the anchor's payload is in those units), or the next turn's anchored
        # estimate carries the change of units over the rounds.
        engine, model, _ = _engine("off", rounds=3, result_chars=9_000, scale=1.5)
        big = "Please review this module carefully. " + gibberish(9_000, "opening")
        _turn(engine, big)
        model.enqueue(Message.assistant("ok"))
        sent = _sent(_turn(engine, "thanks"))
        assert engine.calibrator.multiplier > 1.3
        error = (sent[0].estimated_tokens - model.sent[-1]) / model.sent[-1]
        assert abs(error) < 0.03, error


class _Over:
    """A counter that always says the request is over the window (a provider counting far more than
    the estimate), counting how often it was asked."""

    name = "over"

    def __init__(self, window: int) -> None:
        self.window = window
        self.asked = 0

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int:
        self.asked += 1
        return self.window + 1


class TestACountOverTheWindow:
    def test_compiles_again_once_and_never_loops(self) -> None:
        over = _Over(20_000)
        engine, model, _ = _engine(
            "auto", usage="none", rounds=3, result_chars=6_000, window=20_000, counter=over
        )
        events = _turn(engine)
        sent = _sent(events)
        assert model.rejected == 0 and len(sent) == len(model.calls) == 4
        # One count per request at most: the recompiled request (or the restarted stream's) is sent
        # on its estimate, not counted again.
        assert 0 < over.asked <= len(sent) + sum(isinstance(e, StreamRestarted) for e in events)
        assert not any(e.counted for e in sent)  # each counted request was replaced before sending
        assert engine.fit.composition_factor() > 1  # ... and compile fits by what the count showed


class TestWhatACountCovers:
    def test_a_message_is_covered_only_as_the_counted_request_rendered_it(self) -> None:
        from contextwindow.engine.live import shared as _shared

        def message(text: str, id: str | None) -> Message:
            return Message(role="user", content=(Text(text=text),), id=id)

        stored = message("the tool said a great deal", "m1")
        counted = {"m1": stored.content}
        assert _shared(counted, stored)
        # The same ledger id rendered otherwise (capped, archived, cut to fill) is new to the provider.
        assert not _shared(counted, message("the tool said", "m1"))
        assert not _shared(counted, message("the tool said a great deal", "m2"))
        assert not _shared(counted, message("the tool said a great deal", None))  # no ledger id


def _calls(model: RecordingModel) -> int:
    return len(model.calls)


class TestCountsOnlyWhereTheyPay:
    """A request far from the window is not counted however much of it is new; one
    the uncounted part's error could push over still is."""

    @pytest.mark.parametrize("usage", ["per-call", "none"])
    def test_a_session_whose_estimate_is_good_counts_at_most_10_per_100_calls(self, usage: UsageMode) -> None:
        engine, model, provider = _engine(
            "auto",
            usage=usage,
            rounds=3,
            result_chars=6_000,
            window=200_000,
            tokenizer=PROVIDER_TOKENIZER,
            scale=1.0,
            text=lambda chars, seed: _near(1.0, chars, seed),
        )
        _turn(engine)
        for turn in range(12):
            model.enqueue(*_script(3))
            _turn(engine, f"turn {turn}: read more")
        assert _calls(model) >= 40
        assert provider.counts <= 0.1 * _calls(model), (provider.counts, _calls(model))
        assert model.rejected == 0

    def test_a_session_whose_estimate_drifts_still_counts_and_is_never_sent_over_the_window(self) -> None:
        # The rule prices the later tool results further and further under the provider's count.
        for window in range(9_000, 12_000, 500):
            drift = iter(1.0 + 0.02 * step for step in range(1_000))

            def drifting(chars: int, seed: str, drift: Iterator[float] = drift) -> str:
                return _near(min(1.12, next(drift)), chars, seed)

            engine, model, provider = _engine(
                "auto",
                usage="none",
                rounds=2,
                result_chars=2_500,
                window=window,
                tokenizer=PROVIDER_TOKENIZER,
                scale=1.0,
                text=drifting,
            )
            _turn(engine)
            for turn in range(6):
                model.enqueue(*_script(2))
                _turn(engine, f"turn {turn}: read them again")
            assert model.rejected == 0, window
            assert provider.counts > 1, window
