"""How the local provider counts a request: a real tokenizer, published media rules, fixed framing.

The count of a canonical request (the same whichever wire format carried it), as documented here so
that a test can recompute it independently:

- ``REPLY_PRIMING`` (3) once, plus ``MESSAGE_OVERHEAD`` (3) per message and once for a non-empty
  system prompt: OpenAI's cookbook chat framing ("3 tokens per message, +3 to prime the reply",
  https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb),
  used for every model;
- text, redacted-thinking data: the tokenizer's count of the string;
- a tool result: its ``tool_use_id`` plus its string, or plus its blocks counted by these rules (the
  id is sent, and the real APIs count it);
- a thinking block: the tokenizer's count of its text, or, when it is signed, at least
  ``ceil(len(signature) / SIGNATURE_CHARS_PER_TOKEN)``: the API counts the thinking the signature
  carries, not the summary it shows (figures: ``docs/concepts.md``, "Local provider");
- thinking from earlier turns is stripped, as the Anthropic API does
  (https://platform.claude.com/docs/en/build-with-claude/context-windows): on models that do not
  keep it (:func:`contextwindow.pricing.keeps_prior_thinking`, the published list), thinking and redacted-thinking blocks of assistant messages
  before the current turn count 0. The current turn starts after the last user message that holds
  anything besides tool results: the thinking of a tool-use loop in progress counts;
- a tool use: ``id`` plus ``name`` plus its input as compact JSON (``separators=(",", ":")``, not
  ASCII-escaped);
- each tool definition: ``name`` plus ``description`` plus its schema as compact JSON;
- an image: the model's published image rule from its width and height
  (:func:`contextwindow.pricing.image_tokens`), or the rule's upper bound when they are unknown;
- a text document: its text; any other document ``PDF_PAGE_TOKENS`` per page (one page when the page
  count is unknown); audio ``AUDIO_TOKENS_PER_SECOND`` per second; video ``VIDEO_TOKENS_PER_SECOND``
  per second (one minute when the duration is unknown).

The tokenizer is tiktoken's ``cl100k_base`` for cl100k-family models and ``o200k_base`` for every
other model (Claude's and Gemini's are not public, so ``o200k_base`` stands in for them). When tiktoken
or its files are missing, ``ceil(chars / 4)`` stands in and :attr:`Tokenizer.name` says so.

A **count scale** makes the stand-in count in the units of the tokenizer it stands in for: each
string's count is ``floor(scale × n + 0.5)``, ``n`` the tokenizer's count of the string (framing and
media are not scaled: they follow their own published rules). The scale is measured, never derived
from contextwindow's pricing rules: a replay of a real session takes it from that session's recorded
usage (what the provider counted for the content appended between two calls, over the tokenizer's
count of that content), so that the engine's estimate is tested against the provider's units and not
copied from them. The default, 1, is the tokenizer's own count.

Counts of long strings are memoised (an agent loop resends the same prefix on every call). The memo
is keyed by a digest of the text, never the text itself, and bounded in bytes (``MEMO_BYTES``), so
a client sending many distinct large texts cannot make it grow.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import threading
from collections import OrderedDict
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
from ..errors import InvalidInput
from ..formats import AttachmentLoader
from ..models import ModelProfile
from ..pricing import image_tokens, image_upper_bound, thinking_stripped_before
from ..pricing.tokenizers import load_encoding

__all__ = [
    "AUDIO_TOKENS_PER_SECOND",
    "MEMO_BYTES",
    "MESSAGE_OVERHEAD",
    "PDF_PAGE_TOKENS",
    "PIECE_CHARS",
    "REPLY_PRIMING",
    "SIGNATURE_CHARS_PER_TOKEN",
    "VIDEO_TOKENS_PER_SECOND",
    "CountMemo",
    "RequestCount",
    "Tokenizer",
    "block_tokens",
    "check_scale",
    "compact_json",
    "count_in_pieces",
    "count_request",
    "tokenizer_for",
    "tool_tokens",
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
SIGNATURE_CHARS_PER_TOKEN = 4
"""Signature characters per token a signed thinking block costs at least (see the module docstring)."""
_MEMO_MIN_CHARS = 256  # shorter strings are counted afresh: the memo lookup would cost as much
MEMO_BYTES = 4 * 1024 * 1024
"""What the count memo of each tokenizer may hold, in bytes (about 20,000 texts)."""


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """A named token counter: ``count(text) -> int``."""

    name: str
    count: Callable[[str], int]


def compact_json(value: Any) -> str:
    """The JSON text tool inputs and schemas are counted as."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class CountMemo:
    """Token counts by a 16-byte digest of their text, least recently used first out, within
    ``max_bytes``. Every entry costs the same (a digest, a count, the map's node), measured once, so
    the bound holds whatever the texts' sizes. Thread-safe."""

    def __init__(self, count: Callable[[str], int], max_bytes: int = MEMO_BYTES) -> None:
        self._count = count
        self._entries: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()
        self.max_bytes = max_bytes
        self.entry_bytes = _entry_bytes()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """What the entries hold now, in bytes."""
        return len(self._entries) * self.entry_bytes

    def __call__(self, text: str) -> int:
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        counted = self._count(text)
        with self._lock:
            self._entries[key] = counted
            while len(self._entries) * self.entry_bytes > self.max_bytes:
                self._entries.popitem(last=False)
        return counted


def _entry_bytes() -> int:
    # a 16-byte key, an int above the small-int cache, and an OrderedDict slot with its link node
    # (the node and the two table slots take about 100 bytes on CPython 3.11).
    return sys.getsizeof(b"\0" * 16) + sys.getsizeof(10**6) + 104


PIECE_CHARS = 64 * 1024
"""Long texts are encoded this many characters at a time (about), so counting a megabyte never holds
its whole token list (a Python int per token, some 9 MB per megabyte of text) at once."""


def _cut_at(text: str, at: int) -> int | None:
    """The first position from ``at`` where a space follows a letter, digit or ASCII symbol.

    In tiktoken's ``cl100k_base`` and ``o200k_base`` split patterns no piece runs from such a
    character into the space after it (the letter, number and punctuation pieces never hold a space
    past their optional leading one), so the text splits there into pieces encoded independently:
    the counts of the two sides add up to the count of the whole.
    """
    i = text.find(" ", max(at, 1))
    while i != -1:
        before = text[i - 1]
        if before.isalnum() or "!" <= before <= "~":
            return i
        i = text.find(" ", i + 1)
    return None


def count_in_pieces(encode: Callable[[str], list[int]], text: str, piece: int = PIECE_CHARS) -> int:
    """``len(encode(text))``, encoding ``text`` in pieces of about ``piece`` characters (see
    :func:`_cut_at`); a text with no place to cut is encoded whole."""
    total, start = 0, 0
    while len(text) - start > piece:
        cut = _cut_at(text, start + piece)
        if cut is None:
            break
        total += len(encode(text[start:cut]))
        start = cut
    return total + len(encode(text[start:] if start else text))


@lru_cache(maxsize=8)
def _tiktoken(encoding: str) -> Tokenizer | None:
    enc = load_encoding(encoding)
    if enc is None:  # tiktoken missing, or its BPE file not cached offline: fall back, and say so
        return None
    encode = enc.encode_ordinary
    memo = CountMemo(lambda text: count_in_pieces(encode, text))

    def count(text: str) -> int:
        return memo(text) if len(text) >= _MEMO_MIN_CHARS else len(encode(text))

    return Tokenizer(name=f"tiktoken:{encoding}", count=count)


_APPROX = Tokenizer(name="approx:ceil(chars/4)", count=lambda text: math.ceil(len(text) / 4))


def check_scale(scale: float) -> float:
    """``scale`` when it is a finite number > 0 (a count scale, see the module docstring)."""
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not math.isfinite(scale)
        or scale <= 0
    ):
        raise InvalidInput(f"must be a finite number > 0, got {scale!r}", path="count_scale")
    return float(scale)


@lru_cache(maxsize=64)
def _scaled(base: Tokenizer, scale: float) -> Tokenizer:
    count = base.count
    return Tokenizer(name=f"{base.name}×{scale:g}", count=lambda text: math.floor(scale * count(text) + 0.5))


def tokenizer_for(profile: ModelProfile, scale: float = 1.0) -> Tokenizer:
    """The tokenizer the local provider counts ``profile``'s requests with, at count ``scale`` (see
    the module docstring)."""
    encoding = "cl100k_base" if profile.tokenizer == "cl100k" else "o200k_base"
    base = _tiktoken(encoding) or _APPROX
    return base if check_scale(scale) == 1.0 else _scaled(base, scale)


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestCount:
    """A request's input tokens, by part, and the tokenizer that counted them."""

    input_tokens: int
    tokenizer: str
    parts: Mapping[str, int]
    """``framing``, ``system``, ``tools``, ``text``, ``tool_use``, ``tool_result``, ``thinking``,
    ``image``, ``document``, ``audio``, ``video``: every token is in exactly one part."""


def count_request(
    request: Request, profile: ModelProfile, load: AttachmentLoader | None = None, *, scale: float = 1.0
) -> RequestCount:
    """The local provider's count of ``request`` for ``profile`` at count ``scale`` (rules in the
    module docstring).

    ``load`` is needed only for text documents (their text is counted); without it they are priced
    as one page.
    """
    tok = tokenizer_for(profile, scale)
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
    parts["tools"] = sum(tool_tokens(t, tok) for t in request.tools)
    stripped = thinking_stripped_before(request.messages, profile.name)
    for index, message in enumerate(request.messages):
        for block in message.content:
            if index < stripped and isinstance(block, Thinking | RedactedThinking):
                continue  # an earlier turn's thinking: the API strips it
            part, tokens = block_tokens(block, profile, tok, load)
            parts[part] += tokens
    return RequestCount(input_tokens=sum(parts.values()), tokenizer=tok.name, parts=parts)


def tool_tokens(tool: ToolSpec, tok: Tokenizer) -> int:
    """One tool definition's tokens: name, description and schema as compact JSON."""
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
            carried = math.ceil(len(block.signature) / SIGNATURE_CHARS_PER_TOKEN) if block.signature else 0
            return "thinking", max(tok.count(block.thinking), carried)
        case RedactedThinking():
            return "thinking", tok.count(block.data)
        case ToolUse():
            return "tool_use", (
                tok.count(block.id) + tok.count(block.name) + tok.count(compact_json(dict(block.input)))
            )
        case ToolResult():
            if isinstance(block.content, str):
                return "tool_result", tok.count(block.tool_use_id) + tok.count(block.content)
            return "tool_result", tok.count(block.tool_use_id) + sum(
                block_tokens(b, profile, tok, load)[1] for b in block.content
            )
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
