"""Deterministic synthetic media: screenshots, photos, PDFs and WAV audio made from a seed.

Scenarios and the demo need media of a known size without shipping binary files. Every function here
returns the same bytes for the same arguments (same Pillow and zlib build), so an attachment's hash —
and therefore its id — is stable from run to run. The images are built to compress like the real
thing: a screenshot is mostly flat UI with text and one noisy preview pane (tens of KB as PNG); a
photo is gradients, shapes and sensor-like noise (JPEG, ~100 KB at 1280×800).

Randomness comes from ``random.Random(seed)`` only; Pillow's own noise effects are not seeded and are
never used.
"""

from __future__ import annotations

import io
import math
import random
import struct
import wave
from typing import Literal

from PIL import Image, ImageDraw, ImageFont

from ..errors import InvalidInput

__all__ = ["MAX_SIDE_PX", "pdf", "photo", "screenshot", "wav"]

MAX_SIDE_PX = 8192
"""Largest side a synthetic image may have: beyond it the bytes get large and no provider keeps them."""

ImageFormat = Literal["png", "jpeg"]

_CODE_WORDS = (
    "def",
    "return",
    "self",
    "import",
    "class",
    "if",
    "for",
    "in",
    "None",
    "value",
    "context",
    "window",
    "tokens",
    "budget",
    "await",
    "yield",
)


def _check_size(width: int, height: int) -> None:
    for name, value in (("width", width), ("height", height)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SIDE_PX:
            raise InvalidInput(f"must be an integer between 1 and {MAX_SIDE_PX} pixels", path=name)


def _encode(image: Image.Image, fmt: ImageFormat) -> bytes:
    out = io.BytesIO()
    if fmt == "png":
        image.save(out, format="PNG", optimize=False, compress_level=1)  # fast; size is still realistic
    else:
        image.save(out, format="JPEG", quality=85, optimize=False, progressive=False)
    return out.getvalue()


def _noise(rng: random.Random, width: int, height: int) -> Image.Image:
    return Image.frombytes("L", (width, height), rng.randbytes(width * height))


def screenshot(
    width: int = 1280, height: int = 800, *, seed: int = 0, caption: str = "", fmt: ImageFormat = "png"
) -> bytes:
    """A desktop-app screenshot: title bar, file sidebar, code lines, a terminal and a noisy preview."""
    _check_size(width, height)
    rng = random.Random(seed)
    dark = rng.random() < 0.5
    bg = (30, 31, 36) if dark else (250, 250, 248)
    fg = (212, 212, 212) if dark else (40, 40, 40)
    image = Image.new("RGB", (width, height), bg)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    bar = max(1, height // 25)
    draw.rectangle((0, 0, width, bar), fill=(60, 63, 70) if dark else (222, 222, 226))
    draw.text((8, bar // 4), caption or f"screenshot {seed}", fill=fg, font=font)
    side = width // 6
    draw.rectangle((0, bar, side, height), fill=(37, 38, 44) if dark else (238, 238, 236))
    for i, y in enumerate(range(bar + 10, height - 10, 18)):
        draw.text((12, y), f"{'  ' * (i % 3)}module_{rng.randrange(1000):03d}.py", fill=fg, font=font)
    term_top = height * 2 // 3
    line_h = 14
    for y in range(bar + 8, term_top - line_h, line_h):
        x = side + 16 + 16 * rng.randrange(4)
        while x < width * 3 // 4:
            word = rng.choice(_CODE_WORDS)
            colour = (rng.randrange(90, 256), rng.randrange(90, 256), rng.randrange(90, 256))
            draw.text((x, y), word, fill=colour if dark else tuple(c // 2 for c in colour), font=font)
            x += 7 * len(word) + 7
            if rng.random() < 0.15:
                break
    draw.rectangle((side, term_top, width, height), fill=(12, 12, 14) if dark else (30, 30, 30))
    for y in range(term_top + 6, height - line_h, line_h):
        text = f"$ pytest -q  {rng.randrange(10**6):06d} passed in {rng.random() * 9:.2f}s"
        draw.text((side + 8, y), text, fill=(120, 220, 120), font=font)
    px, py = width * 3 // 4 + 8, bar + 8
    pw, ph = width - px - 8, term_top - py - 8
    if pw > 0 and ph > 0:
        # A coarse noisy "image preview": keeps the PNG from compressing to nothing, as real ones don't.
        cw, ch = max(1, pw // 6), max(1, ph // 6)
        preview = Image.merge("RGB", [_noise(rng, cw, ch) for _ in range(3)])
        image.paste(preview.resize((pw, ph), Image.Resampling.NEAREST), (px, py))
    return _encode(image, fmt)


def photo(
    width: int = 1280, height: int = 800, *, seed: int = 0, caption: str = "", fmt: ImageFormat = "jpeg"
) -> bytes:
    """A photo-like image: a sky/ground gradient, a few shapes, sensor noise."""
    _check_size(width, height)
    rng = random.Random(seed)
    top = tuple(rng.randrange(60, 200) for _ in range(3))
    bottom = tuple(rng.randrange(20, 140) for _ in range(3))
    gradient = Image.linear_gradient("L").resize((width, height))
    image = Image.composite(
        Image.new("RGB", (width, height), bottom), Image.new("RGB", (width, height), top), gradient
    )
    draw = ImageDraw.Draw(image)
    for _ in range(12):
        x, y = rng.randrange(width), rng.randrange(height)
        r = rng.randrange(max(2, min(width, height) // 20), max(3, min(width, height) // 4))
        colour = tuple(rng.randrange(256) for _ in range(3))
        draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
    if caption:
        draw.text((10, height - 20), caption, fill=(255, 255, 255), font=ImageFont.load_default())
    grain = Image.merge("RGB", [_noise(rng, width, height) for _ in range(3)])
    return _encode(Image.blend(image, grain, 0.12), fmt)


def pdf(pages: int = 1, *, seed: int = 0, title: str = "Document") -> bytes:
    """A valid PDF 1.4 with ``pages`` pages of Helvetica text (a few numbered paragraphs each)."""
    if isinstance(pages, bool) or not isinstance(pages, int) or not 1 <= pages <= 2000:
        raise InvalidInput("must be an integer between 1 and 2000", path="pages")
    rng = random.Random(seed)
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]  # pages tree filled in below
    font_obj = 3
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    kids = []
    for page in range(pages):
        lines = [f"{title} - page {page + 1} of {pages}"]
        for _ in range(30):
            lines.append(" ".join(rng.choice(_CODE_WORDS) for _ in range(12)))
        ops = ["BT", "/F1 11 Tf", "14 TL", "56 780 Td"]
        ops += [f"({line}) Tj T*" for line in lines]
        ops.append("ET")
        stream = "\n".join(ops).encode("ascii")
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content_obj = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content_obj, font_obj)
        )
        kids.append(len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        pages,
    )
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def wav(seconds: float = 1.0, *, seed: int = 0, rate: int = 8000) -> bytes:
    """Mono 16-bit PCM: a tone whose pitch depends on the seed, with a little seeded hiss."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds <= 600:
        raise InvalidInput("must be a number of seconds in (0, 600]", path="seconds")
    rng = random.Random(seed)
    frequency = 220.0 + 20.0 * rng.randrange(20)
    frames = round(seconds * rate)
    samples = bytearray()
    for i in range(frames):
        value = 0.4 * math.sin(2 * math.pi * frequency * i / rate) + 0.02 * (rng.random() - 0.5)
        samples += struct.pack("<h", int(value * 32767))
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(bytes(samples))
    return out.getvalue()
