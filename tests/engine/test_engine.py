"""The turn engine, driven end to end with cumulative usage samples (vectors from agent-framework,
https://github.com/anima-research/agent-framework/pull/98, and apache/maka,
https://github.com/apache/maka/pull/4559)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from contextwindow.content import Image, Message, Text, ToolResult, ToolUse
from contextwindow.engine.events import (
    Compacted,
    Event,
    Note,
    OverflowRecovered,
    RequestSent,
    StreamRestarted,
    StreamResumed,
    TurnEnded,
    UsageReported,
)
from contextwindow.engine.folding.summarizer import Summarizer
from contextwindow.engine.loop import Engine, EngineSettings, ToolOutcome
from contextwindow.errors import ContextOverflow, ProviderError
from contextwindow.models import ModelProfile
from contextwindow.store import open_store
from contextwindow.usage.calibration import FULL_SAMPLE_TOKENS
from contextwindow.usage.tracker import Usage
from engine_support import PlainCompiler, ScriptedProvider, Step, blob_call, blob_tool, cumulative

PROFILE = ModelProfile(
    name="test-200k",
    provider="anthropic",
    context_window=200_000,
    max_output_tokens=32_000,
    tokenizer="claude",
)
SETTINGS = EngineSettings(
    max_tokens=32_000, round_pricing="flat", max_stream_input_tokens=None, usage_mode="cumulative"
)
DONE = Message.assistant("done")


def U(fresh: int = 0, *, cw: int = 0, cr: int = 0, out: int = 0) -> Usage:
    return Usage(fresh_input=fresh, cache_write=cw, cache_read=cr, output=out)


def run(engine: Engine, message: Message) -> list[Event]:
    async def go() -> list[Event]:
        return [event async for event in engine.run_turn(message)]

    return asyncio.run(go())


def engine_for(
    steps: list[Step], settings: EngineSettings = SETTINGS, **kwargs: object
) -> tuple[Engine, ScriptedProvider]:
    provider = ScriptedProvider(steps)
    session = open_store().session("s")
    engine = Engine(
        session,
        provider,
        PROFILE,
        compiler=PlainCompiler(),
        tool_runner=blob_tool,
        settings=settings,
        **kwargs,
    )  # type: ignore[arg-type]
    return engine, provider


def vector_steps(per_call: Sequence[Usage], restart: bool) -> list[Step]:
    samples = cumulative(per_call)
    steps = [Step(blob_call(i), s) for i, s in enumerate(samples)]
    final = U(1_000, out=10) if restart else samples[-1] + U(1_000, out=10)
    steps.append(Step(DONE, final))
    return steps


VECTORS = [
    (
        "projects-from-the-latest-call",
        [U(20_000, cw=20_000, cr=40_000, out=20_000), U(20_000, cw=20_000, cr=78_000, out=30_000)],
        186_043,
        False,
    ),
    ("latest-calls-output-crosses", [U(120_000, out=45_000)], 203_043, True),
    ("restarts-at-a-later-boundary", [U(80_000, out=30_000), U(190_000, out=10_000)], 238_043, True),
    ("cache-write-prompt-term", [U(130_000, cw=30_000, out=2_000)], 200_043, True),
    ("growth-since-last-reporting-call", [U(155_000, out=2_000), U(out=2_000)], 203_086, True),
    ("output-of-a-call-without-prompt", [U(150_000, out=2_000), U(out=5_000)], 201_086, True),
    ("unreported-call-bounded-by-max-tokens", [U(120_000, out=5_000), U()], 201_086, True),
    (
        "growth-starts-again-on-a-reporting-call",
        [U(100_000, out=5_000), U(), U(137_000, out=5_000)],
        180_043,
        False,
    ),
    ("reported-prompt-without-output-bounded", [U(150_000)], 220_043, True),
]


class TestPhysicalWindowThroughTheEngine:
    @pytest.mark.parametrize(
        ("per_call", "expected", "restart"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS]
    )
    def test_seed_001_vector_with_cumulative_samples(
        self, per_call: list[Usage], expected: int, restart: bool
    ) -> None:
        engine, provider = engine_for(vector_steps(per_call, restart))
        events = run(engine, Message.user("go"))
        restarts = [e for e in events if isinstance(e, StreamRestarted)]
        assert engine.last_projection == expected
        if restart:
            assert restarts == [
                StreamRestarted(reason="physical_window", input_tokens=expected, budget=200_000)
            ]
        else:
            assert restarts == []
            sent = [e for e in events if isinstance(e, RequestSent)]
            assert [e.recompiled for e in sent] == [True] + [False] * (len(sent) - 1)
        assert isinstance(events[-1], TurnEnded)
        assert not provider.steps

    def test_no_window_means_no_projection_and_one_stream(self) -> None:
        settings = EngineSettings(
            max_tokens=32_000,
            round_pricing="flat",
            max_stream_input_tokens=None,
            usage_mode="cumulative",
            use_physical_window=False,
        )
        engine, _ = engine_for(vector_steps([U(120_000, out=45_000)], restart=False), settings)
        events = run(engine, Message.user("go"))
        assert not any(isinstance(e, StreamRestarted) for e in events)
        assert engine.last_projection is None

    def test_a_restarted_stream_does_not_inherit_the_figure_that_restarted_it(self) -> None:
        samples = cumulative([U(80_000, out=30_000), U(190_000, out=10_000)])
        steps = [Step(blob_call(0), samples[0]), Step(blob_call(1), samples[1])]
        steps.append(Step(blob_call(2), U(137_000, out=5_000)))  # the new stream's first call
        steps.append(Step(DONE, U(137_000, out=5_000) + U(1_000, out=10)))
        engine, _ = engine_for(steps)
        events = run(engine, Message.user("go"))
        assert len([e for e in events if isinstance(e, StreamRestarted)]) == 1
        assert engine.last_projection == 180_043

    def test_the_stream_budget_takes_precedence_over_the_window(self) -> None:
        settings = EngineSettings(
            max_tokens=32_000, round_pricing="flat", max_stream_input_tokens=150_000, usage_mode="cumulative"
        )
        engine, _ = engine_for(
            vector_steps([U(80_000, out=30_000), U(190_000, out=10_000)], restart=True), settings
        )
        events = run(engine, Message.user("go"))
        restarts = [e for e in events if isinstance(e, StreamRestarted)]
        assert restarts == [StreamRestarted(reason="context_budget", input_tokens=270_000, budget=150_000)]

    def test_end_turn_wins_over_both_restarts(self) -> None:
        async def ending(use: ToolUse) -> ToolOutcome:
            return ToolOutcome(result=await blob_tool(use), end_turn=True)

        engine, _provider = engine_for([Step(blob_call(0), U(120_000, out=45_000))])
        engine.tool_runner = ending
        events = run(engine, Message.user("go"))
        assert not any(isinstance(e, StreamRestarted) for e in events)
        assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn_by_tool"


def _png(i: int) -> bytes:
    import io

    from PIL import Image as PILImage

    buffer = io.BytesIO()
    PILImage.new("RGB", (8 + i, 8), (i, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


class TestMidTurnMessages:
    """agent-framework's vector: round 1 reported a 163k prompt and 2k output; reserve 32k; the
    projection sits at 197k."""

    def _engine(self, photos: int) -> tuple[Engine, ScriptedProvider]:
        steps = [
            Step(blob_call(0), U(163_000, out=2_000)),
            Step(DONE, U(163_000, out=2_000) + U(1_000, out=5)),
        ]
        engine, provider = engine_for(steps)
        refs = [engine.session.attach(_png(i), "image/png") for i in range(photos)]
        message = Message.user("look", *(Image(ref=r) for r in refs))

        async def small_tool(use: ToolUse) -> ToolResult:
            engine.inject(message)
            return ToolResult(tool_use_id=use.id, content="ok")

        engine.tool_runner = small_tool
        return engine, provider

    def test_three_photos_cross_the_window_and_ride_the_restarted_request_once(self) -> None:
        engine, provider = self._engine(3)
        events = run(engine, Message.user("go"))
        restart = next(e for e in events if isinstance(e, StreamRestarted))
        assert restart.reason == "physical_window"
        # ceil(len('ok' + 'look') / 4) + 3 × 1,600 + 2 envelopes of 20
        assert restart.input_tokens == 197_000 + 2 + 4_800 + 40
        last = provider.requests[-1].messages
        carried = [m for m in last if any(isinstance(b, Image) for b in m.content)]
        assert len(carried) == 1 and sum(isinstance(b, Image) for b in carried[0].content) == 3

    def test_without_photos_the_message_rides_into_round_two(self) -> None:
        engine, provider = self._engine(0)
        events = run(engine, Message.user("go"))
        assert not any(isinstance(e, StreamRestarted) for e in events)
        assert any(isinstance(e, StreamResumed) and e.injected_messages == 1 for e in events)
        assert provider.requests[-1].messages[-1].content[0].text == "look"  # type: ignore[union-attr]


SUMMARY = "\n\n".join(
    f"## {s}\nsomething." for s in ("Goal", "Decisions", "Files and artefacts", "Open work", "Latest state")
)


class TestRecovery:
    def _history(self, engine: Engine, turns: int) -> None:
        for i in range(turns):
            engine.session.append(Message.user(f"old question {i} " + "words " * 400))
            engine.session.append(Message.assistant(f"old answer {i} " + "words " * 400))

    def test_a_rejection_is_compacted_and_retried_once(self) -> None:
        rejection = ContextOverflow(
            "prompt is too long: 210000 tokens > 200000 maximum", requested=210_000, limit=200_000
        )
        steps = [Step(DONE, reject=rejection), Step(DONE, U(50_000, out=10))]
        summarizer_provider = ScriptedProvider([Step(Message.assistant(SUMMARY), U(5_000, out=300))])
        engine, provider = engine_for(steps, summarizer=Summarizer(summarizer_provider, PROFILE))
        self._history(engine, 4)
        events = run(engine, Message.user("now"))
        assert any(isinstance(e, Compacted) for e in events)
        assert any(isinstance(e, OverflowRecovered) and e.requested == 210_000 for e in events)
        assert engine.session.latest("checkpoint") is not None
        assert len(provider.requests) == 2
        assert len(provider.requests[1].messages) < len(provider.requests[0].messages)

    def test_a_second_rejection_raises_with_the_providers_numbers_and_a_suggestion(self) -> None:
        rejection = ContextOverflow("too long", requested=210_000, limit=200_000)
        steps = [
            Step(DONE, U(120_000, out=1_000)),
            Step(DONE, reject=rejection),
            Step(DONE, reject=rejection),
        ]
        summarizer_provider = ScriptedProvider([Step(Message.assistant(SUMMARY), U(5_000, out=300))])
        engine, _ = engine_for(steps, summarizer=Summarizer(summarizer_provider, PROFILE))
        self._history(engine, 4)
        run(engine, Message.user("first"))
        seen: list[Event] = []

        async def go() -> None:
            async for event in engine.run_turn(Message.user("second")):
                seen.append(event)

        with pytest.raises(ContextOverflow) as caught:
            asyncio.run(go())
        assert (caught.value.requested, caught.value.limit) == (210_000, 200_000)
        notes = [e for e in seen if isinstance(e, Note)]
        assert (
            Note(
                kind="context_window_suggestion",
                data={"suggested_context_window": 121_000, "declared_context_window": 200_000},
            )
            in notes
        )
        assert any(n.kind == "context_overflow_after_compaction" for n in notes)

    def test_an_uncompactable_head_near_the_window_cannot_loop(self) -> None:
        """The death loop: the only content is the current turn's huge message; nothing can be folded."""
        rejection = ContextOverflow("too long", requested=199_000, limit=200_000)
        steps = [Step(DONE, reject=rejection) for _ in range(50)]
        summarizer_provider = ScriptedProvider(
            [Step(Message.assistant(SUMMARY), U(5_000, out=300)) for _ in range(50)]
        )
        engine, provider = engine_for(steps, summarizer=Summarizer(summarizer_provider, PROFILE))
        seen: list[Event] = []

        async def go() -> None:
            async for event in engine.run_turn(Message.user("huge " * 100_000)):
                seen.append(event)

        with pytest.raises(ContextOverflow):
            asyncio.run(go())
        assert len(provider.requests) == 1  # nothing freed: no retry at all
        assert len(summarizer_provider.requests) == 0
        assert engine.stats.compactions <= engine.settings.max_compactions_per_turn


class TestProactiveFold:
    @pytest.mark.parametrize("raw", ["max_tokens", "length", "model_context_window_exceeded"])
    def test_a_turn_after_a_reply_cut_at_its_limit_folds_nothing_when_the_history_fits(
        self, raw: str
    ) -> None:
        # The reply was cut, so the fold is asked for; an ordinary fold keeps the newest history that
        # fills the target tail, and far from the window that is all of it: nothing folds.
        steps = [Step(DONE, U(3_000, out=1_000), stop_reason=raw), Step(DONE, U(2_000, out=10))]
        summarizer_provider = ScriptedProvider([Step(Message.assistant(SUMMARY), U(5_000, out=300))])
        engine, _ = engine_for(steps, summarizer=Summarizer(summarizer_provider, PROFILE))
        first = run(engine, Message.user("first " + "words " * 100))
        assert isinstance(first[-1], TurnEnded) and first[-1].stop_reason in ("max_tokens", "context_window")
        events = run(engine, Message.user("second"))
        assert not any(isinstance(e, Compacted) for e in events)
        assert len(summarizer_provider.requests) == 0

    def test_no_fold_without_a_declared_window(self) -> None:
        settings = EngineSettings(
            max_tokens=32_000, round_pricing="flat", max_stream_input_tokens=None, use_physical_window=False
        )
        steps = [Step(DONE, U(195_000, out=1_000)), Step(DONE, U(30_000, out=10))]
        summarizer_provider = ScriptedProvider([])
        engine, _ = engine_for(steps, settings, summarizer=Summarizer(summarizer_provider, PROFILE))
        run(engine, Message.user("first"))
        events = run(engine, Message.user("second"))
        assert not any(isinstance(e, Compacted) for e in events)


class TestToolResultsWithLoneSurrogates:
    def test_a_lone_surrogate_in_a_tool_result_is_stored_as_a_replacement_character(self) -> None:
        # A tool that decoded bytes with errors="surrogateescape" hands back "\udcff": no UTF-8 store
        # takes it, and measuring it as UTF-16 raised; the turn goes on with U+FFFD in its place.
        async def undecodable(use: ToolUse) -> ToolResult:
            return ToolResult(tool_use_id=use.id, content="read \udcff byte")

        steps = [Step(blob_call(0), U(1_000, out=10)), Step(DONE, U(1_100, out=10))]
        engine, provider = engine_for(steps)
        engine.tool_runner = undecodable
        events = run(engine, Message.user("read it"))
        assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
        stored = [s.message for s in engine.session.messages()][2].content[0]
        assert isinstance(stored, ToolResult) and stored.content == "read \ufffd byte"
        sent = provider.requests[1].messages[-1].content[0]
        assert isinstance(sent, ToolResult) and sent.content == "read \ufffd byte"

    def test_a_surrogate_pair_in_a_list_result_becomes_its_character(self) -> None:
        async def paired(use: ToolUse) -> ToolResult:
            return ToolResult(tool_use_id=use.id, content=(Text(text="smile \ud83d\ude00"),))

        steps = [Step(blob_call(0), U(1_000, out=10)), Step(DONE, U(1_100, out=10))]
        engine, _ = engine_for(steps)
        engine.tool_runner = paired
        run(engine, Message.user("read it"))
        stored = [s.message for s in engine.session.messages()][2].content[0]
        assert isinstance(stored, ToolResult) and stored.content == (Text(text="smile 😀"),)


class TestProviderNotes:
    def test_a_max_tokens_above_the_models_cap_is_a_note_before_the_error(self) -> None:
        refused = ProviderError(
            "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-x",
            status=400,
        )
        engine, _ = engine_for([Step(DONE, reject=refused)])
        seen: list[Event] = []

        async def go() -> None:
            async for event in engine.run_turn(Message.user("hi")):
                seen.append(event)

        with pytest.raises(ProviderError):
            asyncio.run(go())
        notes = [e for e in seen if isinstance(e, Note)]
        assert [(n.kind, dict(n.data)) for n in notes] == [
            ("context_output_cap", {"max_tokens": 100_000, "output_cap": 64_000})
        ]
        kinds = [e.payload["event"].get("kind") for e in engine.session.entries(["note"])]
        assert "context_output_cap" in kinds

    def test_another_provider_error_is_raised_without_a_note(self) -> None:
        engine, _ = engine_for([Step(DONE, reject=ProviderError("bad request", status=400))])
        seen: list[Event] = []

        async def go() -> None:
            async for event in engine.run_turn(Message.user("hi")):
                seen.append(event)

        with pytest.raises(ProviderError, match="bad request"):
            asyncio.run(go())
        assert not any(isinstance(e, Note) for e in seen)

    def test_a_provider_counting_far_less_than_was_sent_is_a_note(self) -> None:
        # The request holds a 30,000-character tool result; the provider says it read 500 tokens.
        steps = [Step(blob_call(0), U(9_000, out=10)), Step(DONE, U(500, out=10))]
        engine, _ = engine_for(steps, EngineSettings(max_tokens=32_000, round_pricing="flat"))
        events = run(engine, Message.user("go"))
        truncated = [e for e in events if isinstance(e, Note) and e.kind == "context_provider_truncated"]
        assert len(truncated) == 1 and truncated[0].data["input_tokens"] == 500


class TestLedger:
    def test_every_event_that_changes_the_request_is_recorded(self) -> None:
        engine, _ = engine_for(vector_steps([U(120_000, out=45_000)], restart=True))
        run(engine, Message.user("go"))
        kinds = [e.payload["event"]["type"] for e in engine.session.entries(["note"]) if "event" in e.payload]
        assert "stream_restarted" in kinds and "usage" in kinds and "turn_ended" in kinds
        assert engine.session.latest("anchor") is not None


class TestWithTheLocalProviderAndRealCompile:
    def test_a_tool_loop_on_a_small_window_never_gets_rejected(self) -> None:
        from contextwindow.compile import Policy
        from contextwindow.engine.compiler import EngineCompiler
        from contextwindow.models import get_profile
        from contextwindow.testing import LocalProvider, LocalSettings

        profile = get_profile("claude-sonnet-4-5").with_(context_window=16_000, max_output_tokens=2_000)
        script = []
        for i in range(30):
            script.append(Message.assistant(f"step {i}", ToolUse(id=f"c{i}", name="read", input={"i": i})))
        script.append(Message.assistant("finished"))
        provider = LocalProvider(settings=LocalSettings(window=16_000, usage="cumulative"), script=script)
        session = open_store().session("local")

        async def read(use: ToolUse) -> ToolResult:
            return ToolResult(tool_use_id=use.id, content=("line of source code\n" * 150))

        engine = Engine(
            session,
            provider,
            profile,
            compiler=EngineCompiler(Policy(output_reserve=2_000)),
            tool_runner=read,
            summarizer=Summarizer(provider, profile, instruction_suffix="[[contextwindow:summarize]]"),
            settings=EngineSettings(usage_mode="cumulative", max_tokens=2_000),
        )
        events = run(engine, Message.user("read the files"))
        assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
        assert events[-1].calls == 31
        assert not any(isinstance(e, OverflowRecovered) for e in events)
        assert any(isinstance(e, StreamRestarted) for e in events)
        sent = [e.usage.prompt for e in events if isinstance(e, UsageReported) and e.reported]
        assert sent and max(sent) <= 16_000


class TestCalibrationAndAnchors:
    def _engine(
        self, steps: list[Step], session_name: str = "s"
    ) -> tuple[Engine, ScriptedProvider, PlainCompiler]:
        provider = ScriptedProvider(steps)
        compiler = PlainCompiler()
        engine = Engine(
            open_store().session(session_name),
            provider,
            PROFILE,
            compiler=compiler,
            tool_runner=blob_tool,
            settings=EngineSettings(max_tokens=32_000, round_pricing="flat", max_stream_input_tokens=None),
        )
        return engine, provider, compiler

    def test_one_sample_per_compiled_request_feeds_the_next_compile(self) -> None:
        from contextwindow.pricing import Estimator

        first = Message.user("calibrate " * 300)
        estimate = Estimator(PROFILE).messages((first,))
        steps = [
            Step(blob_call(0), U(round(1.5 * estimate), out=10)),  # ratio 1.5: 1.0 → 1.1
            Step(DONE, U(round(3 * estimate), out=10)),  # a grown, appended request: never a sample
        ]
        engine, _, compiler = self._engine(steps)
        run(engine, first)
        # A fresh multiplier's first sample: a running mean's first step, weighted by the request's size.
        learned = 1 + min(1.0, estimate / FULL_SAMPLE_TOKENS) * 0.5
        assert engine.calibrator.multiplier == pytest.approx(learned, abs=1e-3)
        engine.provider = ScriptedProvider([Step(DONE, U(1_000, out=5))])
        run(engine, Message.user("next"))
        assert compiler.multipliers[-1] == pytest.approx(learned, abs=0.011)  # in the fit's 2% steps

    def test_the_multiplier_and_the_anchor_survive_a_new_engine_on_the_session(self) -> None:
        from contextwindow.pricing import Estimator

        first = Message.user("calibrate " * 300)
        estimate = Estimator(PROFILE).messages((first,))
        engine, _, _ = self._engine([Step(DONE, U(round(1.5 * estimate), out=40))])
        run(engine, first)
        session = engine.session
        stored = session.latest("anchor")
        assert stored is not None and stored.payload["anchor"]["input_tokens"] == round(1.5 * estimate)
        again = Engine(session, ScriptedProvider([]), PROFILE, compiler=PlainCompiler())
        assert again.calibrator.multiplier == pytest.approx(engine.calibrator.multiplier)
        assert again.calibrator.multiplier > 1.1
        assert again.trigger.baseline_input == round(1.5 * estimate)
        assert again.trigger.baseline_output == 40

    def test_a_new_engine_sizes_its_fit_from_the_stored_anchors_count(self) -> None:
        from contextwindow.pricing import Estimator

        first = Message.user("calibrate " * 300)
        estimate = Estimator(PROFILE).messages((first,))
        engine, _, _ = self._engine([Step(DONE, U(round(1.3 * estimate), out=40))])
        run(engine, first)
        again = Engine(engine.session, ScriptedProvider([]), PROFILE, compiler=PlainCompiler())
        assert again.trigger.baseline_input == round(1.3 * estimate)
        assert again.fit.composition_factor() > 1  # the count, not the estimate, sizes the first fit

    def test_an_anchor_for_another_model_does_not_seed_the_trigger(self) -> None:
        engine, _, _ = self._engine([Step(DONE, U(197_000, out=1_000))])
        run(engine, Message.user("first"))
        other = ModelProfile(
            name="other-200k",
            provider="anthropic",
            context_window=200_000,
            max_output_tokens=32_000,
            tokenizer="claude",
        )
        again = Engine(engine.session, ScriptedProvider([]), other, compiler=PlainCompiler())
        assert again.trigger.baseline_input is None


class TestReportedWindowNote:
    def test_crossing_the_models_reported_window_without_a_declared_one_is_noted(self) -> None:
        settings = EngineSettings(
            max_tokens=32_000, round_pricing="flat", max_stream_input_tokens=None, use_physical_window=False
        )
        engine, _ = engine_for([Step(DONE, U(150_000, out=1_000))], settings)
        assert not [e for e in run(engine, Message.user("a")) if isinstance(e, Note)]
        engine.provider = ScriptedProvider([Step(DONE, U(205_000, out=1_000))])
        notes = [e for e in run(engine, Message.user("b")) if isinstance(e, Note)]
        assert notes == [
            Note(
                kind="context_reported_window_exceeded",
                data={"used_tokens": 206_000, "reported_context_window": 200_000},
            )
        ]

    def test_no_note_when_a_window_is_declared(self) -> None:
        engine, _ = engine_for([Step(DONE, U(150_000, out=1_000))])
        run(engine, Message.user("a"))
        engine.provider = ScriptedProvider([Step(DONE, U(205_000, out=1_000))])
        kinds = [e.kind for e in run(engine, Message.user("b")) if isinstance(e, Note)]
        assert "context_reported_window_exceeded" not in kinds


class TestEscalationEvents:
    def test_archived_tool_results_carry_the_ids_compile_archived(self) -> None:
        from contextwindow.compile import Policy
        from contextwindow.engine.compiler import EngineCompiler
        from contextwindow.engine.events import ToolResultsArchived

        session = open_store().session("arch")
        for i in range(3):
            session.append(Message.user(f"turn {i}"))
            session.append(Message.assistant(ToolUse(id=f"old{i}", name="read", input={})))
            session.append(Message.user(ToolResult(tool_use_id=f"old{i}", content="source line\n" * 400)))
            session.append(Message.assistant(f"read {i}"))
        rejection = ContextOverflow("request too large")  # no numbers: nothing to refit by
        provider = ScriptedProvider([Step(DONE, reject=rejection), Step(DONE, U(5_000, out=5))])
        engine = Engine(
            session,
            provider,
            PROFILE,
            compiler=EngineCompiler(Policy(archive_text_over_tokens=100_000)),
            settings=EngineSettings(max_tokens=4_000, max_stream_input_tokens=None),
        )
        events = run(engine, Message.user("now"))
        archived = [e for e in events if isinstance(e, ToolResultsArchived)]
        assert archived and set(archived[0].tool_use_ids) == {"old0", "old1", "old2"}
        assert any(isinstance(e, OverflowRecovered) for e in events)


class TestStreamsWithoutAReportedPrompt:
    def test_a_restarted_stream_whose_first_call_reports_nothing_does_not_inherit(self) -> None:
        samples = cumulative([U(120_000, out=45_000)])
        steps = [Step(blob_call(0), samples[0]), Step(blob_call(1), None), Step(DONE, U(20_000, out=5))]
        engine, _ = engine_for(steps)
        events = run(engine, Message.user("go"))
        assert len([e for e in events if isinstance(e, StreamRestarted)]) == 1
        assert engine.last_projection is None  # the new stream has no reporting call yet

    def test_without_usage_the_engines_estimate_stands_in_for_the_projection(self) -> None:
        settings = EngineSettings(max_tokens=32_000, round_pricing="flat", max_stream_input_tokens=None)
        steps = [Step(blob_call(i), None) for i in range(30)] + [Step(DONE, None)]
        engine, _ = engine_for(steps, settings)
        events = run(engine, Message.user("go"))
        restarts = [e for e in events if isinstance(e, StreamRestarted)]
        # Each blob round adds 6,043; the first request is tiny, so the estimate crosses
        # 200,000 − 32,000 after about 27 rounds, never later than the window allows.
        assert restarts and all(r.reason == "physical_window" and r.input_tokens > 200_000 for r in restarts)
        assert engine.last_projection is None

    def test_an_unreported_first_call_disarms_the_calibration_sample(self) -> None:
        from contextwindow.pricing import Estimator

        first = Message.user("calibrate " * 300)
        estimate = Estimator(PROFILE).messages((first,))
        steps = [Step(blob_call(0), None), Step(DONE, U(round(1.5 * estimate), out=10))]
        engine, _ = engine_for(steps, EngineSettings(max_tokens=32_000, round_pricing="flat"))
        run(engine, first)
        assert engine.calibrator.multiplier == 1.0  # the grown request was never compared with the estimate
