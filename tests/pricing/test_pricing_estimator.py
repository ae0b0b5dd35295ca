"""The default rule: content-aware text, framing, exact mode, bad input, count_tokens."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwindow.content import Message, Request, Text, Thinking, ToolResult, ToolSpec, ToolUse
from contextwindow.errors import InvalidInput, UsageError
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator, count_tokens


def tiktoken_or_skip() -> object:
    try:
        import tiktoken

        return tiktoken.get_encoding("o200k_base")
    except Exception:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("tiktoken o200k_base not available offline")


CODE = Path(__file__).read_text(encoding="utf-8")
CHINESE = "上下文窗口让智能体在模型的上下文限制内运行，同时尽可能保留对话内容。" * 20


class TestFittedTextRule:
    """The rule (``exact=False``): what Claude and Gemini are priced with, checked on OpenAI families
    where the real count is known."""

    @pytest.mark.parametrize(
        ("text", "tolerance"),
        [
            pytest.param(CODE, 0.15, id="code"),
            pytest.param("Plain English prose about agents and windows. " * 50, 0.15, id="prose"),
            # Counts cannot tell common from rare ideographs; see the accuracy benchmark.
            pytest.param(CHINESE, 0.35, id="chinese"),
        ],
    )
    def test_is_near_o200k_on_real_text(self, text: str, tolerance: float) -> None:
        enc = tiktoken_or_skip()
        exact = len(enc.encode(text, disallowed_special=()))  # type: ignore[attr-defined]
        assert abs(Estimator("gpt-4o", exact=False).text(text) - exact) / exact < tolerance

    def test_chinese_costs_far_more_per_character_than_chars_over_4(self) -> None:
        assert Estimator("gpt-4o", exact=False).text(CHINESE) > 2 * len(CHINESE) / 4

    def test_claude_2026_prices_more_than_claude(self) -> None:
        assert Estimator("claude-opus-4-7").text(CODE) > 1.3 * Estimator("claude-sonnet-4-5").text(CODE)

    def test_claude_2026_prices_cjk_as_the_older_claude(self) -> None:
        # the newer tokenizer's ~30% more tokens is on English and code, not on CJK text
        assert Estimator("claude-opus-4-7").text(CHINESE) == Estimator("claude-sonnet-4-5").text(CHINESE)

    @given(st.text(max_size=300))
    @settings(max_examples=200)
    def test_never_negative_never_nan_and_non_empty_costs_at_least_one(self, text: str) -> None:
        for model in ("gpt-4o", "gpt-4", "claude-sonnet-4-5", "claude-opus-4-7", "gemini-2.5-pro"):
            raw = Estimator(model, exact=False).raw_text(text)
            assert math.isfinite(raw) and raw >= 0
            assert (raw >= 1) == bool(text)

    @given(st.text(max_size=200), st.text(max_size=200))
    def test_concatenation_costs_about_the_sum(self, a: str, b: str) -> None:
        est = Estimator("gpt-4o", exact=False)
        assert est.raw_text(a + b) <= est.raw_text(a) + est.raw_text(b) + 3

    def test_a_megabyte_of_one_character(self) -> None:
        assert 0 < Estimator("gpt-4o", exact=False).text("x" * 1_000_000) < 1_000_000

    def test_lone_surrogates_are_priced_not_raised(self) -> None:
        assert Estimator("gpt-4o", exact=False).text("\ud800abc") >= 1

    def test_non_string_text_names_the_field(self) -> None:
        with pytest.raises(InvalidInput) as err:
            Estimator("gpt-4o", exact=False).block(Text(text=123))  # type: ignore[arg-type]
        assert err.value.path == "text"


class TestExactMode:
    def test_counts_exactly_and_treats_special_tokens_as_text(self) -> None:
        enc = tiktoken_or_skip()
        text = "hello <|endoftext|> world"
        assert Estimator("gpt-4o", exact=True).text(text) == len(enc.encode(text, disallowed_special=()))  # type: ignore[attr-defined]

    @pytest.mark.parametrize("model", ["gpt-4o", "gpt-4"])
    def test_is_the_default_for_openai_models_where_tiktoken_is_cached(self, model: str) -> None:
        tiktoken_or_skip()
        text = "Le modèle compte les jetons exactement: «très bien». Привет, 世界! " * 5
        est = Estimator(model)
        assert est.exact
        name = "o200k_base" if model == "gpt-4o" else "cl100k_base"
        import tiktoken

        truth = len(tiktoken.get_encoding(name).encode(text, disallowed_special=()))
        assert est.text(text) == truth
        assert count_tokens(text, model=model) == truth
        assert count_tokens(text, model=model, exact=False) == Estimator(model, exact=False).text(text)

    def test_false_always_prices_with_the_rule(self) -> None:
        tiktoken_or_skip()
        est = Estimator("gpt-4o", exact=False)
        assert not est.exact
        text = "a rule, not the tokenizer " * 40
        assert est.raw_text(text) != Estimator("gpt-4o").raw_text(text)

    def test_none_falls_back_to_the_rule_without_a_tokenizer(self) -> None:
        est = Estimator("claude-sonnet-4-5")
        assert not est.exact
        assert est.text("hello world") == Estimator("claude-sonnet-4-5", exact=False).text("hello world")

    def test_claude_has_no_exact_mode_and_the_error_says_what_to_do(self) -> None:
        with pytest.raises(UsageError, match="not public") as err:
            Estimator("claude-sonnet-4-5", exact=True)
        assert "tokenizer_file" in str(err.value)
        with pytest.raises(UsageError):
            count_tokens("hi", model="claude-sonnet-4-5", exact=True)

    def test_true_without_the_cached_file_says_how_to_get_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from contextwindow.pricing.tokenizers import load_encoding

        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
        load_encoding.cache_clear()
        try:
            with pytest.raises(UsageError, match="TIKTOKEN_CACHE_DIR"):
                Estimator("gpt-4o", exact=True)
            assert not Estimator("gpt-4o").exact  # None: the rule, silently
        finally:
            monkeypatch.undo()
            load_encoding.cache_clear()

    def test_the_seed_store_preset_refuses_exact(self) -> None:
        with pytest.raises(UsageError):
            Estimator("gpt-4o", preset="seed-store", exact=True)
        assert not Estimator("gpt-4o", preset="seed-store").exact

    def test_a_bad_setting_is_refused(self) -> None:
        with pytest.raises(InvalidInput):
            Estimator("gpt-4o", exact="yes")  # type: ignore[arg-type]


class TestRoundingAndFraming:
    def test_openai_message_framing_is_three(self) -> None:
        est = Estimator("gpt-4o")
        msg = Message.user("hi", "there")
        assert est.message(msg) == est.blocks(msg.content) + 3

    def test_request_is_system_tools_messages_and_framing(self) -> None:
        est = Estimator("gpt-4o", 1.3)
        req = Request(
            system=(Text(text="You are terse."),),
            tools=(ToolSpec(name="read", description="Read a file"),),
            messages=(Message.user("hi"), Message.assistant(ToolUse(id="t", name="read", input={"p": 1}))),
        )
        expected = est.block(req.system[0]) + est.tool_spec(req.tools[0]) + est.messages(req.messages) + 4
        assert est.request(req) == expected == est.breakdown(req).total

    def test_nested_tool_result_blocks_round_once(self) -> None:
        est = Estimator("gpt-4o", 1.5)
        nested = ToolResult(tool_use_id="t", content=tuple(Text(text="a") for _ in range(7)))
        assert est.block(nested) == math.floor(est.raw_block(nested) * 1.5 + 0.5)

    @pytest.mark.parametrize("bad", [float("nan"), -1.0, 0.0, 5.0, "1"], ids=str)
    def test_constructor_refuses_a_bad_multiplier(self, bad: object) -> None:
        with pytest.raises(InvalidInput) as err:
            Estimator("gpt-4o", bad)  # type: ignore[arg-type]
        assert err.value.path == "multiplier"

    def test_ten_thousand_one_character_blocks(self) -> None:
        msg = Message(role="user", content=tuple(Text(text="a") for _ in range(10_000)))
        assert Estimator("gpt-4o").message(msg) == 10_003


class TestCountTokens:
    def test_string_block_message_and_list(self) -> None:
        est = Estimator("gpt-4o")
        msg = Message.user("hello world")
        assert count_tokens("hello world", model="gpt-4o") == est.text("hello world")
        assert count_tokens(Text(text="hi"), model="gpt-4o") == est.block(Text(text="hi"))
        assert count_tokens(msg, model="gpt-4o") == est.message(msg)
        assert count_tokens([msg, msg], model="gpt-4o") == 2 * est.message(msg)

    def test_request_uses_its_own_model(self) -> None:
        req = Request(model="claude-sonnet-4-5", messages=(Message.user("hi"),))
        assert count_tokens(req) == Estimator("claude-sonnet-4-5").request(req)

    def test_needs_a_model(self) -> None:
        with pytest.raises(UsageError):
            count_tokens("hello")

    def test_wire_format_requests(self) -> None:
        pytest.importorskip("contextwindow.formats")
        anthropic = {
            "model": "claude-sonnet-4-5",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
        }
        openai = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
        assert count_tokens(anthropic) > 0
        assert count_tokens(openai) > 0


class TestEarlierTurnsThinking:
    """The API strips earlier turns' thinking on some models; the estimate does not charge it there."""

    SIGNATURE = "EqQBCkYIBRgCKkD" * 40

    def _messages(self) -> tuple[Message, ...]:
        return (
            Message.user("Fix the bug."),
            Message.assistant(
                Thinking(thinking="Look at main.py first.", signature=self.SIGNATURE), Text(text="Done.")
            ),
            Message.user("Thanks. Now the tests."),
        )

    @pytest.mark.parametrize(
        ("model", "kept"),
        [("claude-sonnet-4-5", False), ("claude-opus-4-1", False), ("claude-opus-4-5", True)],
    )
    def test_a_request_charges_an_earlier_turns_thinking_only_where_the_model_keeps_it(
        self, model: str, kept: bool
    ) -> None:
        est = Estimator(get_profile(model))
        thinking = est.block(self._messages()[1].content[0])
        whole = est.messages(self._messages()) + est.request(Request())
        assert est.request(Request(messages=self._messages())) == (whole if kept else whole - thinking)
        assert est.uncharged(self._messages()) == (0 if kept else thinking)

    def test_the_thinking_of_a_tool_use_turn_in_progress_is_charged(self) -> None:
        est = Estimator(get_profile("claude-sonnet-4-5"))
        messages = (
            *self._messages()[:1],
            Message.assistant(
                Thinking(thinking="Read it.", signature=self.SIGNATURE), ToolUse(id="t1", name="ls", input={})
            ),
            Message.user(ToolResult(tool_use_id="t1", content="a.py")),
        )
        assert est.uncharged(messages) == 0

    def test_compile_does_not_count_what_the_api_strips(self) -> None:
        from contextwindow.compile import CompileState, Policy, PricedMessage, compile

        messages = self._messages()
        for model, kept in (("claude-sonnet-4-5", False), ("claude-opus-4-5", True)):
            profile = get_profile(model)
            est = Estimator(profile)
            state = CompileState(messages=tuple(PricedMessage(message=m) for m in messages))
            compiled = compile(state, profile, Policy(), estimator=est)
            thinking = est.block(messages[1].content[0])
            sent = est.request(Request(messages=compiled.messages))
            assert compiled.local_estimate == sent
            assert compiled.makeup["text"] < est.messages(messages) or kept
            assert (est.uncharged(compiled.messages) == thinking) is not kept
