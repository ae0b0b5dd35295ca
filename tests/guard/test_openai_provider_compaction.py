"""``compaction="provider"`` on the OpenAI wires: Responses compaction sent by the guard (the items
before the newest compaction item dropped), and Chat Completions falling back to local folding with
one warning."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow import Message, ToolUse
from contextwindow.compaction import guarded_body, per_call_dollars
from contextwindow.engine import observe
from contextwindow.formats import responses as responses_format
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

openai = LazyModule("openai")

GPT = "gpt-4o"
WINDOW = 16_000
FILE = "a line of the file the agent read, long enough to matter. " * 100  # about 1,200 tokens
TOOLS = [{"type": "function", "name": "read_file", "description": "Read.", "parameters": {"type": "object"}}]


@pytest.fixture
def model() -> LocalModel:
    return LocalModel(LocalSettings(window=WINDOW, prompt_cache=True))


@pytest.fixture
def raw(model: LocalModel) -> Iterator[Any]:
    with (
        LocalServer(model) as server,
        openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0) as client,
    ):
        yield client


def agent(client: Any, model: LocalModel, rounds: int) -> list[Any]:
    """A naive Responses agent: the whole input every call, each output appended, each read answered."""
    model.enqueue(*(Message.assistant(ToolUse(id=f"call_{i}", name="read_file")) for i in range(rounds)))
    items: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    responses = []
    for i in range(rounds):
        response = client.responses.create(model=GPT, input=items, tools=TOOLS, max_output_tokens=1_000)
        responses.append(response)
        items += [o.model_dump(exclude_none=True, warnings=False) for o in response.output]
        calls = [o for o in response.output if o.type == "function_call"]
        items += [
            {"type": "function_call_output", "call_id": c.call_id, "output": f"{i} {FILE}"} for c in calls
        ]
    return responses


class TestResponses:
    def test_a_naive_agent_runs_on_the_providers_compaction_past_the_window(
        self, raw: Any, model: LocalModel
    ) -> None:
        guarded = contextwindow.guard(raw, store=":memory:", compaction="provider", context_window=WINDOW)
        responses = agent(guarded, model, 24)  # about 29k tokens of reads: twice the window
        compacted = [r for r in responses if r.output[0].type == "compaction"]
        assert compacted, "the provider compacted"
        sent = guarded.last_exchange.body
        assert sent["context_management"][0]["type"] == "compaction"
        # Items before the newest compaction item are dropped (OpenAI would read and bill them).
        assert sum(1 for i in sent["input"] if i.get("type") == "compaction") == 1
        assert sent["input"][0]["type"] == "compaction"
        # After a compaction the calls start again from the item: never rejected, never near the window.
        after = responses[responses.index(compacted[0]) + 1 :]
        assert after and all(r.usage.input_tokens < WINDOW for r in after)
        guarded.store.close()

    def test_local_mode_keeps_a_compaction_item_in_the_history_it_renders(self) -> None:
        item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "sealed"}
        body = {
            "model": GPT,
            "input": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": "a"},
                item,
                {"role": "user", "content": "b"},
            ],
        }
        request = responses_format.parse_request(body).request
        count = Estimator(get_profile(GPT)).request
        sent = guarded_body(body, request, mode="provider", wire="openai-responses", room=12_000, count=count)
        assert sent is not None  # something to drop: sent with the provider's compaction
        assert sent["input"] == [body["input"][0], item, body["input"][3]]
        assert (
            guarded_body(body, request, mode="local", wire="openai-responses", room=12_000, count=count)
            is None
        )

    def test_under_the_threshold_with_nothing_to_drop_the_guard_keeps_the_call(self) -> None:
        body = {"model": GPT, "input": [{"role": "user", "content": "a"}]}
        request = responses_format.parse_request(body).request
        count = Estimator(get_profile(GPT)).request
        assert (
            guarded_body(body, request, mode="provider", wire="openai-responses", room=12_000, count=count)
            is None
        )


class TestChatCompletions:
    def test_provider_folds_locally_and_says_so_once(
        self, raw: Any, model: LocalModel, caplog: pytest.LogCaptureFixture
    ) -> None:
        guarded = contextwindow.guard(raw, store=":memory:", compaction="provider", context_window=WINDOW)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
        observe._warned.clear()
        with caplog.at_level(logging.WARNING, logger="contextwindow.guard"):
            for i in range(16):
                messages.append({"role": "user", "content": f"{i} {FILE}"})
                reply = guarded.chat.completions.create(model=GPT, messages=messages, max_tokens=1_000)
                messages.append({"role": "assistant", "content": reply.choices[0].message.content})
                assert reply.usage.prompt_tokens + 1_000 <= WINDOW
        said = [r for r in caplog.records if "no provider compaction" in r.getMessage()]
        assert len(said) == 1  # once, not on every call
        assert "context_management" not in guarded.last_exchange.body
        assert guarded.last_exchange.session_id  # the guard's own path: folded locally
        guarded.store.close()


class TestCostModel:
    def test_openai_compaction_is_priced_cheaper_than_a_local_fold_when_each_call_adds_a_lot(self) -> None:
        dollars = per_call_dollars(
            GPT, wire="openai-responses", room=12_000, head=500, growth=1_200, whole=10_000
        )
        assert dollars is not None and dollars["provider"] < dollars["local"]
