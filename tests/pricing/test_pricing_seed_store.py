"""The seed-store preset reproduces context-manager's message store
(https://github.com/anima-research/context-manager), and the other projects' image prices
(https://github.com/apache/maka/pull/4486, https://github.com/withastro/flue/issues/531)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.content import (
    AttachmentRef,
    Audio,
    Document,
    GeneratedImage,
    Image,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    Video,
    utf16_len,
)
from contextwindow.pricing import Estimator, seed_estimate_text, seed_json_tokens

PROSE = ("The quick brown fox jumps over the lazy dog while the agent keeps reading files. " * 600)[:40_041]
DENSE = ('{"key": "value", "path": "/usr/lib/x_y=z"} ' * 1000)[:40_041]


def store(m: float = 1.0) -> Estimator:
    return Estimator("claude-sonnet-4-5", m, preset="seed-store")


def ref(**kw: object) -> AttachmentRef:
    return AttachmentRef(id="att_x", sha256="0" * 64, media_type="image/png", size_bytes=10, **kw)  # type: ignore[arg-type]


class TestSeedTextEstimator:
    def test_empty_string_is_zero(self) -> None:
        assert seed_estimate_text("") == 0

    def test_40041_prose_characters_give_13808(self) -> None:
        assert seed_estimate_text(PROSE) == 13_808

    def test_40041_dense_json_characters_give_17410(self) -> None:
        assert seed_json_tokens(PROSE) == 17_410
        assert seed_estimate_text(DENSE) == 17_410

    def test_density_threshold_is_twelve_percent_of_the_probe(self) -> None:
        just_over = "{" * 13 + "a" * 87  # 13% dense
        just_under = "{" * 12 + "a" * 88  # 12% is not over
        assert seed_estimate_text(just_over) == math.ceil(100 / 2.3)
        assert seed_estimate_text(just_under) == math.ceil(100 / 2.9)

    def test_probe_reads_only_the_first_2000_units(self) -> None:
        text = "a" * 2000 + "{" * 2000
        assert seed_estimate_text(text) == math.ceil(4000 / 2.9)

    def test_length_is_utf16_code_units(self) -> None:
        assert seed_estimate_text("😀" * 10) == math.ceil(20 / 2.3)

    @given(st.text())
    def test_matches_the_reference_definition(self, text: str) -> None:
        units = text.encode("utf-16-le", "surrogatepass")
        codes = [units[i] | units[i + 1] << 8 for i in range(0, len(units), 2)]
        if not codes:
            assert seed_estimate_text(text) == 0
            return
        probe = codes[:2000]
        dense = sum(1 for c in probe if c > 126 or chr(c) in '{}[]":_/=`')
        rate = 2.3 if dense / len(probe) > 0.12 else 2.9
        assert seed_estimate_text(text) == math.ceil(len(codes) / rate)


class TestSeedBlockPrices:
    def test_tool_use_is_compact_json_plus_20(self) -> None:
        block = ToolUse(id="t", name="read", input={"path": "/a b", "n": [1, 2], "ü": "é"})
        assert store().block(block) == math.ceil(len('{"path":"/a b","n":[1,2],"ü":"é"}') / 2.3) + 20

    def test_string_tool_result_is_priced_at_the_dense_rate(self) -> None:
        assert store().block(ToolResult(tool_use_id="t", content="x" * 23)) == 10

    def test_list_tool_result_sums_raw_nested_prices_and_rounds_once(self) -> None:
        nested = tuple(Text(text="x") for _ in range(10))  # each raw 1; at 1.75 → 17.5 → 18
        assert store(1.75).block(ToolResult(tool_use_id="t", content=nested)) == 18
        assert store(1.75).blocks([Text(text="x")] * 10) == 20

    @pytest.mark.parametrize(
        ("block", "price"),
        [
            pytest.param(Image(ref=ref()), 1600, id="image-unstamped"),
            pytest.param(Image(ref=ref(token_estimate=250)), 250, id="image-stamped"),
            pytest.param(Image(ref=ref(token_estimate=0)), 0, id="image-stamped-zero"),
            pytest.param(Image(ref=ref(token_estimate=float("nan"))), 1600, id="image-nan-stamp-ignored"),
            pytest.param(Image(ref=ref(token_estimate=-5)), 1600, id="image-negative-stamp-ignored"),
            pytest.param(GeneratedImage(ref=ref()), 1600, id="generated-image-as-image"),
            pytest.param(GeneratedImage(ref=ref(token_estimate=77)), 77, id="generated-image-stamped"),
            pytest.param(Document(ref=ref(pages=3)), 1000, id="document"),
            pytest.param(Audio(ref=ref(duration_seconds=60)), 1000, id="audio"),
            pytest.param(Video(ref=ref()), 1000, id="video"),
        ],
    )
    def test_media(self, block: object, price: int) -> None:
        assert store().block(block) == price  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("block", "price"),
        [
            pytest.param(Thinking(thinking="abc", token_estimate=42), 42, id="stamp-wins"),
            pytest.param(Thinking(thinking="", signature="s" * 330), 100, id="signed-empty"),
            pytest.param(Thinking(thinking="x" * 2900, signature="s" * 33), 1000, id="signed-text-wins"),
            pytest.param(Thinking(thinking="x" * 29), 10, id="unsigned"),
            pytest.param(RedactedThinking(data="d" * 600), 100, id="redacted-by-carrier"),
            pytest.param(RedactedThinking(data=""), 600, id="redacted-empty"),
            pytest.param(RedactedThinking(data="d", token_estimate=9), 9, id="redacted-stamp"),
        ],
    )
    def test_thinking(self, block: object, price: int) -> None:
        assert store().block(block) == price  # type: ignore[arg-type]

    def test_unknown_block_costs_zero_in_the_store(self) -> None:
        class Strange:
            type = "strange"

        assert store().raw_block(Strange()) == 0  # type: ignore[arg-type]


class TestPerBlockRounding:
    @pytest.mark.parametrize(
        ("chars", "count", "m", "total"),
        [
            pytest.param(1, 83, 1.0, 83, id="83x1@1"),
            pytest.param(1, 83, 1.75, 166, id="83x1@1.75"),
            pytest.param(1, 83, 1.8, 166, id="83x1@1.8"),
            pytest.param(3, 26, 0.6, 26, id="26x3@0.6"),
            pytest.param(3, 26, 1.8, 104, id="26x3@1.8"),
            pytest.param(4, 39, 1.0, 78, id="39x4@1"),
            pytest.param(4, 39, 1.2, 78, id="39x4@1.2"),
            pytest.param(4, 39, 1.8, 156, id="39x4@1.8"),
        ],
    )
    def test_vectors(self, chars: int, count: int, m: float, total: int) -> None:
        message = Message(role="user", content=tuple(Text(text="a" * chars) for _ in range(count)))
        assert store(m).message(message) == total

    @pytest.mark.parametrize(
        ("text", "m", "total"),
        [
            pytest.param(PROSE, 1.0, 13_808, id="prose@1"),
            pytest.param(PROSE, 0.73, 10_080, id="prose@0.73"),
            pytest.param(PROSE, 0.72, 9_942, id="prose@0.72"),
            pytest.param(DENSE, 0.6, 10_446, id="dense@0.6"),
        ],
    )
    def test_long_text_vectors(self, text: str, m: float, total: int) -> None:
        assert store(m).block(Text(text=text)) == total

    def test_half_rounds_up_not_to_even(self) -> None:
        assert store(0.5).block(Text(text="a" * 5)) == 1  # raw 2 → 1.0; raw 5 at 0.5 below
        assert store(0.5).block(ToolResult(tool_use_id="t", content="x" * 7)) == 2  # raw 4 → 2
        assert store(1.5).block(Text(text="x")) == 2  # 1.5 → 2 (banker's would also give 2)
        assert store(2.5 / 1).block(Text(text="x")) == 3  # 2.5 → 3, banker's gives 2


class TestMediaRulers:
    def test_maka_prices_every_materialized_image_at_2000_never_by_characters(self) -> None:
        est = Estimator("claude-sonnet-4-5", image_flat=2000)
        screenshot = Image(ref=ref(width=1920, height=1080))
        result = ToolResult(tool_use_id="t", content=(Text(text="ok"), screenshot))
        assert est.block(screenshot) == 2000
        text_only = ToolResult(tool_use_id="t", content=(Text(text="ok"),))
        assert est.raw_block(result) == pytest.approx(2000 + est.raw_block(text_only))

    @pytest.mark.parametrize("preset", ["default", "seed-store"])
    def test_flue_user_message_images_are_never_free(self, preset: str) -> None:
        est = Estimator("claude-sonnet-4-5", preset=preset)  # type: ignore[arg-type]
        with_image = Message.user("look", Image(ref=ref()))
        assert est.message(with_image) - est.message(Message.user("look")) >= 1568


class TestUtf16Length:
    @pytest.mark.parametrize(
        ("text", "units"),
        [("abc", 3), ("é", 1), ("😀", 2), ("a\udcff", 2), ("\ud83d\ude00", 2)],
        ids=["ascii", "bmp", "astral", "lone-surrogate", "pair-as-two-code-points"],
    )
    def test_counts_javascript_length_and_never_raises(self, text: str, units: int) -> None:
        assert utf16_len(text) == units
