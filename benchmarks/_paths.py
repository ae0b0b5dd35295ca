"""Paths benchmarks share: the repository root and the shared ground truth beside it."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ``../shared`` beside the checkout; a git worktree elsewhere names it with CONTEXTWINDOW_SHARED.
SHARED = Path(os.environ.get("CONTEXTWINDOW_SHARED") or ROOT.parent / "shared")
TOKENIZERS = SHARED / "tokenizers"
CLAUDE_SESSIONS = SHARED / "data" / "claude-code-sessions"
RESULTS = ROOT / "benchmarks" / "results"

if TOKENIZERS.is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TOKENIZERS))
