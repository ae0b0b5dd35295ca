"""Collecting the suite stays cheap: no test module imports an SDK or an agent framework when it is
collected. Each costs a second or more to import, and collection pays it before the first test runs
(and on every ``-k`` run); the tests that use them import them when they run (``_shared.LazyModule``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FRAMEWORKS = (
    "anthropic",
    "openai",
    "litellm",
    "langchain",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
    "agents",
    "google.genai",
    "matplotlib",
)

_PROBE = """
import json, sys
import pytest

code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "tests"])
loaded = sorted(f for f in {frameworks!r} if f in sys.modules)
print("LOADED " + json.dumps({{"code": int(code), "loaded": loaded}}))
"""


class TestCollection:
    def test_collecting_the_suite_imports_no_sdk_or_framework(self) -> None:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE.format(frameworks=FRAMEWORKS)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        [line] = [line for line in done.stdout.splitlines() if line.startswith("LOADED ")]
        result = json.loads(line.removeprefix("LOADED "))
        assert result["code"] == 0, done.stdout[-3000:]
        assert result["loaded"] == [], (
            f"collecting imports {result['loaded']}: import them in the tests that use them "
            "(a LazyModule, a fixture or the test body), not at the top of a test module"
        )
