"""OpenTelemetry spans of a guarded run, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.errors import UsageError
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

WINDOW = 16_000
TURNS = 12


@pytest.fixture
def exporter() -> Iterator[Any]:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import contextwindow.otel

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    contextwindow.otel.instrument(tracer_provider=provider)
    yield memory
    contextwindow.otel.uninstrument()
    provider.shutdown()


def _run(url: str) -> str:
    raw = anthropic.Anthropic(api_key="local", base_url=url, max_retries=0, timeout=60)
    client = contextwindow.guard(raw, store=":memory:")
    history: list[dict[str, Any]] = []
    for turn in range(TURNS):
        history.append({"role": "user", "content": f"Turn {turn}: " + "word " * 1_500})
        response = client.messages.create(model="claude-sonnet-4-5", max_tokens=1_024, messages=history)
        history.append({"role": "assistant", "content": response.content})
    session: str = client.last_exchange.session_id
    client.store.close()
    raw.close()
    return session


class TestSpans:
    def test_each_call_is_a_genai_span_with_what_contextwindow_did(self, exporter: Any) -> None:
        with LocalServer(LocalModel(LocalSettings(effective_window=WINDOW))) as server:
            session = _run(server.url)
        spans = exporter.get_finished_spans()
        assert len(spans) == TURNS + 1  # the turns, and the one the provider refused
        assert all(s.name == "chat claude-sonnet-4-5" for s in spans)
        attrs = [dict(s.attributes) for s in spans]
        assert all(a["gen_ai.operation.name"] == "chat" for a in attrs)
        assert all(a["gen_ai.request.model"] == "claude-sonnet-4-5" for a in attrs)
        assert all(a["gen_ai.conversation.id"] == session for a in attrs)
        assert all(a["gen_ai.request.max_tokens"] == 1_024 for a in attrs)
        refused = [a for a in attrs if a.get("error.type") == "context_overflow"]
        assert len(refused) == 1 and refused[0]["contextwindow.refused.limit"] == WINDOW
        assert "gen_ai.usage.input_tokens" not in refused[0]
        answered = [a for a in attrs if "error.type" not in a]
        assert all(
            a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0 for a in answered
        )
        assert all(a["gen_ai.response.finish_reasons"] == ("end_turn",) for a in answered)
        assert all(a["gen_ai.usage.input_tokens"] + 1_024 <= WINDOW for a in attrs[-3:])
        retry = attrs[attrs.index(refused[0]) + 1]
        assert retry["contextwindow.retry"] is True
        assert retry["contextwindow.window_learned"] == WINDOW
        assert retry["contextwindow.window"] == WINDOW
        assert sum(a["contextwindow.folds"] for a in attrs) >= 1
        assert sum(a["contextwindow.tokens_freed"] for a in attrs) > 0
        assert all(
            a["contextwindow.agent_request.tokens"] >= a["contextwindow.request.tokens"] * 0.9 for a in attrs
        )
        assert all(s.start_time <= s.end_time for s in spans)
        if contextwindow.cost.available():
            assert all(a["contextwindow.cost.usd"] > 0 for a in answered)

    def test_no_span_once_uninstrumented(self, exporter: Any) -> None:
        import contextwindow.otel

        contextwindow.otel.uninstrument()
        with LocalServer(LocalModel(LocalSettings())) as server:
            _run(server.url)
        assert exporter.get_finished_spans() == ()

    def test_without_opentelemetry_instrument_names_the_extra(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import contextwindow.otel

        monkeypatch.setitem(sys.modules, "opentelemetry", None)
        with pytest.raises(UsageError, match=r"contextwindow\[otel\]"):
            contextwindow.otel.instrument()
