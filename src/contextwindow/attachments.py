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
    MAX_DURATION_SECONDS,
    MAX_PAGES,
    AttachmentRef,
    attachment_id,
    parse_attachment_ref,
)
from .errors import InvalidInput

__all__ = [
    "MAX_IMAGE_PIXELS",
    "MAX_IMAGE_SIDE",
    "check_image",
    "decode_base64",
    "make_ref",
    "normal_media_type",
    "sniff",
    "split_data_url",
]

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


MAX_IMAGE_SIDE = 65_535
"""Pixels per side an image may have: 65,535 is the JPEG and PNG-in-practice ceiling; beyond it the
header is corrupt or hostile (every provider downsizes to a few thousand pixels anyway)."""
MAX_IMAGE_PIXELS = 178_956_970
"""Width × height an image may have: Pillow's decompression-bomb error threshold (twice
``PIL.Image.MAX_IMAGE_PIXELS``, https://pillow.readthedocs.io/en/stable/reference/Image.html)."""

_PIL_FORMATS = {media: fmt for fmt, media in _PIL_MEDIA_TYPES.items()}
_PDF_MAGIC_WINDOW = 1024  # readers accept "%PDF-" within the first kilobyte (PDF 1.7, annex H.3)


def _image_header(data: bytes, media_type: str) -> tuple[str, int, int] | None:
    """``(format, width, height)`` from an image's header, or ``None`` when no reader knows it.

    Pillow's lazy open reads only the header. Past its decompression-bomb limit it refuses to open
    at all, so the header is then read by the format's own Pillow reader without that check:
    a bomb still has its dimensions, and the dimension budget, not Pillow, refuses it.
    """
    # Pillow loads with the first image sniffed, not with the library: most stores never see one.
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PILImage.DecompressionBombWarning)
            with PILImage.open(io.BytesIO(data)) as img:
                return img.format or "", img.size[0], img.size[1]
    except PILImage.DecompressionBombError:
        return _unchecked_header(data, media_type)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError):
        return None


def _unchecked_header(data: bytes, media_type: str) -> tuple[str, int, int] | None:
    from PIL import Image as PILImage
    from PIL import UnidentifiedImageError

    PILImage.init()
    named = _PIL_FORMATS.get(media_type)
    for fmt in dict.fromkeys([*([named] if named else []), *_PIL_MEDIA_TYPES]):
        factory, accept = PILImage.OPEN[fmt]
        if accept is not None and not accept(data[:16]):
            continue
        try:
            with factory(io.BytesIO(data), "") as img:
                return fmt, int(img.size[0]), int(img.size[1])
        except (UnidentifiedImageError, OSError, ValueError, SyntaxError, EOFError):
            continue
    return None


def sniff(data: bytes, media_type: str, *, verify_type: bool = False) -> dict[str, Any]:
    """What the header says: width/height for images, pages for PDFs, duration for WAV.

    Unknown or unreadable headers give nothing: pricing then uses a flat price that errs high. A
    header's dimensions are returned as they are, however large (a decompression bomb included), so
    that :func:`check_image` can refuse them by the dimension budget. With ``verify_type``, bytes
    that are not of ``media_type`` are ``InvalidInput`` (providers refuse such a mismatch, so the
    ledger refuses it at the door): an image of another known format, bytes no reader recognises as
    the image format named, or a PDF without its ``%PDF-`` header.
    """
    media_type = normal_media_type(media_type)
    if media_type.startswith("image/"):
        header = _image_header(data, media_type)
        expected = _PIL_FORMATS.get(media_type)
        if header is None:
            if verify_type and expected is not None:
                raise InvalidInput(f"bytes are not a {media_type} image", path="data")
            return {}
        fmt, width, height = header
        actual = _PIL_MEDIA_TYPES.get(fmt)
        if verify_type and expected is not None and actual != media_type:
            raise InvalidInput(
                f"bytes are {actual or fmt or 'another format'}, not {media_type}", path="media_type"
            )
        return {"width": width, "height": height} if width > 0 and height > 0 else {}
    if media_type == "application/pdf":
        if verify_type and b"%PDF-" not in data[:_PDF_MAGIC_WINDOW]:
            raise InvalidInput("bytes are not a PDF (no %PDF- header)", path="data")
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


def check_image(
    width: int | None,
    height: int | None,
    *,
    max_side: int = MAX_IMAGE_SIDE,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> None:
    """Image dimensions within the dimension budget, or ``InvalidInput`` with the figures."""
    if width is None or height is None:
        return
    if max(width, height) > max_side:
        raise InvalidInput(f"image is {width}×{height} px, over the {max_side}-px side budget", path="width")
    if width * height > max_pixels:
        raise InvalidInput(
            f"image is {width}×{height} = {width * height} px, over the {max_pixels}-px budget", path="width"
        )


_SNIFFED_EXACT = ("width", "height")
"""Figures a header states exactly: a caller's claim that contradicts them is refused."""


def _merge(found: dict[str, Any], claimed: dict[str, Any]) -> dict[str, Any]:
    for key in _SNIFFED_EXACT:
        if key in found and claimed.get(key) is not None and claimed[key] != found[key]:
            raise InvalidInput(f"is {claimed[key]!r} but the bytes' header says {found[key]}", path=key)
    return {**{k: v for k, v in claimed.items() if v is not None}, **found}


def make_ref(
    data: bytes,
    media_type: str,
    *,
    media_type_path: str = "media_type",
    max_image_side: int = MAX_IMAGE_SIDE,
    max_image_pixels: int = MAX_IMAGE_PIXELS,
    **meta: Any,
) -> AttachmentRef:
    """An ``AttachmentRef`` for these bytes: hashed, sized, sniffed; the one media rule.

    The rule, the same for the ledger's ``attach`` and the wire parsers: bytes are not empty and are
    of their media type (:func:`sniff` with ``verify_type``); dimensions come from the header and
    are within the dimension budget; ``meta`` (``width``, ``height``, ``duration_seconds``,
    ``pages``, ``token_estimate``) fills what the header does not say, and a claimed width or height
    that contradicts the header is refused. ``media_type_path`` is where the media type came from,
    so a bad one is reported at the wire field that held it
    (``messages[0].content[1].source.media_type``).
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidInput("attachment data must be bytes", path="data")
    if not isinstance(media_type, str) or not _MEDIA_TYPE.fullmatch(media_type):
        raise InvalidInput(f"not a media type: {media_type!r}", path=media_type_path)
    raw = bytes(data) if not isinstance(data, bytes) else data
    if not raw:
        raise InvalidInput("attachment data is empty", path="data")
    digest = hashlib.sha256(raw).hexdigest()
    try:
        found = sniff(raw, media_type.lower(), verify_type=True)
    except InvalidInput as err:
        raise InvalidInput(
            err.reason, path=media_type_path if err.path == "media_type" else err.path
        ) from None
    fields: dict[str, Any] = {
        "id": attachment_id(digest),
        "sha256": digest,
        "media_type": media_type.lower(),
        "size_bytes": len(raw),
    }
    fields.update(_merge(found, meta))
    width, height = fields.get("width"), fields.get("height")
    if isinstance(width, int) and isinstance(height, int) and not isinstance(width, bool):
        check_image(width, height, max_side=max_image_side, max_pixels=max_image_pixels)
    return parse_attachment_ref(fields, path="")  # the edge validator checks the figures (stamps, ...)
