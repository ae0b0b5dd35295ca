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
engine or the provider computed. Tool use and tool result ids are counted: they are sent. A provider run at a count scale (``LocalSettings.count_scale``) is
recounted at the same scale: each string's count ``floor(scale × n + 0.5)``, framing and images not
scaled. Thinking follows Anthropic's published rule (https://platform.claude.com/docs/en/build-with-claude/context-windows):
a signed block costs at least one token per 4 signature characters, and on the models that strip
earlier turns' thinking (Opus before 4.5, Sonnet before 4.6, Haiku through 4.5) the thinking of
assistant messages before the current turn (from the last run of user messages that answers no tool
call) is not counted.
"""

from __future__ import annotations

import base64
import json
import math
import re
import struct
from functools import lru_cache
from typing import Any

import tiktoken

__all__ = ["image_size", "recount"]

_PER_MESSAGE = 3
_PRIMING = 3
_ENC = tiktoken.get_encoding("o200k_base")


@lru_cache(maxsize=65_536)
def _encoded(text: str) -> int:
    return len(_ENC.encode(text, disallowed_special=()))


def _tokens(text: str, scale: float) -> int:
    n = _encoded(text)
    return n if scale == 1.0 else math.floor(scale * n + 0.5)


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


def _block(block: dict[str, Any], scale: float) -> int:
    kind = block.get("type")
    if kind == "text":
        return _tokens(block["text"], scale)
    if kind == "thinking":
        signature = block.get("signature") or ""
        return max(_tokens(block.get("thinking", ""), scale), math.ceil(len(signature) / 4))
    if kind == "redacted_thinking":
        return _tokens(block.get("data", ""), scale)
    if kind == "tool_use":
        return (
            _tokens(block.get("id", ""), scale)
            + _tokens(block["name"], scale)
            + _tokens(_compact(block.get("input", {})), scale)
        )
    if kind == "tool_result":
        content = block.get("content", "")
        ident = _tokens(block.get("tool_use_id", ""), scale)
        if isinstance(content, str):
            return ident + _tokens(content, scale)
        return ident + sum(_block(b, scale) for b in content)
    if kind == "image":
        source = block.get("source", {})
        return _image_tokens(source["data"]) if source.get("type") == "base64" else 1_600
    if kind == "document":
        source = block.get("source", {})
        if source.get("type") == "text":
            return _tokens(source.get("data", ""), scale)
        return 3_000  # Anthropic: "1,500 to 3,000 tokens per page"; one page, the top end
    return _tokens(_compact(block), scale)


def recount(body: dict[str, Any], scale: float = 1.0) -> int:
    """Input tokens of an Anthropic Messages request body, counted afresh (see the module docstring)."""
    messages = body.get("messages", [])
    total = _PRIMING + _PER_MESSAGE * len(messages)
    system = body.get("system")
    if system:
        total += _PER_MESSAGE
        total += (
            _tokens(system, scale)
            if isinstance(system, str)
            else sum(_tokens(b["text"], scale) for b in system)
        )
    for tool in body.get("tools", []):
        total += (
            _tokens(tool["name"], scale)
            + _tokens(tool.get("description", ""), scale)
            + _tokens(_compact(tool.get("input_schema", {})), scale)
        )
    turn = _turn_start(messages) if _strips_thinking(str(body.get("model", ""))) else 0
    for index, message in enumerate(messages):
        content = message["content"]
        if isinstance(content, str):
            total += _tokens(content, scale)
            continue
        for b in content:
            if index < turn and b.get("type") in ("thinking", "redacted_thinking"):
                continue
            total += _block(b, scale)
    return total


def _strips_thinking(model: str) -> bool:
    if model.startswith("claude-3"):
        return True
    found = re.search(r"claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?![0-9])", model)
    if found is None:
        return False
    version = (int(found.group(2)), int(found.group(3) or 0))
    first_keeping = {"opus": (4, 5), "sonnet": (4, 6), "haiku": (4, 6)}[found.group(1)]
    return version < first_keeping


def _turn_start(messages: list[dict[str, Any]]) -> int:
    """The start of the last run of user messages holding no tool result (the current turn)."""
    last, index = 0, 0
    while index < len(messages):
        if messages[index]["role"] != "user":
            index += 1
            continue
        end = index
        while end < len(messages) and messages[end]["role"] == "user":
            end += 1
        if not any(
            not isinstance(m["content"], str) and any(b.get("type") == "tool_result" for b in m["content"])
            for m in messages[index:end]
        ):
            last = index
        index = end
    return last
