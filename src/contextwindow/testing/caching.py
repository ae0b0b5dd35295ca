"""The local provider's prompt cache, as Anthropic and OpenAI document theirs.

A request is read as a sequence of **blocks** in the order the providers build their prompt: each
tool definition, each system block, then each message's content blocks. A block's tokens are its
count by :mod:`.counting` (a message's framing goes with its first block, the system's with the first
system block; the reply priming, ``REPLY_PRIMING``, comes last and is never cached), so the tokens of
all blocks plus the priming are the request's input count. The **prefix** up to a block is named by a
digest chained over the model and every block up to it (its exact content), so two requests share a
prefix entry only when everything up to that block is the same.

**Anthropic** (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching): only what a
``cache_control`` breakpoint marks is cached.

- A breakpoint is ``{"type": "ephemeral"}`` with an optional ``"ttl"`` of ``"5m"`` (the default) or
  ``"1h"``, on a tool, a system block or a message content block. At most ``MAX_BREAKPOINTS`` (4) per
  request; a fifth is a 400, "A maximum of 4 blocks with cache_control may be provided. Found 5.".
- A prefix shorter than the model's minimum (:func:`minimum_cacheable`: 1,024 tokens for most Sonnet
  and Opus models, 2,048 for Haiku 3 and 3.5, 4,096 for Opus 4.5, 4.6 and Haiku 4.5, as the docs'
  table lists them) is not cached and raises no error.
- At each breakpoint the system looks for an entry at that block and at up to ``LOOKBACK_BLOCKS``
  (20) block boundaries before it ("checks for cache hits at all previous content block boundaries,
  up to approximately 20 blocks before your explicit breakpoint"); the longest prefix found over all
  breakpoints is read, and its entry's lifetime starts again (a hit refreshes it). Entries are written
  at the breakpoints (at or above the minimum) and last their ``ttl`` from their last use.
- Usage: ``cache_read_input_tokens`` is the prefix read, ``cache_creation_input_tokens`` what follows
  it up to the last breakpoint that was cached, and ``input_tokens`` the rest, the three disjoint
  ("total_input_tokens = cache_read_input_tokens + cache_creation_input_tokens + input_tokens").
- Not imitated: the rule that 1-hour breakpoints come before 5-minute ones (not enforced), and the
  ``cache_creation`` breakdown by lifetime on the wire (:attr:`CacheUse.write_1h` has it in process).

**OpenAI** (https://platform.openai.com/docs/guides/prompt-caching): automatic. A prompt of
``OPENAI_MIN_TOKENS`` (1,024) tokens or more is cached at every block boundary at or above that
length; a later prompt reads the longest prefix it shares with a live entry, rounded down to a
multiple of ``OPENAI_STEP`` (128), when that is 1,024 or more. Entries live ``OPENAI_TTL_SECONDS``
(5 minutes, the low end of the documented "5 to 10 minutes of inactivity") from their last use.
Reported in ``prompt_tokens_details.cached_tokens`` (Chat Completions) and
``input_tokens_details.cached_tokens`` (Responses), *within* the prompt's count. A prefix is shared
block by block here: two prompts whose blocks differ share nothing past the first differing block,
even when that block starts with the same text (the real cache matches tokens).

Time is the model's clock (:attr:`LocalSettings.clock <contextwindow.testing.LocalSettings.clock>`),
so tests move it. What the cache holds is bounded (``MAX_ENTRIES`` prefixes, least recently used out).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..compile.head import SUMMARY_HEADER
from ..content import Message, RedactedThinking, Request, Text, Thinking
from ..formats import AttachmentLoader
from ..models import ModelProfile
from ..pricing import thinking_stripped_before
from .counting import MESSAGE_OVERHEAD, Tokenizer, block_tokens, tool_tokens

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "MAX_ENTRIES",
    "OPENAI_MIN_TOKENS",
    "OPENAI_STEP",
    "OPENAI_TTL_SECONDS",
    "TTL_SECONDS",
    "Breakpoint",
    "CacheTTL",
    "CacheUse",
    "Position",
    "PromptCache",
    "Segment",
    "breakpoints_in",
    "minimum_cacheable",
    "provider_breakpoints",
    "segments",
]

CacheTTL: TypeAlias = Literal["5m", "1h"]
TTL_SECONDS: Mapping[str, float] = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20
OPENAI_MIN_TOKENS = 1024
OPENAI_STEP = 128
OPENAI_TTL_SECONDS = 300.0
MAX_ENTRIES = 200_000
"""Prefix entries the cache holds at most (a digest and an expiry each: some 20 MB at most)."""

Position: TypeAlias = tuple[str, int] | tuple[str, int, int]
"""Where a block is: ``("tools", i)``, ``("system", i)`` or ``("messages", m, b)``; an empty
message is ``("messages", m, -1)``."""

# The minimum cacheable prompt by model, longest name prefix first (Anthropic's prompt-caching page:
# 4,096 for Opus 4.6, Opus 4.5 and Haiku 4.5; 1,024 for Sonnet 4.6, 4.5, Opus 4.1, 4, Sonnet 4 and
# 3.7; 2,048 for Haiku 3.5 and 3). Models the page does not list take 1,024.
_MINIMUMS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-3-haiku", 2048),
)
_DEFAULT_MINIMUM = 1024


def minimum_cacheable(model: str) -> int:
    """The shortest prefix Anthropic caches for ``model``, in tokens (see the module docstring)."""
    for prefix, minimum in _MINIMUMS:
        if model.startswith(prefix):
            return minimum
    return _DEFAULT_MINIMUM


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """A ``cache_control`` marker: the block it ends and its lifetime."""

    at: Position
    ttl: CacheTTL = "5m"


@dataclass(frozen=True, slots=True)
class Segment:
    """One block of a request: where it is, its tokens, and the digest of the prefix it ends."""

    at: Position
    tokens: int
    digest: bytes


@dataclass(frozen=True, slots=True)
class CacheUse:
    """What one call read from and wrote to the cache, in tokens."""

    read: int = 0
    write: int = 0
    write_1h: int = 0
    """The part of ``write`` kept for an hour (the rest for five minutes)."""


def segments(
    request: Request,
    profile: ModelProfile,
    tok: Tokenizer,
    load: AttachmentLoader | None,
    *,
    provider: str = "anthropic",
) -> list[Segment]:
    """``request``'s blocks in prompt order, with their tokens and prefix digests (module docstring);
    prefixes of different ``provider`` caches never match."""
    chain = hashlib.blake2b(f"{provider}\0{profile.name}".encode(), digest_size=16).digest()
    out: list[Segment] = []

    def add(at: Position, tokens: int, content: Any) -> None:
        nonlocal chain
        text = repr((at[0], content)).encode("utf-8", "surrogatepass")
        chain = hashlib.blake2b(chain + text, digest_size=16).digest()
        out.append(Segment(at=at, tokens=tokens, digest=chain))

    for i, tool in enumerate(request.tools):
        add(("tools", i), tool_tokens(tool, tok), tool)
    for i, text in enumerate(request.system):
        add(("system", i), tok.count(text.text) + (MESSAGE_OVERHEAD if i == 0 else 0), text)
    stripped = thinking_stripped_before(request.messages, profile.name)
    for m, message in enumerate(request.messages):
        _message_segments(m, message, m < stripped, profile, tok, load, add)
    return out


def _message_segments(
    m: int,
    message: Message,
    stripped: bool,
    profile: ModelProfile,
    tok: Tokenizer,
    load: AttachmentLoader | None,
    add: Callable[[Position, int, Any], None],
) -> None:
    if not message.content:
        add(("messages", m, -1), MESSAGE_OVERHEAD, message.role)
    for b, block in enumerate(message.content):
        if stripped and isinstance(block, Thinking | RedactedThinking):
            tokens = 0  # an earlier turn's thinking: the API strips it (as counting does)
        else:
            tokens = block_tokens(block, profile, tok, load)[1]
        framing = MESSAGE_OVERHEAD if b == 0 else 0
        add(("messages", m, b), tokens + framing, (message.role, b == 0, block))


def breakpoints_in(body: Mapping[str, Any]) -> tuple[Breakpoint, ...] | str:
    """The ``cache_control`` breakpoints of an Anthropic Messages body, in prompt order, or the text
    of the 400 a malformed one gets. A block whose nested blocks (a tool result's) carry markers is a
    breakpoint once per marker. A top-level ``cache_control`` (automatic caching) marks the last block
    of the last message."""
    found: list[Breakpoint] = []
    for i, tool in enumerate(_list(body.get("tools"))):
        problem = _add(found, tool, ("tools", i), f"tools.{i}")
        if problem:
            return problem
    for i, block in enumerate(_list(body.get("system"))):
        problem = _add(found, block, ("system", i), f"system.{i}")
        if problem:
            return problem
    messages = _list(body.get("messages"))
    for m, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        for b, block in enumerate(_list(content)):
            path = f"messages.{m}.content.{b}"
            problem = _add(found, block, ("messages", m, b), path)
            for n, inner in enumerate(_list(block.get("content")) if isinstance(block, Mapping) else ()):
                problem = problem or _add(found, inner, ("messages", m, b), f"{path}.content.{n}")
            if problem:
                return problem
    top = body.get("cache_control")
    if top is not None and messages:
        last = messages[-1].get("content") if isinstance(messages[-1], Mapping) else None
        b = len(last) - 1 if isinstance(last, list) else 0
        problem = _add(found, body, ("messages", len(messages) - 1, b), "")
        if problem:
            return problem
    return tuple(found)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _add(found: list[Breakpoint], block: Any, at: Position, path: str) -> str | None:
    if not isinstance(block, Mapping) or block.get("cache_control") is None:
        return None
    where = f"{path}.cache_control" if path else "cache_control"
    marker = block["cache_control"]
    if not isinstance(marker, Mapping) or marker.get("type") != "ephemeral":
        return f"{where}.type: Input should be 'ephemeral'"
    ttl = marker.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        return f"{where}.ttl: Input should be '5m' or '1h'"
    found.append(Breakpoint(at=at, ttl=ttl))
    return None


def provider_breakpoints(request: Request) -> tuple[Breakpoint, ...]:
    """The breakpoints :class:`~contextwindow.providers.anthropic.AnthropicProvider` marks (with its
    default ``cache_breakpoints=True``): the last system block, the summary checkpoint's message when
    the request opens with one, and the last block of the last message unless it is thinking."""
    out: list[Breakpoint] = []
    if request.system:
        out.append(Breakpoint(at=("system", len(request.system) - 1)))
    if len(request.messages) > 1 and _opens_with_summary(request.messages[0]):
        out.append(Breakpoint(at=("messages", 0, len(request.messages[0].content) - 1)))
    if request.messages:
        m = len(request.messages) - 1
        content = request.messages[m].content
        if content and not isinstance(content[-1], Thinking | RedactedThinking):
            out.append(Breakpoint(at=("messages", m, len(content) - 1)))
    return tuple(out)


def _opens_with_summary(message: Message) -> bool:
    first = message.content[0] if message.content else None
    return isinstance(first, Text) and first.text.startswith(SUMMARY_HEADER)


class PromptCache:
    """The prefixes one local provider holds: digest → (expiry, lifetime). Thread-safe."""

    def __init__(self, clock: Callable[[], float], max_entries: int = MAX_ENTRIES) -> None:
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def __len__(self) -> int:
        return len(self._entries)

    def _alive(self, digest: bytes, now: float) -> bool:
        entry = self._entries.get(digest)
        if entry is None:
            return False
        if entry[0] <= now:
            del self._entries[digest]
            return False
        return True

    def _keep(self, digest: bytes, now: float, seconds: float) -> None:
        old = self._entries.get(digest)
        seconds = max(seconds, old[1]) if old is not None else seconds
        self._entries[digest] = (now + seconds, seconds)
        self._entries.move_to_end(digest)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def anthropic(self, blocks: Sequence[Segment], marks: Sequence[Breakpoint], minimum: int) -> CacheUse:
        """Read and write the prefixes ``marks`` end (see the module docstring)."""
        index = {s.at: i for i, s in enumerate(blocks)}
        marked = sorted({(index[b.at], b.ttl) for b in marks if b.at in index})
        if not marked:
            return CacheUse()
        ends = _ends(blocks)
        cached = [(i, ttl) for i, ttl in marked if ends[i] >= minimum]
        with self._lock:
            now = self._clock()
            hit = -1
            for i, _ in cached:
                for j in range(i, max(-1, i - LOOKBACK_BLOCKS - 1), -1):
                    if j > hit and self._alive(blocks[j].digest, now):
                        hit = j
                        break
            if hit >= 0:
                self._keep(blocks[hit].digest, now, self._entries[blocks[hit].digest][1])
            for i, ttl in cached:
                self._keep(blocks[i].digest, now, TTL_SECONDS[ttl])
        read = ends[hit] if hit >= 0 else 0
        write = write_1h = 0
        start = read
        for i, ttl in cached:
            if i > hit:
                write += ends[i] - start
                write_1h += ends[i] - start if ttl == "1h" else 0
                start = ends[i]
        return CacheUse(read=read, write=write, write_1h=write_1h)

    def openai(self, blocks: Sequence[Segment], total: int) -> CacheUse:
        """Read the longest live prefix of a prompt of ``total`` tokens and keep its own (module
        docstring)."""
        if total < OPENAI_MIN_TOKENS:
            return CacheUse()
        ends = _ends(blocks)
        shared = 0
        with self._lock:
            now = self._clock()
            for i in range(len(blocks) - 1, -1, -1):
                if ends[i] < OPENAI_MIN_TOKENS:
                    break
                if self._alive(blocks[i].digest, now):
                    shared = ends[i]
                    break
            for i, block in enumerate(blocks):
                if ends[i] >= OPENAI_MIN_TOKENS:
                    self._keep(block.digest, now, OPENAI_TTL_SECONDS)
        read = shared // OPENAI_STEP * OPENAI_STEP
        return CacheUse(read=read if read >= OPENAI_MIN_TOKENS else 0)


def _ends(blocks: Sequence[Segment]) -> list[int]:
    """The tokens of each block's prefix (itself included)."""
    out, total = [], 0
    for block in blocks:
        total += block.tokens
        out.append(total)
    return out
