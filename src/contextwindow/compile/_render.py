"""One message as compile sees it: its stored prices, media items and tool blocks (the *base*), and
the message as it renders once archive, media and cap decisions are applied, priced as it renders.

Prices follow the one-ruler rule: a block that is the stored block itself (by identity) keeps
its stored raw price; any block compile made (a cut, a placeholder, an archived result) is priced
fresh by the same estimator. Each top-level block is rounded after the multiplier, half up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from ..content import (
    MEDIA_TYPES,
    AttachmentRef,
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    MediaBlock,
    Message,
    RedactedThinking,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolSpec,
    ToolUse,
    Video,
)
from .archive import placeholder_result
from .media import MediaItem, encoded_size, is_image, placeholder
from .state import ArchiveRecord, PricedMessage
from .truncate import text_only_estimate, truncate_content

__all__ = [
    "Base",
    "Pricer",
    "Rendered",
    "base_of",
    "calibrated",
    "price_blocks",
    "rebased",
    "recalibrated",
    "render_message",
]

# Segment slots in a price vector, in the order of state.SEGMENTS' message segments.
TEXT, TOOL_RESULTS, IMAGES, OTHER_MEDIA = 0, 1, 2, 3
_MIXED_RESULT = 4
"""A tool result holding media: its price is split between results, images and other media."""
Part = tuple[int, float, float, float]
"""One top-level block's raw (pre-multiplier) price: ``(slot, raw, media raw, image raw)``; the last
two only for a tool result holding media (slot ``_MIXED_RESULT``)."""
# JSON framing per block/message on the wire; an estimate for the byte wall only.
_BLOCK_OVERHEAD = 40
_MESSAGE_OVERHEAD = 30


class Pricer(Protocol):
    """What compile asks of the ``Estimator`` (``contextwindow.pricing``)."""

    def raw_block(self, block: Block) -> float: ...

    def block(self, block: Block) -> int: ...

    def text(self, s: str) -> int: ...

    def message(self, message: Message) -> int: ...

    def tool_spec(self, tool: ToolSpec) -> int: ...

    def request(self, request: Request) -> int: ...

    def uncharged(self, messages: Sequence[Message]) -> int: ...


def calibrated(raw: float, multiplier: float) -> int:
    """``floor(raw × m + 0.5)``: per top-level block, half up, as the store of
    https://github.com/anima-research/context-manager rounds."""
    return max(0, math.floor(raw * multiplier + 0.5))


@dataclass(frozen=True, slots=True)
class Base:
    """What compile needs of a stored message before deciding anything; cached by message id."""

    raw: tuple[float, ...]
    tokens: int
    """Calibrated price as stored (pre-strip): the ruler the media depth is measured with."""
    media: tuple[tuple[int, int, MediaItem], ...]
    """(top-level index, nested index or -1, item) in reading order."""
    results: tuple[int, ...]
    """Top-level indexes of tool results."""
    human: bool
    """A user message with something besides tool results: a turn starts here."""
    multiplier: float = 1.0
    """The multiplier ``tokens`` was calibrated at (:func:`recalibrated` moves it to another)."""


def base_of(pm: PricedMessage, position: int, est: Pricer, multiplier: float) -> Base:
    """The :class:`Base` of the message at ``position``: its stored prices (repriced when missing or bad)."""
    message = pm.message
    blocks = message.content
    prices = pm.block_prices
    if prices is None or len(prices) != len(blocks) or not all(_finite(p) for p in prices):
        prices = tuple(est.raw_block(b) for b in blocks)
    # (top-level index, index inside a tool result or -1, block), in message order: the ordinal.
    found: list[tuple[int, int, MediaBlock]] = []
    results: list[int] = []
    human = False
    for index, block in enumerate(blocks):
        if isinstance(block, ToolResult):
            results.append(index)
            if not isinstance(block.content, str):
                found.extend(
                    (index, nested_index, nested)
                    for nested_index, nested in enumerate(block.content)
                    if isinstance(nested, MEDIA_TYPES)
                )
            continue
        human = True
        if isinstance(block, MEDIA_TYPES):
            found.append((index, -1, block))
    media = [
        (
            index,
            nested_index,
            MediaItem(
                position=position,
                ordinal=ordinal,
                ref=block.ref,
                image=is_image(block),
            ),
        )
        for ordinal, (index, nested_index, block) in enumerate(found)
    ]
    tokens = sum(calibrated(p, multiplier) for p in prices)
    return Base(
        raw=tuple(prices),
        tokens=tokens,
        media=tuple(media),
        results=tuple(results),
        human=human and message.role == "user",
        multiplier=multiplier,
    )


def _finite(value: object) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    )


@dataclass(frozen=True, slots=True)
class Rendered:
    """A message as it will be sent, with its price by segment and its wire size."""

    message: Message
    tokens: int
    segments: tuple[int, int, int, int]
    wire_bytes: int
    inline: tuple[AttachmentRef, ...]
    truncated: bool = False
    """The per-message cap cut this message."""
    parts: tuple[Part, ...] = ()
    """Each top-level block's raw price, so the memo can calibrate it again (:func:`recalibrated`)."""
    priced_at: tuple[float, int] = (1.0, 0)
    """``(multiplier, framing)`` the prices were calibrated with."""
    uncut: int = -1
    """The content's text-only estimate before the per-message cap (chars/4 units); -1: rendered
    without a cap, not measured. A render no cap cut is the render at every cap it is within
    (:func:`same_at`)."""


def same_at(rendered: Rendered, made_at: int, cap: int) -> bool:
    """Whether ``rendered``, made under the per-message cap ``made_at``, is the render under ``cap``
    (0 = none): the same cap, or one that cuts it under neither."""
    if made_at == cap:
        return True
    return not rendered.truncated and rendered.uncut >= 0 and (cap <= 0 or rendered.uncut <= cap)


def render_message(
    pm: PricedMessage,
    base: Base,
    *,
    archived: Mapping[str, ArchiveRecord],
    evicted: frozenset[int],
    cap: int,
    est: Pricer,
    multiplier: float,
    framing: int,
    reread: bool = True,
) -> Rendered:
    """Apply archive placeholders (by tool-use id) and media placeholders (by media ordinal) to the
    stored content, cut it to ``cap`` (chars/4 units, 0 = none), and price what is sent;
    ``reread``: the placeholders say to call the re-read tool (``Policy.reread_tool``)."""
    message = pm.message
    content = message.content
    if archived or evicted:
        content = _apply(content, base, archived, evicted, reread=reread)
    cut = False
    uncut = -1
    if cap:
        uncut = text_only_estimate(content)
        if uncut > cap:
            before = content
            content = truncate_content(content, cap)
            cut = content is not before
    if content is message.content:
        rendered = message
    else:
        rendered = Message(
            role=message.role,
            content=content,
            id=message.id,
            created_at=message.created_at,
            metadata=message.metadata,
        )
    stored = {id(b): raw for b, raw in zip(message.content, base.raw, strict=True)}
    priced = price_blocks(rendered, stored, est, multiplier, framing, uncut=uncut)
    if cut:
        priced = replace(priced, truncated=True)
    return priced


def _apply(
    content: tuple[Block, ...],
    base: Base,
    archived: Mapping[str, ArchiveRecord],
    evicted: frozenset[int],
    *,
    reread: bool,
) -> tuple[Block, ...]:
    top_ordinal = {top: item.ordinal for top, nested, item in base.media if nested < 0}
    nested_ordinal = {(top, nested): item.ordinal for top, nested, item in base.media if nested >= 0}
    out: list[Block] = []
    changed = False
    for index, block in enumerate(content):
        if isinstance(block, ToolResult):
            record = archived.get(block.tool_use_id)
            if record is not None:
                out.append(placeholder_result(block, record, reread=reread))
                changed = True
                continue
            if evicted and not isinstance(block.content, str):
                inner_blocks: list[Block] = []
                inner_changed = False
                for nested, inner in enumerate(block.content):
                    ordinal = nested_ordinal.get((index, nested))
                    if ordinal is not None and ordinal in evicted and isinstance(inner, MEDIA_TYPES):
                        inner_blocks.append(placeholder(inner, reread=reread))
                        inner_changed = True
                    else:
                        inner_blocks.append(inner)
                if inner_changed:
                    block = ToolResult(
                        tool_use_id=block.tool_use_id,
                        content=tuple(inner_blocks),  # type: ignore[arg-type]
                        is_error=block.is_error,
                    )
                    changed = True
            out.append(block)
            continue
        ordinal = top_ordinal.get(index)
        if ordinal is not None and ordinal in evicted and isinstance(block, MEDIA_TYPES):
            out.append(placeholder(block, reread=reread))
            changed = True
            continue
        out.append(block)
    return tuple(out) if changed else content


def price_blocks(
    message: Message, stored: Mapping[int, float], est: Pricer, m: float, framing: int, *, uncut: int = -1
) -> Rendered:
    """Price a rendered message block by block — the stored raw price for a stored block, a fresh one
    otherwise — plus the estimator's per-message framing (counted as text), calibrated at ``m``;
    ``uncut``: the content's text-only estimate before the cap, when measured."""
    wire = _MESSAGE_OVERHEAD
    inline: list[AttachmentRef] = []
    parts: list[Part] = []
    for block in message.content:
        raw = stored.get(id(block))
        if raw is None:
            raw = est.raw_block(block)
        wire += _BLOCK_OVERHEAD
        if isinstance(block, ToolResult):
            if isinstance(block.content, str):
                parts.append((TOOL_RESULTS, raw, 0.0, 0.0))
                wire += len(block.content.encode())
            else:
                media_raw = 0.0
                media_images = 0.0
                for inner in block.content:
                    if isinstance(inner, MEDIA_TYPES):
                        inner_raw = est.raw_block(inner)
                        media_raw += inner_raw
                        if isinstance(inner, Image | GeneratedImage):
                            media_images += inner_raw
                        if inner.ref is not None:
                            inline.append(inner.ref)
                            wire += encoded_size(inner.ref.size_bytes) + _BLOCK_OVERHEAD
                    elif isinstance(inner, Text):
                        wire += len(inner.text.encode()) + _BLOCK_OVERHEAD
                parts.append((_MIXED_RESULT, raw, media_raw, media_images))
        elif isinstance(block, Image | GeneratedImage):
            parts.append((IMAGES, raw, 0.0, 0.0))
            if block.ref is not None:
                inline.append(block.ref)
                wire += encoded_size(block.ref.size_bytes)
        elif isinstance(block, Document | Audio | Video):
            parts.append((OTHER_MEDIA, raw, 0.0, 0.0))
            if block.ref is not None:
                inline.append(block.ref)
                wire += encoded_size(block.ref.size_bytes)
        else:
            parts.append((TEXT, raw, 0.0, 0.0))
            wire += _wire_text(block)
    segments = _segments(parts, m, framing)
    return Rendered(
        message=message,
        tokens=sum(segments),
        segments=segments,
        wire_bytes=wire,
        inline=tuple(inline),
        parts=tuple(parts),
        priced_at=(m, framing),
        uncut=uncut,
    )


def _segments(parts: Sequence[Part], multiplier: float, framing: int) -> tuple[int, int, int, int]:
    """The price by segment of blocks whose raw prices are ``parts``, each rounded after ``multiplier``."""
    slots = [framing, 0, 0, 0]
    for slot, raw, media_raw, media_images in parts:
        price = calibrated(raw, multiplier)
        if slot != _MIXED_RESULT:
            slots[slot] += price
            continue
        media_part = min(price, calibrated(media_raw, multiplier))
        image_part = min(media_part, calibrated(media_images, multiplier))
        slots[IMAGES] += image_part
        slots[OTHER_MEDIA] += media_part - image_part
        slots[TOOL_RESULTS] += price - media_part
    return slots[0], slots[1], slots[2], slots[3]


def recalibrated(rendered: Rendered, multiplier: float, framing: int) -> Rendered:
    """``rendered`` priced at another multiplier and framing: the same message (the same object), its
    blocks' raw prices calibrated again, exactly as :func:`price_blocks` would price it afresh."""
    if rendered.priced_at == (multiplier, framing):
        return rendered
    segments = _segments(rendered.parts, multiplier, framing)
    return replace(rendered, tokens=sum(segments), segments=segments, priced_at=(multiplier, framing))


def rebased(base: Base, multiplier: float) -> Base:
    """``base`` with its stored price calibrated at ``multiplier``."""
    if base.multiplier == multiplier:
        return base
    return Base(
        raw=base.raw,
        tokens=sum(calibrated(p, multiplier) for p in base.raw),
        media=base.media,
        results=base.results,
        human=base.human,
        multiplier=multiplier,
    )


def _wire_text(block: Block) -> int:
    if isinstance(block, Text):
        return len(block.text.encode())
    if isinstance(block, Thinking):
        return len(block.thinking.encode()) + len((block.signature or "").encode())
    if isinstance(block, RedactedThinking):
        return len(block.data.encode())
    if isinstance(block, ToolUse):
        return len(block.name) + len(json.dumps(dict(block.input), ensure_ascii=False, default=str).encode())
    return 0
