"""litellm stays offline in either import order.

``LITELLM_LOCAL_MODEL_COST_MAP`` is read when litellm is imported; imported first, litellm fetches its
model cost map, falls back to the package's and keeps retrying in a background thread (about 8 s
offline). Importing the adapter after it must end those retries without another fetch, and imported
before it, litellm must fetch nothing at all. Each order runs in a subprocess whose network is an
``httpx.get`` that records the call and fails as an unreachable host does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import json, sys, threading, time
import httpx

calls = []

def offline(url, **kwargs):
    calls.append(time.monotonic())
    raise httpx.ConnectError(f"no network (test): {url}")

httpx.get = offline
first = sys.argv[1] == "adapter-first"
if first:
    import contextwindow.integrations.litellm
else:
    import contextwindow.guard, contextwindow.integrations._bridge  # the adapter's own import is quick then
import litellm
if not first:
    import contextwindow.integrations.litellm
ready = time.monotonic()
for thread in threading.enumerate():
    if thread.name == "litellm-model-cost-map-retry":
        thread.join(timeout=60)
print(json.dumps({
    "calls": len(calls),
    "after_the_adapter": sum(c > ready for c in calls),
    "retrying_for": time.monotonic() - ready,
    "has_gpt_4o": "gpt-4o" in litellm.model_cost,
}))
"""

SRC = Path(__file__).resolve().parents[2] / "src"


def probe(order: str) -> dict[str, object]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LITELLM_LOCAL_MODEL_COST_MAP", "LITELLM_OFFLINE_MODE")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", PROBE, order], capture_output=True, text=True, env=env, timeout=180, check=True
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
class TestLiteLLMOffline:
    def test_imported_before_litellm_nothing_is_fetched(self) -> None:
        result = probe("adapter-first")
        assert result["calls"] == 0
        assert result["has_gpt_4o"]

    def test_imported_after_litellm_its_retries_end_without_another_fetch(self) -> None:
        result = probe("litellm-first")
        assert result["calls"] >= 1  # litellm's own, while it was imported, before the adapter was
        assert result["after_the_adapter"] == 0
        # The retry thread ends at its next attempt (within litellm's longest wait, 5 s), not 8 s on.
        assert isinstance(result["retrying_for"], float) and result["retrying_for"] < 6.5
        assert result["has_gpt_4o"]
