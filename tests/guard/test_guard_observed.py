"""What a guarded run tells its host: a log line per call, the events through ``on_event``, the cost.

The provider serves less than the model's profile says (the local provider's ``effective_window``):
the first rejection teaches the window, and the logs, the events and the ledger say so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.engine.events import Event, UsageReported, WindowLearned
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

WINDOW = 16_000
TURNS = 12


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(LocalModel(LocalSettings(effective_window=WINDOW))) as running:
        yield running


def _run(client: Any, turns: int = TURNS) -> None:
    history: list[dict[str, Any]] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Turn {turn}: " + "word " * 1_500})
        response = client.messages.create(model="claude-sonnet-4-5", max_tokens=1_024, messages=history)
        history.append({"role": "assistant", "content": response.content})


class TestGuardedRunObserved:
    def test_each_call_is_one_info_line_naming_the_session_and_the_learned_window(
        self, server: LocalServer, caplog: pytest.LogCaptureFixture
    ) -> None:
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0, timeout=60)
        client = contextwindow.guard(raw, store=":memory:")
        with caplog.at_level(logging.INFO, logger="contextwindow"):
            _run(client)
        session = client.last_exchange.session_id
        lines = [r for r in caplog.records if r.name == "contextwindow.engine" and r.levelno == logging.INFO]
        calls = [r.getMessage() for r in lines]
        # One line per provider call: the turns, plus the refused one and the summariser's calls
        # (which are not the engine's calls and have no line).
        assert len(calls) >= TURNS
        assert all(f"session {session}" in line for line in calls)
        refused = [line for line in calls if "refused for size" in line]
        assert len(refused) == 1
        learned = [line for line in calls if f"window learned {WINDOW:,}" in line]
        assert len(learned) == 1
        assert "retried after a rejection for size" in learned[0]
        assert any("folded" in line for line in calls)
        assert all("asked " in line and "sent " in line for line in calls)
        # No message content at INFO: the agent's words never appear.
        assert not any("word word" in r.getMessage() for r in caplog.records)
        client.store.close()
        raw.close()

    def test_on_event_receives_the_events_of_each_exchange_once(self, server: LocalServer) -> None:
        seen: list[Event] = []
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0, timeout=60)
        client = contextwindow.guard(raw, store=":memory:", on_event=seen.append)
        exchanged: list[Event] = []
        history: list[dict[str, Any]] = []
        for turn in range(TURNS):
            history.append({"role": "user", "content": f"Turn {turn}: " + "word " * 1_500})
            response = client.messages.create(model="claude-sonnet-4-5", max_tokens=1_024, messages=history)
            history.append({"role": "assistant", "content": response.content})
            exchanged.extend(client.last_exchange.events)
        assert [id(e) for e in seen] == [id(e) for e in exchanged]
        learned = [e for e in seen if isinstance(e, WindowLearned)]
        assert learned == [WindowLearned(window=WINDOW, previous=learned[0].previous)]
        assert learned[0].previous is not None and learned[0].previous > WINDOW
        usage = [e for e in seen if isinstance(e, UsageReported)]
        assert len(usage) == TURNS
        client.store.close()
        raw.close()

    def test_each_call_is_priced_in_dollars(self, server: LocalServer) -> None:
        pytest.importorskip("genai_prices")
        seen: list[Event] = []
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0, timeout=60)
        client = contextwindow.guard(raw, store=":memory:", on_event=seen.append)
        _run(client, turns=2)
        usage = [e for e in seen if isinstance(e, UsageReported)]
        for event in usage:
            assert event.cost is not None
            # Claude Sonnet 4.5: $3 per million input tokens, $15 per million output tokens.
            expected_input = event.usage.prompt * 3 / 1_000_000
            assert float(event.cost.input) == pytest.approx(expected_input, rel=1e-9)
            assert float(event.cost.output) == pytest.approx(event.usage.output * 15 / 1_000_000, rel=1e-9)
        client.store.close()
        raw.close()

    def test_nothing_is_logged_unless_the_application_configures_logging(self) -> None:
        logger = logging.getLogger("contextwindow")
        assert any(isinstance(h, logging.NullHandler) for h in logger.handlers)
        assert logger.level == logging.NOTSET
