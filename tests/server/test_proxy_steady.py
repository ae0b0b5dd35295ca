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
from contextwindow.errors import UsageError
from contextwindow.guard import Exchange
from contextwindow.server import BackgroundServer, guarded
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import proxy_app
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from proxy_support import fake_upstream

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


class TestTheReplyIsRecordedInTheCoresLastStep:
    """A reply that comes whole is recorded in the worker-thread step that ends the core's call: two
    hand-offs to a worker thread per call (compile, then the reply), not three; each costs about
    0.1 ms of CPU on its own."""

    def test_a_call_answered_whole_takes_two_hand_offs(
        self, proxy: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _converse(proxy, calls=2)
        real = guarded.anyio.to_thread.run_sync
        handed: list[str] = []

        async def counted(function: Any, *args: Any, **kwargs: Any) -> Any:
            handed.append(getattr(function, "__name__", repr(function)))
            return await real(function, *args, **kwargs)

        monkeypatch.setattr(guarded.anyio.to_thread, "run_sync", counted)
        _converse(proxy, calls=3)
        assert len(handed) == 2 * 3, handed

    def test_the_reply_is_recorded_before_the_agent_has_it(self) -> None:
        store = open_store(":memory:")
        with (
            fake_upstream() as (upstream, running),
            BackgroundServer(proxy_app(running.url, transform=GuardTransform(store))) as proxy,
        ):
            history = [_user(0)]
            with httpx.Client(base_url=proxy.url, headers={"x-api-key": "k"}, timeout=30) as client:
                answer = client.post(
                    "/v1/messages", json={"model": MODEL, "max_tokens": 16, "messages": history}
                )
                assert answer.status_code == 200, answer.text
                session = store.session(answer.headers["x-contextwindow-session"])
                # Read as soon as the agent has the answer: the reply is in the ledger already.
                stored = [m.message for m in session.messages()]
            assert [m.role for m in stored] == ["user", "assistant"]
            assert len(upstream.seen) == 1

    @pytest.mark.parametrize("failure", [RuntimeError("disk gone"), UsageError("a reply the ledger refuses")])
    def test_a_reply_that_cannot_be_recorded_is_not_sent_again(
        self, failure: Exception, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # The recording runs inside the core's step now; its failure must stay the proxy's own, never
        # be taken for the core's (a UsageError from the core means "nothing to fit": the request
        # would go upstream a second time, as written).
        def refuse(self: Any, reply: Any) -> None:
            raise failure

        monkeypatch.setattr(Exchange, "finish", refuse)
        with (
            fake_upstream() as (upstream, running),
            BackgroundServer(
                proxy_app(running.url, transform=GuardTransform(open_store(":memory:")))
            ) as proxy,
            httpx.Client(base_url=proxy.url, headers={"x-api-key": "k"}, timeout=30) as client,
        ):
            answer = client.post(
                "/v1/messages", json={"model": MODEL, "max_tokens": 16, "messages": [_user(0)]}
            )
            assert answer.status_code >= 500
            assert len(upstream.seen) == 1, [s.path for s in upstream.seen]
