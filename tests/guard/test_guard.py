"""``contextwindow.guard(client)`` with the real SDK clients against the local provider over HTTP."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow import ContextOverflow, Message, Policy, Text, ToolUse
from contextwindow.guard import GuardCore, GuardOptions, Reply, Send, run_sync
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-4o"
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file of the project.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }
]
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the project.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    }
]


def words(turn: int, n: int = 400) -> str:
    return " ".join(f"word{turn}_{i}" for i in range(n))


@pytest.fixture
def model() -> LocalModel:
    return LocalModel(LocalSettings(window=16_000))


@pytest.fixture
def server(model: LocalModel) -> Iterator[LocalServer]:
    with LocalServer(model) as running:
        yield running


@pytest.fixture
def clients(server: LocalServer) -> Iterator[list[Any]]:
    """Every SDK client a test opens, closed after it (an open connection is a ResourceWarning)."""
    opened: list[Any] = []
    yield opened
    for client in opened:
        client.close()


@pytest.fixture
def claude(server: LocalServer, clients: list[Any]) -> Any:
    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("store", ":memory:")
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
        clients.append(raw)
        guarded = contextwindow.guard(raw, **kwargs)
        clients.append(guarded.store)
        return guarded

    return make


@pytest.fixture
def gpt(server: LocalServer, clients: list[Any]) -> Any:
    def make(**kwargs: Any) -> Any:
        kwargs.setdefault("store", ":memory:")
        raw = openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0)
        clients.append(raw)
        guarded = contextwindow.guard(raw, **kwargs)
        clients.append(guarded.store)
        return guarded

    return make


class TestOneLine:
    def test_a_long_chat_never_reaches_the_window_the_provider_enforces(self, claude: Any) -> None:
        client = claude()
        history: list[dict[str, Any]] = []
        sizes = []
        for turn in range(30):
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            response = client.messages.create(
                model=CLAUDE, max_tokens=1024, system="Be brief.", messages=history
            )
            assert isinstance(response, anthropic.types.Message)
            history.append({"role": "assistant", "content": response.content})
            sizes.append(response.usage.input_tokens)
        assert max(sizes) + 1024 <= 16_000
        session = client.store.session(client.last_exchange.session_id)
        assert session.latest("checkpoint") is not None  # older history was folded, not dropped
        assert len(session.messages()) == 60  # one session: every call continued the same history
        assert sizes[-1] > 0.6 * 16_000  # and the window is used once full

    def test_the_first_rejection_teaches_the_window_and_the_retry_is_accepted(
        self, server: LocalServer, claude: Any
    ) -> None:
        client = claude()
        history: list[dict[str, Any]] = []
        recovered = 0
        for turn in range(12):
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            response = client.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
            history.append({"role": "assistant", "content": response.content})
            recovered += sum(e.type == "overflow_recovered" for e in client.last_exchange.events)
        assert recovered == 1

    def test_a_message_larger_than_the_window_raises_context_overflow_with_the_providers_numbers(
        self, server: LocalServer, claude: Any
    ) -> None:
        # No per-message cap: with the default one (half the budget) compile cuts the message once the
        # rejection taught the window, and the retry is accepted.
        client = claude(policy=Policy(max_message_tokens=0))
        with pytest.raises(ContextOverflow) as raised:
            client.messages.create(
                model=CLAUDE, max_tokens=1024, messages=[{"role": "user", "content": words(0, 9000)}]
            )
        assert raised.value.limit == 16_000
        assert isinstance(raised.value.__cause__, anthropic.BadRequestError)

    def test_a_message_over_the_cap_is_cut_once_the_rejection_taught_the_window(self, claude: Any) -> None:
        client = claude()
        response = client.messages.create(
            model=CLAUDE, max_tokens=1024, messages=[{"role": "user", "content": words(0, 9000)}]
        )
        assert response.usage.input_tokens + 1024 <= 16_000
        assert [e.type for e in client.last_exchange.events].count("overflow_recovered") == 1
        sent = client.last_exchange.body["messages"][0]["content"][0]["text"]
        assert sent.startswith("word0_0 ") and "[truncated — original was" in sent

    def test_other_errors_are_the_sdks_own(self, claude: Any) -> None:
        client = claude()
        with pytest.raises(anthropic.NotFoundError):
            client.messages.create(
                model="claude-nonexistent-1", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
            )

    def test_everything_else_about_the_client_is_unchanged(self, server: LocalServer) -> None:
        with anthropic.Anthropic(api_key="local", base_url=server.url) as inner:
            client = contextwindow.guard(inner, store=":memory:")
            assert client.base_url == inner.base_url
            assert client.messages.with_raw_response is not None
            assert client.models is not None


class TestToolLoops:
    def test_an_anthropic_tool_loop_keeps_pairs_and_one_session(
        self, server: LocalServer, model: LocalModel, claude: Any
    ) -> None:
        client = claude()
        history: list[dict[str, Any]] = []
        for turn in range(6):
            model.enqueue(
                Message.assistant(
                    ToolUse(id=f"a{turn}", name="read_file", input={"path": "a.py"}),
                    ToolUse(id=f"b{turn}", name="read_file", input={"path": "b.py"}),
                ),
                Message.assistant(f"Done with {turn}."),
            )
            history.append({"role": "user", "content": f"Read the files, turn {turn}."})
            while True:
                response = client.messages.create(model=CLAUDE, max_tokens=512, tools=TOOLS, messages=history)
                history.append({"role": "assistant", "content": response.content})
                uses = [b for b in response.content if b.type == "tool_use"]
                if not uses:
                    break
                history.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": u.id, "content": "x = 1\n" * 400}
                            for u in uses
                        ],
                    }
                )
        sent = client.last_exchange.body
        # The agent's tools pass through first and as it wrote them; the one tool the guard may add is
        # its re-read tool, and only when a placeholder in the request names it (six turns of results
        # at a 16k window archive the stale ones, so whether it does depends on their price).
        assert sent["tools"][: len(TOOLS)] == TOOLS
        named = "read_archived" in json.dumps(sent["messages"])
        assert [t["name"] for t in sent["tools"][len(TOOLS) :]] == (["read_archived"] if named else [])
        assert sent["messages"][0]["role"] == "user"
        assert len(client.store.sessions()) == 1

    def test_an_openai_tool_loop_sends_results_in_call_order(
        self, server: LocalServer, model: LocalModel, gpt: Any
    ) -> None:
        client = gpt()
        model.enqueue(
            Message.assistant(
                ToolUse(id="call_1", name="read_file", input={"path": "a.py"}),
                ToolUse(id="call_2", name="read_file", input={"path": "b.py"}),
            ),
            Message.assistant("Both read."),
        )
        history: list[Any] = [
            {"role": "system", "content": "You read files."},
            {"role": "user", "content": "Read a and b."},
        ]
        first = client.chat.completions.create(model=GPT, tools=OPENAI_TOOLS, messages=history)
        assert isinstance(first, openai.types.chat.ChatCompletion)
        message = first.choices[0].message
        history.append(message)  # the SDK's own object, as agents append it
        for call in message.tool_calls or []:
            history.append({"role": "tool", "tool_call_id": call.id, "content": f"contents of {call.id}"})
        second = client.chat.completions.create(model=GPT, tools=OPENAI_TOOLS, messages=history)
        assert second.choices[0].message.content == "Both read."
        sent = client.last_exchange.body["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
        assert [m.get("tool_call_id") for m in sent[3:]] == ["call_1", "call_2"]
        assert len(client.store.sessions()) == 1


class TestStreams:
    def test_an_anthropic_stream_is_the_sdks_stream_and_its_usage_is_recorded(
        self, server: LocalServer, claude: Any
    ) -> None:
        client = claude()
        stream = client.messages.create(
            model=CLAUDE, max_tokens=256, stream=True, messages=[{"role": "user", "content": "hello there"}]
        )
        assert isinstance(stream, anthropic.Stream)
        kinds = [event.type for event in stream]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
        session = client.store.session(client.last_exchange.session_id)
        assert session.latest("usage") is not None
        assert [m.message.role for m in session.messages()] == ["user", "assistant"]

    def test_messages_stream_gives_the_sdks_final_message(self, claude: Any) -> None:
        client = claude()
        with client.messages.stream(
            model=CLAUDE, max_tokens=256, messages=[{"role": "user", "content": "hello there"}]
        ) as stream:
            text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert final.content[0].text == text
        session = client.store.session(client.last_exchange.session_id)
        assert len(session.messages()) == 2

    def test_an_openai_stream_records_the_reply(self, server: LocalServer, gpt: Any) -> None:
        client = gpt()
        stream = client.chat.completions.create(
            model=GPT, stream=True, messages=[{"role": "user", "content": "hello there"}]
        )
        assert isinstance(stream, openai.Stream)
        text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
        session = client.store.session(client.last_exchange.session_id)
        assert [b.text for b in session.messages()[-1].message.content if isinstance(b, Text)] == [text]


class TestAsync:
    def test_the_async_clients_share_the_core(self, server: LocalServer) -> None:
        async def main() -> tuple[int, int]:
            async with (
                anthropic.AsyncAnthropic(api_key="l", base_url=server.url) as raw_a,
                openai.AsyncOpenAI(api_key="l", base_url=server.url + "/v1") as raw_o,
            ):
                a = contextwindow.guard(raw_a, store=":memory:")
                o = contextwindow.guard(raw_o, store=":memory:")
                return await loop(a, o)

        async def loop(a: Any, o: Any) -> tuple[int, int]:
            history: list[dict[str, Any]] = []
            chat: list[Any] = []
            for turn in range(14):
                history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
                response = await a.messages.create(model=CLAUDE, max_tokens=1024, messages=history)
                history.append({"role": "assistant", "content": response.content})
                chat.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
                completion = await o.chat.completions.create(model=GPT, max_tokens=1024, messages=chat)
                chat.append(completion.choices[0].message)
            return len(a.store.sessions()), len(o.store.sessions())

        assert asyncio.run(main()) == (1, 1)

    def test_the_sync_client_works_inside_a_running_event_loop(self, claude: Any) -> None:
        client = claude()

        async def notebook_cell() -> str:
            response = client.messages.create(
                model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
            )
            return str(response.content[0].text)

        assert asyncio.run(notebook_cell()).startswith("Local reply")


class TestRecognition:
    def test_a_new_process_continues_the_stored_session(
        self, server: LocalServer, tmp_path: Path, claude: Any
    ) -> None:
        store = tmp_path / "guard.sqlite"
        history: list[dict[str, Any]] = [{"role": "user", "content": "remember the number 7"}]
        first = claude(store=str(store))
        response = first.messages.create(model=CLAUDE, max_tokens=64, messages=history)
        history += [{"role": "assistant", "content": response.content}, {"role": "user", "content": "and?"}]
        first.store.close()
        again = claude(store=str(store))
        again.messages.create(model=CLAUDE, max_tokens=64, messages=history)
        assert again.store.sessions() == [first.last_exchange.session_id]
        assert len(again.store.session(first.last_exchange.session_id).messages()) == 4

    def test_a_history_that_diverges_becomes_its_own_session(self, claude: Any) -> None:
        client = claude()
        base = [{"role": "user", "content": "start"}]
        response = client.messages.create(model=CLAUDE, max_tokens=64, messages=base)
        client.messages.create(
            model=CLAUDE,
            max_tokens=64,
            messages=[
                *base,
                {"role": "assistant", "content": "an edited reply"},
                {"role": "user", "content": "go"},
            ],
        )
        assert response.content
        sessions = client.store.sessions()
        assert len(sessions) == 2 and sessions[1] == sessions[0] + ".1"

    def test_an_explicit_session_id_names_the_session(self, claude: Any) -> None:
        client = claude(session="run-42")
        client.messages.create(model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": "hi"}])
        assert client.store.sessions() == ["run-42"]


class TestCount:
    def test_count_tokens_counts_the_request_the_guard_would_send(
        self, server: LocalServer, claude: Any
    ) -> None:
        client = claude(context_window=16_000)
        history = []
        for turn in range(10):
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            history.append({"role": "assistant", "content": "ok"})
        history.append({"role": "user", "content": "and now?"})
        counted = client.messages.count_tokens(model=CLAUDE, messages=history)
        assert 0 < counted.input_tokens < 16_000
        with anthropic.Anthropic(api_key="l", base_url=server.url) as bare:
            whole = bare.messages.count_tokens(model=CLAUDE, messages=history)
        assert whole.input_tokens > 16_000


class TestSansIO:
    def test_the_core_is_stepped_by_hand_with_no_client_at_all(self) -> None:
        core = GuardCore(contextwindow.open_store(), "anthropic", overflow=lambda exc: None)
        seen: list[Send] = []

        def perform(step: Send) -> Any:
            seen.append(step)
            return {"answered": True}

        body = {"model": CLAUDE, "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
        exchange = run_sync(core.request(body), perform)
        exchange.finish(Reply(message=Message.assistant("hello"), stop_reason="end_turn"))
        assert exchange.result == {"answered": True}
        assert [s.purpose for s in seen] == ["request"]
        assert seen[0].body["messages"][0]["content"][0]["text"] == "hi"


class TestRereads:
    def _archived_history(
        self, client: Any, model: LocalModel, lines: tuple[int, ...] = (1400,) * 4
    ) -> list[dict[str, Any]]:
        """Four reads of ``lines`` lines (~4 tokens each): more than the 16k window holds, so stale
        results are archived (they are only under pressure)."""
        history: list[dict[str, Any]] = []
        for turn, n in enumerate(lines):
            model.enqueue(
                Message.assistant(ToolUse(id=f"r{turn}", name="read_file", input={"path": f"{turn}.py"})),
                Message.assistant(f"Read {turn}."),
            )
            history.append({"role": "user", "content": f"Read file {turn}."})
            for _ in range(2):
                response = client.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
                history.append({"role": "assistant", "content": response.content})
                uses = [b for b in response.content if b.type == "tool_use"]
                if uses:
                    body = f"ORIGINAL-{turn} " + "line of code\n" * n
                    history.append(
                        {
                            "role": "user",
                            "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": body}],
                        }
                    )
        assert client.store.session(client.last_exchange.session_id).entries(["archive"])
        return history

    def test_the_model_reads_an_archived_result_again_and_the_agent_sees_only_the_answer(
        self, claude: Any, model: LocalModel
    ) -> None:
        client = claude(context_window=16_000)
        # Larger reads: the new turn's compile archives one more, and the original fits again beside it.
        history = self._archived_history(client, model, (1800,) * 4)
        session = client.store.session(client.last_exchange.session_id)
        artifact = session.entries(["archive"])[0].payload["artifact_id"]
        assert any("read_archived" in str(m) for m in client.last_exchange.body["messages"])
        assert client.last_exchange.body["tools"][-1]["name"] == "read_archived"
        model.enqueue(
            Message.assistant(ToolUse(id="rr", name="read_archived", input={"id": artifact})),
            Message.assistant("The first file again: seen."),
        )
        history.append({"role": "user", "content": "Look at the first file again."})
        usage_before = len(session.entries(["usage"]))
        response = client.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
        assert [b.text for b in response.content] == ["The first file again: seen."]
        last = client.last_exchange.body["messages"][-1]["content"][0]
        assert last["type"] == "tool_result" and "ORIGINAL-0" in str(last["content"])
        # Both calls the provider answered are in the books: the re-read's and the final one.
        assert len(session.entries(["usage"])) == usage_before + 2
        assert [e.type for e in client.last_exchange.events].count("usage") == 2
        # The agent's history (which never held the re-read) still continues the same session.
        history.append({"role": "assistant", "content": response.content})
        history.append({"role": "user", "content": "Thanks."})
        model.enqueue(Message.assistant("You are welcome."))
        client.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
        assert client.last_exchange.session_id == session.id and len(client.store.sessions()) == 1

    def test_an_original_that_does_not_fit_beside_the_request_restarts_it_and_the_agent_sees_no_error(
        self, claude: Any, model: LocalModel
    ) -> None:
        client = claude(context_window=16_000)
        # The new turn fits without new archives, and the first original (2,000 lines, ~6k tokens)
        # does not fit beside it: the round restarts the request (compiled afresh, older history
        # folded), as a tool round does. (Smaller, it fits and the stream resumes; much larger, the
        # re-read result is capped to fit and the stream resumes too.)
        history = self._archived_history(client, model, lines=(2000, 1300, 1300, 1300))
        session = client.store.session(client.last_exchange.session_id)
        artifact = session.entries(["archive"])[0].payload["artifact_id"]
        model.enqueue(
            Message.assistant(ToolUse(id="rr", name="read_archived", input={"id": artifact})),
            Message.assistant("Seen it again."),
        )
        history.append({"role": "user", "content": "Look at the first file again."})
        response = client.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
        assert [b.text for b in response.content] == ["Seen it again."]
        kinds = [e.type for e in client.last_exchange.events]
        assert "stream_restarted" in kinds and "overflow_recovered" not in kinds
        sent = client.last_exchange.body["messages"]
        assert "ORIGINAL-0" in json.dumps(sent[-1]["content"])
        assert response.usage.input_tokens + 256 <= 16_000

    def test_the_host_can_turn_it_off(self, claude: Any, model: LocalModel) -> None:
        client = claude(reread=False, context_window=16_000)
        self._archived_history(client, model)
        assert [t["name"] for t in client.last_exchange.body["tools"]] == ["read_file"]


def _openai_archived_history(client: Any, model: LocalModel, lines: int = 1600) -> list[Any]:
    """The OpenAI agent's four reads of ``lines`` lines: more than the 16k window holds, so stale
    results are archived; the agent appends the SDK's own message objects."""
    history: list[Any] = [{"role": "system", "content": "You read files."}]
    for turn in range(4):
        model.enqueue(
            Message.assistant(ToolUse(id=f"call_r{turn}", name="read_file", input={"path": f"{turn}.py"})),
            Message.assistant(f"Read {turn}."),
        )
        history.append({"role": "user", "content": f"Read file {turn}."})
        for _ in range(2):
            completion = client.chat.completions.create(
                model=GPT, max_completion_tokens=256, tools=OPENAI_TOOLS, messages=history
            )
            message = completion.choices[0].message
            history.append(message)
            for call in message.tool_calls or []:
                body = f"ORIGINAL-{turn} " + "line of code\n" * lines
                history.append({"role": "tool", "tool_call_id": call.id, "content": body})
    assert client.store.session(client.last_exchange.session_id).entries(["archive"])
    return history


def _artifact(client: Any) -> str:
    session = client.store.session(client.last_exchange.session_id)
    return str(session.entries(["archive"])[0].payload["artifact_id"])


class TestRereadsBesideTheAgentsCalls:
    """A reply that calls ``read_archived`` and the agent's own tools reaches the agent with its own
    calls only; the guard answers its re-read when the agent's results come back, beside them."""

    def test_an_anthropic_agent_runs_its_tool_and_the_next_request_answers_both_in_order(
        self, claude: Any, model: LocalModel
    ) -> None:
        client = claude(context_window=16_000)
        history = TestRereads()._archived_history(client, model, (1600,) * 4)
        artifact = _artifact(client)
        model.enqueue(
            Message.assistant(
                Text(text="Reading both."),
                ToolUse(id="rr", name="read_archived", input={"id": artifact}),
                ToolUse(id="rf", name="read_file", input={"path": "new.py"}),
            ),
            Message.assistant("Compared."),
        )
        history.append({"role": "user", "content": "Compare the first file with new.py."})
        response = client.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
        assert isinstance(response, anthropic.types.Message)
        assert [(b.type, getattr(b, "id", None)) for b in response.content] == [
            ("text", None),
            ("tool_use", "rf"),
        ]
        assert response.stop_reason == "tool_use"
        history.append({"role": "assistant", "content": response.content})
        history.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "rf", "content": "NEW FILE"}]}
        )
        final = client.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
        assert [b.text for b in final.content] == ["Compared."]  # the strict provider took the request
        sent = client.last_exchange.body["messages"]
        assert [b["id"] for b in sent[-2]["content"] if b["type"] == "tool_use"] == ["rr", "rf"]
        results = [b for b in sent[-1]["content"] if b["type"] == "tool_result"]
        assert [r["tool_use_id"] for r in results] == ["rr", "rf"]
        assert "ORIGINAL-0" in json.dumps(results[0]["content"]) and "NEW FILE" in json.dumps(results[1])
        assert len(client.store.sessions()) == 1

    def test_an_openai_agent_gets_the_sdks_completion_without_the_guards_call(
        self, gpt: Any, model: LocalModel
    ) -> None:
        client = gpt(context_window=16_000)
        history = _openai_archived_history(client, model)
        artifact = _artifact(client)
        model.enqueue(
            Message.assistant(
                ToolUse(id="call_rf", name="read_file", input={"path": "new.py"}),
                ToolUse(id="call_rr", name="read_archived", input={"id": artifact}),
            ),
            Message.assistant("Compared."),
        )
        history.append({"role": "user", "content": "Compare the first file with new.py."})
        completion = client.chat.completions.create(
            model=GPT, max_completion_tokens=256, tools=OPENAI_TOOLS, messages=history
        )
        assert isinstance(completion, openai.types.chat.ChatCompletion)
        message = completion.choices[0].message
        assert [c.id for c in message.tool_calls or []] == ["call_rf"]
        assert completion.choices[0].finish_reason == "tool_calls"
        history.append(message)
        history.append({"role": "tool", "tool_call_id": "call_rf", "content": "NEW FILE"})
        final = client.chat.completions.create(
            model=GPT, max_completion_tokens=256, tools=OPENAI_TOOLS, messages=history
        )
        assert final.choices[0].message.content == "Compared."
        sent = client.last_exchange.body["messages"]
        assert [c["id"] for c in sent[-3]["tool_calls"]] == ["call_rf", "call_rr"]
        assert [(m["role"], m["tool_call_id"]) for m in sent[-2:]] == [
            ("tool", "call_rf"),
            ("tool", "call_rr"),
        ]
        assert sent[-2]["content"] == "NEW FILE" and "ORIGINAL-0" in json.dumps(sent[-1]["content"])
        assert len(client.store.sessions()) == 1

    def test_a_model_that_calls_every_offered_tool_never_hands_the_agent_a_call_it_cannot_answer(
        self, gpt: Any, model: LocalModel
    ) -> None:
        client = gpt(context_window=16_000)
        history = _openai_archived_history(client, model)
        # What ``contextwindow serve --call-tools`` does: call each offered tool, re-read included.
        model.settings = dataclasses.replace(model.settings, call_tools=True)
        history.append({"role": "user", "content": "Read what you need."})
        completion = client.chat.completions.create(
            model=GPT, max_completion_tokens=256, tools=OPENAI_TOOLS, messages=history
        )
        [call] = completion.choices[0].message.tool_calls or []
        assert call.function.name == "read_file"
        history.append(completion.choices[0].message)
        history.append({"role": "tool", "tool_call_id": call.id, "content": "NEW FILE"})
        final = client.chat.completions.create(
            model=GPT, max_completion_tokens=256, tools=OPENAI_TOOLS, messages=history
        )
        assert final.choices[0].message.content  # answered in text: every call had its result
        mine, guards = [m for m in client.last_exchange.body["messages"] if m["role"] == "tool"][-2:]
        assert (mine["tool_call_id"], mine["content"]) == (call.id, "NEW FILE")
        # The guard answered its own call (the model's made-up id is refused by name), not a stub.
        assert "'example'" in guards["content"] and "omitted" not in guards["content"]

    def test_a_new_process_answers_the_guards_call_from_the_ledger(
        self, server: LocalServer, model: LocalModel, clients: list[Any], tmp_path: Path
    ) -> None:
        def fresh() -> Any:
            raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
            guarded = contextwindow.guard(raw, store=tmp_path / "guard.sqlite", context_window=16_000)
            clients.extend([raw, guarded.store])
            return guarded

        client = fresh()
        history = TestRereads()._archived_history(client, model, (1600,) * 4)
        model.enqueue(
            Message.assistant(
                ToolUse(id="rr", name="read_archived", input={"id": _artifact(client)}),
                ToolUse(id="rf", name="read_file", input={"path": "new.py"}),
            ),
            Message.assistant("Compared."),
        )
        history.append({"role": "user", "content": "Compare the first file with new.py."})
        response = client.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
        history.append({"role": "assistant", "content": response.content})
        history.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "rf", "content": "NEW FILE"}]}
        )
        again = fresh()  # a new process: only the ledger knows the guard's call
        final = again.messages.create(model=CLAUDE, max_tokens=256, tools=TOOLS, messages=history)
        assert [b.text for b in final.content] == ["Compared."]
        results = [
            b for b in again.last_exchange.body["messages"][-1]["content"] if b["type"] == "tool_result"
        ]
        assert [r["tool_use_id"] for r in results] == ["rr", "rf"]
        assert "ORIGINAL-0" in json.dumps(results[0]["content"])
        assert again.last_exchange.session_id == client.last_exchange.session_id


class TestResponses:
    def test_a_responses_tool_loop_runs_through_the_guard(self, gpt: Any, model: LocalModel) -> None:
        client = gpt()
        tools = [
            {"type": "function", "name": "read_file", "parameters": {"type": "object", "properties": {}}}
        ]
        history: list[Any] = []
        for turn in range(14):
            model.enqueue(
                Message.assistant(ToolUse(id=f"call_{turn}", name="read_file", input={})),
                Message.assistant(f"Read {turn}."),
            )
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            while True:
                response = client.responses.create(
                    model=GPT, instructions="Be brief.", tools=tools, input=history, max_output_tokens=512
                )
                assert isinstance(response, openai.types.responses.Response)
                history += [item.model_dump(exclude_none=True) for item in response.output]
                calls = [item for item in response.output if item.type == "function_call"]
                if not calls:
                    break
                history += [
                    {"type": "function_call_output", "call_id": c.call_id, "output": "print('hi')\n" * 50}
                    for c in calls
                ]
        assert response.output_text == "Read 13."
        assert len(client.store.sessions()) == 1
        session = client.store.session(client.last_exchange.session_id)
        assert session.latest("checkpoint") is not None  # the provider's 16k window was met by folding
        sent = client.last_exchange.body
        assert sent["instructions"] == "Be brief." and sent["input"][0]["role"] == "user"


class TestPromptCache:
    @staticmethod
    def _unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for message in messages:
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in message["content"]]
            out.append({**message, "content": content})
        return out

    def test_consecutive_requests_keep_their_prefix_and_mark_the_last_block(self, claude: Any) -> None:
        client = claude()
        history: list[dict[str, Any]] = []
        bodies = []
        for turn in range(6):
            history.append({"role": "user", "content": f"Turn {turn}: tell me more."})
            response = client.messages.create(
                model=CLAUDE, max_tokens=256, system="Be brief.", messages=history
            )
            history.append({"role": "assistant", "content": response.content})
            bodies.append(client.last_exchange.body["messages"])
        for before, after in itertools.pairwise(bodies):
            assert self._unmarked(after)[: len(before)] == self._unmarked(before)
            marked = [b for m in after for b in m["content"] if "cache_control" in b]
            assert marked == [after[-1]["content"][-1]]


class TestPassThrough:
    def test_thinking_signatures_and_images_reach_the_provider_intact(
        self, claude: Any, model: LocalModel
    ) -> None:
        import base64

        from contextwindow import Thinking
        from contextwindow.replay.synthetic_media import screenshot

        client = claude()
        model.enqueue(
            Message.assistant(Thinking(thinking="Let me look.", signature="sig-abc"), "A screenshot.")
        )
        png = base64.b64encode(screenshot(320, 200, seed=1)).decode()
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
        history: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": "What is this?"}, image]}
        ]
        response = client.messages.create(model=CLAUDE, max_tokens=256, messages=history)
        assert response.content[0].type == "thinking" and response.content[0].signature == "sig-abc"
        history += [
            {"role": "assistant", "content": response.content},
            {"role": "user", "content": "And now?"},
        ]
        client.messages.create(model=CLAUDE, max_tokens=256, messages=history)
        sent = client.last_exchange.body["messages"]
        assert sent[0]["content"][1]["source"]["data"] == png
        assert sent[1]["content"][0] == {
            "type": "thinking",
            "thinking": "Let me look.",
            "signature": "sig-abc",
        }
        assert len(client.store.sessions()) == 1


class TestMistakes:
    def test_a_client_the_guard_does_not_know_is_a_usage_error_naming_it(self) -> None:
        from contextwindow import UsageError

        with pytest.raises(UsageError) as raised:
            contextwindow.guard(object(), store=":memory:")
        assert "object" in str(raised.value)

    def test_a_summariser_client_of_another_kind_is_refused(self, server: LocalServer) -> None:
        from contextwindow import UsageError

        with (
            anthropic.Anthropic(api_key="l", base_url=server.url) as sync_client,
            pytest.raises(UsageError),
        ):
            contextwindow.guard(sync_client, store=":memory:", summarizer=openai.OpenAI(api_key="l"))


class TestOptions:
    def test_one_options_value_configures_the_guard_and_keywords_replace_its_fields(
        self, server: LocalServer, clients: list[Any]
    ) -> None:
        options = GuardOptions(store=":memory:", session="named", context_window=9_000)
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
        clients.append(raw)
        guarded = contextwindow.guard(raw, options, context_window=8_000)
        clients.append(guarded.store)
        guarded.messages.create(model=CLAUDE, max_tokens=20, messages=[{"role": "user", "content": "hi"}])
        assert guarded.last_exchange.session_id == "named"
        assert guarded.guard_core.options == dataclasses.replace(options, context_window=8_000)

    def test_an_option_the_guard_does_not_have_is_a_type_error(self) -> None:
        with pytest.raises(TypeError, match="stor"):
            contextwindow.guard(object(), stor=":memory:")


class TestAsyncStreams:
    def test_an_async_stream_is_the_sdks_and_its_reply_is_recorded(self, server: LocalServer) -> None:
        async def main() -> tuple[bool, int, list[str]]:
            async with openai.AsyncOpenAI(api_key="l", base_url=server.url + "/v1") as raw:
                client = contextwindow.guard(raw, store=":memory:")
                stream = await client.chat.completions.create(
                    model=GPT, stream=True, messages=[{"role": "user", "content": "hello"}]
                )
                is_sdk = isinstance(stream, openai.AsyncStream)
                pieces = [c.choices[0].delta.content or "" async for c in stream if c.choices]
                session = client.store.session(client.last_exchange.session_id)
                return is_sdk, len(session.messages()), pieces

        is_sdk, stored, pieces = asyncio.run(main())
        assert is_sdk and stored == 2 and "".join(pieces).startswith("Local reply")


class TestTheGuardsOwnLedger:
    """A ledger the guard opens itself commits without waiting for the disk (the agent resends what an
    OS crash could drop); a store given is used as it was opened."""

    @staticmethod
    def _durability(store: object) -> str:
        return store._backend().durability  # type: ignore[attr-defined, no-any-return]

    def test_a_path_or_the_default_opens_at_normal_durability(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from contextwindow.guard import resolve_store

        assert self._durability(resolve_store(tmp_path / "a" / "guard.sqlite")) == "normal"
        assert self._durability(resolve_store(f"sqlite:///{tmp_path / 'b.sqlite'}")) == "normal"
        monkeypatch.setenv("CONTEXTWINDOW_STORE", str(tmp_path / "c" / "guard.sqlite"))
        assert self._durability(resolve_store(None)) == "normal"
        assert (tmp_path / "c" / "guard.sqlite").exists()

    def test_a_store_given_keeps_its_own_durability_and_memory_stays_in_memory(self, tmp_path: Path) -> None:
        from contextwindow.guard import resolve_store
        from contextwindow.store import open_store

        given = open_store(tmp_path / "full.sqlite", durability="full")
        assert resolve_store(given) is given and self._durability(given) == "full"
        assert resolve_store(":memory:").url == "memory://"


class TestARestartKeepsThePromptCache:
    """A guard started again on the same ledger (a new process, or a conversation rebuilt after an
    eviction) sends the history as the one before it did, byte for byte: the provider's prompt cache
    serves the whole prefix, tool calls' inputs included (their keys as the agent wrote them)."""

    def test_the_first_request_after_a_restart_reads_the_whole_prefix_from_the_cache(
        self, tmp_path: Path
    ) -> None:
        anthropic = pytest.importorskip("anthropic")
        system = [
            {
                "type": "text",
                "text": "You are a coding agent. " * 1500,
                "cache_control": {"type": "ephemeral"},
            }
        ]
        history: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug " * 50}]
        raws: list[Any] = []
        with LocalServer(LocalModel(LocalSettings(prompt_cache=True))) as server:

            def guarded() -> Any:
                raws.append(anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0))
                return contextwindow.guard(raws[-1], store=tmp_path / "guard.sqlite")

            def call(client: Any) -> Any:
                return client.messages.create(
                    model="claude-haiku-4-5", max_tokens=50, system=system, messages=history
                )

            first = guarded()
            for i in range(3):
                edit = {"path": f"f{i}.py", "old": "x" * 300, "new": "y" * 300}
                history.append(
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": f"t{i}", "name": "edit", "input": edit}],
                    }
                )
                history.append(
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok " * 200}],
                    }
                )
                reply = call(first)
                history += [
                    {"role": "assistant", "content": reply.content[0].text},
                    {"role": "user", "content": "go on"},
                ]
            before = reply.usage.cache_read_input_tokens + reply.usage.cache_creation_input_tokens
            again = call(guarded())
            # all of the request before it is read from the cache; only what is new since is written
            for raw in raws:
                raw.close()
        assert again.usage.cache_read_input_tokens >= before
