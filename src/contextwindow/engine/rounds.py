"""Pricing the round appended at a tool boundary: what the projection adds for it.

The appended round prices everything the round brings in, media of mid-turn
messages included, erring high: a needless recompile costs less than a provider's refusal.
:class:`RoundPricer` prices it with the same ``Estimator`` as the rest of the library; the ``flat``
preset reproduces agent-framework's flat rule exactly (``ceil(chars/4) + 1600 × tool-result images +
20 × (tool results + injected messages)``; mid-turn image or generated image at a valid stamp else
1,600; document, audio, video 1,000) so its known-answer vectors can be checked.

:class:`RoundRatios` learns from the provider's own counts of recent rounds how far over its estimate
the next one may be counted.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..content import (
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    Text,
    Thinking,
    ToolResult,
    Video,
    utf16_len,
    valid_stamp,
)
from ..errors import InvalidInput
from ..usage.calibration import BAND

__all__ = [
    "ENVELOPE_TOKENS",
    "FLAT_IMAGE_TOKENS",
    "FLAT_OTHER_MEDIA_TOKENS",
    "ROUND_TEXT_MARGIN",
    "BlockPricer",
    "RoundPricer",
    "RoundRatios",
    "flat_round_tokens",
]

# estimateAppendedRoundTokens: each tool result and each injected message carries a 20-token envelope.
ENVELOPE_TOKENS = 20
# The store's flat prices agent-framework's appended-round rule uses: image 1,600; document/audio/video 1,000.
FLAT_IMAGE_TOKENS = 1_600
FLAT_OTHER_MEDIA_TOKENS = 1_000
ROUND_TEXT_MARGIN = 0.15
"""How far over the text rule's estimate :class:`RoundPricer` prices an appended round's text: one
chunk is priced far less surely than a whole request (the measurement: "Round ratios" in
``docs/concepts.md``)."""
# RoundRatios: rounds whose estimate is below this are not learned from. Their 20-token envelopes
# (against a provider's few tokens of framing) dominate the ratio, and the most they can be off by
# is a few dozen tokens, which the margin covers.
MIN_LEARNED_ROUND_TOKENS = 256
# RoundRatios: how many recent learned rounds the factor is the maximum of. A tool loop's rounds
# repeat a few kinds (a file chunk, a test report, a screenshot); 16 rounds see each kind several
# times, and an old session's content kinds age out.
ROUND_RATIO_HISTORY = 16
# RoundRatios: a round counted at more than this share of its estimate was confounded (the request
# changed by more than the round), as the calibration band rejects such samples.
MAX_ROUND_RATIO = BAND[1]


class BlockPricer(Protocol):
    """What the round pricer needs of an ``Estimator``: a block's calibrated price in tokens."""

    def block(self, block: Block) -> int: ...


@dataclass(frozen=True, slots=True)
class RoundPricer:
    """Prices the round about to be appended at a tool boundary, erring high.

    With an ``estimator`` (the default path), each tool result and each block of each injected message
    is priced by that estimator, the one ruler every other count uses, plus a 20-token envelope per tool
    result and per injected message. Calibration may only raise the figure here (a multiplier below 1
    would let a round slip past the window), so blocks are priced by ``floor_estimator`` too, when
    given, and the larger price wins.

    The margins are by content kind, because a round is one or two pieces of content, not a whole
    request whose errors average out. ``margin`` raises everything by the share compile keeps below
    the window. ``text_margin`` raises text (text blocks, string tool results, the text inside list
    tool results, thinking) by the text rule's error on a *single* chunk, which is far wider than on
    a request (see :data:`ROUND_TEXT_MARGIN`); media is priced by the provider's published rules and
    keeps ``margin``. With ``preset="flat"`` it is agent-framework's flat rule, for the seed vectors.
    """

    estimator: BlockPricer | None = None
    preset: Literal["estimator", "flat"] = "estimator"
    floor_estimator: BlockPricer | None = None
    margin: float = 0.0
    text_margin: float = 0.0

    def __post_init__(self) -> None:
        if self.preset == "estimator" and self.estimator is None:
            raise InvalidInput("the estimator preset needs an estimator", path="estimator")
        for name in ("margin", "text_margin"):
            if not 0 <= getattr(self, name) < 1:
                raise InvalidInput("must be ≥ 0 and < 1", path=name)

    def price_and_estimate(
        self, tool_results: Sequence[ToolResult], injected: Sequence[Message] = (), *, factor: float = 1.0
    ) -> tuple[int, int]:
        """``(price, estimate)`` of the round from one pricing of its blocks: the engine needs both at
        every tool boundary, and a round can be a large tool result.

        The price is the estimate with each part (:meth:`parts`) raised by its margin, or by
        ``factor`` when that is larger: the most the provider has lately counted a round at over its
        estimate (:class:`RoundRatios`). The estimate has no margin. The flat preset gives the
        flat rule for both, untouched by either."""
        if self.preset == "flat":
            flat = flat_round_tokens(tool_results, injected)
            return flat, flat
        if not math.isfinite(factor) or factor <= 0:
            raise InvalidInput("must be a finite number > 0", path="factor")
        text, other = self.parts(tool_results, injected)
        price = math.ceil(text * max(1 + self.text_margin, factor) + other * max(1 + self.margin, factor))
        return price, text + other

    def parts(self, tool_results: Sequence[ToolResult], injected: Sequence[Message] = ()) -> tuple[int, int]:
        """The round's estimate split into ``(text, everything else)``: the blocks at the larger of
        the calibrated and the floor price; the envelopes and media are the second part."""
        if self.estimator is None:
            raise InvalidInput("the flat preset prices no parts", path="preset")
        text = 0
        other = ENVELOPE_TOKENS * (len(tool_results) + len(injected))
        for block in [*tool_results, *(b for m in injected for b in m.content)]:
            price = self._block(block)
            if isinstance(block, Text | Thinking) or (
                isinstance(block, ToolResult) and isinstance(block.content, str)
            ):
                text += price
            elif isinstance(block, ToolResult):
                # Nested blocks: the text among them takes the text margin (at most the result's price).
                nested = min(price, sum(self._block(b) for b in block.content if isinstance(b, Text)))
                text += nested
                other += price - nested
            else:
                other += price
        return text, other

    def _block(self, block: Block) -> int:
        assert self.estimator is not None
        price = self.estimator.block(block)
        if self.floor_estimator is not None:
            price = max(price, self.floor_estimator.block(block))
        return price


@dataclass(slots=True)
class RoundRatios:
    """How far the provider counted recent appended rounds over their estimate: the factor the next
    round is priced at (:meth:`RoundPricer.price_and_estimate`).

    A text rule is right on average over content kinds, not for each: a chunk of source code can be
    counted 10% over its estimate while a JSON report is counted 40% under, and the calibration
    multiplier, one number over whole requests, sits between them. The projection prices a single
    round, so a round of the kind the rule under-prices can carry the request past the window while
    the projection says it fits. The provider's own numbers measure each round:
    within a stream, the prompt of the call after a round, less the prompt and the output of the call
    before it, is what the round (with the reply re-sent) cost. :meth:`factor` is the largest of the
    last ``history`` such ratios: a round of a kind seen lately is priced at least as high as that
    kind has been counted. Rounds below ``min_tokens`` and ratios above ``max_ratio`` are not learned.
    """

    history: int = ROUND_RATIO_HISTORY
    min_tokens: int = MIN_LEARNED_ROUND_TOKENS
    max_ratio: float = MAX_ROUND_RATIO
    _ratios: deque[float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.history <= 0:
            raise InvalidInput("must be > 0", path="history")
        if self.min_tokens < 1:
            raise InvalidInput("must be ≥ 1", path="min_tokens")
        if not (math.isfinite(self.max_ratio) and self.max_ratio >= 1):
            raise InvalidInput("must be a finite number ≥ 1", path="max_ratio")
        self._ratios = deque(maxlen=self.history)

    def observe(self, *, real: int, estimate: int) -> bool:
        """A round the provider counted at ``real`` tokens whose estimate was ``estimate``; returns
        whether it was learned (see the class docstring for what is not)."""
        if real < 0 or estimate < 0:
            raise InvalidInput("must be ≥ 0", path="real" if real < 0 else "estimate")
        if estimate < self.min_tokens:
            return False
        ratio = real / estimate
        if ratio > self.max_ratio:
            return False
        self._ratios.append(ratio)
        return True

    def factor(self) -> float:
        """The largest recent ratio, or 1 when none was learned."""
        return max(self._ratios, default=1.0)


def _flat_media(block: Block) -> int | None:
    """The flat rule's price of a mid-turn message's media block, or None for a non-media block."""
    if isinstance(block, Image | GeneratedImage):
        stamp = valid_stamp(block.ref.token_estimate) if block.ref is not None else None
        return math.ceil(stamp) if stamp is not None else FLAT_IMAGE_TOKENS
    if isinstance(block, Document | Audio | Video):
        return FLAT_OTHER_MEDIA_TOKENS
    return None


def flat_round_tokens(tool_results: Sequence[ToolResult], injected: Sequence[Message] = ()) -> int:
    """agent-framework ``estimateAppendedRoundTokens`` (with a mid-turn message's media priced), exactly.

    ``ceil(chars/4) + 1600 × tool-result images + 20 × (tool results + injected messages)``, where
    ``chars`` is the tool results' text and the injected messages' text; a mid-turn message's image or
    generated image adds its stamp when finite and ≥ 0 (else 1,600), a document, audio or video 1,000.
    A tool result's non-image media are priced as a mid-turn message's are (erring high: the seed's
    results carried only images).
    """
    chars = 0
    media = 0
    for result in tool_results:
        if isinstance(result.content, str):
            chars += utf16_len(result.content)
            continue
        for nested in result.content:
            if isinstance(nested, Text):
                chars += utf16_len(nested.text)
            elif isinstance(nested, Image | GeneratedImage):
                media += FLAT_IMAGE_TOKENS
            else:
                media += FLAT_OTHER_MEDIA_TOKENS
    for message in injected:
        for block in message.content:
            if isinstance(block, Text):
                chars += utf16_len(block.text)
                continue
            price = _flat_media(block)
            if price is not None:
                media += price
    return math.ceil(chars / 4) + media + ENVELOPE_TOKENS * (len(tool_results) + len(injected))
