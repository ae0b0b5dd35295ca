"""An independent recount of a request as sent: tiktoken on the wire JSON, not the project's arithmetic.

The local provider counts a request with ``o200k_base`` and a fixed framing (documented in
``contextwindow.testing.counting``). This module counts the *rendered* Anthropic Messages body a
recording wrote (``contextwindow simulate --record``), with tiktoken called directly and the framing
re-derived from the public rule it follows (OpenAI's cookbook: 3 tokens per message and 3 to prime the
reply, https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb).
Images are read from their own bytes (PNG, GIF, JPEG, WebP headers) and priced by Anthropic's published
rule: resized to fit within 1,568 px on the long edge and about 1.15 megapixels, then
``width × height / 750`` tokens (https://docs.anthropic.com/en/docs/build-with-claude/vision).
A benchmark that says "no request went over the window" checks it with this, not with the numbers the
engine or the provider computed.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from functools import lru_cache
from typing import Any

import tiktoken

__all__ = ["image_size", "recount"]

_PER_MESSAGE = 3
_PRIMING = 3
_ENC = tiktoken.get_encoding("o200k_base")


@lru_cache(maxsize=65_536)
def _tokens(text: str) -> int:
    return len(_ENC.encode(text, disallowed_special=()))


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height from an image's header, or ``None`` for a format not read here."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return int(width), int(height)
    if data[:6] in (b"GIF87a", b"GIF89a"):
        width, height = struct.unpack("<HH", data[6:10])
        return int(width), int(height)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        chunk = data[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if chunk == b"VP8 ":
            width, height = struct.unpack("<HH", data[26:30])
            return int(width) & 0x3FFF, int(height) & 0x3FFF
        if chunk == b"VP8L":
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = int.from_bytes(data[i + 2 : i + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return int(width), int(height)
            i += 2 + length
    return None


@lru_cache(maxsize=4_096)
def _image_tokens(data: str) -> int:
    size = image_size(base64.b64decode(data))
    if size is None:
        return 1_600  # the rule's ceiling: about 1.15 megapixels / 750
    width, height = size
    scale = min(1.0, 1_568 / max(width, height), math.sqrt(1_150_000 / max(1, width * height)))
    return math.ceil(max(1, round(width * scale)) * max(1, round(height * scale)) / 750)


def _block(block: dict[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return _tokens(block["text"])
    if kind == "thinking":
        return _tokens(block.get("thinking", ""))
    if kind == "redacted_thinking":
        return _tokens(block.get("data", ""))
    if kind == "tool_use":
        return _tokens(block["name"]) + _tokens(_compact(block.get("input", {})))
    if kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, str):
            return _tokens(content)
        return sum(_block(b) for b in content)
    if kind == "image":
        source = block.get("source", {})
        return _image_tokens(source["data"]) if source.get("type") == "base64" else 1_600
    if kind == "document":
        source = block.get("source", {})
        if source.get("type") == "text":
            return _tokens(source.get("data", ""))
        return 3_000  # Anthropic: "1,500 to 3,000 tokens per page"; one page, the top end
    return _tokens(_compact(block))


def recount(body: dict[str, Any]) -> int:
    """Input tokens of an Anthropic Messages request body, counted afresh (see the module docstring)."""
    messages = body.get("messages", [])
    total = _PRIMING + _PER_MESSAGE * len(messages)
    system = body.get("system")
    if system:
        total += _PER_MESSAGE
        total += _tokens(system) if isinstance(system, str) else sum(_tokens(b["text"]) for b in system)
    for tool in body.get("tools", []):
        total += (
            _tokens(tool["name"])
            + _tokens(tool.get("description", ""))
            + _tokens(_compact(tool.get("input_schema", {})))
        )
    for message in messages:
        content = message["content"]
        total += _tokens(content) if isinstance(content, str) else sum(_block(b) for b in content)
    return total
