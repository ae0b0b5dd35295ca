"""How the engine fits history into the window on long sessions: archives, folds, reserves, estimates."""

from __future__ import annotations

import asyncio
import io
import math
from pathlib import Path

from benchmarks._claude_sessions import recorded_scale

from contextwindow.compile import Policy
from contextwindow.content import Message, Text, ToolResult, ToolSpec, ToolUse
from contextwindow.engine import Engine
from contextwindow.engine.compiler import CompileContext, EngineCompiler
from contextwindow.engine.events import Compacted, Event
from contextwindow.engine.fit import WindowFit
from contextwindow.engine.folding.fold_trigger import ProactiveTrigger
from contextwindow.engine.folding.summarizer import Summarizer
from contextwindow.engine.settings import EngineSettings
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
from contextwindow.replay.demo import DEMO_SERVED_SHARE, DEMO_WINDOW, build_demo
from contextwindow.replay.importers import import_claude_code
from contextwindow.replay.report import EVENT_LEGEND, format_value, write_report
from contextwindow.replay.scenario import Scenario, ScenarioBuilder
from contextwindow.replay.simulate import simulate_sync
from contextwindow.store import open_store
from contextwindow.store.slots import MemorySlot
from contextwindow.testing import SUMMARY_MARKER, LocalProvider
from contextwindow.usage.calibration import Calibrator

DATA = Path(__file__).parents[1] / "data"
PROSE = "The agent reads a file, thinks about it and writes down what it found. " * 40


def _session(turns: int, *, big_first: bool = True, reads: int = 3) -> Scenario:
    """Turns of tool calls; the first turn reads one large file (a stale result once later turns come)."""
    b = ScenarioBuilder(name="fit")
    b.system("You are a careful coding agent.")
    b.tools([ToolSpec(name="read", description="read a file")])
    for t in range(turns):
        b.user(Message.user(f"Turn {t}: audit module {t} and report."))
        for r in range(reads):
            call = f"t{t}r{r}"
            b.assistant(
                Message.assistant(f"Reading part {r}.", ToolUse(id=call, name="read", input={"part": r}))
            )
            body = PROSE * (6 if big_first and t == 0 and r == 0 else 1)
            b.tool_result(ToolResult(tool_use_id=call, content=f"part {r} of turn {t}\n{body}"))
        b.assistant(Message.assistant(f"Turn {t} done."))
    return b.build()


class TestArchiveUnderPressure:
    def test_stale_results_stay_whole_while_the_history_fits(self) -> None:
        sink = io.StringIO()
        result = simulate_sync(_session(5), model="gpt-4o", window=64_000, record=sink)
        assert not any("compacted" in r.events for r in result.records)
        last = sink.getvalue().splitlines()[-1]
        assert last.count(PROSE.strip()) >= 6 + 14  # the first turn's large result went out whole

    def test_stale_results_are_archived_when_the_request_needs_the_room(self) -> None:
        result = simulate_sync(_session(5), model="gpt-4o", window=9_000, reserve=1_000)
        assert result.summary["rejections"] == 0
        assert any("archived" in r.events or "compacted" in r.events for r in result.records)

    def test_archives_that_would_leave_the_request_a_sliver_are_not_taken(self, tmp_path: Path) -> None:
        profile = get_profile("gpt-4o").with_(context_window=3_000, max_output_tokens=500)
        with open_store(tmp_path / "s.db") as store:
            session = store.session("s")
            big = PROSE * 5  # ~3,000 tokens: more than the whole budget
            for message in (
                Message.user("Turn 0: look around."),
                Message.assistant("Looked."),
                Message.user("Turn 1: read the file."),
                Message.assistant(ToolUse(id="t0", name="read", input={})),
                Message.user(ToolResult(tool_use_id="t0", content=big)),
                Message.assistant("Read it."),
                Message.user("Turn 2: go on."),
                Message.assistant("Going on."),
                Message.user("Turn 3: and on."),
            ):
                session.append(message)
            compiler = EngineCompiler(Policy(output_reserve=500, max_message_tokens=0))
            out = compiler(CompileContext(session=session, profile=profile))
            assert not list(session.entries(["archive"]))  # archiving would leave ~100 of 2,500
            assert out.decisions.archived == ()
            assert out.estimated_tokens >= 0.6 * out.budget  # the large result cut to fill instead
            [cut] = out.decisions.truncated
            assert cut.message_id == session.messages()[4].id
            assert out.decisions.omitted  # the oldest turn is left out, for a fold to cover


def _long_replies(turns: int, reads: int) -> Scenario:
    """Turns whose every third reply is longer than the call's max_tokens (cut by the provider)."""
    b = ScenarioBuilder(name="long replies")
    b.system("You are a careful coding agent.")
    b.tools([ToolSpec(name="read", description="read a file")])
    for t in range(turns):
        b.user(Message.user(f"Turn {t}: audit module {t} and report."))
        for r in range(reads):
            call = f"t{t}r{r}"
            said = PROSE * (3 if r % 3 == 1 else 0) + f"Reading part {r}."
            b.assistant(Message.assistant(said, ToolUse(id=call, name="read", input={"part": r})))
            b.tool_result(ToolResult(tool_use_id=call, content=f"part {r} of turn {t}\n{PROSE * 2}"))
        b.assistant(Message.assistant(f"Turn {t} done."))
    return b.build()


class TestOrdinaryFold:
    def test_every_fold_keeps_the_newest_history_that_fills_the_tail(self) -> None:
        window = 16_000
        result = simulate_sync(_long_replies(4, 12), model="gpt-4o", window=window, reserve=1_000)
        assert result.summary["cut_replies"] > 0 and result.summary["rejections"] == 0
        after = [
            r.provider_input_tokens / window
            for before, r in zip(result.records, result.records[1:], strict=False)
            if "compacted" in r.events or "compacted" in before.events
            if r.provider_input_tokens
        ]
        assert after, "the session never folded"
        assert min(after) >= 0.5


class TestTriggerFoldsOnlyWhenNeeded:
    def test_a_cut_reply_asks_for_a_fold_that_does_not_come_while_the_request_fits(self) -> None:
        # The history fills more than the fold's target tail (90% of the budget) but the request
        # still fits with its whole output reserve: folding now would free room nothing needs yet.
        profile = get_profile("gpt-4o").with_(context_window=8_000)
        settings = EngineSettings(max_tokens=1_000, max_stream_input_tokens=None)
        local = LocalProvider()
        summarizer = Summarizer(local, profile, instruction_suffix=f"{SUMMARY_MARKER}]]")
        engine = Engine(open_store().session("s"), local, profile, settings=settings, summarizer=summarizer)
        budget = engine._requests().budget
        note = PROSE[: len(PROSE) // 4]  # ~150 tokens
        for _ in range(100):
            if _estimate(engine) >= 0.93 * budget:
                break
            engine.append(Message.user(note))
            engine.append(Message.assistant(note))
        assert 0.9 * budget < _estimate(engine) <= budget
        engine.trigger.accepted(input_tokens=0, output_tokens=1_000, finish_reason="length")
        opener = engine.append(Message.user("Go on."))

        async def prepare() -> list[Event]:
            return [event async for event in engine.prepare(opener.id)]

        events = asyncio.run(prepare())
        assert not any(isinstance(e, Compacted) for e in events)
        assert engine.request.messages[0].content == (Text(text=note),)  # the whole history went out


def _estimate(engine: Engine) -> int:
    return engine._requests().estimated_tokens


class TestReplyReserve:
    def test_the_reply_reserve_never_exceeds_the_calls_max_tokens(self) -> None:
        trigger = ProactiveTrigger(declared_window=10_000, max_tokens=500)
        trigger.accepted(input_tokens=8_000, output_tokens=1_000, finish_reason="end_turn")
        assert trigger.reply_reserve() == 500
        assert trigger.due() is None  # 8,000 + 1,000 + 500 < 10,000; min(2 × 1,000, 8,000) would fire

    def test_without_max_tokens_the_reserve_is_twice_the_last_output(self) -> None:
        trigger = ProactiveTrigger(declared_window=10_000)
        trigger.accepted(input_tokens=8_000, output_tokens=1_000, finish_reason="end_turn")
        assert trigger.reply_reserve() == 2_000 and trigger.due() == "proactive"


class TestDemoShowsRecovery:
    def test_the_demo_provider_serves_less_and_one_rejection_is_recovered_and_learned(self) -> None:
        served = math.floor(DEMO_WINDOW * DEMO_SERVED_SHARE)
        result = simulate_sync(
            build_demo(0),
            model="claude-sonnet-4-6",
            window=DEMO_WINDOW,
            usage="per-call",
            provider_window=served,
        )
        assert result.summary["rejections"] == result.summary["recovered"] == 1
        assert result.summary["window_learned"] == served
        assert result.failed_turns == 0

    def test_the_report_formats_values_as_the_cli_does_and_says_what_the_events_are(
        self, tmp_path: Path
    ) -> None:
        result = simulate_sync(_session(3), model="gpt-4o", window=9_000, reserve=1_000)
        page = write_report(result.records, result.summary, tmp_path).read_text(encoding="utf-8")
        share = result.summary["window_use_mean"]
        assert f"<td>{share:.1%}</td>" in page and f"{share}" not in page
        assert EVENT_LEGEND in page
        assert (
            format_value(0.6904) == "69.0%" and format_value(22080) == "22,080" and format_value(None) == "—"
        )


class TestEstimatesHold:
    def test_from_the_second_request_on_estimates_are_within_five_percent_and_not_under(self) -> None:
        # Claude's rule prices this text above the local provider's o200k count: calibration learns
        # it on the first call, and the anchor after it must be in the units the next compile uses.
        result = simulate_sync(_session(8), model="claude-sonnet-4-5", window=64_000, usage="per-call")
        errors = [
            (r.estimated_tokens - r.provider_input_tokens) / r.provider_input_tokens
            for r in result.records[1:]
            if r.provider_input_tokens
        ]
        assert len(errors) >= 30
        ordered = sorted(abs(e) for e in errors)
        assert ordered[math.ceil(0.95 * len(ordered)) - 1] <= 0.05  # p95
        assert min(errors) >= -0.03


def _calibrator() -> Calibrator:
    return Calibrator(MemorySlot(None), model="claude-opus-4-7")


class TestRetryHolds:
    def test_the_retry_holds_the_uncounted_margin_on_what_no_count_covers(self) -> None:
        profile = get_profile("claude-opus-4-7")
        estimator = Estimator(profile)
        fit = WindowFit(profile, _calibrator(), estimator=estimator, settings=EngineSettings())
        assert not fit.hold_for(10_000)  # nothing counted yet: the uncounted margin is on everything
        fit.observe(prompt=12_000, local_estimate=12_000, multiplier=1.0)
        before = fit.fit_profile(13_600).context_window
        assert fit.hold_for(10_000)
        assert fit.held == math.ceil((0.13 - 0.05) * 10_000)
        assert fit.fit_profile(13_600).context_window == before - fit.held
        assert not fit.hold_for(5_000)  # a smaller part never loosens the hold
        fit.release()
        assert fit.fit_profile(13_600).context_window == before

    def test_a_real_session_whose_retry_was_refused_again_recovers_at_85_percent(self) -> None:
        # An Opus 4.7 sub-agent: a mid-turn fold's request is refused at 14,279 against 13,600; the
        # retry re-cuts a large WebFetch result that the estimate prices 10-24% low.
        path = DATA / "claude_code_subagent.jsonl"
        scenario = import_claude_code(path)
        result = simulate_sync(
            scenario,
            model="claude-opus-4-7",
            window=16_000,
            usage="per-call",
            provider_window=13_600,
            count_scale=recorded_scale(path, "claude-opus-4-7"),
        )
        assert result.summary["rejections"] >= 1
        assert result.failed_turns == 0
