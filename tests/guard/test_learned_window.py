"""What a provider taught of its window is kept in the ledger: a new client per call, another guard
on the same store, a branch of the conversation all start from it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

WINDOW = 16_000
CLAUDE = "claude-sonnet-4-6"


def words(turn: int, n: int = 400) -> str:
    return " ".join(f"word{turn}_{i}" for i in range(n))


@pytest.fixture
def server() -> Iterator[LocalServer]:
    # A provider serving less than the model's profile says (200k).
    with LocalServer(LocalModel(LocalSettings(effective_window=WINDOW))) as running:
        yield running


def _recovered(events: list[Any]) -> int:
    return sum(e.type == "overflow_recovered" for e in events)


class TestANewClientPerCall:
    def test_the_window_is_learned_once_for_every_client_on_the_store(
        self, server: LocalServer, tmp_path: Path
    ) -> None:
        store = str(tmp_path / "ledger.db")
        history: list[dict[str, Any]] = []
        recovered = 0
        for turn in range(24):
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            with anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw:
                client = contextwindow.guard(raw, store=store)
                response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
                recovered += _recovered(client.last_exchange.events)
                client.store.close()
            history.append({"role": "assistant", "content": response.content})
        assert recovered == 1  # the first rejection taught the window; no later client was refused

    def test_a_branch_starts_from_the_window_its_parent_learned(self, server: LocalServer) -> None:
        with anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw:
            client = contextwindow.guard(raw, store=":memory:")
            history: list[dict[str, Any]] = []
            events: list[Any] = []
            for turn in range(24):
                history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
                if turn % 4 == 3:
                    history[0] = {"role": "user", "content": f"Edited {turn}: {words(0)}"}  # a branch
                response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
                events += client.last_exchange.events
                history.append({"role": "assistant", "content": response.content})
            assert _recovered(events) == 1
            client.store.close()


class _Refusing:
    """A summary client whose every call fails with the SDK's own error type (a 400 it raises)."""

    def __init__(self) -> None:
        self.calls = 0
        self.messages = self

    def create(self, **body: Any) -> Any:
        self.calls += 1
        raise RuntimeError("Error code: 400 - prompt is too long: 15537 + 1417 > 16000")


class TestTheSummariser:
    def test_a_refused_summary_call_never_reaches_the_agent(self, server: LocalServer) -> None:
        refusing = _Refusing()
        with anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw:
            client = contextwindow.guard(raw, store=":memory:")
            client._summary_client = refusing  # the summariser's calls go through this client
            history: list[dict[str, Any]] = []
            for turn in range(24):
                history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
                response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
                history.append({"role": "assistant", "content": response.content})
            client.store.close()
        assert refusing.calls > 0  # it did try to summarise, and the fold cut instead

    def test_a_summary_refused_for_size_through_the_sdk_is_halved_and_asked_again(
        self, server: LocalServer
    ) -> None:
        # The summariser's own endpoint serves less than the agent's: its SDK refuses the first ask.
        small = LocalModel(LocalSettings(effective_window=5_000))
        refused = [0]
        handle = small.handle

        def counted(request: Any, *args: Any, **kwargs: Any) -> Any:
            answer = handle(request, *args, **kwargs)
            refused[0] += type(answer).__name__ == "Rejection"
            return answer

        small.handle = counted  # type: ignore[method-assign]
        events: list[Any] = []
        with (
            LocalServer(small) as summaries,
            anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw,
            anthropic.Anthropic(api_key="local", base_url=summaries.url, max_retries=0) as summary_raw,
        ):
            client = contextwindow.guard(raw, store=":memory:", summarizer=summary_raw)
            history: list[dict[str, Any]] = []
            for turn in range(24):
                history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
                response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
                events += client.last_exchange.events
                history.append({"role": "assistant", "content": response.content})
            client.store.close()
        assert refused[0] > 0  # the summariser's endpoint did refuse
        summarised = [e for e in events if e.type == "compacted" and e.summarizer_calls > 0]
        assert summarised  # and the halved ask was summarised, not cut
