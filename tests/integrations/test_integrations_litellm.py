"""The litellm adapter: real ``litellm.completion``/``acompletion`` routed to the local provider."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

import pytest

from _shared import LazyModule
from contextwindow.testing import LocalServer
from integrations_support import TURNS, WINDOW, ObservedModel, close_the_loop_left_open, notes

if TYPE_CHECKING:
    from contextwindow.integrations.litellm import GuardedLiteLLM

# The adapter imports litellm, which takes seconds: a test imports it, collecting the suite does not.
adapter = LazyModule("contextwindow.integrations.litellm")

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the notes.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]


close_the_loop = pytest.fixture(autouse=True)(close_the_loop_left_open)  # litellm's sync path keeps one open


@pytest.fixture(autouse=True)
def _litellm() -> None:
    pytest.importorskip("litellm")
    adapter.GuardedLiteLLM  # noqa: B018 (the adapter's import sets litellm's model map up)


def routing(server: LocalServer) -> dict[str, Any]:
    return {"model": "openai/gpt-4o", "api_base": server.url + "/v1", "api_key": "local", "num_retries": 0}


def tool_loop(llm: GuardedLiteLLM, server: LocalServer, turns: int, size: int = 150) -> list[dict[str, Any]]:
    """``turns`` user turns of an agent that searches once a turn; each result is ``notes(turn, size)``."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "You search notes."}]
    for turn in range(turns):
        history.append({"role": "user", "content": f"Turn {turn}: notes on topic {turn}."})
        while True:
            response = llm.completion(**routing(server), messages=history, tools=TOOLS)
            message = response.choices[0].message
            history.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                history.append({"role": "tool", "tool_call_id": call.id, "content": notes(str(turn), size)})
    return history


# The default policy archives a stale text result only when it is priced over
# Policy.archive_text_over_tokens (2,048): results under it leave folding as the only way to stay inside
# the window; results over it are archived where the request needs the room (and folds come later).
UNARCHIVABLE = 130  # notes(..., 130): about 1,800 tokens
ARCHIVABLE = 150  # about 2,100 tokens


class TestGuardedLiteLLM:
    def test_a_tool_loop_runs_forty_turns_on_a_16k_window_without_an_error(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        llm = adapter.GuardedLiteLLM(store=":memory:", context_window=WINDOW)
        history = tool_loop(llm, server, TURNS, UNARCHIVABLE)
        assert sum(m["role"] == "tool" for m in history) == TURNS
        assert model.rejections == []
        assert WINDOW * 0.6 < model.largest <= WINDOW
        assert llm.last_exchange is not None
        session = llm.store.session(llm.last_exchange.session_id)
        assert len(session.messages()) == len(history) - 1  # one session, every message kept
        assert session.latest("checkpoint") is not None  # older history folded through litellm

    def test_a_tool_loop_whose_results_can_be_archived_archives_them_where_the_request_needs_room(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        llm = adapter.GuardedLiteLLM(store=":memory:", context_window=WINDOW)
        history = tool_loop(llm, server, TURNS, ARCHIVABLE)
        assert model.rejections == []
        assert WINDOW * 0.5 < model.largest <= WINDOW
        assert llm.last_exchange is not None
        session = llm.store.session(llm.last_exchange.session_id)
        assert len(session.messages()) == len(history) - 1
        assert session.entries(["archive"])  # stale results archived under pressure, re-readable
        # ... only where the request needs the room: the window stays used (archiving every stale
        # result at once kept these requests at a quarter of the budget).
        later = [c.input_tokens or 0 for c in model.calls[len(model.calls) // 2 :]]
        assert sum(later) / len(later) > 0.5 * WINDOW

    def test_a_rejection_litellm_raises_is_recognised_and_recovered_once(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        llm = adapter.GuardedLiteLLM(store=":memory:")  # gpt-4o's profile says 128k; 16k is served
        tool_loop(llm, server, 10)
        assert len(model.rejections) == 1
        assert "maximum context length" in model.rejections[0].message

    def test_acompletion_and_streams_are_guarded(self, server: LocalServer, model: ObservedModel) -> None:
        llm = adapter.GuardedLiteLLM(store=":memory:", context_window=WINDOW)

        async def go() -> list[str]:
            history: list[dict[str, Any]] = []
            texts = []
            for turn in range(6):
                history.append({"role": "user", "content": f"Turn {turn}: {notes(str(turn), 200)}"})
                if turn % 2:
                    response = await llm.acompletion(**routing(server), messages=history)
                    text = response.choices[0].message.content
                else:
                    stream = await llm.acompletion(**routing(server), messages=history, stream=True)
                    text = "".join([c.choices[0].delta.content or "" async for c in stream])
                history.append({"role": "assistant", "content": text})
                texts.append(text)
            return texts

        texts = asyncio.run(go())
        assert all(texts)
        assert model.rejections == []
        assert model.largest <= WINDOW
        session = llm.store.session(llm.last_exchange.session_id)
        assert len(session.messages()) == 12  # streamed replies recorded too

    def test_the_model_profile_is_the_name_without_litellms_provider_prefix(self) -> None:
        from contextwindow.integrations.litellm import _profile_name

        assert _profile_name("openai/gpt-4o") == "gpt-4o"
        assert _profile_name("anthropic/claude-sonnet-4-6") == "claude-sonnet-4-6"

    def test_litellm_reads_its_model_map_from_the_package(self) -> None:
        assert os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"


class TestGuardedLiteLLMBoundAndRereads:
    def test_a_max_tokens_that_cannot_fit_the_served_window_is_sent_lowered(
        self, server: LocalServer, model: ObservedModel
    ) -> None:
        llm = adapter.GuardedLiteLLM(store=":memory:")  # gpt-4o's profile says 128k; 16k is served
        history: list[dict[str, Any]] = []
        for turn in range(4):
            history.append({"role": "user", "content": f"Turn {turn}: {notes(str(turn))}"})
            response = llm.completion(**routing(server), messages=history, max_tokens=16_000)
            history.append({"role": "assistant", "content": response.choices[0].message.content})
        assert len(model.rejections) == 1  # the first call, which taught the window
        assert llm.last_exchange is not None
        lowered = [e for e in llm.last_exchange.events if e.type == "max_tokens_lowered"]
        assert lowered and lowered[0].asked == 16_000 and lowered[0].lowered < WINDOW // 2
        assert llm.last_exchange.body["max_tokens"] == lowered[0].lowered

    def test_the_guard_answers_the_models_re_reads_and_the_agent_never_sees_them(self) -> None:
        from contextwindow.content import ToolResult, ToolUse
        from integrations_support import RereadingModel

        model = RereadingModel()
        with LocalServer(model) as server:
            llm = adapter.GuardedLiteLLM(store=":memory:", context_window=WINDOW)
            history = tool_loop(llm, server, 14, 250)
        assert model.rejections == []
        assert model.rereads, "no archived result was named to the model"
        names = [c["function"]["name"] for m in history for c in m.get("tool_calls") or ()]
        assert "read_archived" not in names  # the agent ran only its own tool
        assert llm.last_exchange is not None
        stored = [m.message for m in llm.store.session(llm.last_exchange.session_id).messages()]
        ids = {
            b.id for m in stored for b in m.content if isinstance(b, ToolUse) and b.name == "read_archived"
        }
        answers = [b for m in stored for b in m.content if isinstance(b, ToolResult) and b.tool_use_id in ids]
        # The model's asks for an id a placeholder named (the local model also calls every tool it is
        # offered with a made-up id, which is answered with an error result).
        named = [a for a in answers if a.tool_use_id.startswith("toolu_reread_")]
        assert named and all(str(a.content).startswith("note on ") for a in named)
