"""Text rules per tokenizer family: the model's exact tokenizer where available, else the fitted rule.

The fitted rule prices a string as ``sum(c * f)`` over the features of ``_features.py`` with one
coefficient vector per family and piece (prose, code, CJK, Cyrillic, other scripts, JSON; chosen by
``_features.piece_of``), in ``data/coefficients.json.gz``, fitted by ``benchmarks/fit_text_rule.py``
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
from ..models import ModelProfile, TokenizerFamily
from ._bytepairs import Weights, class_codes
from ._features import (
    FEATURE_NAMES,
    LATIN_FEATURES,
    N_FEATURES,
    PAIR_FEATURES,
    PIECES,
    SINGLE_FEATURES,
    ZERO_TAIL,
    measure,
)
from ._tables import table
from .tokenizers import exact_source, missing_reason

__all__ = ["Structure", "ceil_nonneg", "exact_text", "fitted_rule", "structure_for"]

_CJK_AS_OLDER: dict[str, str] = {"claude-2026": "claude"}
"""The newer Claude tokenizer (Opus 4.7 and later) counts about 30% more tokens than the earlier one
on the same English text ("approximately 30% more tokens",
https://platform.claude.com/docs/en/build-with-claude/token-counting; ~1.37× in the fit on real
sessions) but, by third-party measurements, about as many on CJK text: the CJK piece of the newer
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


# OpenAI chat framing: 3 tokens per message, 3 to prime the reply (OpenAI cookbook convention,
# https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb).
# Tool framing is not published; the small figures are assumptions that err high.
_OPENAI = Structure(
    message=3, request=3, text_block=0, tool_use=8, tool_result=6, tool_spec=10, media_block=0
)


def _coefficients() -> dict[str, Any]:
    """The fitted coefficients (``data/coefficients.json.gz``), checked against the feature set."""
    data: dict[str, Any] = table("coefficients")
    if tuple(data["features"]) != FEATURE_NAMES or any(
        set(pieces) != set(PIECES) or any(len(c) != N_FEATURES for c in pieces.values())
        for pieces in data["text"].values()
    ):
        # a stale generated table: refit rather than misprice
        raise RuntimeError(
            "pricing coefficients do not match the feature set; run benchmarks/fit_text_rule.py"
        )
    return data


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
    )


def _linear(
    family: str, scale: float, piece_scales: dict[str, float] | None = None
) -> Callable[[str], float]:
    """The fitted rule of ``family`` times ``scale`` (``piece_scales`` overrides it per piece)."""
    pieces = _coefficients()["text"][family]
    singles = slice(1, 1 + len(SINGLE_FEATURES))
    pairs = slice(singles.stop, singles.stop + len(PAIR_FEATURES))
    latin = slice(pairs.stop, pairs.stop + len(LATIN_FEATURES))
    rest = slice(latin.stop, N_FEATURES)
    scales = {p: (piece_scales or {}).get(p, scale) for p in PIECES}
    vectors = [tuple(c * scales[p] for c in pieces[p]) for p in PIECES]
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
        return max(total, 1.0)  # non-empty text is at least one token

    return price


@cache
def fitted_rule(family: TokenizerFamily) -> Callable[[str], float]:
    """The default text rule of a family: unrounded tokens of a string."""
    data = _coefficients()
    if family in data["text"]:
        return _linear(family, 1.0)
    if family in data["claude_ratio"]:
        ratio = data["claude_ratio"][family]
        same = _CJK_AS_OLDER.get(family)
        cjk = {"cjk": data["claude_ratio"][same]} if same in data["claude_ratio"] else None
        return _linear("o200k", ratio, cjk)
    return _linear("o200k", _MARGIN_FAMILIES.get(family, _MARGIN_FAMILIES["unknown"]))


def exact_text(profile: ModelProfile, exact: bool | None) -> Callable[[str], float] | None:
    """The exact text counter of ``profile`` for an ``exact`` setting, or ``None`` for the rule.

    ``None``: exact where the model's tokenizer is available offline (tiktoken for the OpenAI
    families, a ``tokenizer.json`` for open-weight models), else the rule. ``True``: exact, or a
    ``UsageError`` saying how to get the tokenizer. ``False``: always the rule.
    """
    if exact is False:
        return None
    source = exact_source(profile)
    if source is None:
        if exact is True:
            raise UsageError(missing_reason(profile))
        return None
    count = source.count

    def price(text: str) -> float:
        return float(count(text))

    return price


def ceil_nonneg(value: float) -> int:
    """Round a price up to whole tokens, never below 0."""
    return max(0, math.ceil(value))
