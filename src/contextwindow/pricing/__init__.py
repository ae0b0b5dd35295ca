"""Pricing: how many tokens a block, a message, a request costs, for one model.

One ruler for the whole library. :class:`Estimator` counts text with the model's own tokenizer
where it is available offline (tiktoken for OpenAI families, a Hugging Face ``tokenizer.json`` for
open-weight models) and with the fitted, content-aware rule of its tokenizer family elsewhere, and
prices media by the provider's rules (``preset="default"``); ``preset="seed-store"`` reproduces the
message-store rates of context-manager. :func:`image_tokens` is the pure image rule;
:func:`count_tokens` is the one-call convenience. :func:`thinking_stripped_before` says which thinking blocks a request is
charged for (earlier turns' thinking is stripped on some Claude models).
"""

from __future__ import annotations

from ._count import count_tokens
from ._estimator import (
    MULTIPLIER_BOUNDS,
    Breakdown,
    BreakdownRow,
    Estimator,
    Preset,
    clamp_multiplier,
    tool_bytes,
    valid_multiplier,
)
from ._media import (
    MEDIA_FLAT_TOKENS,
    anthropic_resized_size,
    image_tokens,
    image_upper_bound,
)
from ._seed_store import estimate_text as seed_estimate_text
from ._seed_store import json_tokens as seed_json_tokens
from ._thinking import current_turn_start, keeps_prior_thinking, thinking_stripped_before

__all__ = [
    "MEDIA_FLAT_TOKENS",
    "MULTIPLIER_BOUNDS",
    "Breakdown",
    "BreakdownRow",
    "Estimator",
    "Preset",
    "anthropic_resized_size",
    "clamp_multiplier",
    "count_tokens",
    "current_turn_start",
    "image_tokens",
    "image_upper_bound",
    "keeps_prior_thinking",
    "seed_estimate_text",
    "seed_json_tokens",
    "thinking_stripped_before",
    "tool_bytes",
    "valid_multiplier",
]
