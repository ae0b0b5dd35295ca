"""The proxy says what it did: response headers and the access line name the session, the tokens
of the agent's request and of the request sent, the actions, the upstream's status and time."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.server import BackgroundServer
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import proxy_app
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
from server_support import access_lines

httpx = LazyModule("httpx")

ENFORCED = 16_000
TURNS = 10


@pytest.fixture
def proxy() -> Iterator[BackgroundServer]:
    settings = LocalSettings(effective_window=ENFORCED, default_model="claude-haiku-4-5")
    with (
        LocalServer(LocalModel(settings)) as upstream,
        BackgroundServer(
            proxy_app(upstream.url, transform=GuardTransform(open_store(":memory:")))
        ) as running,
    ):
        yield running


def _turns(url: str) -> list[Any]:
    history: list[dict[str, Any]] = []
    answers = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for turn in range(TURNS):
            history.append({"role": "user", "content": f"turn {turn}: " + "listing line " * 1_000})
            answer = client.post(
                "/v1/messages",
                headers={"x-api-key": "tenant-a", "anthropic-version": "2023-06-01"},
                json={"model": "claude-haiku-4-5", "max_tokens": 256, "messages": history},
            )
            assert answer.status_code == 200
            history.append({"role": "assistant", "content": answer.json()["content"]})
            answers.append(answer)
    return answers


class TestTheProxySaysWhatItDid:
    def test_headers_name_the_session_the_tokens_and_the_actions(self, proxy: BackgroundServer) -> None:
        answers = _turns(proxy.url)
        sessions = {a.headers["x-contextwindow-session"] for a in answers}
        assert len(sessions) == 1
        (session,) = sessions
        assert session.startswith("t") and "/" in session  # the tenant's hash, then the session
        sent = [int(a.headers["x-contextwindow-tokens-sent"]) for a in answers]
        asked = [int(a.headers["x-contextwindow-tokens-in"]) for a in answers]
        assert all(s + 256 <= ENFORCED for s in sent)
        assert (
            asked[-1] > ENFORCED > sent[-1]
        )  # the agent's history outgrew the window; what was sent did not
        actions = [a.headers["x-contextwindow-actions"] for a in answers]
        assert actions[0] == "none"
        assert sum("window_learned" in a for a in actions) == 1
        assert sum("retried" in a for a in actions) == 1
        assert any("folded" in a for a in actions)
        assert all(float(a.headers["x-contextwindow-upstream-ms"]) > 0 for a in answers)

    def test_the_access_line_repeats_them_with_the_tenant(self, proxy: BackgroundServer) -> None:
        with access_lines() as caught:
            answers = _turns(proxy.url)
            lines = caught.wait(answers[-1].headers["x-contextwindow-session"], count=TURNS)
        proxied = [json.loads(line) for line in lines if '"path":"/v1/messages"' in line]
        proxied = [p for p in proxied if "session" in p]
        assert len(proxied) == TURNS
        for line, answer in zip(proxied, answers, strict=True):
            assert line["session"] == answer.headers["x-contextwindow-session"]
            assert line["tenant"] == line["session"].split("/")[0]
            assert line["status"] == 200
            assert line["tokens_sent"] == int(answer.headers["x-contextwindow-tokens-sent"])
            assert line["tokens_in"] == int(answer.headers["x-contextwindow-tokens-in"])
            assert isinstance(line["actions"], list) and isinstance(line["upstream_ms"], float)
        assert any("window_learned" in p["actions"] for p in proxied)
