"""How the local provider counts a request: a real tokenizer, published media rules, fixed framing.

The count of a canonical request (the same whichever wire format carried it), as documented here so
that a test can recompute it independently:

- ``REPLY_PRIMING`` (3) once, plus ``MESSAGE_OVERHEAD`` (3) per message and once for a non-empty
  system prompt: OpenAI's cookbook chat framing ("3 tokens per message, +3 to prime the reply",
  https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb),
  used for every model;
- text, thinking, redacted-thinking data, a tool result's string: the tokenizer's count of the string;
- a tool use: ``name`` plus its input as compact JSON (``separators=(",", ":")``, not ASCII-escaped);
- each tool definition: ``name`` plus ``description`` plus its schema as compact JSON;
- an image: the model's published image rule from its width and height
  (:func:`contextwindow.pricing.image_tokens`), or the rule's upper bound when they are unknown;
- a text document: its text; any other document ``PDF_PAGE_TOKENS`` per page (one page when the page
  count is unknown); audio ``AUDIO_TOKENS_PER_SECOND`` per second; video ``VIDEO_TOKENS_PER_SECOND``
  per second (one minute when the duration is unknown).

The tokenizer is tiktoken's ``cl100k_base`` for cl100k-family models and ``o200k_base`` for every
other model (Claude's and Gemini's are not public, so ``o200k_base`` stands in for them). When tiktoken
or its files are missing, ``ceil(chars / 4)`` stands in and :attr:`Tokenizer.name` says so.

Counts of long strings are memoised (an agent loop resends the same prefix on every call).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, assert_never

from ..content import (
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    RedactedThinking,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolSpec,
    ToolUse,
    Video,
)
from ..formats import AttachmentLoader
from ..models import ModelProfile
from ..pricing import image_tokens, image_upper_bound
from ..pricing.tokenizers import load_encoding

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "MESSAGE_OVERHEAD",
    "PDF_PAGE_TOKENS",
    "REPLY_PRIMING",
    "VIDEO_TOKENS_PER_SECOND",
    "RequestCount",
    "Tokenizer",
    "block_tokens",
    "compact_json",
    "count_request",
    "tokenizer_for",
]

MESSAGE_OVERHEAD = 3  # OpenAI cookbook chat framing: 3 tokens per message (see the module docstring)
"""Tokens of chat framing per message (OpenAI cookbook)."""
REPLY_PRIMING = 3  # ... and 3 to prime the reply
"""Tokens that prime the reply, once per request (OpenAI cookbook)."""
# Anthropic: "1,500 to 3,000 tokens per page" (https://docs.claude.com/en/docs/build-with-claude/pdf-support);
# the top end.
PDF_PAGE_TOKENS = 3_000
AUDIO_TOKENS_PER_SECOND = 32  # Gemini: "each second of audio as 32 tokens" (its audio page)
# Gemini: "approximately 300 tokens per second of video" (its video-understanding page; both at
# https://ai.google.dev/gemini-api/docs/tokens and the pages it links).
VIDEO_TOKENS_PER_SECOND = 300
UNKNOWN_DURATION_SECONDS = 60.0
_MEMO_MIN_CHARS = 256  # shorter strings are counted afresh: the memo lookup would cost as much


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """A named token counter: ``count(text) -> int``."""

    name: str
    count: Callable[[str], int]


def compact_json(value: Any) -> str:
    """The JSON text tool inputs and schemas are counted as."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@lru_cache(maxsize=8)
def _tiktoken(encoding: str) -> Tokenizer | None:
    enc = load_encoding(encoding)
    if enc is None:  # tiktoken missing, or its BPE file not cached offline: fall back, and say so
        return None
    encode = enc.encode_ordinary

    @lru_cache(maxsize=4096)
    def memo(text: str) -> int:
        return len(encode(text))

    def count(text: str) -> int:
        return memo(text) if len(text) >= _MEMO_MIN_CHARS else len(encode(text))

    return Tokenizer(name=f"tiktoken:{encoding}", count=count)


_APPROX = Tokenizer(name="approx:ceil(chars/4)", count=lambda text: math.ceil(len(text) / 4))


def tokenizer_for(profile: ModelProfile) -> Tokenizer:
    """The tokenizer the local provider counts ``profile``'s requests with (see the module docstring)."""
    encoding = "cl100k_base" if profile.tokenizer == "cl100k" else "o200k_base"
    return _tiktoken(encoding) or _APPROX


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestCount:
    """A request's input tokens, by part, and the tokenizer that counted them."""

    input_tokens: int
    tokenizer: str
    parts: Mapping[str, int]
    """``framing``, ``system``, ``tools``, ``text``, ``tool_use``, ``tool_result``, ``thinking``,
    ``image``, ``document``, ``audio``, ``video``: every token is in exactly one part."""


def count_request(
    request: Request, profile: ModelProfile, load: AttachmentLoader | None = None
) -> RequestCount:
    """The local provider's count of ``request`` for ``profile`` (rules in the module docstring).

    ``load`` is needed only for text documents (their text is counted); without it they are priced
    as one page.
    """
    tok = tokenizer_for(profile)
    parts: dict[str, int] = dict.fromkeys(
        (
            "framing",
            "system",
            "tools",
            "text",
            "tool_use",
            "tool_result",
            "thinking",
            "image",
            "document",
            "audio",
            "video",
        ),
        0,
    )
    parts["framing"] = REPLY_PRIMING + MESSAGE_OVERHEAD * len(request.messages)
    if request.system:
        parts["framing"] += MESSAGE_OVERHEAD
        parts["system"] = sum(tok.count(t.text) for t in request.system)
    parts["tools"] = sum(_tool(t, tok) for t in request.tools)
    for message in request.messages:
        for block in message.content:
            part, tokens = block_tokens(block, profile, tok, load)
            parts[part] += tokens
    return RequestCount(input_tokens=sum(parts.values()), tokenizer=tok.name, parts=parts)


def _tool(tool: ToolSpec, tok: Tokenizer) -> int:
    return (
        tok.count(tool.name) + tok.count(tool.description) + tok.count(compact_json(dict(tool.input_schema)))
    )


def block_tokens(
    block: Block, profile: ModelProfile, tok: Tokenizer, load: AttachmentLoader | None = None
) -> tuple[str, int]:
    """One block's part name and tokens."""
    match block:
        case Text():
            return "text", tok.count(block.text)
        case Thinking():
            return "thinking", tok.count(block.thinking)
        case RedactedThinking():
            return "thinking", tok.count(block.data)
        case ToolUse():
            return "tool_use", tok.count(block.name) + tok.count(compact_json(dict(block.input)))
        case ToolResult():
            if isinstance(block.content, str):
                return "tool_result", tok.count(block.content)
            return "tool_result", sum(block_tokens(b, profile, tok, load)[1] for b in block.content)
        case Image() | GeneratedImage():
            detail = block.detail if isinstance(block, Image) else None
            ref = block.ref
            if ref is not None and ref.width and ref.height:
                return "image", image_tokens(profile.image_rule, ref.width, ref.height, detail)
            return "image", image_upper_bound(profile.image_rule, detail)
        case Document():
            ref = block.ref
            if ref is not None and ref.media_type.startswith("text/") and load is not None:
                return "document", tok.count(load(ref).decode("utf-8", errors="replace"))
            pages = ref.pages if ref is not None and ref.pages else 1
            return "document", PDF_PAGE_TOKENS * pages
        case Audio():
            seconds = block.ref.duration_seconds
            return "audio", math.ceil(
                AUDIO_TOKENS_PER_SECOND * (UNKNOWN_DURATION_SECONDS if seconds is None else seconds)
            )
        case Video():
            seconds = block.ref.duration_seconds
            return "video", math.ceil(
                VIDEO_TOKENS_PER_SECOND * (UNKNOWN_DURATION_SECONDS if seconds is None else seconds)
            )
        case _:
            assert_never(block)
