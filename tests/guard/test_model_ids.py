"""The guard with any model name: cloud platforms' ids, deployment names and local models' tags."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

WINDOW = 16_000


def words(turn: int, n: int = 400) -> str:
    return " ".join(f"word{turn}_{i}" for i in range(n))


@pytest.fixture
def server() -> Iterator[LocalServer]:
    # A provider serving less than the profile says, under whatever name it is asked for.
    with LocalServer(LocalModel(LocalSettings(effective_window=WINDOW, any_model=True))) as running:
        yield running


@pytest.fixture
def clients() -> Iterator[list[Any]]:
    opened: list[Any] = []
    yield opened
    for client in opened:
        client.close()


def claude(server: LocalServer, clients: list[Any], **options: Any) -> Any:
    raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
    guarded = contextwindow.guard(raw, store=":memory:", **options)
    clients.extend([raw, guarded.store])
    return guarded


def gpt(server: LocalServer, clients: list[Any], **options: Any) -> Any:
    raw = openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0)
    guarded = contextwindow.guard(raw, store=":memory:", **options)
    clients.extend([raw, guarded.store])
    return guarded


def chat_anthropic(client: Any, model: str, turns: int) -> list[Any]:
    history: list[dict[str, Any]] = []
    events: list[Any] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
        response = client.messages.create(model=model, max_tokens=1024, messages=history)
        history.append({"role": "assistant", "content": response.content})
        events += client.last_exchange.events
    return events


def chat_openai(client: Any, model: str, turns: int) -> list[Any]:
    history: list[dict[str, Any]] = []
    events: list[Any] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
        response = client.chat.completions.create(model=model, max_tokens=1024, messages=history)
        history.append({"role": "assistant", "content": response.choices[0].message.content})
        events += client.last_exchange.events
    return events


class TestPlatformIds:
    def test_a_bedrock_id_with_a_context_window_runs_past_the_window(
        self, server: LocalServer, clients: list[Any]
    ) -> None:
        client = claude(server, clients, context_window=WINDOW)
        events = chat_anthropic(client, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", 30)
        assert client.last_exchange.session_id  # guarded, not passed through
        assert not any(e.type == "overflow_recovered" for e in events)  # never sent too large

    def test_a_bedrock_id_alone_is_guarded_as_the_model_it_names(
        self, server: LocalServer, clients: list[Any]
    ) -> None:
        client = claude(server, clients)
        events = chat_anthropic(client, "anthropic.claude-3-5-sonnet-20241022-v2:0", 30)
        assert sum(e.type == "overflow_recovered" for e in events) == 1  # the rejection taught the window


class TestUnknownNames:
    def test_a_deployment_name_with_a_context_window_is_guarded_and_says_so_once(
        self, server: LocalServer, clients: list[Any], caplog: pytest.LogCaptureFixture
    ) -> None:
        client = gpt(server, clients, context_window=WINDOW)
        with caplog.at_level(logging.WARNING, logger="contextwindow.guard"):
            events = chat_openai(client, "acme-prod-gpt4o-deployment", 30)
        said = [r.getMessage() for r in caplog.records if "acme-prod-gpt4o-deployment" in r.getMessage()]
        assert len(said) == 1 and f"{WINDOW}-token window" in said[0]
        assert client.last_exchange.session_id
        assert not any(e.type == "overflow_recovered" for e in events)

    def test_with_nothing_known_the_first_rejection_teaches_the_window(
        self, server: LocalServer, clients: list[Any]
    ) -> None:
        client = claude(server, clients)
        model = "llama3.1:8b"
        sessions = []
        history: list[dict[str, Any]] = []
        for turn in range(30):
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            response = client.messages.create(model=model, max_tokens=1024, messages=history)
            history.append({"role": "assistant", "content": response.content})
            sessions.append(client.last_exchange.session_id)
        first_guarded = next(i for i, s in enumerate(sessions) if s)
        assert first_guarded > 0  # passed through while nothing was known
        assert all(sessions[first_guarded:])  # and guarded from the first rejection on

    def test_with_nothing_known_and_no_rejection_the_request_goes_out_as_written(
        self, server: LocalServer, clients: list[Any]
    ) -> None:
        client = gpt(server, clients)
        client.chat.completions.create(
            model="Qwen/Qwen2.5-72B-Instruct", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
        )
        assert client.last_exchange.session_id == ""
