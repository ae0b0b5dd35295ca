"""Where the shared ground truth lives (``../shared`` beside the project's root) and how tests use it.

Locally a missing piece skips the test that needs it; in CI (``CI=true``) it fails loudly, because a
green run that skipped its ground truth proves nothing.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(
    os.environ.get("CONTEXTWINDOW_SHARED") or ROOT.parent / "shared"
)  # a worktree elsewhere can point at it
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


class LazyModule:
    """The module ``name``, imported on first use of a public attribute: a test module that uses
    ``anthropic.Anthropic`` in its tests does not import the SDK when the suite is collected (a second
    or more per SDK or framework). Private and dunder names are not forwarded: collecting probes every
    module-level object for them (``__test__``, ``__wrapped__``, ``_mock_name``)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._name), attribute)
