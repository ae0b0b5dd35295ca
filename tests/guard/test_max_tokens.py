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


class TestAboveTheModelsOutputCap:
    """gpt-4o writes at most 16,384 tokens a reply: 64,000 (pydantic-ai's Anthropic default, reused
    for an OpenAI model) is refused by the provider even where the window has room for it."""

    @pytest.fixture
    def server(self) -> Iterator[LocalServer]:
        with LocalServer(LocalModel(LocalSettings())) as running:
            yield running

    def test_it_is_lowered_to_the_cap_and_the_call_is_accepted(self, server: LocalServer) -> None:
        openai = pytest.importorskip("openai")
        with openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0) as raw:
            bare = raw.chat.completions
            with pytest.raises(openai.BadRequestError):  # the provider refuses it as asked
                bare.create(
                    model="gpt-4o",
                    max_tokens=PYDANTIC_AI_DEFAULT,
                    messages=[{"role": "user", "content": "Hi"}],
                )
            client = contextwindow.guard(raw, store=":memory:")
            response = client.chat.completions.create(
                model="gpt-4o", max_tokens=PYDANTIC_AI_DEFAULT, messages=[{"role": "user", "content": "Hi"}]
            )
            assert response.choices[0].message.content
            assert (
                client.last_exchange.body["max_tokens"] == contextwindow.models.output_cap("gpt-4o") == 16_384
            )
            lowered = [e for e in client.last_exchange.events if e.type == "max_tokens_lowered"]
            assert [(e.asked, e.lowered) for e in lowered] == [(PYDANTIC_AI_DEFAULT, 16_384)]
            client.store.close()

    def test_a_model_no_profile_names_is_not_held_to_a_guessed_cap(self) -> None:
        assert contextwindow.models.output_cap("gpt-4o") == 16_384
        assert contextwindow.models.output_cap("my-own-finetune") is None
