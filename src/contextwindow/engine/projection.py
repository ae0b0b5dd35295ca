"""The physical-window projection: would the next round of a turn cross the window?

Within a turn the engine appends rounds (tool results and mid-turn messages) to the request it already
sent, without recompiling, so the provider's prompt cache stays warm. Nothing in that path measures the
growing request, so at every tool boundary the engine asks this module whether the request about to go
out still fits (seed 001, agent-framework #92/#98, final rule at da42e8b)::

    projection = real + out + growth + appended + reserve

- ``real``: the prompt of the latest call on this stream that *reported* a prompt (fresh input + cache
  write + cache read: every token the provider counted as input);
- ``out``: that call's output, where an output of 0 counts as ``max_tokens`` (a call that ended at a
  tool boundary wrote a tool use, so 0 is a count its adapter left at 0);
- ``growth``: what the stream grew by since that call: each round it was continued past, and the output
  (or ``max_tokens``) of each call that reported no prompt. A prompt of 0 means *unreported*, not empty;
- ``appended``: the round about to be appended, priced by :class:`RoundPricer`;
- ``reserve``: the output reserve the request asks for.

It runs only with a declared window and once a call on the stream has reported a prompt (``real > 0``):
before then there is no real figure to project from. All state resets at stream start; without the
reset a restarted stream inherits the number that restarted it and loops (seed 001).

The appended round (seed 000, final rule) prices everything the round brings in, media of mid-turn
messages included, erring high: a needless recompile costs less than a provider's refusal.
:class:`RoundPricer` prices it with the same ``Estimator`` as the rest of the library; the ``seed``
preset reproduces agent-framework's flat rule exactly (``ceil(chars/4) + 1600 × tool-result images +
20 × (tool results + injected messages)``; mid-turn image or generated image at a valid stamp else
1,600; document, audio, video 1,000) so the seed vectors can be checked.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from ..compile.truncate import safe_slice
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
    valid_stamp,
)
from ..errors import InvalidInput
from ..pricing import utf16_len
from ..usage.calibration import BAND

__all__ = [
    "DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS",
    "ENVELOPE_TOKENS",
    "ROUND_TEXT_MARGIN",
    "SEED_IMAGE_TOKENS",
    "SEED_OTHER_MEDIA_TOKENS",
    "BlockPricer",
    "PhysicalWindow",
    "RoundPricer",
    "RoundRatios",
    "cap_tool_result",
    "inline_cap_chars",
    "projection",
    "seed_round_tokens",
    "storable_tool_result",
    "truncation_notice",
]

# agent-framework DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS: 5000 earlier, 24000 now (seed-behaviours §6).
DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS = 24_000
# estimateAppendedRoundTokens: each tool result and each injected message carries a 20-token envelope.
ENVELOPE_TOKENS = 20
# The store's flat prices the seed-000 projection uses: image 1,600; document/audio/video 1,000.
SEED_IMAGE_TOKENS = 1_600
SEED_OTHER_MEDIA_TOKENS = 1_000
# RoundPricer: the text of an appended round is priced this much over the text rule's estimate. One
# chunk of text is priced far less surely than a whole request: benchmarks/pricing_accuracy on
# held-out chunks (o200k_base) puts the rule's |error| at p95 9.7% for prose, 7.8% for JSON, 12% for
# markdown and 16.7% for code (as measured at the start of session 2). 15% covers nearly
# every chunk of the common kinds; the price of erring high is a restart one round sooner in the few
# cases where the projection lands within that share of a round below the window.
ROUND_TEXT_MARGIN = 0.15
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


def truncation_notice(original_chars: int) -> str:
    """agent-framework's notice for a tool result cut with no writable workspace (seed-behaviours §6)."""
    return (
        f"\n\n[truncated — original was {original_chars} chars; "
        "no writable workspace, full content not retained]"
    )


def inline_cap_chars(
    max_message_tokens: int | None, desired: int = DEFAULT_TOOL_RESULT_INLINE_MAX_CHARS
) -> int:
    """The inline cap of a tool result: ``min(desired, max_message_tokens × 4)`` (seed-behaviours §6)."""
    if desired <= 0:
        raise InvalidInput("must be > 0", path="desired")
    if max_message_tokens is None:
        return desired
    if max_message_tokens <= 0:
        raise InvalidInput("must be > 0", path="max_message_tokens")
    return min(desired, max_message_tokens * 4)


def _valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate (a tool's undecodable byte, ``"\\udcff"``) as U+FFFD; a
    surrogate pair written as two code points becomes its character."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def storable_tool_result(result: ToolResult) -> ToolResult:
    """The result with text the ledger can store: a lone surrogate, which no UTF-8 store accepts,
    becomes U+FFFD (the tool's own output is kept; only the undecodable unit is replaced)."""
    if isinstance(result.content, str):
        text = _valid_unicode(result.content)
        return result if text is result.content else replace(result, content=text)
    blocks = tuple(
        replace(b, text=_valid_unicode(b.text)) if isinstance(b, Text) and not b.text.isascii() else b
        for b in result.content
    )
    changed = any(a is not b for a, b in zip(blocks, result.content, strict=True))
    return replace(result, content=blocks) if changed else result


def cap_tool_result(result: ToolResult, cap_chars: int) -> ToolResult:
    """The result as it rides into the next round: text beyond ``cap_chars`` cut with the notice.

    A string result is cut at the cap; a list result keeps its text blocks in order within the cap
    (the block that straddles it is cut, later text dropped) and keeps every media block, which is
    priced by its own rule. The notice names the original length so the model knows what it lost.
    """
    if isinstance(result.content, str):
        total = utf16_len(result.content)
        if total <= cap_chars:
            return result
        return replace(result, content=safe_slice(result.content, cap_chars) + truncation_notice(total))
    total = sum(utf16_len(b.text) for b in result.content if isinstance(b, Text))
    if total <= cap_chars:
        return result
    kept: list[Block] = []
    room = cap_chars
    cut = False
    for block in result.content:
        if not isinstance(block, Text):
            kept.append(block)
            continue
        if cut:
            continue
        length = utf16_len(block.text)
        if length <= room:
            kept.append(block)
            room -= length
            continue
        kept.append(Text(text=safe_slice(block.text, room) + truncation_notice(total)))
        cut = True
    return replace(result, content=tuple(kept))  # type: ignore[arg-type]


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
    keeps ``margin``. Measured: a code tool result priced 8% under its real count rejected a request
    by 5 tokens at 32k with one margin of 5% for everything. With ``preset="seed"`` it is
    agent-framework's flat rule, for the seed vectors.
    """

    estimator: BlockPricer | None = None
    preset: Literal["estimator", "seed"] = "estimator"
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
        estimate (:class:`RoundRatios`). The estimate has no margin. The seed preset gives the seed's
        flat rule for both, untouched by either."""
        if self.preset == "seed":
            flat = seed_round_tokens(tool_results, injected)
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
            raise InvalidInput("the seed preset prices no parts", path="preset")
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
    the projection says it fits (measured: a code tool result 8% over its estimate rejected by 5
    tokens at 32k with the fit margin of 5% applied). The provider's own numbers measure each round:
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

    def __len__(self) -> int:
        return len(self._ratios)


def _seed_media(block: Block) -> int | None:
    """Seed 000's price of a mid-turn message's media block, or None for a non-media block."""
    if isinstance(block, Image | GeneratedImage):
        stamp = valid_stamp(block.ref.token_estimate) if block.ref is not None else None
        return math.ceil(stamp) if stamp is not None else SEED_IMAGE_TOKENS
    if isinstance(block, Document | Audio | Video):
        return SEED_OTHER_MEDIA_TOKENS
    return None


def seed_round_tokens(tool_results: Sequence[ToolResult], injected: Sequence[Message] = ()) -> int:
    """agent-framework ``estimateAppendedRoundTokens`` (seed 000 final rule), exactly.

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
                media += SEED_IMAGE_TOKENS
            else:
                media += SEED_OTHER_MEDIA_TOKENS
    for message in injected:
        for block in message.content:
            if isinstance(block, Text):
                chars += utf16_len(block.text)
                continue
            price = _seed_media(block)
            if price is not None:
                media += price
    return math.ceil(chars / 4) + media + ENVELOPE_TOKENS * (len(tool_results) + len(injected))


def projection(*, real: int, out: int, growth: int, appended: int, reserve: int) -> int:
    """``real + out + growth + appended + reserve``: the next request's size as the provider will see it."""
    for name, value in (
        ("real", real),
        ("out", out),
        ("growth", growth),
        ("appended", appended),
        ("reserve", reserve),
    ):
        if value < 0:
            raise InvalidInput("must be ≥ 0", path=name)
    return real + out + growth + appended + reserve


@dataclass(slots=True)
class PhysicalWindow:
    """The per-stream state behind the projection (seed 001 final rule).

    ``window`` is the declared physical window (``None``: no projection at all); ``reserve`` the output
    reserve each request asks for, which also bounds an unreported output (``max_tokens``).
    """

    window: int | None
    reserve: int
    real: int = 0
    out: int = 0
    growth: int = 0

    def __post_init__(self) -> None:
        if self.window is not None and self.window <= 0:
            raise InvalidInput("must be > 0", path="window")
        if self.reserve < 0:
            raise InvalidInput("must be ≥ 0", path="reserve")

    def start_stream(self) -> None:
        """A new stream starts from nothing: it must not inherit the figure that restarted it."""
        self.real = self.out = self.growth = 0

    def observe_call(self, *, prompt: int, output: int, max_tokens: int | None = None) -> None:
        """One provider call's own usage (a per-call delta, never a stream's running total).

        A prompt > 0 sets ``real``/``out`` and zeroes ``growth``; a prompt of 0 (unreported) adds the
        call's output to ``growth``. Either way an output of 0 counts as ``max_tokens``.
        """
        if prompt < 0 or output < 0:
            raise InvalidInput("a call's usage is never negative", path="prompt" if prompt < 0 else "output")
        bound = self.reserve if max_tokens is None else max_tokens
        counted = output if output > 0 else bound
        if prompt > 0:
            self.real, self.out, self.growth = prompt, counted, 0
        else:
            self.growth += counted

    def project(self, appended: int) -> int | None:
        """The projection for a round of ``appended`` tokens, or ``None`` when none can be made."""
        if self.window is None or self.real <= 0:
            return None
        return projection(
            real=self.real, out=self.out, growth=self.growth, appended=appended, reserve=self.reserve
        )

    def over(self, appended: int) -> int | None:
        """The projection when it crosses the window (restart), else ``None`` (the round fits)."""
        projected = self.project(appended)
        if projected is None or self.window is None or projected <= self.window:
            return None
        return projected

    def continue_past(self, appended: int) -> None:
        """The stream continues past a boundary: its round now sits in the request as growth."""
        if appended < 0:
            raise InvalidInput("must be ≥ 0", path="appended")
        self.growth += appended
