"""A model whose tokenizer is public, priced by the rule for want of it, says so once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import logging
logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
from contextwindow.pricing import Estimator
from contextwindow.content import Message
from contextwindow.models import get_profile
for model in ("gpt-4o", "gpt-4o", "claude-sonnet-4-5"):
    Estimator(get_profile(model)).message(Message.user("hello there, how are you today?"))
"""


def _stderr(cache: Path) -> str:
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return done.stderr


class TestRuleFallbackWarning:
    def test_a_missing_public_tokenizer_is_one_warning_naming_the_fix(self, tmp_path: Path) -> None:
        lines = [line for line in _stderr(tmp_path).splitlines() if line.startswith("contextwindow")]
        assert len(lines) == 1, lines
        assert lines[0].startswith("contextwindow.pricing WARNING gpt-4o: priced by the fitted rule")
        assert "TIKTOKEN_CACHE_DIR" in lines[0]

    def test_with_the_tokenizer_cached_nothing_is_said(self) -> None:
        cached = os.environ.get("TIKTOKEN_CACHE_DIR")
        assert cached, "the tests run with the real tokenizers (TIKTOKEN_CACHE_DIR)"
        assert "contextwindow" not in _stderr(Path(cached))
