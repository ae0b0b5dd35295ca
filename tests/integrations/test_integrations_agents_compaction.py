"""The OpenAI Agents SDK on a guarded ``AsyncOpenAI`` with ``compaction="provider"``: a ``Runner.run``
tool loop twice the window long runs on OpenAI's Responses compaction (the SDK keeps the
``compaction`` items, the guard drops what precedes the newest)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow import Message, ToolUse
from contextwindow.guard import store_of
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

agents = LazyModule("agents")
openai = LazyModule("openai")

WINDOW = 16_000
FILE = "a line of the file the agent read, long enough to matter. " * 100  # about 1,200 tokens
READS = 20  # about 24k tokens of results: over the window


@pytest.fixture(autouse=True)
def _agents() -> None:
    pytest.importorskip("agents")
    agents.set_tracing_disabled(True)


def read_file_tool() -> Any:
    @agents.function_tool
    def read_file(path: str) -> str:
        """Read a file."""
        return f"{path} {FILE}"

    return read_file


async def run(compaction: str) -> Any:
    model = LocalModel(LocalSettings(window=WINDOW, prompt_cache=True))
    reads = (
        Message.assistant(ToolUse(id=f"call_{i}", name="read_file", input={"path": f"f{i}"}))
        for i in range(READS)
    )
    model.enqueue(*reads, Message.assistant("Done."))
    with LocalServer(model) as server:
        async with openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="local", max_retries=0) as raw:
            client = contextwindow.guard(raw, store=":memory:", compaction=compaction, context_window=WINDOW)
            agent = agents.Agent(
                name="reader",
                instructions="Read the files.",
                tools=[read_file_tool()],
                model=agents.OpenAIResponsesModel("gpt-4o", client),
                model_settings=agents.ModelSettings(max_tokens=1_000),
            )
            result = await agents.Runner.run(agent, "Read every file.", max_turns=READS + 5)
            store_of(client).close()
            return result


class TestAgentsOnProviderCompaction:
    def test_a_tool_loop_twice_the_window_runs_on_the_providers_compaction(self) -> None:
        result = asyncio.run(run("provider"))
        assert result.final_output == "Done."
        kinds = [type(item).__name__ for item in result.new_items]
        assert "CompactionItem" in kinds
        assert all(r.usage.input_tokens < WINDOW for r in result.raw_responses)
