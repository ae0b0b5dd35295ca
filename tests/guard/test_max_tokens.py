"""An output bound that cannot fit the window is lowered, never sent to be refused."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

WINDOW = 20_000
PYDANTIC_AI_DEFAULT = 64_000  # pydantic-ai's Anthropic model asks for 64,000 when no max_tokens is set


@pytest.fixture
def client() -> Iterator[Any]:
    with LocalServer(LocalModel(LocalSettings(effective_window=WINDOW))) as server:
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0, timeout=60)
        guarded = contextwindow.guard(raw, store=":memory:")
        yield guarded
        guarded.store.close()
        raw.close()


class TestImpossibleMaxTokens:
    def test_a_bound_larger_than_the_window_is_lowered_and_no_call_fails(
        self, client: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        history: list[dict[str, Any]] = []
        sent = lowered = 0
        with caplog.at_level(logging.WARNING, logger="contextwindow.guard"):
            for turn in range(40):
                history.append({"role": "user", "content": f"Turn {turn}: " + "word " * 300})
                response = client.messages.create(
                    model="claude-sonnet-4-5", max_tokens=PYDANTIC_AI_DEFAULT, messages=history
                )
                history.append({"role": "assistant", "content": response.content})
                events = client.last_exchange.events
                sent += sum(e.type == "request_sent" for e in events)
                lowered += any(e.type == "max_tokens_lowered" for e in events)
                assert client.last_exchange.body["max_tokens"] < WINDOW
        assert lowered == 40
        assert sent <= 1.25 * 40  # refused once, when the provider named its window
        assert any("max_tokens 64000 cannot fit" in r.getMessage() for r in caplog.records)

    def test_a_bound_that_fits_goes_out_as_asked(self, client: Any) -> None:
        client.messages.create(
            model="claude-sonnet-4-5", max_tokens=1024, messages=[{"role": "user", "content": "Hi"}]
        )
        assert client.last_exchange.body["max_tokens"] == 1024
        assert not any(e.type == "max_tokens_lowered" for e in client.last_exchange.events)
