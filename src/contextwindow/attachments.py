"""Attachment intake: bytes in, an :class:`~contextwindow.content.AttachmentRef` out.

Everything pricing and eviction need is decided here, once, from the bytes' header: the content hash,
the size, and — where the format says so cheaply — width and height (Pillow reads only the header),
PDF page count, WAV duration. Nothing here keeps or copies the bytes.

Base64 is decoded with ``binascii.a2b_base64``, which reads an ASCII ``str`` in place: the decoded
bytes are the only copy made.
"""

from __future__ import annotations

import binascii
import hashlib
import io
import re
import warnings
import wave
from typing import Any

from .content import (
    MAX_DIMENSION_PX,
    MAX_DURATION_SECONDS,
    MAX_PAGES,
    AttachmentRef,
    attachment_id,
    parse_attachment_ref,
)
from .errors import InvalidInput

__all__ = ["decode_base64", "make_ref", "normal_media_type", "sniff", "split_data_url"]

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

_PDF_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_WHITESPACE = re.compile(r"\s")
# A PDF page object ("/Type /Pages", the page tree, must not match). Compressed object streams hide
# page objects; the count is then unknown rather than wrong.
# RFC 6838 type/subtype, optionally with parameters (``text/plain; charset=utf-8``).
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][\w.+-]*/[A-Za-z0-9][\w.+-]*(\s*;.*)?", re.ASCII)


def decode_base64(data: str, *, path: str) -> bytes:
    """Decode base64 text; bad input is ``InvalidInput`` at ``path``, never a bare ``binascii.Error``."""
    if not isinstance(data, str):
        raise InvalidInput("base64 data must be a string", path=path)
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        pass
    if _WHITESPACE.search(data):  # wrapped base64 (MIME line breaks) is still base64
        try:
            stripped = _WHITESPACE.sub("", data)
            return binascii.a2b_base64(stripped, strict_mode=True)
        except (binascii.Error, ValueError):
            pass
    raise InvalidInput("not valid base64", path=path)


def split_data_url(url: str, *, path: str) -> tuple[str, str]:
    """``data:<media type>;base64,<data>`` → (media type, base64 text)."""
    head, sep, payload = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise InvalidInput("a data URL must look like data:<media type>;base64,<data>", path=path)
    media_type = head[5:-7] or "application/octet-stream"
    return media_type, payload


def normal_media_type(media_type: str) -> str:
    """Lower-cased, parameters dropped, common aliases folded (``image/jpg`` → ``image/jpeg``)."""
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def sniff(data: bytes, media_type: str, *, verify_type: bool = False) -> dict[str, Any]:
    """What the header says: width/height for images, pages for PDFs, duration for WAV.

    Unknown, unreadable or implausible headers give nothing (a header may claim any size): pricing
    then uses a flat price that errs high. Pillow's decompression-bomb warning is silenced here
    because nothing is decompressed; an image past its hard limit is beyond every provider's limit
    and gets no dimensions. With ``verify_type``, image bytes of another known format than
    ``media_type`` are ``InvalidInput``: providers refuse such a mismatch, so the ledger refuses it at
    the door.
    """
    media_type = normal_media_type(media_type)
    if media_type.startswith("image/"):
        # Pillow loads with the first image sniffed, not with the library: most stores never see one.
        from PIL import Image as PILImage
        from PIL import UnidentifiedImageError

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
                with PILImage.open(io.BytesIO(data)) as img:  # lazy: reads the header, not the pixels
                    fmt, (width, height) = img.format, img.size
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, PILImage.DecompressionBombError):
            return {}
        actual = _PIL_MEDIA_TYPES.get(fmt or "")
        if verify_type and actual is not None and actual != media_type:
            raise InvalidInput(f"bytes are {actual}, not {media_type}", path="media_type")
        plausible = 0 < width <= MAX_DIMENSION_PX and 0 < height <= MAX_DIMENSION_PX
        return {"width": width, "height": height} if plausible else {}
    if media_type == "application/pdf":
        pages = len(_PDF_PAGE.findall(data))
        return {"pages": pages} if 0 < pages <= MAX_PAGES else {}
    if media_type == "audio/wav":
        try:
            with wave.open(io.BytesIO(data)) as wav:
                rate = wav.getframerate()
                duration = wav.getnframes() / rate if rate else -1.0
            return {"duration_seconds": duration} if 0 <= duration <= MAX_DURATION_SECONDS else {}
        except (wave.Error, EOFError, OSError, ValueError):
            return {}
    return {}


def make_ref(
    data: bytes, media_type: str, *, media_type_path: str = "media_type", **meta: Any
) -> AttachmentRef:
    """An ``AttachmentRef`` for these bytes: hashed, sized, sniffed. ``meta`` overrides what was sniffed.

    ``media_type_path`` is where the media type came from, so a bad one is reported at the wire
    field that held it (``messages[0].content[1].source.media_type``).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInput("attachment data must be bytes", path="data")
    if not isinstance(media_type, str) or not _MEDIA_TYPE.fullmatch(media_type):
        raise InvalidInput(f"not a media type: {media_type!r}", path=media_type_path)
    digest = hashlib.sha256(data).hexdigest()
    fields: dict[str, Any] = {
        "id": attachment_id(digest),
        "sha256": digest,
        "media_type": media_type.lower(),
        "size_bytes": len(data),
    }
    fields.update(sniff(bytes(data) if isinstance(data, memoryview) else data, media_type.lower()))
    fields.update({k: v for k, v in meta.items() if v is not None})
    return parse_attachment_ref(fields)  # the edge validator checks the figures (dimensions, stamps)
