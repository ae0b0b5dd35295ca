"""Where the shared ground truth lives (``../shared`` beside the project's root) and how tests use it.

Locally a missing piece skips the test that needs it; in CI (``CI=true``) it fails loudly, because a
green run that skipped its ground truth proves nothing.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TOKENIZERS = SHARED / "tokenizers"
CLAUDE_SESSIONS = SHARED / "data" / "claude-code-sessions"


def require(path: Path, what: str) -> Path:
    """``path`` if it exists; else skip (locally) or fail (CI)."""
    if path.exists():
        return path
    message = f"{what} is missing at {path}"
    if os.environ.get("CI") == "true":
        pytest.fail(message + " (CI must have ../shared)")
    pytest.skip(message)


def encoding(name: str) -> Any:
    """The real tiktoken encoding ``name`` from ``TIKTOKEN_CACHE_DIR``; else skip (locally) or fail
    (CI)."""
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"tiktoken {name} not available offline (set TIKTOKEN_CACHE_DIR)")


def gibberish(chars: int, seed: str) -> str:
    """Words of random lowercase letters (from digests): text the default rule prices far below its
    real count (~45% under against o200k: the Latin-vocabulary features price a word outside the
    vocabulary like a near-word of 2-3 tokens, and random letters cost a token per 2-3 letters).
    Engine tests use it where they need content the rule under-prices."""
    raw = b"".join(hashlib.sha256(f"{seed} {i}".encode()).digest() for i in range(chars // 24 + 2))
    words, at = [], 0
    while at + 12 < len(raw):
        size = 3 + raw[at] % 8
        words.append("".join(chr(0x61 + b % 26) for b in raw[at + 1 : at + 1 + size]))
        at += 1 + size
    return " ".join(words)[:chars]
