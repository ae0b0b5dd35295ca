"""Text rules per tokenizer family: the model's exact tokenizer where available, else the fitted rule.

The fitted rule splits a text into pieces the way a byte-pair tokenizer's pre-tokenizer does (a
word with the character before it, up to three digits, a punctuation run, a whitespace run:
:data:`PIECE`) and prices each piece by its greedy split against the family's vocabulary
(``_vocabulary``), times a scale fitted per family against tiktoken on the fit half of the corpus
(``data/textrule.json.gz``, ``benchmarks/fit_text_rule.py``). Pieces that are tokens are counted in
C; the others are split in Python, on a sample of at most :data:`SPLIT_SAMPLE` of them, scaled by
their bytes. A text longer than :data:`SAMPLE_ABOVE` bytes is read on :data:`WINDOWS` fixed windows
cut at piece boundaries and scaled by its bytes. Deterministic: fixed windows, fixed strides.

Claude's tokenizer is not public, so a Claude family prices text as the o200k rule times a ratio,
plus a figure per ASCII punctuation byte (Claude merges punctuation less than o200k), both fitted
per generation against real Claude usage (``benchmarks/fit_claude_rule.py``); the share of a text's
bytes that are not ASCII keeps the ratio fitted without the punctuation term (the sessions hold
almost no such text, so the rule does not price it lower than before that term); Gemini and
other families without an offline tokenizer use the o200k rule with a margin, so they err high.

The :class:`Structure` of a family is the per-message, per-block and per-request framing tokens
the provider adds around content; ``Estimator.message`` and ``Estimator.request`` include it. Claude
renders a tool call as its parameters, so a Claude call is priced per parameter (its name, its value
as it is when a string, else as JSON) rather than as the JSON of its input.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from itertools import filterfalse
from typing import Any

from ..errors import UsageError
from ..models import ModelProfile, TokenizerFamily
from ._tables import table
from ._vocabulary import FAMILIES, Vocabulary, vocabulary
from .tokenizers import FAMILY_ENCODINGS, exact_source, missing_reason

__all__ = [
    "PIECE",
    "SAMPLE_ABOVE",
    "SPLIT_SAMPLE",
    "WINDOWS",
    "Structure",
    "cjk_share",
    "exact_text",
    "fitted_rule",
    "punctuation_bytes",
    "rule_tokens",
    "structure_for",
]

PIECE = re.compile(
    rb"[^\r\nA-Za-z0-9\x80-\xff]?[A-Za-z\x80-\xff]+"  # a word, with the one character before it
    rb"|[0-9]{1,3}"  # numbers split into groups of up to three digits
    rb"| ?[^\sA-Za-z0-9\x80-\xff]+[\r\n/]*"  # a punctuation run
    rb"|\s*[\r\n]+"  # line breaks, with the spaces before them
    rb"|\s+(?!\S)"  # spaces, but the last one before a word joins the word
    rb"|\s+"
)
"""The pieces of a text's UTF-8: the pre-tokenizer pattern of tiktoken's ``o200k_base`` and
``cl100k_base`` (https://github.com/openai/tiktoken/blob/main/tiktoken_ext/openai_public.py), with
every non-ASCII byte read as a letter (Python's ``re`` has no Unicode letter classes over bytes: a
non-ASCII symbol joins the word it touches, which the greedy split then cuts where the vocabulary
does) and without the split of upper-case runs and contractions (the greedy split finds those)."""
SAMPLE_ABOVE = 2048
"""UTF-8 bytes above which a text is read on :data:`WINDOWS` windows of :data:`_WINDOW` bytes and
scaled by its bytes: on ASCII text the rule's cost a byte is about tiktoken's, so the sample is what
makes it faster (figures: ``docs/concepts.md``, "Text rule")."""
WINDOWS = 8
_WINDOW = 256
_ALIGN = 64  # bytes a window's edge moves to reach a space (else a character boundary)
SPLIT_SAMPLE = 128
"""Pieces that are not tokens split in Python at most this many per text (in evenly spread runs,
scaled by their bytes); the pieces that are tokens are all counted. The split, not the counting, is
the rule's cost (figures: ``docs/concepts.md``, "Text rule")."""
_RUN = 16  # the sample of those pieces is runs of this many consecutive ones


def _spans(raw: bytes) -> list[tuple[int, int]]:
    """The windows a long text is read on: evenly spread, each starting and ending at a space where
    one is near (a piece begins with its space) and never inside a UTF-8 character."""
    size = len(raw)
    step = (size - _WINDOW) // (WINDOWS - 1)
    out = []
    for i in range(WINDOWS):
        start = i * step
        end = start + _WINDOW
        if start:
            at = raw.find(b" ", start, start + _ALIGN)
            start = at if at >= 0 else start
            while start < end and 0x80 <= raw[start] < 0xC0:
                start += 1
        if end < size:
            at = raw.rfind(b" ", end - _ALIGN, end)
            end = at if at > start else end
            while end > start and 0x80 <= raw[end] < 0xC0:
                end -= 1
        out.append((start, end))
    return out


def rule_tokens(raw: bytes, vocab: Vocabulary) -> float:
    """Unscaled tokens of a text's UTF-8 ``raw`` by the vocabulary (see the module docstring)."""
    size = len(raw)
    spans = [(0, size)] if size <= SAMPLE_ABOVE else _spans(raw)
    findall, is_token = PIECE.findall, vocab.tokens.__contains__
    hits = seen = 0
    misses: list[bytes] = []
    for start, end in spans:
        pieces = findall(raw, start, end)
        missed = list(filterfalse(is_token, pieces))
        hits += len(pieces) - len(missed)
        misses += missed
        seen += end - start
    scale = 1.0
    if len(misses) > SPLIT_SAMPLE:
        # runs of consecutive pieces, evenly spread: a stride would alias with a periodic text
        # (a table, repeated lines) and split only one kind of its pieces
        total = len(b"".join(misses))
        step = (len(misses) - _RUN) // (SPLIT_SAMPLE // _RUN - 1)
        misses = [p for at in range(0, step * (SPLIT_SAMPLE // _RUN), step) for p in misses[at : at + _RUN]]
        scale = total / len(b"".join(misses))
    return (hits + vocab.count(misses) * scale) * (size / seen if seen else 1.0)


# Lead bytes of CJK characters in UTF-8: U+3000–U+DFFF (CJK, kana, Hangul) and U+F000–U+FFFF
# (compatibility and full-width forms), three bytes each.
_NOT_CJK_LEAD = bytes(b for b in range(256) if not (0xE3 <= b <= 0xED or b == 0xEF))


def cjk_share(raw: bytes) -> float:
    """The share of a text's UTF-8 bytes that are CJK characters (one C pass)."""
    return 3 * len(raw.translate(None, _NOT_CJK_LEAD)) / len(raw) if raw else 0.0


_CJK_AS_OLDER: dict[str, str] = {"claude-2026": "claude"}
"""The newer Claude tokenizer (Opus 4.7 and later) counts about 30% more tokens than the earlier one
on the same English text ("approximately 30% more tokens",
https://platform.claude.com/docs/en/build-with-claude/token-counting; ~1.37× in the fit on real
sessions) but, by third-party measurements, about as many on CJK text: the CJK share of a text priced for the newer
family keeps the older family's ratio. The sessions the ratios are fitted on hold almost no CJK."""

# Families without an offline tokenizer: the o200k fit with a margin so the estimate errs high.
_MARGIN_FAMILIES: dict[str, float] = {"gemini": 1.15, "deepseek": 1.15, "unknown": 1.25}


@dataclass(frozen=True, slots=True)
class Structure:
    """Framing tokens a provider adds around content, by family."""

    message: float
    """Per message (role markers, separators)."""
    request: float
    """Per request (OpenAI primes the reply with 3)."""
    text_block: float
    tool_use: float
    """Beyond the tool name and the JSON of its input."""
    tool_result: float
    tool_spec: float
    """Per tool definition, beyond the JSON of its name, description and schema."""
    media_block: float
    tool_param: float | None = None
    """Per parameter of a tool call's input, when the provider renders a call as its parameters
    (each one's name and value, a string as it is, any other value as JSON: Claude's function-call
    format) rather than as the JSON of the input; ``None``: priced as the JSON (OpenAI)."""


# OpenAI chat framing: 3 tokens per message, 3 to prime the reply (OpenAI cookbook convention,
# https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb).
# Tool framing is not published; the small figures are assumptions that err high.
_OPENAI = Structure(
    message=3, request=3, text_block=0, tool_use=8, tool_result=6, tool_spec=10, media_block=0
)


def _coefficients() -> dict[str, Any]:
    """The Claude part of the fitted coefficients (``data/coefficients.json.gz``)."""
    data: dict[str, Any] = table("coefficients")
    return data


@cache
def _scales() -> dict[str, float]:
    """The fitted scale of each family's vocabulary rule (``data/textrule.json.gz``)."""
    data: dict[str, Any] = table("textrule")
    if set(data["scale"]) != set(FAMILIES):
        # a stale generated table: refit rather than misprice
        raise RuntimeError(
            "the text rule's scales do not match its families; run benchmarks/fit_text_rule.py"
        )
    return {family: float(s) for family, s in data["scale"].items()}


@cache
def structure_for(family: TokenizerFamily) -> Structure:
    """The framing of a family. Claude's is fitted against real Claude Code sessions
    (``benchmarks/fit_claude_rule.py``); families without published framing use OpenAI's, which is small."""
    claude = _coefficients()["claude_structure"].get(family)
    if claude is None:
        return _OPENAI
    return Structure(
        message=claude["message"],
        request=0,
        text_block=claude["text_block"],
        tool_use=claude["tool_use"],
        tool_result=claude["tool_result"],
        tool_spec=claude["tool_use"],
        media_block=0,  # rounds with media were left out of the fit: no framing was measured
        tool_param=claude["tool_param"],
    )


_NOT_PUNCTUATION = bytes(b for b in range(256) if not (33 <= b < 127 and not chr(b).isalnum()))


def punctuation_bytes(raw: bytes) -> int:
    """How many of a text's UTF-8 bytes are ASCII punctuation (one C pass)."""
    return len(raw.translate(None, _NOT_PUNCTUATION))


_ASCII = bytes(range(128))


def _rule(
    family: str,
    scale: float,
    cjk_scale: float | None = None,
    punctuation: float = 0.0,
    other_scale: float | None = None,
) -> Callable[[str], float]:
    """The vocabulary rule of ``family`` times ``scale``, plus ``punctuation`` tokens per ASCII
    punctuation byte (a tokenizer that merges punctuation less than the vocabulary's).

    ``other_scale`` applies instead to the share of the text's bytes that are not ASCII (text the
    punctuation fit saw almost none of keeps the ratio fitted without that term), and ``cjk_scale``
    to the share that is CJK (a generation whose tokenizer changed on other text only)."""
    vocab = vocabulary(family)
    k = scale * _scales()[family if family in FAMILIES else "o200k"]
    k_other = k if other_scale is None else other_scale * _scales()["o200k"]
    k_cjk = None if cjk_scale is None else cjk_scale * _scales()["o200k"]

    def price(text: str) -> float:
        if not text:
            return 0.0
        raw = text.encode("utf-8", "surrogatepass")
        factor = k
        if not text.isascii() and (k_other != k or k_cjk is not None):
            other = len(raw.translate(None, _ASCII)) / len(raw)  # the bytes that are not ASCII
            cjk = cjk_share(raw) if k_cjk is not None else 0.0
            factor = k + (k_other - k) * (other - cjk) + ((k_cjk or k) - k) * cjk
        tokens = rule_tokens(raw, vocab) * factor
        if punctuation:
            tokens += punctuation * punctuation_bytes(raw)
        return max(tokens, 1.0)  # non-empty text is at least one token

    return price


@cache
def fitted_rule(family: TokenizerFamily) -> Callable[[str], float]:
    """The default text rule of a family: unrounded tokens of a string."""
    if family in FAMILIES:
        return _remembered(_rule(family, 1.0))
    data = _coefficients()
    if family in data["claude_ratio"]:
        ratio = data["claude_ratio"][family]
        other = data["claude_other_ratio"]
        same = _CJK_AS_OLDER.get(family)
        cjk = other.get(same) if same else None
        return _remembered(_rule("o200k", ratio, cjk, data["claude_punctuation"][family], other[family]))
    return _remembered(_rule("o200k", _MARGIN_FAMILIES.get(family, _MARGIN_FAMILIES["unknown"])))


def exact_text(profile: ModelProfile, exact: bool | None) -> Callable[[str], float] | None:
    """The exact text counter of ``profile`` for an ``exact`` setting, or ``None`` for the rule.

    ``None``: exact where the model's tokenizer is available offline (tiktoken for the OpenAI
    families, a ``tokenizer.json`` for open-weight models), else the rule. ``True``: exact, or a
    ``UsageError`` saying how to get the tokenizer. ``False``: always the rule. A model whose tokenizer
    is public (an OpenAI family, or a profile naming its ``tokenizer_file``) priced by the rule for
    want of it gets a warning on the ``contextwindow.pricing`` logger, once per model.
    """
    if exact is False:
        return None
    source = exact_source(profile)
    if source is None:
        if exact is True:
            raise UsageError(missing_reason(profile))
        if profile.tokenizer_file or profile.tokenizer in FAMILY_ENCODINGS:
            reason = missing_reason(profile)
            _warn_once(
                profile.name, f"{profile.name}: priced by the fitted rule, not its exact tokenizer: {reason}"
            )
        return None
    return _exact_price(source.count)


@cache
def _exact_price(count: Callable[[str], int]) -> Callable[[str], float]:
    """``count`` as a text rule, remembering its recent answers (one per tokenizer)."""
    return _remembered(lambda text: float(count(text)))


_REMEMBERED_TEXTS = 8192
"""How many recent texts a text rule remembers the price of (a fold prices again the messages it may
cover: a long history's worth)."""

_REMEMBERED_CHARS = 1 << 20
"""The longest text remembered (a checkpoint's summary, a summariser's transcript: priced on every
compile, and twice a fold)."""

_REMEMBERED_TOTAL = 4 << 20
"""The characters the remembered texts may hold together: the memory held stays under a few
megabytes."""


def _remembered(price: Callable[[str], float]) -> Callable[[str], float]:
    """``price`` (a pure function of the text) remembering its last :data:`_REMEMBERED_TEXTS` answers,
    for texts up to :data:`_REMEMBERED_CHARS` long and :data:`_REMEMBERED_TOTAL` in all. One call
    prices the same text several times (the block as stored, the request's estimate, the reply as it
    joins the live request; the summary in the head on every compile), and a tokenizer's encode is the
    costly part of each."""
    memo: dict[str, float] = {}
    held = [0]  # the characters of the texts in memo

    def priced(text: str) -> float:
        known = memo.get(text)
        if known is not None:
            return known
        tokens = price(text)
        size = len(text)
        if size <= _REMEMBERED_CHARS:
            if len(memo) >= _REMEMBERED_TEXTS or held[0] + size > _REMEMBERED_TOTAL:
                # Dropped at once: cheaper than ordering, and safe beside other threads (a count a
                # race leaves off only makes the next clear come sooner or later).
                memo.clear()
                held[0] = 0
            memo[text] = tokens
            held[0] += size
        return tokens

    return priced


_log = logging.getLogger("contextwindow.pricing")
_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    """``message`` as a warning on the ``contextwindow.pricing`` logger, once per process for ``key``."""
    if key not in _warned:
        _warned.add(key)
        _log.warning("%s", message)
