"""``GuardTransform(compaction="provider")``: the provider's own compaction through the proxy, its
fields in the upstream's JSON and its beta beside the agent's own ``anthropic-beta``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow import Message, ToolUse
from contextwindow.server import BackgroundServer
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import proxy_app
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

WINDOW = 16_000
CLAUDE = "claude-sonnet-4-6"
FILE = "a line of the file the agent read, long enough to matter. " * 250  # about 3,000 tokens
TOOLS = [{"name": "read_file", "description": "Read.", "input_schema": {"type": "object", "properties": {}}}]


def tool_rounds(rounds: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
    for i in range(rounds):
        out.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {}}],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i} {FILE}"}
        out.append({"role": "user", "content": [result]})
    return out


@pytest.fixture
def model() -> LocalModel:
    return LocalModel(LocalSettings(window=WINDOW, prompt_cache=True))


@pytest.fixture
def proxy(model: LocalModel) -> Iterator[BackgroundServer]:
    transform = GuardTransform(open_store(":memory:"), context_window=WINDOW, compaction="provider")
    with (
        LocalServer(model) as upstream,
        BackgroundServer(proxy_app(upstream.url, transform=transform)) as running,
    ):
        yield running
    transform.store.close()


class TestAnthropic:
    def test_the_providers_edits_reach_the_upstream_beside_the_agents_betas(
        self, proxy: BackgroundServer
    ) -> None:
        with anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0) as client:
            response = client.messages.create(
                model=CLAUDE,
                max_tokens=1024,
                tools=TOOLS,
                messages=tool_rounds(8),  # about 24k tokens: over the window
                extra_headers={"anthropic-beta": "files-api-2025-04-14"},
            )
        # The local provider refuses context_management without its beta, and reports what it cleared.
        applied = response.model_extra["context_management"]["applied_edits"]
        assert applied[0]["type"] == "clear_tool_uses_20250919" and applied[0]["cleared_tool_uses"] >= 3
        assert response.usage.input_tokens + 1024 <= WINDOW


class TestResponses:
    def test_a_naive_agent_runs_on_openais_compaction_through_the_proxy(
        self, proxy: BackgroundServer, model: LocalModel
    ) -> None:
        file = "a line of the file the agent read, long enough to matter. " * 100
        model.enqueue(*(Message.assistant(ToolUse(id=f"call_{i}", name="read_file")) for i in range(20)))
        items: list[dict[str, Any]] = [{"role": "user", "content": "Read every file."}]
        tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
        kinds = []
        with openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0) as client:
            for i in range(20):  # about 24k tokens of reads: over the window
                response = client.responses.create(
                    model="gpt-4o", input=items, tools=tools, max_output_tokens=1_000
                )
                kinds.append(response.output[0].type)
                items += [o.model_dump(exclude_none=True, warnings=False) for o in response.output]
                items += [
                    {"type": "function_call_output", "call_id": o.call_id, "output": f"{i} {file}"}
                    for o in response.output
                    if o.type == "function_call"
                ]
                assert response.usage.input_tokens < 2 * WINDOW
        assert "compaction" in kinds


class TestAnthropicServerCompaction:
    def test_a_text_history_is_compacted_by_the_provider_and_goes_on_from_its_block(self) -> None:
        window = 100_000
        text = "a line the user pasted into the conversation, long enough to matter. " * 200  # ~3k tokens
        transform = GuardTransform(open_store(":memory:"), context_window=window, compaction="provider")
        with (
            LocalServer(LocalModel(LocalSettings(window=window))) as upstream,
            BackgroundServer(proxy_app(upstream.url, transform=transform)) as running,
            anthropic.Anthropic(base_url=running.url, api_key="k", max_retries=0) as client,
        ):
            messages: list[dict[str, Any]] = []
            kinds = []
            inputs = []
            for turn in range(34):
                messages.append({"role": "user", "content": f"{turn} {text}"})
                reply = client.beta.messages.create(model=CLAUDE, max_tokens=1_000, messages=messages)
                kinds.append(reply.content[0].type)
                inputs.append(reply.usage.input_tokens)
                messages.append(
                    {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
                )
        transform.store.close()
        first = kinds.index("compaction")
        # The calls after the block read the summary and what followed, not the whole history.
        assert inputs[-1] < inputs[first - 1] // 2
        assert max(inputs) + 1_000 <= window
