"""What the guarded proxy does per request does not grow with the history: an agent resending a
history that only grows is priced, compiled and sent without going over the whole history again.

The upstream is the local provider; the agent resends its whole history on every call, as the
benchmark's agent (``benchmarks/proxy.py``) does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextwindow.engine.fit import WindowFit
from contextwindow.server import BackgroundServer
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import proxy_app
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

MODEL = "claude-haiku-4-5"


def _user(i: int) -> dict[str, Any]:
    words = " ".join(f"p10w{i}x{j}" for j in range(60))
    return {"role": "user", "content": f"step {i} of p10: {words}"}


@pytest.fixture
def proxy() -> Iterator[str]:
    with (
        LocalServer(LocalModel(LocalSettings(default_model=MODEL))) as upstream,
        BackgroundServer(
            proxy_app(upstream.url, transform=GuardTransform(open_store(":memory:")))
        ) as running,
    ):
        yield running.url


def _converse(url: str, calls: int, start: int = 9) -> None:
    """An agent of ``start`` messages, then ``calls`` calls, each resending the whole history."""
    history = [
        _user(i) if i % 2 == 0 else {"role": "assistant", "content": f"done {i} " + "ok " * 30}
        for i in range(start)
    ]
    history.append(_user(start))
    with httpx.Client(base_url=url, headers={"x-api-key": "k"}, timeout=30) as client:
        for _ in range(calls):
            answer = client.post("/v1/messages", json={"model": MODEL, "max_tokens": 16, "messages": history})
            assert answer.status_code == 200, answer.text
            history += [{"role": "assistant", "content": answer.json()["content"][0]["text"]}]
            history.append(_user(len(history)))


class TestTheCalibrationStepHolds:
    def test_a_multiplier_learned_near_a_half_step_keeps_the_step_compile_sees(
        self, proxy: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The local provider counts what the estimator prices within 1%: the multiplier settles
        # between two steps. Each step compile sees prices every message of the history again, so
        # the step must not flip as samples come in (it did every 5 calls: each whole-request sample
        # was backed out at the multiplier, not at the step its estimate was made at).
        steps: list[float] = []
        seen = WindowFit.multiplier

        def spy(fit: WindowFit) -> float:
            step = seen(fit)
            if not steps or steps[-1] != step:
                steps.append(step)
            return step

        monkeypatch.setattr(WindowFit, "multiplier", spy)
        _converse(proxy, calls=24)
        assert len(steps) <= 2, steps  # the first step, and at most one move as it settles
