"""A function as a provider: what the handler answers is what the stream says, and it records its calls."""

from __future__ import annotations

import asyncio

import pytest

from contextwindow.content import Message, Request, Text, Thinking, ToolUse
from contextwindow.errors import ContextOverflow, UsageError
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
from contextwindow.pricing.counters import InputCounter
from contextwindow.providers import (
    Provider,
    ProviderEvent,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    UsageSample,
    complete,
)
from contextwindow.testing import CountingFunctionProvider, FunctionProvider, FunctionReply
from contextwindow.usage.tracker import Usage

REQUEST = Request(model="claude-sonnet-4-5", messages=(Message.user("hello"),))


def no_bytes(ref: object) -> bytes:
    raise AssertionError("nothing to load")


def events(
    provider: FunctionProvider, request: Request = REQUEST, max_tokens: int = 100
) -> list[ProviderEvent]:
    async def go() -> list[ProviderEvent]:
        return [e async for e in provider.stream(request, max_tokens=max_tokens, load=no_bytes)]

    return asyncio.run(go())


class TestAnswers:
    def test_a_string_is_one_text_block_that_ends_the_turn(self) -> None:
        out = events(FunctionProvider(lambda request, max_tokens: "hi"))
        assert out[:-1] == [TextDelta(text="hi")]
        stop = out[-1]
        assert isinstance(stop, Stop) and (stop.reason, stop.raw_reason) == ("end_turn", "end_turn")
        assert stop.message == Message.assistant("hi")

    def test_a_message_that_calls_a_tool_streams_the_call_and_stops_for_tool_use(self) -> None:
        use = ToolUse(id="c1", name="read", input={"path": "a.py"})
        out = events(FunctionProvider(lambda request, max_tokens: Message.assistant("reading", use)))
        assert out[:-1] == [TextDelta(text="reading"), ToolCall(tool_use=use)]
        assert isinstance(out[-1], Stop) and out[-1].reason == "tool_use"

    def test_thinking_streams_with_its_signature(self) -> None:
        reply = Message.assistant(Thinking(thinking="hmm", signature="sig"), "done")
        out = events(FunctionProvider(lambda request, max_tokens: reply))
        assert out[:2] == [ThinkingDelta(thinking="hmm", signature="sig"), TextDelta(text="done")]

    def test_a_replys_usage_is_one_sample_before_the_stop_and_its_own_stop_reason_is_normalised(self) -> None:
        usage = Usage(fresh_input=1_200, output=100)
        reply = FunctionReply(message=Message.assistant("cut"), usage=usage, stop_reason="length")
        out = events(FunctionProvider(lambda request, max_tokens: reply))
        assert out[1] == UsageSample(usage=usage)
        assert isinstance(out[2], Stop) and (out[2].reason, out[2].raw_reason) == ("max_tokens", "length")

    def test_a_message_alone_reports_no_usage(self) -> None:
        out = events(FunctionProvider(lambda request, max_tokens: Message.assistant("hi")))
        assert not any(isinstance(e, UsageSample) for e in out)

    def test_an_async_handler_is_awaited(self) -> None:
        async def handler(request: Request, max_tokens: int) -> str:
            await asyncio.sleep(0)
            return f"bound {max_tokens}"

        completion = asyncio.run(complete(FunctionProvider(handler), REQUEST, max_tokens=7, load=no_bytes))
        assert completion.message == Message.assistant("bound 7") and completion.usage is None

    @pytest.mark.parametrize(
        "answer",
        [None, 42, Message.user("I am the user"), FunctionReply(message=Message.user("me too"))],
        ids=["none", "int", "user-message", "user-reply"],
    )
    def test_an_answer_that_is_not_an_assistant_reply_is_a_usage_error(self, answer: object) -> None:
        with pytest.raises(UsageError):
            events(FunctionProvider(lambda request, max_tokens: answer))  # type: ignore[arg-type, return-value]


class TestRejections:
    def test_what_the_handler_raises_reaches_the_caller_unchanged(self) -> None:
        rejection = ContextOverflow("prompt is too long: 9 tokens > 8 maximum", requested=9, limit=8)

        def handler(request: Request, max_tokens: int) -> str:
            raise rejection

        with pytest.raises(ContextOverflow) as caught:
            events(FunctionProvider(handler))
        assert caught.value is rejection

    def test_a_handler_can_reject_for_size_as_a_provider_with_a_window_does(self) -> None:
        estimator = Estimator(get_profile("claude-sonnet-4-5"))
        window = estimator.request(REQUEST) + 50

        def sized(request: Request, max_tokens: int) -> str:
            size = estimator.request(request)
            if size + max_tokens > window:
                raise ContextOverflow(f"{size} + {max_tokens} > {window}", requested=size, limit=window)
            return "fits"

        provider = FunctionProvider(sized)
        assert isinstance(events(provider, max_tokens=50)[-1], Stop)
        with pytest.raises(ContextOverflow):
            events(provider, max_tokens=51)


class TestRecording:
    def test_every_request_and_its_output_bound_is_recorded_in_order_rejected_ones_too(self) -> None:
        answers: list[str | ContextOverflow] = ["one", ContextOverflow("too long"), "three"]

        def handler(request: Request, max_tokens: int) -> str:
            answer = answers.pop(0)
            if isinstance(answer, Exception):
                raise answer
            return answer

        provider = FunctionProvider(handler)
        sent = [Request(messages=(Message.user(f"q{i}"),)) for i in range(3)]
        events(provider, sent[0], 10)
        with pytest.raises(ContextOverflow):
            events(provider, sent[1], 20)
        events(provider, sent[2], 30)
        assert provider.requests == sent
        assert provider.max_tokens == [10, 20, 30]


class TestCounting:
    def test_a_function_provider_is_a_provider_that_does_not_count(self) -> None:
        provider = FunctionProvider(lambda request, max_tokens: "hi", name="fake")
        assert isinstance(provider, Provider) and provider.name == "fake"
        assert not isinstance(provider, InputCounter)

    def test_a_counting_one_counts_with_its_function_and_a_count_is_not_a_call(self) -> None:
        def count(request: Request) -> int:
            return sum(len(b.text) for m in request.messages for b in m.content if isinstance(b, Text))

        provider = CountingFunctionProvider(lambda request, max_tokens: "hi", count)
        assert isinstance(provider, InputCounter)
        assert asyncio.run(provider.count_input_tokens(REQUEST, load=no_bytes)) == len("hello")
        assert provider.counted == [REQUEST] and provider.requests == []

    def test_an_async_count_is_awaited(self) -> None:
        async def count(request: Request) -> int:
            return 12

        provider = CountingFunctionProvider(lambda request, max_tokens: "hi", count)
        assert asyncio.run(provider.count_input_tokens(REQUEST, load=no_bytes)) == 12
