"""Media budget: which attachments go inline, decided newest first from stored sizes before any byte is read.

Limits (the live-image policy of https://github.com/anima-research/context-manager, and the byte
budget https://github.com/withastro/flue asks for): a count cap on images, a depth in tokens from
the newest message, and a byte budget over the encoded (base64) size from ``AttachmentRef.size_bytes``. An item over any of them becomes a text placeholder naming its
attachment id, which a manifest lists so the model can ask for it again. Everything here is a pure
function of refs and constants: a rebuild after a crash gives the same partition byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..content import (
    MEDIA_TYPES,
    AttachmentRef,
    Block,
    GeneratedImage,
    Image,
    MediaBlock,
    Message,
    Text,
    ToolResult,
)
from .reread import READ_ARCHIVED

__all__ = [
    "MediaBudget",
    "MediaItem",
    "encoded_size",
    "hysteresis_limits",
    "is_image",
    "manifest_text",
    "partition_refs",
    "placeholder",
    "shed_media",
]


def encoded_size(size_bytes: int) -> int:
    """Base64 characters for ``size_bytes`` raw bytes: what the wire carries (the budget counts these)."""
    return 4 * math.ceil(size_bytes / 3)


def is_image(block: Block) -> bool:
    """Images and generated images: the blocks the count cap (``maxLiveImages``) applies to."""
    return isinstance(block, Image | GeneratedImage)


def placeholder(block: MediaBlock, *, reread: bool = True) -> Text:
    """The short text that stands for a media item left out of line; it names the attachment id, and
    with ``reread`` (``Policy.reread_tool``) says to call :data:`READ_ARCHIVED` with it."""
    ref = block.ref
    what = "image" if isinstance(block, GeneratedImage) else block.type
    if ref is None:
        return Text(text=f"[{what} dropped from live context]")
    how = f"; call {READ_ARCHIVED} with its id to see it again" if reread else ""
    return Text(text=f"[{what} {ref.id} dropped from live context{how}]")


@dataclass(frozen=True, kw_only=True, slots=True)
class MediaItem:
    """One media block of the history, as the budget sees it: where it is and its stored size."""

    position: int
    """Index of its message in the session."""
    ordinal: int
    """Its ordinal among the message's media, nested tool-result media included, in reading order."""
    ref: AttachmentRef | None
    image: bool

    @property
    def wire_bytes(self) -> int:
        return 0 if self.ref is None else encoded_size(self.ref.size_bytes)


def partition_refs(
    refs_newest_first: Iterable[AttachmentRef], *, byte_budget: int, count_cap: int
) -> tuple[list[AttachmentRef], list[AttachmentRef]]:
    """``(inline, evicted)``: refs walked newest first, inline while within the count cap (0 = none)
    and the encoded byte budget (each item tested on its own, as context-manager does)."""
    inline: list[AttachmentRef] = []
    evicted: list[AttachmentRef] = []
    kept_bytes = 0
    for ref in refs_newest_first:
        size = encoded_size(ref.size_bytes)
        if (count_cap and len(inline) >= count_cap) or kept_bytes + size > byte_budget:
            evicted.append(ref)
        else:
            inline.append(ref)
            kept_bytes += size
    return inline, evicted


class MediaBudget:
    """The running media decision of one compile, fed items newest first.

    ``count_cap`` and ``byte_budget`` are the limits in force (already trimmed by hysteresis when it
    bound); ``watermark`` is ``(position, ordinal)`` of the oldest item allowed inline, if any.
    ``contiguous`` (with hysteresis) refuses every item older than the first one refused, so the
    inline set is exactly the items from the watermark on and a recompile keeps it.
    """

    def __init__(
        self,
        *,
        count_cap: int,
        byte_budget: int,
        watermark: tuple[int, int] | None,
        contiguous: bool = False,
    ) -> None:
        self.count_cap = count_cap
        self.contiguous = contiguous
        self.refused: str | None = None
        self.byte_budget = byte_budget
        self.watermark = watermark
        self.kept_images = 0
        self.kept_bytes = 0
        self.oldest_kept: tuple[int, int] | None = None

    def snapshot(self) -> tuple[int, int, str | None]:
        """The running state ``admit`` decides from, to compare or :meth:`restore`."""
        return (self.kept_images, self.kept_bytes, self.refused)

    def restore(self, state: tuple[int, int, str | None]) -> None:
        """Go back to a state :meth:`snapshot` returned."""
        self.kept_images, self.kept_bytes, self.refused = state

    def admit(self, item: MediaItem, *, too_deep: bool) -> str | None:
        """``None`` when the item goes inline, else the reason it does not."""
        if self.watermark is not None and (item.position, item.ordinal) < self.watermark:
            return "watermark"
        if too_deep:
            return "depth"
        if self.refused is not None:
            return self.refused
        if item.image and self.count_cap and self.kept_images >= self.count_cap:
            return self._refuse("count")
        size = item.wire_bytes
        if self.kept_bytes + size > self.byte_budget:
            return self._refuse("bytes")
        if item.image:
            self.kept_images += 1
        self.kept_bytes += size
        self.oldest_kept = (item.position, item.ordinal)
        return None

    def passed_over(self) -> None:
        """Items were put out of line because their unit did not fit with them inline: with
        ``contiguous``, every older item is refused too (the inline set stays the newest run)."""
        if self.contiguous and self.refused is None:
            self.refused = "budget"

    def _refuse(self, reason: str) -> str:
        if self.contiguous:
            self.refused = reason
        return reason


def shed_media(
    message: Message, excess: int, *, reread: bool = True
) -> tuple[Message, int, list[AttachmentRef]]:
    """Replace inline media in ``message`` in reading order, nested tool-result media included, until
    ``excess`` encoded bytes are freed (``shedImagesToFitByteBudget`` of https://github.com/antra-tess/membrane). Returns the
    message, the bytes freed and the refs shed; ``reread`` as for :func:`placeholder`."""
    freed = 0
    shed: list[AttachmentRef] = []

    def swap(block: Block) -> Block:
        nonlocal freed
        if freed < excess and isinstance(block, MEDIA_TYPES) and block.ref is not None:
            freed += encoded_size(block.ref.size_bytes)
            shed.append(block.ref)
            return placeholder(block, reread=reread)
        return block

    content: list[Block] = []
    for block in message.content:
        if isinstance(block, ToolResult) and not isinstance(block.content, str):
            inner = tuple(swap(b) for b in block.content)
            if any(a is not b for a, b in zip(inner, block.content, strict=True)):
                block = ToolResult(tool_use_id=block.tool_use_id, content=inner, is_error=block.is_error)  # type: ignore[arg-type]
            content.append(block)
        else:
            content.append(swap(block))
    if not shed:
        return message, 0, []
    replaced = Message(
        role=message.role,
        content=tuple(content),
        id=message.id,
        created_at=message.created_at,
        metadata=message.metadata,
    )
    return replaced, freed, shed


def hysteresis_limits(
    items_newest_first: Sequence[MediaItem], *, count_cap: int, byte_budget: int, ratio: float
) -> tuple[int, int, bool]:
    """``(count_cap, byte_budget, bound)``: the limits trimmed to ``ratio ×`` when either binds over
    the eligible items (the hysteresis of ``Policy.media_hysteresis_ratio``), else unchanged."""
    images = sum(1 for item in items_newest_first if item.image)
    total = sum(item.wire_bytes for item in items_newest_first)
    count_binds = bool(count_cap) and images > count_cap
    bytes_binds = total > byte_budget
    if not (count_binds or bytes_binds):
        return count_cap, byte_budget, False
    new_cap = max(1, math.floor(ratio * count_cap)) if count_cap else 0
    return new_cap, math.floor(ratio * byte_budget), True


def manifest_text(entries: Sequence[AttachmentRef], *, max_entries: int, reread: bool = True) -> str:
    """The ``<attachments>`` manifest: the not-inline attachments by id, newest first, so the model
    can ask for one again (with ``reread``, ``Policy.reread_tool``, it says to call
    :data:`READ_ARCHIVED`). It names no ledger message id: those are random, minted at
    append, and would make two runs of the same session send different bytes; the attachment id
    (a content hash) is what the model asks by, and the compile decisions keep the message ids."""
    how = f"; call {READ_ARCHIVED} with an id to see one again" if reread else ""
    lines = ["<attachments>", f"Not inline in this request{how}:"]
    seen: set[str] = set()
    shown = 0
    hidden = 0
    for ref in entries:
        if ref.id in seen:
            continue
        seen.add(ref.id)
        if shown >= max_entries:
            hidden += 1
            continue
        dims = f" {ref.width}x{ref.height}" if ref.width and ref.height else ""
        lines.append(f"- {ref.id} {ref.media_type}{dims} {ref.size_bytes} bytes")
        shown += 1
    if hidden:
        lines.append(f"- and {hidden} more, older")
    lines.append("</attachments>")
    return "\n".join(lines)
