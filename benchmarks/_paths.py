"""Paths benchmarks share: the repository root and the shared ground truth beside it."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(
    os.environ.get("CONTEXTWINDOW_SHARED") or ROOT.parent / "shared"
)  # a worktree elsewhere can point at it
TOKENIZERS = SHARED / "tokenizers"
CLAUDE_SESSIONS = SHARED / "data" / "claude-code-sessions"
RESULTS = ROOT / "benchmarks" / "results"

if TOKENIZERS.is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TOKENIZERS))
