"""Text rules per tokenizer family: the fitted default, and tiktoken's exact count where installed.

The fitted rule prices a string as ``sum(c * f)`` over the features of ``_features.py`` with one
coefficient vector per family and piece (prose, code, CJK, Cyrillic, other scripts, JSON; chosen by
``_features.piece_of``), in ``_coefficients.py``, fitted by ``benchmarks/fit_text_rule.py``
against tiktoken. Claude's tokenizer is not public, so a Claude
family prices text as the o200k rule times a ratio fitted per generation against real Claude usage
(``benchmarks/fit_claude_rule.py``); Gemini and other families without an offline tokenizer use
the o200k rule with a margin, so they err high.

The :class:`Structure` of a family is the per-message, per-block and per-request framing tokens
the provider adds around content; ``Estimator.message`` and ``Estimator.request`` include it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..errors import UsageError
from ..models import TokenizerFamily
from . import _coefficients
from ._bytepairs import Weights, class_codes
from ._features import (
    LATIN_FEATURES,
    N_FEATURES,
    PAIR_FEATURES,
    PIECES,
    SINGLE_FEATURES,
    ZERO_TAIL,
    measure,
)
from .tokenizers import cache_dir, load_encoding

__all__ = ["EXACT_ENCODINGS", "Structure", "ceil_nonneg", "exact_counter", "fitted_rule", "structure_for"]

EXACT_ENCODINGS: dict[str, str] = {"o200k": "o200k_base", "cl100k": "cl100k_base"}
"""Families tiktoken counts exactly (its model table: https://github.com/openai/tiktoken)."""

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


# OpenAI chat framing: 3 tokens per message, 3 to prime the reply (OpenAI cookbook convention,
# https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb).
# Tool framing is not published; the small figures are assumptions that err high.
_OPENAI = Structure(
    message=3, request=3, text_block=0, tool_use=8, tool_result=6, tool_spec=10, media_block=0
)
# Claude: fitted against real Claude Code sessions (see _coefficients and fit_claude_rule.py).
_CLAUDE = {
    family: Structure(
        message=c["message"],
        request=0,
        text_block=c["text_block"],
        tool_use=c["tool_use"],
        tool_result=c["tool_result"],
        tool_spec=c["tool_use"],
        media_block=0,  # rounds with media were left out of the fit: no framing was measured
    )
    for family, c in _coefficients.CLAUDE_STRUCTURE.items()
}


def structure_for(family: TokenizerFamily) -> Structure:
    """The framing of a family; families without published framing use OpenAI's, which is small."""
    return _CLAUDE.get(family, _OPENAI)


def _linear(family: str, scale: float) -> Callable[[str], float]:
    pieces = _coefficients.TEXT_COEFFICIENTS[family]
    if tuple(pieces) != PIECES or any(len(c) != N_FEATURES for c in pieces.values()):
        # a stale generated file: refit rather than misprice
        raise RuntimeError(
            "pricing coefficients do not match the feature set; run benchmarks/fit_text_rule.py"
        )
    singles = slice(1, 1 + len(SINGLE_FEATURES))
    pairs = slice(singles.stop, singles.stop + len(PAIR_FEATURES))
    latin = slice(pairs.stop, pairs.stop + len(LATIN_FEATURES))
    rest = slice(latin.stop, N_FEATURES)
    vectors = [tuple(c * scale for c in pieces[p]) for p in PIECES]
    # per piece: bias, the single and pair features as weight tables, the Latin and tail vectors
    table = tuple((v[0], Weights.of(v[singles], v[pairs]), v[latin], v[rest]) for v in vectors)

    def price(text: str) -> float:
        m = measure(text, family)
        if m is None:
            return 0.0
        bias, weights, latin_c, rest_c = table[m.piece]
        total: float = (
            bias
            + weights.total(class_codes(m.sample), m.single_scale, m.pair_scale)
            + sum(map(operator.mul, latin_c, m.latin))
        )
        if m.tail is not ZERO_TAIL:
            total += sum(map(operator.mul, rest_c, m.tail))
        return max(total, scale)  # non-empty text is at least one token

    return price


@cache
def fitted_rule(family: TokenizerFamily) -> Callable[[str], float]:
    """The default text rule of a family: unrounded tokens of a string."""
    if family in _coefficients.TEXT_COEFFICIENTS:
        return _linear(family, 1.0)
    if family in _coefficients.CLAUDE_TEXT_RATIO:
        return _linear("o200k", _coefficients.CLAUDE_TEXT_RATIO[family])
    return _linear("o200k", _MARGIN_FAMILIES.get(family, _MARGIN_FAMILIES["unknown"]))


@cache
def exact_counter(family: TokenizerFamily) -> Callable[[str], float]:
    """tiktoken's exact count for a family it covers; special-token text is counted as text.

    ``UsageError`` when the family has no public tokenizer (Claude, Gemini) or tiktoken is not
    installed (``pip install contextwindow[tiktoken]``).
    """
    name = EXACT_ENCODINGS.get(family)
    if name is None:
        raise UsageError(
            f"no exact tokenizer for the {family!r} family; exact=True needs an OpenAI (tiktoken) model"
        )
    encoding: Any = load_encoding(name)
    if encoding is None:
        raise UsageError(
            f"exact=True needs tiktoken ({name}) installed and its file cached offline: "
            f"pip install 'contextwindow[tiktoken]' and set TIKTOKEN_CACHE_DIR (now {cache_dir()}); "
            "contextwindow never downloads it"
        )

    def count(text: str) -> float:
        if not text:
            return 0.0
        # disallowed_special=() counts "<|endoftext|>" as plain text instead of raising.
        return float(len(encoding.encode(text, disallowed_special=())))

    return count


def ceil_nonneg(value: float) -> int:
    """Round a price up to whole tokens, never below 0."""
    return max(0, math.ceil(value))
