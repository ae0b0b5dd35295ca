"""context-manager's message-store rates, reproduced exactly.

These are the ``message-store.ts`` rules of context-manager (its later version): a density probe
picks 2.3 or 2.9 characters per token over UTF-16 code units, JSON-ish payloads are always dense, a tool use is its compact JSON plus 20, media are flat. They
are kept as the ``seed-store`` preset so the store's known-answer vectors can be checked, and as a
peer in the accuracy benchmark; the default preset is the fitted rule. One deliberate difference: a
stamp counts only when it is a finite number ≥ 0 (upstream lets NaN and negatives through;
``content.valid_stamp``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..content import utf16_len

__all__ = [
    "DENSE_CHARS_PER_TOKEN",
    "ENCRYPTED_CARRIER_CHARS_PER_TOKEN",
    "HIDDEN_THINKING_TOKENS_DEFAULT",
    "IMAGE_TOKEN_ESTIMATE",
    "PROSE_CHARS_PER_TOKEN",
    "SIGNATURE_CHARS_PER_TOKEN",
    "TOOL_USE_OVERHEAD",
    "estimate_text",
    "js_json",
    "js_round",
    "json_tokens",
]

PROSE_CHARS_PER_TOKEN = 2.9
DENSE_CHARS_PER_TOKEN = 2.3
DENSITY_THRESHOLD = 0.12
DENSITY_PROBE = 2000
SIGNATURE_CHARS_PER_TOKEN = 3.3
ENCRYPTED_CARRIER_CHARS_PER_TOKEN = 6
HIDDEN_THINKING_TOKENS_DEFAULT = 600
IMAGE_TOKEN_ESTIMATE = 1600
TOOL_USE_OVERHEAD = 20

# Dense UTF-16 code units: > 126, or one of { } [ ] " : _ / = and the backtick.
_DENSE_ASCII = frozenset('{}[]":_/=`')
_DENSE_DELETE = bytes(b for b in range(127) if chr(b) not in _DENSE_ASCII)


def js_round(value: float) -> int:
    """JavaScript's ``Math.round``: .5 rounds up (``floor(x + 0.5)``), not to even."""
    return math.floor(value + 0.5)


def _dense_units(probe: str) -> int:
    if probe.isascii():
        return len(probe.encode("ascii").translate(None, _DENSE_DELETE))
    units = probe.encode("utf-16-le", "surrogatepass")
    count = 0
    for i in range(0, len(units), 2):
        unit = units[i] | (units[i + 1] << 8)
        if unit > 126 or chr(unit) in _DENSE_ASCII:
            count += 1
    return count


def estimate_text(text: str) -> int:
    """``defaultTokenEstimator``: ``ceil(L / 2.3)`` when over 12% of the first 2,000 UTF-16 units
    are dense, else ``ceil(L / 2.9)``; L in UTF-16 units; "" is 0."""
    if not text:
        return 0
    length = utf16_len(text)
    if text.isascii():
        probe = text[:DENSITY_PROBE]
        n = len(probe)
    else:
        units = text.encode("utf-16-le", "surrogatepass")[: 2 * DENSITY_PROBE]
        probe = units.decode("utf-16-le", "surrogatepass")
        n = len(units) // 2
    rate = DENSE_CHARS_PER_TOKEN if _dense_units(probe) / n > DENSITY_THRESHOLD else PROSE_CHARS_PER_TOKEN
    return math.ceil(length / rate)


def json_tokens(text: str) -> int:
    """``jsonTokenEstimator``: always dense, ``ceil(L / 2.3)``."""
    return math.ceil(utf16_len(text) / DENSE_CHARS_PER_TOKEN)


def js_json(value: Mapping[str, Any] | Any) -> str:
    """``JSON.stringify``: compact separators, non-ASCII left unescaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
