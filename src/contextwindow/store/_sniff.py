"""What an attachment's bytes say about themselves: image size, WAV duration, PDF pages.

Only headers are read: Pillow's ``Image.open`` parses the header lazily and never decodes pixels, so
sniffing a 1 MB PNG costs microseconds and no pixel memory. Whatever cannot be sniffed stays
unknown (pricing then uses a flat estimate that errs high) unless the caller supplied it.
"""

from __future__ import annotations

import io
import re
import warnings
import wave
from dataclasses import dataclass

from PIL import Image as PILImage
from PIL import UnidentifiedImageError

from ..errors import InvalidInput

__all__ = ["Sniffed", "normal_media_type", "sniff"]

# Pillow format names → the media type a provider expects for them.
_PIL_MEDIA_TYPES = {
    "PNG": "image/png",
    "JPEG": "image/jpeg",
    "GIF": "image/gif",
    "WEBP": "image/webp",
    "BMP": "image/bmp",
    "TIFF": "image/tiff",
}
_ALIASES = {"image/jpg": "image/jpeg", "audio/x-wav": "audio/wav", "audio/wave": "audio/wav"}
# A PDF page object; "/Type /Pages" (the page tree) must not match. Compressed object streams hide
# page objects, in which case the count is unknown rather than wrong.
_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


@dataclass(frozen=True, slots=True)
class Sniffed:
    """Figures read from the bytes; ``None`` where the format does not say or was not recognised."""

    width: int | None = None
    height: int | None = None
    duration_seconds: float | None = None
    pages: int | None = None


def normal_media_type(media_type: str) -> str:
    """Lower-cased, parameters dropped, common aliases folded (``image/jpg`` → ``image/jpeg``)."""
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def sniff(data: bytes, media_type: str) -> Sniffed:
    """Read the figures the header gives; an image whose bytes are another format is refused."""
    if media_type.startswith("image/"):
        return _sniff_image(data, media_type)
    if media_type == "audio/wav":
        return _sniff_wav(data)
    if media_type == "application/pdf":
        pages = len(_PDF_PAGE.findall(data))
        return Sniffed(pages=pages or None)
    return Sniffed()


def _sniff_image(data: bytes, media_type: str) -> Sniffed:
    try:
        with warnings.catch_warnings():
            # Size limits are the admission budget's job; Pillow's bomb warning must not escape.
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
            with PILImage.open(io.BytesIO(data)) as image:
                fmt, (width, height) = image.format, image.size
    except (UnidentifiedImageError, PILImage.DecompressionBombError, OSError, ValueError, SyntaxError):
        return Sniffed()
    actual = _PIL_MEDIA_TYPES.get(fmt or "")
    if actual is not None and actual != media_type:
        # Providers refuse a media type that does not match the bytes; refuse it here, at the door.
        raise InvalidInput(f"bytes are {actual}, not {media_type}", path="media_type")
    if width <= 0 or height <= 0:
        return Sniffed()
    return Sniffed(width=width, height=height)


def _sniff_wav(data: bytes) -> Sniffed:
    try:
        with wave.open(io.BytesIO(data)) as wav:
            frames, rate = wav.getnframes(), wav.getframerate()
    except (wave.Error, EOFError, ValueError):
        return Sniffed()
    if rate <= 0:
        return Sniffed()
    return Sniffed(duration_seconds=frames / rate)
