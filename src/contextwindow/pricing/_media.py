"""Media rules: what an image, document, audio or video costs, by the provider's published rule.

Each rule reproduces the vendor's documentation (the pages are listed in ``docs/concepts.md``); the
test suite reproduces the documented tables exactly. Media are never priced from their bytes: the
rules read only an :class:`~contextwindow.content.AttachmentRef`'s metadata, and when the figures a
rule needs are unknown the price is the rule's upper bound, so an estimate errs high.
"""

from __future__ import annotations

import math
from typing import assert_never

from ..content import MAX_DIMENSION_PX, MAX_DURATION_SECONDS, MAX_PAGES, AttachmentRef, valid_stamp
from ..errors import InvalidInput
from ..models import (
    AnthropicPatchRule,
    FlatImageRule,
    GeminiMediaResolutionRule,
    GeminiTileRule,
    ImageRule,
    ModelProfile,
    OpenAIPatchRule,
    OpenAITileRule,
)

__all__ = [
    "MEDIA_FLAT_TOKENS",
    "anthropic_resized_size",
    "audio_tokens",
    "document_tokens",
    "image_tokens",
    "image_upper_bound",
    "ref_image_tokens",
    "video_tokens",
]

MEDIA_FLAT_TOKENS = 1000
"""Document, audio or video with no published rate: context-manager's store price."""

# Anthropic PDF pages: "1,500 to 3,000 tokens per page depending on content density", and the page
# image is priced by the image rule on top (https://docs.claude.com/en/docs/build-with-claude/pdf-support).
# The upper end, so it errs high.
ANTHROPIC_PDF_TEXT_PER_PAGE = 3000
# Gemini 2.x: "Each document page is equivalent to 258 tokens" (Gemini's document-processing page,
# https://ai.google.dev/gemini-api/docs/document-processing).
GEMINI_PDF_PAGE = 258
# Gemini audio: "each second of audio as 32 tokens" (https://ai.google.dev/gemini-api/docs/audio).
GEMINI_AUDIO_PER_SECOND = 32
# Gemini 2.x video: ~300 tokens per second at default media resolution (258/frame at 1 FPS + audio).
GEMINI_VIDEO_PER_SECOND = 300
# OpenAI: "1 token per 100 ms of audio" in user messages
# (https://developers.openai.com/api/docs/guides/realtime-costs).
OPENAI_AUDIO_PER_SECOND = 10
# Gemini 2.x tiles have no published ceiling; a 4K frame (3840×2160) is 15–16 tiles.
_GEMINI_TILE_UPPER = 16
# OpenAI tile models: the largest image after the 2048 fit and 768 short side is 768×2048 = 8 tiles.
_OPENAI_MAX_TILES = 8


def _dimension(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput("must be a number of pixels", path=name)
    if not math.isfinite(value) or value <= 0 or value > MAX_DIMENSION_PX:
        raise InvalidInput(f"must be between 1 and {MAX_DIMENSION_PX} pixels", path=name)
    return max(1, int(value))


def anthropic_resized_size(width: int, height: int, rule: AnthropicPatchRule) -> tuple[int, int]:
    """Anthropic's ``resized_size``: the largest aspect-preserving size within both limits.

    A transcription of the reference implementation on the current vision page: bisect on the
    long edge with ``fits(w, h) = ceil(w/28)*28 <= max_edge and ceil(h/28)*28 <= max_edge and
    ceil(w/28)*ceil(h/28) <= max_tokens`` and ``short = max(round(long / aspect), 1)``. Python's
    ``round`` is part of the rule (2000×1500 → 1270×952 depends on it).
    """
    p = rule.patch

    def fits(w: int, h: int) -> bool:
        pw, ph = -(-w // p), -(-h // p)
        return pw * p <= rule.max_edge and ph * p <= rule.max_edge and pw * ph <= rule.max_tokens

    if fits(width, height):
        return width, height
    landscape = width >= height
    long_edge, short_edge = (width, height) if landscape else (height, width)

    def size(edge: int) -> tuple[int, int]:
        other = max(round(edge * short_edge / long_edge), 1)
        return (edge, other) if landscape else (other, edge)

    lo, hi = 1, long_edge
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(*size(mid)):
            lo = mid
        else:
            hi = mid - 1
    return size(lo)


def _anthropic(rule: AnthropicPatchRule, width: int, height: int) -> int:
    w, h = anthropic_resized_size(width, height, rule)
    return -(-w // rule.patch) * -(-h // rule.patch)


def _openai_tile(rule: OpenAITileRule, width: int, height: int, detail: str | None) -> int:
    if detail == "low":
        return rule.base
    w, h = float(width), float(height)
    if max(w, h) > rule.fit:  # scale to fit inside fit×fit; smaller images are not enlarged
        scale = rule.fit / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > rule.short_side:  # shortest side to 768, "round down the other dimension"
        scale = rule.short_side / min(w, h)
        w, h = w * scale, h * scale
    tw, th = math.floor(w + 1e-9), math.floor(h + 1e-9)
    tiles = -(-max(tw, 1) // rule.tile) * -(-max(th, 1) // rule.tile)
    return rule.base + tiles * rule.per_tile


def _openai_patch(rule: OpenAIPatchRule, width: int, height: int, detail: str | None) -> int:
    max_px, budget = rule.budget(detail)
    p = rule.patch
    w, h = float(width), float(height)
    if max(w, h) > max_px:
        scale = max_px / max(w, h)
        w, h = math.floor(w * scale + 1e-9), math.floor(h * scale + 1e-9)
    patches = math.ceil(w / p - 1e-9) * math.ceil(h / p - 1e-9)
    if budget > 0 and patches > budget:
        shrink = math.sqrt(p * p * budget / (w * h))
        fw, fh = w * shrink / p, h * shrink / p
        adjusted = shrink * min(math.floor(fw + 1e-9) / fw, math.floor(fh + 1e-9) / fh)
        w, h = math.floor(w * adjusted + 1e-9), math.floor(h * adjusted + 1e-9)
        patches = -(-max(int(w), 1) // p) * -(-max(int(h), 1) // p)
    return math.ceil(patches * rule.multiplier - 1e-9)


def _gemini_tile(rule: GeminiTileRule, width: int, height: int) -> int:
    if width <= rule.small_edge and height <= rule.small_edge:
        return rule.per_tile
    # The 2.x tiling is unpublished: both documented variants, the larger (an estimate errs high).
    fixed = -(-width // rule.tile) * -(-height // rule.tile)
    unit = min(max(min(width, height) / 1.5, 256.0), float(rule.tile))
    cropped = math.ceil(width / unit) * math.ceil(height / unit)
    return max(fixed, cropped) * rule.per_tile


def _resolution(rule: GeminiMediaResolutionRule, detail: str | None) -> str:
    names = {name for name, _ in rule.image_tokens}
    return detail if detail in names else rule.resolution


def image_tokens(rule: ImageRule, width: int, height: int, detail: str | None = None) -> int:
    """Tokens one image of ``width``×``height`` pixels costs under ``rule``.

    ``detail`` is OpenAI's ``detail`` (``low``/``high``/``auto``/``original``) or, for Gemini 3, a
    ``media_resolution`` name. Non-numeric, non-finite, non-positive or absurd (> 10⁶ px)
    dimensions are an ``InvalidInput`` naming ``width`` or ``height``.
    """
    w, h = _dimension(width, "width"), _dimension(height, "height")
    if isinstance(rule, AnthropicPatchRule):
        return _anthropic(rule, w, h)
    if isinstance(rule, OpenAITileRule):
        return _openai_tile(rule, w, h, detail)
    if isinstance(rule, OpenAIPatchRule):
        return _openai_patch(rule, w, h, detail)
    if isinstance(rule, GeminiTileRule):
        return _gemini_tile(rule, w, h)
    if isinstance(rule, GeminiMediaResolutionRule):
        return dict(rule.image_tokens)[_resolution(rule, detail)]
    if isinstance(rule, FlatImageRule):
        return rule.tokens
    assert_never(rule)


def image_upper_bound(rule: ImageRule, detail: str | None = None) -> int:
    """The price of an image whose dimensions are unknown: the rule's ceiling, so it errs high."""
    if isinstance(rule, AnthropicPatchRule):
        return rule.max_tokens
    if isinstance(rule, OpenAITileRule):
        return rule.base if detail == "low" else rule.base + _OPENAI_MAX_TILES * rule.per_tile
    if isinstance(rule, OpenAIPatchRule):
        max_px, budget = rule.budget(detail)
        if budget <= 0:  # no patch budget: the largest image at the pixel limit, capped at 8000²
            edge = min(max_px, 8000)
            budget = (-(-edge // rule.patch)) ** 2
        return math.ceil(budget * rule.multiplier - 1e-9)
    if isinstance(rule, GeminiTileRule):
        return _GEMINI_TILE_UPPER * rule.per_tile
    if isinstance(rule, GeminiMediaResolutionRule):
        return max(tokens for _, tokens in rule.image_tokens)
    if isinstance(rule, FlatImageRule):
        return rule.tokens
    assert_never(rule)


def _valid_dimension(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and 0 < value <= MAX_DIMENSION_PX
    )


def _seconds(ref: AttachmentRef) -> float | None:
    value = ref.duration_seconds
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= MAX_DURATION_SECONDS else None


def ref_image_tokens(rule: ImageRule, ref: AttachmentRef | None, detail: str | None) -> float:
    """An image by reference: a valid stamp wins, then the rule from known dimensions, else the ceiling.

    Dimensions that are missing or corrupt (negative, NaN, over 10⁶ px on a ref built without
    validation) are priced at the rule's ceiling rather than raising mid-compile.
    """
    if ref is not None:
        stamp = valid_stamp(ref.token_estimate)
        if stamp is not None:
            return stamp
        if _valid_dimension(ref.width) and _valid_dimension(ref.height):
            return float(image_tokens(rule, ref.width, ref.height, detail))  # type: ignore[arg-type]
    return float(image_upper_bound(rule, detail))


def document_tokens(profile: ModelProfile, ref: AttachmentRef | None) -> float:
    """A document: per page where the provider publishes a rate; else, with a known page count, the
    upper end of a page's text plus the model's largest page image (OpenAI sends "extracted text plus
    one image per page" with no published rate, so this errs high); with no page count, flat 1,000."""
    stamp = valid_stamp(ref.token_estimate) if ref is not None else None
    if stamp is not None:
        return stamp
    pages = ref.pages if ref is not None else None
    rule = profile.image_rule
    if isinstance(pages, bool) or not isinstance(pages, int) or not 0 < pages <= MAX_PAGES:
        return float(MEDIA_FLAT_TOKENS)
    if profile.provider == "anthropic":
        return float(pages * (ANTHROPIC_PDF_TEXT_PER_PAGE + image_upper_bound(rule)))
    if isinstance(rule, GeminiMediaResolutionRule):
        return float(pages * dict(rule.pdf_page_tokens)[rule.resolution])
    if profile.provider == "gemini":
        return float(pages * GEMINI_PDF_PAGE)
    return float(pages * (ANTHROPIC_PDF_TEXT_PER_PAGE + image_upper_bound(rule)))


def audio_tokens(profile: ModelProfile, ref: AttachmentRef) -> float:
    """Audio: by duration where the provider publishes a rate (Gemini 32/s, OpenAI 10/s), else 1,000."""
    stamp = valid_stamp(ref.token_estimate)
    if stamp is not None:
        return stamp
    seconds = _seconds(ref)
    if seconds is None:
        return float(MEDIA_FLAT_TOKENS)
    if profile.provider == "gemini":
        return math.ceil(seconds) * float(GEMINI_AUDIO_PER_SECOND)
    if profile.provider == "openai":
        return math.ceil(seconds) * float(OPENAI_AUDIO_PER_SECOND)
    return float(MEDIA_FLAT_TOKENS)


def video_tokens(profile: ModelProfile, ref: AttachmentRef) -> float:
    """Video: Gemini by duration (1 FPS frames + 32/s audio), else the flat 1,000."""
    stamp = valid_stamp(ref.token_estimate)
    if stamp is not None:
        return stamp
    seconds = _seconds(ref)
    rule = profile.image_rule
    if seconds is None or profile.provider != "gemini":
        return float(MEDIA_FLAT_TOKENS)
    if isinstance(rule, GeminiMediaResolutionRule):
        frame = 280 if rule.resolution == "high" else 70  # Gemini 3 table: per video frame
        return math.ceil(seconds) * float(frame + GEMINI_AUDIO_PER_SECOND)
    return math.ceil(seconds) * float(GEMINI_VIDEO_PER_SECOND)
