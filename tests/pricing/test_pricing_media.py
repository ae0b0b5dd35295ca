"""Media rules: the providers' documented tables reproduced exactly (their pages: ``docs/concepts.md``)."""

from __future__ import annotations

import pytest

from contextwindow.content import AttachmentRef, Audio, Document, Image
from contextwindow.errors import InvalidInput
from contextwindow.models import (
    AnthropicPatchRule,
    FlatImageRule,
    GeminiMediaResolutionRule,
    GeminiTileRule,
    OpenAIPatchRule,
    OpenAITileRule,
    get_profile,
)
from contextwindow.pricing import Estimator, anthropic_resized_size, image_tokens, image_upper_bound


def image_only(est: Estimator, img: Image) -> float:
    """The image's own price, without the rule's per-block framing (a zero stamp is framing only)."""
    zero = Image(
        ref=AttachmentRef(id="z", sha256="0", media_type="image/png", size_bytes=1, token_estimate=0)
    )
    return est.raw_block(img) - est.raw_block(zero)


STANDARD = AnthropicPatchRule(max_edge=1568, max_tokens=1568)
HIRES = AnthropicPatchRule(max_edge=2576, max_tokens=4784)


class TestAnthropicTable:
    @pytest.mark.parametrize(
        ("w", "h", "standard", "hires"),
        [
            pytest.param(200, 200, 64, 64, id="200x200"),
            pytest.param(1000, 1000, 1296, 1296, id="1000x1000"),
            pytest.param(1092, 1092, 1521, 1521, id="1092x1092"),
            pytest.param(1920, 1080, 1560, 2691, id="1920x1080"),
            pytest.param(2000, 1500, 1564, 3888, id="2000x1500"),
            pytest.param(3840, 2160, 1560, 4784, id="3840x2160"),
        ],
    )
    def test_documented_table(self, w: int, h: int, standard: int, hires: int) -> None:
        assert image_tokens(STANDARD, w, h) == standard
        assert image_tokens(HIRES, w, h) == hires

    @pytest.mark.parametrize(
        ("w", "h", "rule", "size"),
        [
            pytest.param(1920, 1080, STANDARD, (1456, 819), id="1920x1080-standard"),
            pytest.param(2000, 1500, STANDARD, (1270, 952), id="2000x1500-standard"),
            pytest.param(3840, 2160, HIRES, (2576, 1449), id="3840x2160-hires"),
            pytest.param(1075, 1520, STANDARD, (924, 1307), id="a4-page"),
        ],
    )
    def test_documented_resizes(
        self, w: int, h: int, rule: AnthropicPatchRule, size: tuple[int, int]
    ) -> None:
        assert anthropic_resized_size(w, h, rule) == size

    def test_portrait_is_the_transpose_of_landscape(self) -> None:
        assert image_tokens(STANDARD, 1080, 1920) == image_tokens(STANDARD, 1920, 1080)

    def test_profiles_pick_the_generation_rule(self) -> None:
        img = Image(
            ref=AttachmentRef(
                id="a", sha256="0", media_type="image/png", size_bytes=1, width=3840, height=2160
            )
        )
        assert image_only(Estimator("claude-sonnet-4-5"), img) == 1560
        assert image_only(Estimator("claude-opus-4-7"), img) == 4784


class TestOpenAITable:
    @pytest.mark.parametrize(
        ("rule", "w", "h", "detail", "tokens"),
        [
            pytest.param(OpenAITileRule(base=85, per_tile=170), 1024, 1024, "high", 765, id="4o-1024-high"),
            pytest.param(
                OpenAITileRule(base=85, per_tile=170), 2048, 4096, "high", 1105, id="4o-2048x4096-high"
            ),
            pytest.param(OpenAITileRule(base=85, per_tile=170), 4096, 4096, "low", 85, id="4o-low"),
            pytest.param(OpenAITileRule(base=70, per_tile=140), 1024, 1024, "auto", 630, id="gpt5-1024"),
            pytest.param(
                OpenAIPatchRule(multiplier=1.0, budgets=(("high", 2048, 1536),)),
                1800,
                2400,
                "high",
                1452,
                id="patch-1800x2400-1452",
            ),
            pytest.param(
                OpenAIPatchRule(multiplier=1.62, budgets=(("high", 2048, 1536),)),
                1800,
                2400,
                "high",
                2353,
                id="4.1-mini-1800x2400",
            ),
            pytest.param(
                get_profile("gpt-5.4").image_rule, 2048, 2048, "high", 3000, id="5.4-2048-high-3000"
            ),
        ],
    )
    def test_documented_examples(self, rule: object, w: int, h: int, detail: str, tokens: int) -> None:
        assert image_tokens(rule, w, h, detail) == tokens  # type: ignore[arg-type]

    def test_unknown_dimensions_price_at_eight_tiles(self) -> None:
        assert image_upper_bound(OpenAITileRule(base=85, per_tile=170)) == 1445


class TestGeminiAndFlat:
    def test_small_image_is_258(self) -> None:
        assert image_tokens(GeminiTileRule(), 384, 384) == 258

    def test_large_image_takes_the_larger_tiling(self) -> None:
        assert image_tokens(GeminiTileRule(), 1536, 768) == max(2 * 1, 3 * 2) * 258

    def test_media_resolution_table(self) -> None:
        assert image_tokens(GeminiMediaResolutionRule(), 10, 10) == 1120
        assert image_tokens(GeminiMediaResolutionRule(), 10, 10, "low") == 280
        assert image_upper_bound(GeminiMediaResolutionRule()) == 2240

    def test_flat(self) -> None:
        assert image_tokens(FlatImageRule(tokens=999), 5, 5) == 999


class TestBadDimensions:
    @pytest.mark.parametrize(
        ("w", "h", "field"),
        [
            pytest.param(-1, 10, "width", id="negative"),
            pytest.param(10, float("nan"), "height", id="nan"),
            pytest.param(10**9, 10, "width", id="absurd"),
            pytest.param("10", 10, "width", id="string"),
            pytest.param(0, 10, "width", id="zero"),
        ],
    )
    def test_image_tokens_refuses_with_the_field_named(self, w: object, h: object, field: str) -> None:
        with pytest.raises(InvalidInput) as err:
            image_tokens(STANDARD, w, h)  # type: ignore[arg-type]
        assert err.value.path == field

    def test_a_corrupt_ref_is_priced_at_the_ceiling_not_raised(self) -> None:
        ref = AttachmentRef(id="a", sha256="0", media_type="image/png", size_bytes=1, width=-5, height=10**9)
        assert image_only(Estimator("claude-opus-4-7"), Image(ref=ref)) == 4784

    def test_unknown_dimensions_err_high(self) -> None:
        img = Image(url="https://example.com/x.png")
        assert Estimator("claude-sonnet-4-5").block(img) >= 1568
        assert Estimator("gpt-4o").block(img) >= 1445


class TestDocumentsAndAudio:
    def ref(self, **kw: object) -> AttachmentRef:
        return AttachmentRef(id="a", sha256="0", media_type="application/pdf", size_bytes=1, **kw)  # type: ignore[arg-type]

    def test_gemini_audio_is_32_per_second(self) -> None:
        assert Estimator("gemini-2.5-pro").block(Audio(ref=self.ref(duration_seconds=60))) == 1920

    def test_nan_duration_is_flat_not_an_error(self) -> None:
        assert Estimator("gemini-2.5-pro").block(Audio(ref=self.ref(duration_seconds=float("nan")))) == 1000

    def test_gemini_pdf_pages(self) -> None:
        assert Estimator("gemini-2.5-pro").block(Document(ref=self.ref(pages=4))) == 4 * 258

    def test_document_without_a_page_count_is_flat_1000(self) -> None:
        assert Estimator("gpt-4o").block(Document(ref=self.ref())) == 1000

    def test_openai_pdf_pages_err_high_text_and_a_page_image_each(self) -> None:
        # OpenAI publishes no per-page rate: 3,000 text tokens (the top of Anthropic's published range)
        # plus gpt-4o's largest tile image (85 + 8 × 170) per page.
        assert Estimator("gpt-4o").block(Document(ref=self.ref(pages=4))) == 4 * (3000 + 1445)

    def test_anthropic_pdf_pages_err_high(self) -> None:
        assert Estimator("claude-sonnet-4-5").block(Document(ref=self.ref(pages=2))) >= 2 * 3000
