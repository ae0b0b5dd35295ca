"""Pricing: how many tokens a block, a message, a request costs, for one model.

One ruler for the whole library (``docs/concepts.md``, "Estimator"). :class:`Estimator` prices with the
fitted, content-aware text rule of the model's tokenizer family and the provider's media rules
(``preset="default"``), optionally counting text exactly with tiktoken (``exact=True``), or with
the message-store rates of https://github.com/anima-research/context-manager (``preset="seed-store"``).
:func:`image_tokens` is the pure image rule; :func:`count_tokens` is the one-call convenience.
"""

from __future__ import annotations

from ._count import count_tokens
from ._estimator import Breakdown, BreakdownRow, Estimator, Preset, js_round
from ._media import (
    MEDIA_FLAT_TOKENS,
    anthropic_resized_size,
    image_tokens,
    image_upper_bound,
)
from ._seed_store import estimate_text as seed_estimate_text
from ._seed_store import json_tokens as seed_json_tokens
from ._seed_store import utf16_len

__all__ = [
    "MEDIA_FLAT_TOKENS",
    "Breakdown",
    "BreakdownRow",
    "Estimator",
    "Preset",
    "anthropic_resized_size",
    "count_tokens",
    "image_tokens",
    "image_upper_bound",
    "js_round",
    "seed_estimate_text",
    "seed_json_tokens",
    "utf16_len",
]
