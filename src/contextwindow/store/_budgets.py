"""Admission budgets: what the ledger lets in, checked before anything is written.

Over a budget is :class:`~contextwindow.errors.InvalidInput` with the figures (what came, what the
budget allows), and the store is left exactly as it was. Pass ``budgets=Budgets(...)`` to
:func:`~contextwindow.store.open_store` to change them; ``allowed_media_types=None`` admits any
well-formed ``type/subtype``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..attachments import MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE
from ..content import AttachmentRef
from ..errors import InvalidInput
from ..limits import MAX_BYTES, shown

__all__ = ["DEFAULT_MEDIA_TYPES", "Budgets"]

MiB = 1024 * 1024

DEFAULT_MEDIA_TYPES = frozenset(
    {
        # Images every provider takes (the Anthropic, OpenAI and Gemini vision pages list these).
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        # Documents (Anthropic/OpenAI PDF input; plain-text documents).
        "application/pdf",
        "text/plain",
        "text/markdown",
        "text/csv",
        "text/html",
        "application/json",
        # Audio and video (OpenAI audio input; Gemini audio and video).
        "audio/wav",
        "audio/mpeg",
        "audio/mp3",
        "audio/ogg",
        "audio/flac",
        "audio/webm",
        "audio/aac",
        "video/mp4",
        "video/webm",
        "video/quicktime",
        "video/mpeg",
    }
)
"""The media types a store admits unless its :class:`Budgets` say otherwise."""

_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Budgets:
    """Configurable admission limits; the defaults cite where they come from."""

    max_attachment_bytes: int = 50 * MiB
    """Per attachment. 50 MB is the largest single file a provider documents (OpenAI files, Gemini PDF)."""
    max_message_attachment_bytes: int = 100 * MiB
    """Sum of the distinct attachments one message references."""
    allowed_media_types: frozenset[str] | None = DEFAULT_MEDIA_TYPES
    """``None`` admits any well-formed media type."""
    max_image_side: int = MAX_IMAGE_SIDE
    """Pixels per side; 65,535 is the JPEG and PNG-in-practice ceiling, beyond it the header is corrupt."""
    max_image_pixels: int = MAX_IMAGE_PIXELS
    """Width × height; Pillow's decompression-bomb error threshold (2 × ``Image.MAX_IMAGE_PIXELS``).
    A header past it is refused by its dimensions, even though Pillow would not open it."""

    def __post_init__(self) -> None:
        for name in (
            "max_attachment_bytes",
            "max_message_attachment_bytes",
            "max_image_side",
            "max_image_pixels",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_BYTES:
                raise InvalidInput(
                    f"must be an integer between 0 and {MAX_BYTES}, got {shown(value)}",
                    path=f"budgets.{name}",
                )

    def check_media_type(self, media_type: str) -> None:
        """A well-formed media type on the allowed list."""
        if not _MEDIA_TYPE.match(media_type):
            raise InvalidInput(f"{media_type!r} is not a media type (type/subtype)", path="media_type")
        if self.allowed_media_types is not None and media_type not in self.allowed_media_types:
            raise InvalidInput(
                f"{media_type} is not an allowed media type; allowed: {', '.join(sorted(self.allowed_media_types))}",
                path="media_type",
            )

    def check_size(self, size: int) -> None:
        """One attachment's bytes within the per-attachment cap."""
        if size > self.max_attachment_bytes:
            raise InvalidInput(
                f"attachment is {size} bytes, over the per-attachment budget of {self.max_attachment_bytes}",
                path="data",
            )

    def check_message(self, refs: Sequence[AttachmentRef]) -> None:
        """The distinct attachments of one message within the per-message total."""
        total = sum({ref.id: ref.size_bytes for ref in refs}.values())
        if total > self.max_message_attachment_bytes:
            raise InvalidInput(
                f"message attachments total {total} bytes, over the per-message budget of "
                f"{self.max_message_attachment_bytes}",
                path="message.content",
            )
