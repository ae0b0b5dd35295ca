"""Covering folds: history compile leaves out is folded into a summary checkpoint before sending.

Driven end to end: the real compiler, the local provider enforcing a small window, and the local
provider's deterministic summariser. What compile leaves out must be covered by a checkpoint whose
summary rides in the request; folds are bounded; a failing summariser falls back to a hard cut with a
note and never loops; a reopened session compiles the same bytes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from contextwindow.compile import SUMMARY_HEADER, Policy
from contextwindow.content import Message, Request, Text, ToolResult, ToolUse, message_to_dict
from contextwindow.engine.compiler import CompileContext, EngineCompiler
from contextwindow.engine.events import Compacted, CompactionFailed, Event, Note, RequestSent, TurnEnded
from contextwindow.engine.folding.ladder import hard_cut_text
from contextwindow.engine.folding.summarizer import Summarizer
from contextwindow.engine.loop import Engine, EngineSettings
from contextwindow.errors import ProviderError
from contextwindow.formats import AttachmentLoader
from contextwindow.models import get_profile
from contextwindow.providers import ProviderEvent
from contextwindow.store import Session, open_store
from contextwindow.store.slots import LedgerSlot
from contextwindow.testing import FunctionProvider, LocalModel, LocalProvider, LocalSettings
from contextwindow.usage.tracker import AnchorBook

WINDOW = 8_000
RESERVE = 1_000
PROFILE = get_profile("claude-sonnet-4-5").with_(context_window=WINDOW, max_output_tokens=RESERVE)
MARKER = "[[contextwindow:summarize]]"


def script(turns: int, calls: int) -> list[list[Message]]:
    out = []
    for t in range(turns):
        replies = [
            Message.assistant(f"turn {t} step {i}", ToolUse(id=f"c{t}_{i}", name="read", input={"i": i}))
            for i in range(calls)
        ]
        replies.append(Message.assistant(f"turn {t} finished"))
        out.append(replies)
    return out


def reader(lines: int = 60):  # type: ignore[no-untyped-def]
    async def read(use: ToolUse) -> ToolResult:
        return ToolResult(tool_use_id=use.id, content=f"{use.id}: " + "line of source code\n" * lines)

    return read


@dataclass
class Recording:
    """A provider that records each request it is sent and delegates to another."""

    inner: LocalProvider
    name: str = "recording"
    requests: list[Request] = field(default_factory=list)

    def stream(
        self, request: Request, *, max_tokens: int, load: AttachmentLoader
    ) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        return self.inner.stream(request, max_tokens=max_tokens, load=load)


def failing_provider() -> FunctionProvider:
    """A summariser's provider that always fails."""

    def down(request: Request, max_tokens: int) -> str:
        raise ProviderError("the summariser is down", provider="failing")

    return FunctionProvider(down, name="failing")


@dataclass
class RecordingCompiler:
    """The engine compiler, remembering what each compile left out."""

    inner: EngineCompiler
    omitted: list[tuple[str, ...]] = field(default_factory=list)

    def __call__(self, context: CompileContext) -> object:
        compiled = self.inner(context)
        self.omitted.append(tuple(compiled.decisions.omitted))
        return compiled


def make_engine(
    session: Session,
    turns: list[list[Message]],
    *,
    summarizer_provider: object | None = None,
    settings: EngineSettings | None = None,
    lines: int = 60,
) -> tuple[Engine, Recording, RecordingCompiler]:
    model = LocalModel(LocalSettings(window=WINDOW, usage="per-call"), script=[m for t in turns for m in t])
    provider = Recording(LocalProvider(model))
    summarizer = Summarizer(
        summarizer_provider or LocalProvider(model, session="summarizer"),  # type: ignore[arg-type]
        PROFILE,
        instruction_suffix=MARKER,
    )
    compiler = RecordingCompiler(EngineCompiler(Policy(output_reserve=RESERVE), system=(Text(text="agent"),)))
    engine = Engine(
        session,
        provider,
        PROFILE,
        compiler=compiler,  # type: ignore[arg-type]
        tool_runner=reader(lines),
        summarizer=summarizer,
        settings=settings or EngineSettings(max_tokens=RESERVE, max_stream_input_tokens=None),
    )
    return engine, provider, compiler


def run_turns(engine: Engine, compiler: RecordingCompiler, count: int) -> list[list[Event]]:
    """Run ``count`` turns; after each recompiled send, what the compile sent left out is recorded."""
    sent_omitted: list[tuple[str, ...]] = []

    async def go() -> list[list[Event]]:
        out = []
        for t in range(count):
            events = []
            async for event in engine.run_turn(Message.user(f"task {t}: audit the module")):
                if isinstance(event, RequestSent) and event.recompiled:
                    sent_omitted.append(compiler.omitted[-1])
                events.append(event)
            out.append(events)
        return out

    result = asyncio.run(go())
    engine.sent_omitted = sent_omitted  # type: ignore[attr-defined]
    return result


class TestCoveringFold:
    def test_a_long_session_ends_with_a_checkpoint_whose_summary_is_in_the_request(self) -> None:
        turns = script(3, 12)
        engine, provider, compiler = make_engine(open_store().session("s"), turns)
        events = run_turns(engine, compiler, 3)
        compacted = [e for turn in events for e in turn if isinstance(e, Compacted)]
        assert compacted and all(e.summarizer_calls > 0 for e in compacted)
        checkpoint = engine.session.latest("checkpoint")
        assert checkpoint is not None
        for key in ("summary", "first_id", "last_id"):
            assert checkpoint.payload[key]
        # the summariser's own output count of the summary is kept for compile to price it by
        assert checkpoint.payload["summary_tokens"] == compacted[-1].summary_tokens > 0
        # what the fold frees is the covered span's estimate less the summary at that same price
        covered = [s.message for s in engine.session.messages() if s.id in compacted[-1].covered_ids]
        assert (
            compacted[-1].tokens_freed
            == engine._estimator.messages(covered) - (checkpoint.payload["summary_tokens"])
        )
        first = provider.requests[-1].messages[0]
        assert isinstance(first.content[0], Text)
        assert first.content[0].text == SUMMARY_HEADER + checkpoint.payload["summary"]
        assert "## Goal" in checkpoint.payload["summary"]
        assert all(isinstance(turn[-1], TurnEnded) for turn in events)

    def test_nothing_is_left_out_of_a_sent_request_without_a_checkpoint(self) -> None:
        engine, _, compiler = make_engine(open_store().session("s"), script(3, 12))
        run_turns(engine, compiler, 3)
        sent = engine.sent_omitted  # type: ignore[attr-defined]
        assert sent and all(omitted == () for omitted in sent)
        # Every message the checkpoints cover is still in the ledger, from the very first one.
        checkpoint = engine.session.latest("checkpoint")
        assert checkpoint is not None
        ids = [s.message.id for s in engine.session.messages()]
        assert checkpoint.payload["first_id"] == ids[0]
        assert checkpoint.payload["last_id"] in ids

    def test_a_roll_forward_summarises_the_previous_summary_with_the_new_span(self) -> None:
        engine, _, compiler = make_engine(open_store().session("s"), script(3, 12))
        run_turns(engine, compiler, 3)
        checkpoints = engine.session.entries(["checkpoint"])
        assert len(checkpoints) >= 2
        assert {c.payload["first_id"] for c in checkpoints} == {checkpoints[0].payload["first_id"]}

    def test_a_fold_leaves_headroom_so_the_next_calls_need_none(self) -> None:
        engine, _, compiler = make_engine(open_store().session("s"), script(2, 12))
        events = run_turns(engine, compiler, 2)
        calls = sum(1 for turn in events for e in turn if isinstance(e, RequestSent))
        folds = sum(1 for turn in events for e in turn if isinstance(e, Compacted))
        assert folds * 2 <= calls  # not a fold per call

    def test_folds_per_turn_are_bounded_and_the_rest_is_cut_with_a_note(self) -> None:
        settings = EngineSettings(max_tokens=RESERVE, max_stream_input_tokens=None, max_folds_per_turn=1)
        engine, _, compiler = make_engine(
            open_store().session("s"), script(1, 30), settings=settings, lines=150
        )
        [events] = run_turns(engine, compiler, 1)
        folds = [e for e in events if isinstance(e, Compacted) and e.summarizer_calls > 0]
        cuts = [e for e in events if isinstance(e, Note) and e.kind == "context_hard_cut"]
        assert len(folds) == 1 and cuts
        assert all(omitted == () for omitted in engine.sent_omitted)  # type: ignore[attr-defined]
        assert isinstance(events[-1], TurnEnded)


class TestFailingSummariser:
    def test_a_summariser_that_always_fails_cuts_with_a_note_and_does_not_loop(self) -> None:
        failing = failing_provider()
        engine, _, compiler = make_engine(
            open_store().session("s"), script(2, 15), summarizer_provider=failing
        )
        events = run_turns(engine, compiler, 2)
        flat = [e for turn in events for e in turn]
        assert any(isinstance(e, CompactionFailed) and e.reason == "provider_error" for e in flat)
        assert any(isinstance(e, Note) and e.kind == "context_hard_cut" for e in flat)
        assert len(failing.requests) <= 2  # asked once per turn, then cut without asking again
        assert all(isinstance(turn[-1], TurnEnded) for turn in events)
        assert all(omitted == () for omitted in engine.sent_omitted)  # type: ignore[attr-defined]
        checkpoint = engine.session.latest("checkpoint")
        assert checkpoint is not None
        summary = checkpoint.payload["summary"]
        assert "were cut to fit the context window without a summary" in summary
        assert summary.count("were cut") == 1  # consecutive cuts merge into one note
        assert len(engine.session.messages()) == 2 * (1 + 15 + 15 + 1)  # no original lost

    def test_without_a_summariser_the_left_out_history_is_cut_with_a_note(self) -> None:
        engine, _, compiler = make_engine(open_store().session("s"), script(1, 15), lines=150)
        engine.summarizer = None
        [events] = run_turns(engine, compiler, 1)
        assert any(isinstance(e, Note) and e.kind == "context_hard_cut" for e in events)
        assert all(omitted == () for omitted in engine.sent_omitted)  # type: ignore[attr-defined]


class TestDeterminism:
    def test_a_reopened_session_compiles_the_same_bytes(self, tmp_path: Path) -> None:
        path = tmp_path / "ledger.db"
        engine, _, compiler = make_engine(open_store(path).session("s"), script(2, 12))
        run_turns(engine, compiler, 2)
        assert engine.session.latest("checkpoint") is not None

        def compile_with(session: Session) -> str:
            fresh = EngineCompiler(Policy(output_reserve=RESERVE), system=(Text(text="agent"),))
            compiled = fresh(
                CompileContext(
                    session=session,
                    profile=engine.fit_profile(),
                    multiplier=engine.fit.multiplier(),
                    anchor=AnchorBook(LedgerSlot(engine.session, "anchor")).latest,
                )
            )
            return json.dumps([message_to_dict(m) for m in compiled.messages], sort_keys=True)

        before = compile_with(engine.session)
        reopened = open_store(path).session("s")
        assert compile_with(reopened) == before
        assert compile_with(reopened) == before


class TestHardCutText:
    @pytest.mark.parametrize(
        ("previous", "expected"),
        [
            (
                None,
                "[3 earlier messages were cut to fit the context window without a summary; ids a … c remain in the ledger]",
            ),
            (
                "## Goal\nx.",
                "## Goal\nx.\n\n[3 earlier messages were cut to fit the context window without a summary; ids a … c remain in the ledger]",
            ),
            (
                "## Goal\nx.\n\n[2 earlier messages were cut to fit the context window without a summary; ids z … y remain in the ledger]",
                "## Goal\nx.\n\n[5 earlier messages were cut to fit the context window without a summary; ids z … c remain in the ledger]",
            ),
        ],
        ids=["first-cut", "after-a-summary", "merges-with-the-previous-cut"],
    )
    def test_the_note_names_what_was_cut(self, previous: str | None, expected: str) -> None:
        assert hard_cut_text(previous, 3, "a", "c") == expected


class TestSummaryCap:
    def test_the_engine_lowers_the_summarisers_output_cap_to_the_room_it_has(self) -> None:
        def refuse(request: Request, max_tokens: int) -> str:
            raise ProviderError("no", provider="capture")

        capture = FunctionProvider(refuse, name="capture")
        summarizer = Summarizer(capture, PROFILE)
        asyncio.run(summarizer.summarize([Message.user("hello")], max_output_tokens=300))
        asyncio.run(summarizer.summarize([Message.user("hello")], max_output_tokens=10**6))
        assert capture.max_tokens == [300, RESERVE]


class TestNoCliffAtALargeMessage:
    def test_a_turn_whose_image_does_not_fit_sends_it_out_of_line_and_archives_nothing(self) -> None:
        # The new turn's own message carries an image priced past the whole budget. Its image goes
        # out of line for that request, and that alone: the stale tool results stay whole (an
        # archive is recorded for good and would shrink every later request), and the older turns
        # stay in the request.
        import io

        from PIL import Image as PILImage

        from contextwindow.content import Image

        with open_store(":memory:") as store:
            session = store.session("s")
            turns = script(3, 3)
            engine, provider, compiler = make_engine(session, turns, lines=80)
            run_turns(engine, compiler, 2)
            buf = io.BytesIO()
            PILImage.new("RGB", (16, 16), (200, 0, 0)).save(buf, "PNG")
            ref = session.attach(buf.getvalue(), "image/png", token_estimate=9_000)
            sent_before = len(provider.requests)

            async def go() -> list[Event]:
                return [
                    e async for e in engine.run_turn(Message.user("what is on this screen?", Image(ref=ref)))
                ]

            events = asyncio.run(go())
            assert isinstance(events[-1], TurnEnded)
            assert list(session.entries(["archive"])) == []
            first = provider.requests[sent_before]
            text = json.dumps([message_to_dict(m) for m in first.messages])
            assert "task 1: audit the module" in text  # the turn before is still there
            assert ref.id in text and "dropped from live context" in text
            assert not any(isinstance(b, Image) for m in first.messages for b in m.content)
