"""``guard(client, compaction=…)``: the provider's own context editing as the strategy, local
folding when the provider's edits cannot make the request fit, and ``"auto"`` choosing the cheaper."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.compaction import (
    ANTHROPIC_CONTEXT_BETA,
    auto_choice,
    cheaper,
    guarded_body,
    on_the_wire,
    provider_plan,
)
from contextwindow.content import Message, Request, Text, ToolResult, ToolUse
from contextwindow.errors import InvalidInput
from contextwindow.guard import GuardOptions
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

CLAUDE = "claude-sonnet-4-6"
WINDOW = 16_000
TOOLS = [
    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}
]
FILE = "a line of the file the agent read, long enough to matter. " * 250  # about 3,000 tokens


def words(turn: int, n: int = 400) -> str:
    return " ".join(f"word{turn}_{i}" for i in range(n))


def tool_rounds(rounds: int) -> list[dict[str, Any]]:
    """A history of ``rounds`` file reads, about 3k tokens each: over the window from 6 rounds."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for i in range(rounds):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {}}
        out.append({"role": "assistant", "content": [use]})
        out.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i} {FILE}"}],
            }
        )
    return out


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(LocalModel(LocalSettings(window=WINDOW))) as running:
        yield running


@pytest.fixture
def claude(server: LocalServer) -> Iterator[Any]:
    opened: list[Any] = []

    def make(**kwargs: Any) -> Any:
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
        guarded = contextwindow.guard(raw, store=":memory:", **kwargs)
        opened.extend([raw, guarded.store])
        return guarded

    yield make
    for client in opened:
        client.close()


class TestProvider:
    def test_an_over_window_history_is_sent_with_the_providers_edits_and_succeeds(self, claude: Any) -> None:
        client = claude(compaction="provider", context_window=WINDOW)
        history = tool_rounds(8)  # about 24k tokens: over the 16k window
        response = client.messages.create(model=CLAUDE, max_tokens=1024, tools=TOOLS, messages=history)
        assert response.usage.input_tokens + 1024 <= WINDOW
        sent = client.last_exchange.body
        assert sent["messages"] == history  # the agent's history, unfolded: the provider cleared it
        assert sent["extra_headers"]["anthropic-beta"] == ANTHROPIC_CONTEXT_BETA
        edits = sent["extra_body"]["context_management"]["edits"]
        assert edits[0]["type"] == "clear_tool_uses_20250919"
        applied = response.model_extra["context_management"]["applied_edits"]
        assert applied[0]["cleared_tool_uses"] >= 3

    def test_the_agents_own_extra_headers_and_betas_are_kept_beside_the_providers(self, claude: Any) -> None:
        client = claude(compaction="provider", context_window=WINDOW)
        response = client.messages.create(
            model=CLAUDE,
            max_tokens=1024,
            tools=TOOLS,
            messages=tool_rounds(8),
            extra_headers={"anthropic-beta": "files-api-2025-04-14", "x-agent": "1"},
            extra_body={"metadata": {"user_id": "u1"}},
        )
        assert response.model_extra["context_management"]["applied_edits"]  # our beta reached it

    def test_a_window_learned_from_a_rejection_bounds_the_providers_edits_next(self, claude: Any) -> None:
        client = claude(compaction="provider")  # the 16k window is unknown: the profile says 1M
        first = client.messages.create(model=CLAUDE, max_tokens=1024, tools=TOOLS, messages=tool_rounds(8))
        assert first.usage.input_tokens + 1024 <= WINDOW  # folded locally after the rejection
        assert "extra_body" not in client.last_exchange.body
        history = tool_rounds(10)
        response = client.messages.create(model=CLAUDE, max_tokens=1024, tools=TOOLS, messages=history)
        assert response.usage.input_tokens + 1024 <= WINDOW
        assert client.last_exchange.body["messages"] == history  # the provider's edits, unfolded

    def test_when_the_edits_cannot_make_it_fit_the_guard_folds_locally(self, claude: Any) -> None:
        client = claude(compaction="provider")
        history: list[dict[str, Any]] = []
        for turn in range(30):  # plain text: nothing the provider's clearing can free
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
            history.append({"role": "assistant", "content": response.content})
            assert response.usage.input_tokens + 1024 <= WINDOW
        assert client.last_exchange.session_id != ""  # the guard's own path, no deadlock
        assert "extra_body" not in client.last_exchange.body

    @pytest.mark.parametrize("mode", ["provider", "auto"])
    def test_a_history_that_grew_prices_only_its_new_messages_for_the_edits(
        self, claude: Any, mode: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Pricing the request and the provider's edits of it (two to four whole requests a call)
        prices each message of the agent's history once: a call that adds two prices about two."""
        client = claude(compaction=mode)
        priced: list[int] = []
        for name in ("block", "raw_block"):  # every block priced, by any estimator
            original = getattr(Estimator, name)
            monkeypatch.setattr(
                Estimator, name, lambda self, block, _f=original: priced.append(1) or _f(self, block)
            )
        history: list[dict[str, Any]] = []
        per_call = []
        for turn in range(12):
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn, 40)}"})
            before = len(priced)
            response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
            per_call.append(len(priced) - before)
            history.append({"role": "assistant", "content": response.content})
        assert max(per_call[3:]) <= 12, per_call  # the new messages' blocks, not the whole history's

    def test_local_never_sends_the_providers_edits(self, claude: Any) -> None:
        client = claude()
        client.messages.create(model=CLAUDE, max_tokens=1024, tools=TOOLS, messages=tool_rounds(8))
        assert "extra_body" not in client.last_exchange.body
        assert client.last_exchange.session_id != ""

    def test_an_unknown_mode_is_refused(self) -> None:
        with pytest.raises(InvalidInput, match="compaction"):
            GuardOptions(compaction="server")  # type: ignore[arg-type]


def canonical(results: int, text_turns: int, result: str = FILE, *, results_first: bool = False) -> Request:
    reads: list[Message] = [Message(role="user", content=(Text(text="Read the files."),))]
    for i in range(results):
        reads.append(Message(role="assistant", content=(ToolUse(id=f"toolu_{i}", name="read_file"),)))
        reads.append(
            Message(role="user", content=(ToolResult(tool_use_id=f"toolu_{i}", content=f"{i} {result}"),))
        )
    talk: list[Message] = []
    for t in range(text_turns):
        talk.append(Message(role="user", content=(Text(text=f"Turn {t}: {words(t, 150)}"),)))
        talk.append(Message(role="assistant", content=(Text(text=f"Answer {t}."),)))
    messages = [*reads, *talk] if results_first else [*talk, *reads]
    if results_first:
        messages.append(Message(role="user", content=(Text(text="Go on."),)))
    return Request(model=CLAUDE, messages=tuple(messages))


class TestAuto:
    count = staticmethod(Estimator(get_profile(CLAUDE)).request)
    room = WINDOW - 1024

    def choice(self, request: Request) -> str:
        plan = provider_plan(
            request, trigger=int(self.room * 0.8), limit=int(self.room * 0.95), count=self.count
        )
        assert plan.fits
        return auto_choice(request, plan, whole=self.count(request), room=self.room, count=self.count)

    def test_cheaper_picks_the_lower_cost_and_local_on_a_tie(self) -> None:
        assert cheaper(local_dollars=0.02, provider_dollars=0.01) == "provider"
        assert cheaper(local_dollars=0.01, provider_dollars=0.02) == "local"
        assert cheaper(local_dollars=0.01, provider_dollars=0.01) == "local"

    def test_tool_results_that_free_most_of_the_window_go_to_the_provider(self) -> None:
        # Each call adds a 3k result: a fold would be due again at once, the clearing costs one write.
        assert self.choice(canonical(results=8, text_turns=0)) == "provider"

    def test_clearing_that_frees_a_little_each_call_goes_local(self) -> None:
        # A long talk that grows a line a call: the clearing rewrites the cache every call, a fold
        # pays once for many calls of cache reads.
        request = canonical(results=5, text_turns=16, result="a short file line. " * 150, results_first=True)
        assert self.choice(request) == "local"

    def test_auto_in_the_guard_sends_the_providers_edits_where_they_are_cheaper(self) -> None:
        request = canonical(results=8, text_turns=0)
        body: dict[str, Any] = {"model": CLAUDE, "max_tokens": 1024, "messages": []}
        sent = guarded_body(body, request, mode="auto", wire="anthropic", room=self.room, count=self.count)
        assert sent is not None and "context_management" in sent["extra_body"]
        assert (
            guarded_body(body, request, mode="auto", wire="openai", room=self.room, count=self.count) is None
        )
        json_body, headers = on_the_wire(sent)
        assert json_body["context_management"] == sent["extra_body"]["context_management"]
        assert "extra_body" not in json_body and headers == {"anthropic-beta": ANTHROPIC_CONTEXT_BETA}


class TestLearnedFromTheProvidersPath:
    def test_a_window_a_provider_call_was_refused_at_is_kept_in_the_ledger(
        self, server: LocalServer, tmp_path: Any
    ) -> None:
        # Results of about 6k tokens: the newest three the clearing keeps are over the 16k window.
        big = FILE * 2
        history: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
        for i in range(12):
            history.append(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {}}],
                }
            )
            history.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i} {big}"}
                    ],
                }
            )
        store = str(tmp_path / "ledger.db")
        with anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw:
            first = contextwindow.guard(raw, store=store, compaction="provider", context_window=64_000)
            first.messages.create(model=CLAUDE, max_tokens=1024, tools=TOOLS, messages=history)
            assert "extra_body" not in first.last_exchange.body  # refused with the edits: folded locally
            first.store.close()
            # Another guard on the same ledger, told the same window, knows the window the provider
            # really serves (a lesson is the endpoint's: the same wire and declared window): the
            # provider's edits fit it at once.
            second = contextwindow.guard(raw, store=store, compaction="provider", context_window=64_000)
            response = second.messages.create(
                model=CLAUDE, max_tokens=1024, tools=TOOLS, messages=tool_rounds(8)
            )
            assert "extra_body" in second.last_exchange.body
            assert response.usage.input_tokens + 1024 <= WINDOW
            second.store.close()
