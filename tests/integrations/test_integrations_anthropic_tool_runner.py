"""The Anthropic SDK's tool runner (``client.beta.messages.tool_runner``) under ``contextwindow.guard``:
the SDK's own loop over a provider serving 16,000 tokens where the model's profile says 200k."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.testing import LocalServer
from integrations_support import WINDOW, ObservedModel, notes, png

anthropic = LazyModule("anthropic")
contextwindow = LazyModule("contextwindow")

MODEL = "claude-sonnet-4-5"


@pytest.fixture(autouse=True)
def _anthropic() -> None:
    pytest.importorskip("anthropic")


def prompt(turn: int) -> dict[str, Any]:
    """A user turn; every fifth carries a photo."""
    text = {"type": "text", "text": f"Turn {turn}: notes on topic {turn}."}
    if turn % 5 != 4:
        return {"role": "user", "content": [text]}
    data = base64.b64encode(png(800, 600)).decode("ascii")
    photo = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    return {"role": "user", "content": [text, photo]}


def search_tool(runs: list[str], *, is_async: bool = False) -> Any:
    if is_async:

        @anthropic.beta_async_tool
        async def search(query: str) -> str:
            """Search the notes.

            Args:
                query: what to look for.
            """
            runs.append(query)
            return notes(query)

        return search

    @anthropic.beta_tool
    def search_sync(query: str) -> str:
        """Search the notes.

        Args:
            query: what to look for.
        """
        runs.append(query)
        return notes(query)

    return search_sync


def record(messages: list[Any], runner: Any, message: Any) -> None:
    """What the user's loop keeps of each step (the SDK's documented pattern): the reply, then the
    tool results the runner made for it (cached: the tools run once)."""
    messages.append({"role": "assistant", "content": message.content})
    response = runner.generate_tool_call_response()
    if response is not None:
        messages.append(response)


class TestToolRunnerUnderTheGuard:
    @pytest.mark.parametrize("stream", [False, True], ids=["messages", "streamed"])
    def test_the_runner_holds_thirty_two_turns_with_photos_without_being_told_the_window(
        self, server: LocalServer, model: ObservedModel, stream: bool
    ) -> None:
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
        client = contextwindow.guard(raw, store=":memory:")
        runs: list[str] = []
        tool = search_tool(runs)
        messages: list[Any] = []
        for turn in range(32):
            messages.append(prompt(turn))
            runner = client.beta.messages.tool_runner(
                model=MODEL, max_tokens=1024, tools=[tool], messages=messages, stream=stream
            )
            for step in runner:
                record(messages, runner, step.get_final_message() if stream else step)
        assert len(runs) == 32  # the tool ran once per call that asked for it
        assert len(model.rejections) == 1  # the first overflow taught the window
        assert model.largest <= WINDOW
        assert sum(m["role"] == "user" and m["content"][0].get("type") == "text" for m in messages) == 32
        session = client.store.session(client.last_exchange.session_id)
        assert session.latest("checkpoint") is not None  # older history folded, kept in the ledger
        raw.close()

    def test_the_async_runner_is_guarded_too(self, server: LocalServer, model: ObservedModel) -> None:
        runs: list[str] = []

        async def go() -> None:
            raw = anthropic.AsyncAnthropic(api_key="local", base_url=server.url, max_retries=0)
            client = contextwindow.guard(raw, store=":memory:")
            tool = search_tool(runs, is_async=True)
            messages: list[Any] = []
            for turn in range(12):
                messages.append(prompt(turn))
                runner = client.beta.messages.tool_runner(
                    model=MODEL, max_tokens=1024, tools=[tool], messages=messages
                )
                async for message in runner:
                    messages.append({"role": "assistant", "content": message.content})
                    response = await runner.generate_tool_call_response()
                    if response is not None:
                        messages.append(response)
            await raw.close()

        asyncio.run(go())
        assert len(runs) == 12
        assert len(model.rejections) == 1
        assert model.largest <= WINDOW

    def test_the_bare_runner_fails_once_the_history_passes_the_served_window(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        with anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as client:
            runs: list[str] = []
            tool = search_tool(runs)
            messages: list[Any] = []
            with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
                for turn in range(32):
                    messages.append(prompt(turn))
                    runner = client.beta.messages.tool_runner(
                        model=MODEL, max_tokens=1024, tools=[tool], messages=messages, thread=False
                    )
                    for message in runner:
                        record(messages, runner, message)
