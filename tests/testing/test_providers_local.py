"""The local provider: its counts, window, usage settings, script, summaries and failures, in process."""

from __future__ import annotations

import asyncio
import io
import json
import math

import pytest
from PIL import Image as PILImage

from _shared import encoding
from contextwindow.attachments import make_ref
from contextwindow.content import Image, Message, Request, Text, Thinking, ToolResult, ToolSpec, ToolUse
from contextwindow.errors import ContextOverflow, InvalidInput, ProviderError, TransientProviderError
from contextwindow.formats import loader_from
from contextwindow.models import get_profile
from contextwindow.providers import Completion, complete
from contextwindow.testing import LocalModel, LocalProvider, LocalSettings, count_request
from contextwindow.testing.summary import summary_ask
from contextwindow.usage.tracker import Usage

MODEL = "claude-haiku-4-5"
LOAD = loader_from({})


def run(provider: LocalProvider, request: Request, max_tokens: int = 200) -> Completion:
    return asyncio.run(complete(provider, request, max_tokens=max_tokens, load=LOAD))


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), "white").save(out, format="PNG")
    return out.getvalue()


class TestCounting:
    def test_matches_an_independent_tiktoken_count_of_the_same_request(self) -> None:
        enc = encoding("o200k_base")
        data = png(1000, 1000)
        ref = make_ref(data, "image/png")
        schema = {"type": "object", "properties": {"path": {"type": "string"}}}
        request = Request(
            model=MODEL,
            system=(Text(text="You are a careful coding agent."),),
            tools=(ToolSpec(name="read", description="Read a file", input_schema=schema),),
            messages=(
                Message.user("Please read main.py and describe it. Ünïcödé and 中文 too."),
                Message.assistant("Reading it.", ToolUse(id="t1", name="read", input={"path": "main.py"})),
                Message.user(
                    ToolResult(tool_use_id="t1", content="def main():\n    return 42\n"), Image(ref=ref)
                ),
            ),
        )
        n = lambda s: len(enc.encode(s))  # noqa: E731
        expected = (
            3  # reply priming
            + 3 * 4  # per message: system + three messages
            + n("You are a careful coding agent.")
            + n("read")
            + n("Read a file")
            + n('{"type":"object","properties":{"path":{"type":"string"}}}')
            + n("Please read main.py and describe it. Ünïcödé and 中文 too.")
            + n("Reading it.")
            + n("t1")  # the tool use's id, sent and counted
            + n("read")
            + n('{"path":"main.py"}')
            + n("t1")  # the result's tool_use_id
            + n("def main():\n    return 42\n")
            + 1296  # Anthropic's table: 1000×1000 → 1296 on standard models (its vision page)
        )
        counted = count_request(request, get_profile(MODEL), loader_from({ref.id: data}))
        assert counted.input_tokens == expected
        assert counted.tokenizer == "tiktoken:o200k_base"
        assert sum(counted.parts.values()) == counted.input_tokens

    def test_a_count_scale_scales_each_string_and_leaves_framing_and_images_alone(self) -> None:
        enc = encoding("o200k_base")
        data = png(1000, 1000)
        ref = make_ref(data, "image/png")
        texts = ("Please read main.py and describe it.", "Reading it. " * 7)
        request = Request(
            model=MODEL, messages=(Message.user(texts[0], Image(ref=ref)), Message.assistant(texts[1]))
        )
        scaled = count_request(request, get_profile(MODEL), loader_from({ref.id: data}), scale=1.3)
        expected = 3 + 3 * 2 + sum(math.floor(1.3 * len(enc.encode(t)) + 0.5) for t in texts) + 1296
        assert scaled.input_tokens == expected
        assert scaled.tokenizer == "tiktoken:o200k_base×1.3"

    @pytest.mark.parametrize("scale", [0, -1.0, math.nan, math.inf, True], ids=str)
    def test_a_count_scale_that_is_not_a_finite_positive_number_is_refused(self, scale: float) -> None:
        with pytest.raises(InvalidInput):
            LocalSettings(count_scale=scale)


class TestThinking:
    """Thinking is counted as the Anthropic API counts it: what the signature carries, and only where
    the model keeps it."""

    SIGNATURE = "EqQBCkYIBRgCKkD" * 40  # 600 characters: 150 tokens at 4 characters a token

    def _request(self, model: str, *, new_turn: bool) -> Request:
        messages = [
            Message.user("Fix the bug."),
            Message.assistant(
                Thinking(thinking="Look at main.py first.", signature=self.SIGNATURE),
                ToolUse(id="t1", name="read", input={"path": "main.py"}),
            ),
            Message.user(ToolResult(tool_use_id="t1", content="def main(): pass")),
        ]
        if new_turn:
            messages += [Message.assistant("Fixed."), Message.user("Thanks. Now the tests.")]
        return Request(model=model, messages=tuple(messages))

    def test_a_signed_block_costs_what_its_signature_carries(self) -> None:
        counted = count_request(
            self._request("claude-sonnet-4-5", new_turn=False), get_profile("claude-sonnet-4-5")
        )
        assert counted.parts["thinking"] == 150

    def test_a_block_with_no_signature_costs_its_text(self) -> None:
        enc = encoding("o200k_base")
        request = Request(
            messages=(Message.user("hi"), Message.assistant(Thinking(thinking="Look at main.py.")))
        )
        counted = count_request(request, get_profile("claude-sonnet-4-5"))
        assert counted.parts["thinking"] == len(enc.encode("Look at main.py."))

    @pytest.mark.parametrize(
        ("model", "kept"),
        [
            ("claude-sonnet-4-5", False),
            ("claude-sonnet-4-20250514", False),
            ("claude-opus-4-1-20250805", False),
            ("claude-haiku-4-5-20251001", False),
            ("claude-opus-4-5", True),
            ("claude-opus-4-7", True),
            ("claude-sonnet-4-6", True),
        ],
    )
    def test_an_earlier_turns_thinking_counts_only_on_models_that_keep_it(
        self, model: str, kept: bool
    ) -> None:
        counted = count_request(self._request(model, new_turn=True), get_profile(model))
        assert counted.parts["thinking"] == (150 if kept else 0)

    @pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-opus-4-7"])
    def test_the_thinking_of_a_tool_use_turn_in_progress_counts_on_every_model(self, model: str) -> None:
        counted = count_request(self._request(model, new_turn=False), get_profile(model))
        assert counted.parts["thinking"] == 150

    def test_a_cl100k_model_is_counted_with_cl100k(self) -> None:
        encoding("o200k_base")
        counted = count_request(
            Request(model="gpt-4", messages=(Message.user("hello"),)), get_profile("gpt-4")
        )
        assert counted.tokenizer == "tiktoken:cl100k_base"

    def test_the_count_is_the_same_whichever_wire_format_carried_the_request(self) -> None:
        encoding("o200k_base")
        from contextwindow.formats import anthropic, openai

        request = Request(
            model=MODEL,
            system=(Text(text="sys"),),
            messages=(
                Message.user("a question"),
                Message.assistant(ToolUse(id="t1", name="ls", input={"dir": "."})),
                Message.user(ToolResult(tool_use_id="t1", content="a.py b.py")),
            ),
        )
        via_anthropic = anthropic.parse_request(anthropic.render_request(request, LOAD)).request
        via_openai = openai.parse_request(openai.render_request(request, LOAD)).request
        profile = get_profile(MODEL)
        assert (
            count_request(via_anthropic, profile).input_tokens
            == count_request(via_openai, profile).input_tokens
        )

    def test_counts_a_megabyte_of_text(self) -> None:
        enc = encoding("o200k_base")
        text = "word " * 200_000
        counted = count_request(Request(messages=(Message.user(text),)), get_profile(MODEL))
        assert counted.input_tokens == len(enc.encode(text)) + 3 + 3


class TestCountingWithAnotherTokenizer:
    def test_counts_every_request_with_the_family_it_is_given(self) -> None:
        text = "Հայերենը հնդեվրոպական լեզվաընտանիքի առանձին ճյուղ է։ " * 20
        request = Request(model=MODEL, messages=(Message.user(text),))
        own = LocalModel(LocalSettings(default_model=MODEL)).count(request)
        other = LocalModel(LocalSettings(default_model=MODEL, tokenizer="cl100k")).count(request)
        assert own.tokenizer.endswith("o200k_base") and other.tokenizer.endswith("cl100k_base")
        assert other.input_tokens - own.input_tokens == len(encoding("cl100k_base").encode(text)) - len(
            encoding("o200k_base").encode(text)
        )

    def test_an_unknown_family_is_invalid(self) -> None:
        with pytest.raises(InvalidInput) as err:
            LocalSettings(tokenizer="gpt2")  # type: ignore[arg-type]
        assert err.value.path == "tokenizer"


class TestWindow:
    def test_a_request_over_the_window_is_a_context_overflow_with_both_numbers(self) -> None:
        provider = LocalProvider(settings=LocalSettings(window=1000, default_model=MODEL))
        with pytest.raises(ContextOverflow) as caught:
            run(provider, Request(messages=(Message.user("hello " * 2000),)))
        assert caught.value.limit == 1000
        assert caught.value.requested is not None and caught.value.requested > 1000
        assert caught.value.status == 400
        assert "prompt is too long" in str(caught.value)

    def test_input_plus_max_tokens_over_the_window_reports_their_sum(self) -> None:
        provider = LocalProvider(settings=LocalSettings(window=1000, default_model=MODEL))
        request = Request(messages=(Message.user("hello " * 700),))
        n = provider.model.count(request).input_tokens
        with pytest.raises(ContextOverflow) as caught:
            run(provider, request, max_tokens=500)
        assert (caught.value.requested, caught.value.limit) == (n + 500, 1000)

    def test_the_openai_wire_rejects_with_openais_text(self) -> None:
        provider = LocalProvider(settings=LocalSettings(window=1000, default_model="gpt-4o"), wire="openai")
        with pytest.raises(ContextOverflow) as caught:
            run(provider, Request(messages=(Message.user("hello " * 2000),)), max_tokens=100)
        assert "maximum context length is 1000 tokens" in str(caught.value)
        assert caught.value.body["error"]["code"] == "context_length_exceeded"

    def test_an_effective_window_rejects_below_the_declared_one(self) -> None:
        settings = LocalSettings(window=10_000, effective_window=500, default_model=MODEL)
        provider = LocalProvider(settings=settings)
        with pytest.raises(ContextOverflow) as caught:
            run(provider, Request(messages=(Message.user("hello " * 600),)))
        assert caught.value.limit == 500

    def test_a_max_tokens_above_the_models_cap_is_not_an_overflow(self) -> None:
        provider = LocalProvider(settings=LocalSettings(default_model=MODEL))
        with pytest.raises(ProviderError) as caught:
            run(provider, Request(messages=(Message.user("hi"),)), max_tokens=100_000)
        assert not isinstance(caught.value, ContextOverflow)
        assert "maximum allowed number of output tokens" in str(caught.value)


class TestUsageSettings:
    def _loop(self, usage: str) -> list[Usage | None]:
        provider = LocalProvider(
            settings=LocalSettings(usage=usage, default_model=MODEL),  # type: ignore[arg-type]
            script=[
                Message.assistant(ToolUse(id="t1", name="ls", input={})),
                Message.assistant("done"),
                Message.assistant("next turn"),
            ],
        )
        first = Request(messages=(Message.user("list files"),))
        second = Request(
            messages=(
                *first.messages,
                Message.assistant(ToolUse(id="t1", name="ls", input={})),
                Message.user(ToolResult(tool_use_id="t1", content="a.py")),
            )
        )
        third = Request(messages=(*second.messages, Message.assistant("done"), Message.user("again")))
        return [run(provider, r).usage for r in (first, second, third)]

    def test_per_call_reports_each_calls_own_counts(self) -> None:
        a, b, c = self._loop("per-call")
        assert a is not None and b is not None and c is not None
        assert b.fresh_input > a.fresh_input  # the second call's prompt holds the first
        assert c.output > 0

    def test_cumulative_reports_the_running_total_of_the_tool_loop_and_resets_at_a_new_turn(self) -> None:
        per_call = self._loop("per-call")
        cumulative = self._loop("cumulative")
        a, b, c = per_call
        assert a is not None and b is not None and c is not None
        assert cumulative[0] == a
        assert cumulative[1] == a + b
        assert cumulative[2] == c  # a user message without tool results starts a new turn

    def test_cumulative_starts_a_new_total_when_a_request_does_not_continue_the_stream(self) -> None:
        provider = LocalProvider(
            settings=LocalSettings(usage="cumulative", default_model=MODEL),
            script=[Message.assistant(ToolUse(id="t1", name="ls", input={})), Message.assistant("done")],
        )
        first = Request(messages=(Message.user("list files"),))
        a = run(provider, first)
        # A recompiled request (the first message changed) is a new stream, though it answers the tool.
        rebuilt = Request(
            messages=(
                Message.user("[summary] list files"),
                a.message,
                Message.user(ToolResult(tool_use_id="t1", content="a.py")),
            )
        )
        b = run(provider, rebuilt)
        assert a.usage is not None and b.usage is not None
        assert b.usage.fresh_input == provider.model.count(rebuilt).input_tokens

    def test_cumulative_continues_past_a_round_with_a_mid_turn_message(self) -> None:
        provider = LocalProvider(
            settings=LocalSettings(usage="cumulative", default_model=MODEL),
            script=[Message.assistant(ToolUse(id="t1", name="ls", input={})), Message.assistant("done")],
        )
        first = Request(messages=(Message.user("list files"),))
        a = run(provider, first)
        second = Request(
            messages=(
                *first.messages,
                a.message,
                Message.user(ToolResult(tool_use_id="t1", content="a.py")),
                Message.user("also look at b.py"),
            )
        )
        b = run(provider, second)
        assert a.usage is not None and b.usage is not None
        assert b.usage.fresh_input == a.usage.fresh_input + provider.model.count(second).input_tokens

    def test_a_summary_request_is_its_own_stream_and_leaves_the_agents_alone(self) -> None:
        provider = LocalProvider(
            settings=LocalSettings(usage="cumulative", default_model=MODEL),
            script=[Message.assistant(ToolUse(id="t1", name="ls", input={})), Message.assistant("done")],
        )
        first = Request(messages=(Message.user("list files"),))
        a = run(provider, first)
        summary = run(provider, Request(messages=(Message.user("old chat\n\n[[contextwindow:summarize]]"),)))
        assert summary.usage is not None
        assert (
            summary.usage.fresh_input
            == provider.model.count(
                Request(messages=(Message.user("old chat\n\n[[contextwindow:summarize]]"),))
            ).input_tokens
        )
        second = Request(
            messages=(*first.messages, a.message, Message.user(ToolResult(tool_use_id="t1", content="a.py")))
        )
        b = run(provider, second)
        assert a.usage is not None and b.usage is not None
        assert b.usage.fresh_input == a.usage.fresh_input + provider.model.count(second).input_tokens

    def test_output_only_reports_no_input(self) -> None:
        for usage in self._loop("output-only"):
            assert usage is not None and usage.prompt == 0 and usage.output > 0

    def test_none_reports_nothing(self) -> None:
        assert self._loop("none") == [None, None, None]

    def test_an_unknown_setting_is_refused(self) -> None:
        with pytest.raises(InvalidInput):
            LocalSettings(usage="sometimes")  # type: ignore[arg-type]


class TestScriptAndReplies:
    def test_answers_with_the_scripted_messages_in_order_then_a_default(self) -> None:
        provider = LocalProvider(
            settings=LocalSettings(default_model=MODEL),
            script=[Message.assistant("one"), Message.assistant("two")],
        )
        request = Request(messages=(Message.user("hi"),))
        replies = [run(provider, request).message.content for _ in range(3)]
        assert replies[0] == (Text(text="one"),) and replies[1] == (Text(text="two"),)
        assert isinstance(replies[2][0], Text) and replies[2][0].text.startswith("Local reply 3:")

    def test_a_scripted_tool_use_stops_with_tool_use(self) -> None:
        provider = LocalProvider(script=[Message.assistant(ToolUse(id="t", name="ls", input={"a": 1}))])
        done = run(provider, Request(model=MODEL, messages=(Message.user("hi"),)))
        assert done.stop_reason == "tool_use"
        assert done.message.content == (ToolUse(id="t", name="ls", input={"a": 1}),)

    def test_a_reply_longer_than_max_tokens_is_cut_there(self) -> None:
        provider = LocalProvider(script=[Message.assistant("many words " * 500)])
        done = run(provider, Request(model=MODEL, messages=(Message.user("hi"),)), max_tokens=50)
        assert done.stop_reason == "max_tokens"
        assert done.usage is not None and done.usage.output <= 50

    def test_a_scripted_user_message_is_refused(self) -> None:
        with pytest.raises(InvalidInput):
            LocalModel(script=[Message.user("no")])


class TestSummaries:
    def _ask(self, marker: str, instructions: str) -> Request:
        return Request(
            model=MODEL,
            system=(Text(text=f"You summarise conversations. {marker}"),),
            messages=(
                Message.user("We are porting the parser to Rust and fixing the flaky test."),
                Message.assistant("I ported lexer.rs; the flaky test is in test_io."),
                Message.user(instructions),
            ),
        )

    def test_writes_the_requested_sections_in_order(self) -> None:
        request = self._ask(
            "[[contextwindow:summarize target_tokens=120]]",
            "Summarise with these sections:\n## Goal\n## Progress\n## Critical Context\n## Next Steps",
        )
        done = run(LocalProvider(), request, max_tokens=500)
        text = done.message.content[0].text  # type: ignore[union-attr]
        headings = [line for line in text.splitlines() if line.startswith("## ")]
        assert headings == ["## Goal", "## Progress", "## Critical Context", "## Next Steps"]
        assert done.stop_reason == "end_turn"
        assert done.usage is not None and 0 < done.usage.output <= 120
        assert not text.rstrip().endswith(":")

    def test_is_deterministic(self) -> None:
        request = self._ask("[[contextwindow:summarize]]", "Summarise.")
        assert run(LocalProvider(), request).message == run(LocalProvider(), request).message

    def test_a_target_above_max_tokens_is_cut_at_max_tokens(self) -> None:
        request = self._ask("[[contextwindow:summarize target_tokens=2000]]", "Summarise.")
        said = [
            Message.assistant(f"Step {i}: I ported module number {i} of the parser to Rust.")
            for i in range(40)
        ]
        request = Request(
            model=MODEL, system=request.system, messages=(*request.messages[:-1], *said, request.messages[-1])
        )
        done = run(LocalProvider(), request, max_tokens=100)
        assert done.stop_reason == "max_tokens"

    def test_without_the_marker_there_is_no_summary(self) -> None:
        assert summary_ask(Request(messages=(Message.user("## Goal please summarise"),))) is None


class TestFailures:
    def test_fails_transiently_the_number_of_times_it_is_told_then_answers(self) -> None:
        provider = LocalProvider(settings=LocalSettings(default_model=MODEL))
        provider.model.fail_next(2)
        request = Request(messages=(Message.user("hi"),))
        for _ in range(2):
            with pytest.raises(TransientProviderError) as caught:
                run(provider, request)
            assert caught.value.status == 529
        assert run(provider, request).stop_reason == "end_turn"

    def test_delays_each_answer(self) -> None:
        import time

        provider = LocalProvider(settings=LocalSettings(default_model=MODEL, delay_seconds=0.05))
        start = time.perf_counter()
        run(provider, Request(messages=(Message.user("hi"),)))
        assert time.perf_counter() - start >= 0.05

    def test_an_unknown_model_is_a_clear_error(self) -> None:
        from contextwindow.errors import UnknownModel

        with pytest.raises(UnknownModel):
            run(LocalProvider(), Request(model="no-such-model-x", messages=(Message.user("hi"),)))


def test_reply_json_shapes_round_trip() -> None:
    # The wire module's JSON must be plain JSON (no dataclasses leak).
    from contextwindow.testing.wire import anthropic_message, openai_completion

    reply = LocalModel(LocalSettings(default_model=MODEL)).handle(
        Request(messages=(Message.user("hi"),)), wire="anthropic", max_tokens=50
    )
    assert not isinstance(reply, type(None))
    json.dumps(anthropic_message(reply))  # type: ignore[arg-type]
    json.dumps(openai_completion(reply))  # type: ignore[arg-type]


class TestTheCurrentTurn:
    """The current turn starts at the last user turn that answers no tool call; the API merges
    consecutive user messages into one turn."""

    @pytest.mark.parametrize(
        ("roles", "start"),
        [
            pytest.param(["u", "a", "r"], 0, id="a-tool-loop-in-progress"),
            pytest.param(["u", "a", "r", "a", "u"], 4, id="a-new-prompt"),
            pytest.param(["u", "a", "r", "u"], 0, id="text-beside-the-results-continues-the-loop"),
            pytest.param(["u", "a", "u", "u"], 2, id="two-prompts-in-a-row-are-one-turn"),
            pytest.param(["a", "r"], 0, id="no-prompt-at-all"),
        ],
    )
    def test_starts_at_the_last_user_turn_that_answers_no_tool_call(
        self, roles: list[str], start: int
    ) -> None:
        from benchmarks._recount import _turn_start

        from contextwindow.formats import anthropic
        from contextwindow.pricing import current_turn_start

        messages = []
        for role in roles:
            if role == "u":
                messages.append(Message.user("go on"))
            elif role == "a":
                messages.append(Message.assistant(ToolUse(id="t1", name="ls", input={})))
            else:
                messages.append(Message.user(ToolResult(tool_use_id="t1", content="a.py")))
        assert current_turn_start(messages) == start
        body = anthropic.render_request(Request(messages=tuple(messages)), LOAD)
        assert _turn_start(body["messages"]) == start
