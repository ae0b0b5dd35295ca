"""The summariser alone, and its input_too_large path through the engine (maka's summariser rules,
https://github.com/apache/maka/pull/4559)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from contextwindow.content import Message, Request, Text
from contextwindow.engine.events import Compacted, FoldFailure
from contextwindow.engine.folding.summarizer import Summarizer, Summary
from contextwindow.engine.folding.summary_rules import REQUIRED_SECTIONS, SUMMARY_MAX_OUTPUT_TOKENS
from contextwindow.engine.loop import Engine, EngineSettings
from contextwindow.errors import ContextOverflow, ProviderError
from contextwindow.models import ModelProfile
from contextwindow.providers import StopReason
from contextwindow.store import open_store
from contextwindow.testing import FunctionProvider, FunctionReply
from contextwindow.usage.tracker import Usage
from engine_support import PlainCompiler, ScriptedProvider, Step

PROFILE = ModelProfile(
    name="test-200k",
    provider="anthropic",
    context_window=200_000,
    max_output_tokens=32_000,
    tokenizer="claude",
)
GOOD = "\n\n".join(f"## {s}\ncontent for {s}." for s in REQUIRED_SECTIONS)


@dataclass
class Answer:
    text: str = GOOD
    reason: StopReason = "end_turn"
    usage: Usage | None = None
    error: Exception | None = None


class FakeSummariserProvider(FunctionProvider):
    """Answers summary requests from a list (an answer's ``error`` is raised)."""

    def __init__(self, answers: list[Answer]) -> None:
        super().__init__(self._next, name="fake")
        self.answers = answers

    def _next(self, request: Request, max_tokens: int) -> FunctionReply:
        answer = self.answers.pop(0)
        if answer.error is not None:
            raise answer.error
        return FunctionReply(
            message=Message.assistant(answer.text), usage=answer.usage, stop_reason=answer.reason
        )


SPAN = [Message.user("please port heapq"), Message.assistant("reading heapq.py now")]


def summarise(
    provider: FakeSummariserProvider, span: list[Message] = SPAN, **kwargs: object
) -> Summary | FoldFailure:
    summarizer = Summarizer(provider, PROFILE, **kwargs)  # type: ignore[arg-type]
    return asyncio.run(summarizer.summarize(span))


def instruction(request: Request) -> str:
    last = request.messages[-1]
    assert last.role == "user"
    return "".join(b.text for b in last.content if isinstance(b, Text))


class TestSummarizerCalls:
    def test_a_good_summary_takes_one_call_capped_at_8000_tokens(self) -> None:
        provider = FakeSummariserProvider([Answer()])
        result = summarise(provider)
        assert isinstance(result, Summary) and result.calls == 1
        assert provider.max_tokens == [SUMMARY_MAX_OUTPUT_TOKENS]
        assert "heapq" in instruction(provider.requests[0])  # the span rides in the last user message

    def test_a_reply_cut_at_the_cap_gets_one_shorter_retry(self) -> None:
        provider = FakeSummariserProvider([Answer(text="## Goal\nport", reason="max_tokens"), Answer()])
        result = summarise(provider)
        assert isinstance(result, Summary) and result.calls == 2
        assert "cut off at the output limit" in instruction(provider.requests[1])
        assert "cut off at the output limit" not in instruction(provider.requests[0])

    def test_cut_at_the_cap_twice_fails_with_output_length_after_two_calls(self) -> None:
        provider = FakeSummariserProvider(
            [Answer(reason="max_tokens"), Answer(reason="max_tokens"), Answer()]
        )
        result = summarise(provider)
        assert result == FoldFailure("output_length", "cut at the output limit twice")
        assert len(provider.requests) == 2

    def test_a_malformed_summary_gets_one_stricter_repair(self) -> None:
        provider = FakeSummariserProvider([Answer(text="## Goal\nport heapq"), Answer()])
        result = summarise(provider)
        assert isinstance(result, Summary) and result.calls == 2
        assert "could not be used (malformed summary missing section)" in instruction(provider.requests[1])

    def test_still_malformed_after_the_repair_fails_after_two_calls(self) -> None:
        provider = FakeSummariserProvider([Answer(text="no sections"), Answer(text=GOOD + "\n```"), Answer()])
        result = summarise(provider)
        assert isinstance(result, FoldFailure) and result.reason == "malformed_summary_truncated"
        assert len(provider.requests) == 2

    def test_never_more_than_two_calls_whatever_goes_wrong(self) -> None:
        provider = FakeSummariserProvider(
            [Answer(reason="max_tokens"), Answer(text="bad"), Answer(), Answer()]
        )
        summarise(provider)
        assert len(provider.requests) == 2

    def test_a_context_length_rejection_is_input_too_large(self) -> None:
        rejection = ContextOverflow(
            "prompt is too long: 250000 tokens > 200000 maximum", requested=250_000, limit=200_000
        )
        provider = FakeSummariserProvider([Answer(error=rejection)])
        result = summarise(provider)
        assert isinstance(result, FoldFailure) and result.reason == "input_too_large"

    def test_a_rejection_of_the_repair_is_input_too_large_too(self) -> None:
        rejection = ContextOverflow("too long", requested=250_000, limit=200_000)
        provider = FakeSummariserProvider([Answer(text="bad"), Answer(error=rejection)])
        result = summarise(provider)
        assert isinstance(result, FoldFailure) and result.reason == "input_too_large"

    def test_other_provider_failures_fail_open_as_provider_error(self) -> None:
        provider = FakeSummariserProvider([Answer(error=ProviderError("boom", status=500))])
        result = summarise(provider)
        assert isinstance(result, FoldFailure) and result.reason == "provider_error"

    def test_a_span_over_its_own_window_is_input_too_large_without_a_call(self) -> None:
        small = ModelProfile(
            name="small",
            provider="anthropic",
            context_window=9_000,
            max_output_tokens=8_000,
            tokenizer="claude",
        )
        provider = FakeSummariserProvider([Answer()])
        result = asyncio.run(Summarizer(provider, small).summarize([Message.user("word " * 5_000)]))
        assert isinstance(result, FoldFailure) and result.reason == "input_too_large"
        assert provider.requests == []


class TestInputTooLargeThroughTheEngine:
    def test_the_fold_halves_until_the_summariser_accepts_it(self) -> None:
        """The summariser's provider refuses spans of more than 8 messages; the fold retreats by half."""

        answers = FakeSummariserProvider(
            [Answer(usage=Usage(fresh_input=1_000, output=100)) for _ in range(8)]
        )
        covered: list[int] = []

        def picky(request: Request, max_tokens: int) -> FunctionReply:
            lines = instruction(request).count("[user] old") + instruction(request).count("[assistant] old")
            covered.append(lines)
            if lines > 8:
                raise ContextOverflow("prompt is too long", requested=300_000, limit=200_000)
            return answers._next(request, max_tokens)

        summariser_provider = FunctionProvider(picky, name="picky")
        steps = [Step(Message.assistant("done"), Usage(fresh_input=197_000, output=1_000))]
        steps.append(Step(Message.assistant("done again"), Usage(fresh_input=20_000, output=10)))
        provider = ScriptedProvider(steps)
        session = open_store().session("s")
        engine = Engine(
            session,
            provider,
            PROFILE,
            compiler=PlainCompiler(),
            summarizer=Summarizer(summariser_provider, PROFILE),
            settings=EngineSettings(max_tokens=32_000, round_pricing="flat", max_stream_input_tokens=None),
        )
        for i in range(16):
            session.append(Message.user(f"old question {i}"))
            session.append(Message.assistant(f"old answer {i}"))

        async def turn(text: str) -> list[object]:
            return [e async for e in engine.run_turn(Message.user(text))]

        asyncio.run(turn("first"))
        # The rejection ladder's fold before the next turn (a compiler that fits nothing leaves no tail
        # to keep, so the reactive fold covers everything before the turn, as far as the summariser reads).
        second = session.append(Message.user("second")).message
        assert second.id is not None

        async def fold() -> list[object]:
            return [e async for e in engine._folding.fold("pre_turn", second.id, phase_tag="reactive")]

        events = asyncio.run(fold())
        compacted = [e for e in events if isinstance(e, Compacted)]
        assert len(compacted) == 1 and compacted[0].phase == "reactive"
        # 34 visible messages before "second": 34 → 17 → 8 covered; each refusal halves the span.
        assert covered[0] > 8 and covered[-1] <= 8
        assert len(covered) == 3
        assert len(compacted[0].covered_ids) == 8


def _coding_span(n: int) -> list[Message]:
    """A coding agent's span: prose, tool calls and their (some long) results, in ``n`` messages."""
    from contextwindow.content import ToolResult, ToolUse

    out: list[Message] = []
    for i in range(n):
        if i % 3 == 0:
            out.append(
                Message.user(
                    f"Step {i}: the build of module m{i % 7} failed; fix it and run the tests again."
                )
            )
        elif i % 3 == 1:
            use = ToolUse(
                id=f"toolu_{i:04d}", name="bash", input={"command": f"pytest -q tests/test_m{i % 7}.py"}
            )
            out.append(Message(role="assistant", content=(Text(text="Running the tests."), use)))
        else:
            body = "\n".join(
                f"tests/test_m{i % 7}.py::test_{j} {'PASSED' if j % 5 else 'FAILED'}" for j in range(40 + i)
            )
            out.append(
                Message(role="user", content=(ToolResult(tool_use_id=f"toolu_{i - 1:04d}", content=body),))
            )
    return out


def _sized(window: int, output: int, tokenizer: str = "o200k") -> ModelProfile:
    """A profile of ``window`` tokens (``output`` of them the most a reply takes), counted by ``tokenizer``."""
    name, provider = ("gpt-4o", "openai") if tokenizer == "o200k" else ("small", "anthropic")
    return ModelProfile(
        name=name, provider=provider, context_window=window, max_output_tokens=output, tokenizer=tokenizer
    )


class TestTheSummarisersOwnWindow:
    """What the summariser's request may hold, by its estimate: priced in parts with a tokenizer (the
    span's texts are counted once), whole by a fitted rule."""

    @staticmethod
    def _whole(summarizer: Summarizer, span: list[Message], room: int) -> int:
        """The most leading messages whose request, priced whole, fits with ``room`` for the output."""
        from contextwindow.engine.folding.summarizer import render_transcript

        window = summarizer.profile.context_window
        fits = [
            summarizer.estimator.request(summarizer._request(render_transcript(span[:k]), None, None)) + room
            <= window
            for k in range(len(span) + 1)
        ]
        return max(k for k, ok in enumerate(fits) if ok) if fits[0] else 0

    def test_with_a_tokenizer_the_parts_never_price_a_span_under_its_whole(self) -> None:
        from contextwindow.engine.folding.summarizer import render_transcript
        from contextwindow.models import get_profile
        from contextwindow.pricing import Estimator

        profile = get_profile("gpt-4o")
        estimator = Estimator(profile, exact=True)
        summarizer = Summarizer(FakeSummariserProvider([]), profile, estimator=estimator)
        span = _coding_span(60)
        whole = estimator.request(summarizer._request(render_transcript(span), None, None))
        # The largest window this span's request fits in, by the parts: never below the whole's price.
        for window in range(whole - 50, whole + 400, 5):
            small = _sized(window, 100)
            s = Summarizer(FakeSummariserProvider([]), small, estimator=estimator, max_output_tokens=100)
            if s.fits(span):
                assert window - 100 >= whole
                assert window - 100 <= whole * 1.05  # and not far over it
                break
        else:
            raise AssertionError("the span fits no window up to 400 tokens over its whole price")

    def test_with_a_tokenizer_the_prefix_allowed_fits_priced_whole(self) -> None:
        from contextwindow.models import get_profile
        from contextwindow.pricing import Estimator

        span = _coding_span(90)
        estimator = Estimator(get_profile("gpt-4o"), exact=True)
        for window in (3_000, 6_000, 9_000, 20_000):
            small = _sized(window, 1_000)
            summarizer = Summarizer(FakeSummariserProvider([]), small, estimator=estimator)
            allowed = summarizer.fitting(span)
            whole = self._whole(summarizer, span, 1_000)
            assert allowed <= whole  # never more than the whole request holds
            assert allowed >= whole - 2  # and not much less (a seam or two)
            assert summarizer.fits(span[:allowed]) and (
                allowed == len(span) or not summarizer.fits(span[: allowed + 1])
            )

    def test_by_a_fitted_rule_the_prefix_is_the_whole_requests(self) -> None:
        span = _coding_span(90)
        for window in (12_000, 14_000, 20_000, 60_000):
            small = _sized(window, 8_000, "claude")
            summarizer = Summarizer(FakeSummariserProvider([]), small)
            assert not summarizer.estimator.exact
            assert summarizer.fitting(span) == self._whole(summarizer, span, 8_000)

    def test_a_frame_over_the_window_holds_nothing(self) -> None:
        summarizer = Summarizer(FakeSummariserProvider([]), _sized(9_000, 8_000, "claude"))
        previous = "word " * 4_000
        assert summarizer.fitting(_coding_span(3), previous) == 0
        assert not summarizer.fits([], previous)

    def test_the_request_around_the_transcript_is_priced_again_when_the_prompt_changes(self) -> None:
        from contextwindow.models import get_profile
        from contextwindow.pricing import Estimator

        estimator = Estimator(get_profile("gpt-4o"), exact=True)
        summarizer = Summarizer(FakeSummariserProvider([]), _sized(12_000, 8_000), estimator=estimator)
        span = _coding_span(3)
        assert summarizer.fits(span)
        summarizer.prompt = "Summarise. " * 2_000  # ~4,000 tokens more than the window leaves
        assert not summarizer.fits(span)
