"""Test-session setup: real tokenizers come from ``../shared/tokenizers`` (offline)."""

from __future__ import annotations

import os

from _shared import TOKENIZERS

if TOKENIZERS.is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TOKENIZERS))
elif os.environ.get("CI") == "true":
    raise RuntimeError(f"CI needs the real tokenizers at {TOKENIZERS}")
