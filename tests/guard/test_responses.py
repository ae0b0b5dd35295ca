"""OpenAI Responses end to end: the local provider's Responses API (streams, stored responses,
reasoning items) and the guard over it, with the real ``openai`` SDK clients over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow import Message, Thinking, ToolUse
from contextwindow.formats import responses as responses_format
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

openai = LazyModule("openai")

GPT = "gpt-4o"
TOOLS = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a file of the project.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }
]
ENCRYPTED = ["reasoning.encrypted_content"]


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
def raw(server: LocalServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0) as client:
        yield client


@pytest.fixture
def gpt(raw: openai.OpenAI) -> Iterator[Any]:
    guarded = contextwindow.guard(raw, store=":memory:")
    yield guarded
    guarded.store.close()


def _read_then_answer(model: LocalModel, call: str = "call_1") -> None:
    model.enqueue(
        Message.assistant(
            Thinking(thinking="The file will tell."),
            ToolUse(id=call, name="read_file", input={"path": "a.py"}),
        ),
        Message.assistant(Thinking(thinking="It prints hi."), "It prints hi."),
    )


def _items(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in response.output]


class TestLocalResponsesStream:
    def test_streams_the_events_openai_sends_ending_on_the_whole_response(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        _read_then_answer(model)
        stream = raw.responses.create(model=GPT, input="What does a.py do?", tools=TOOLS, stream=True)
        events = list(stream)
        kinds = [e.type for e in events]
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        assert "response.reasoning_summary_text.delta" in kinds
        assert "response.function_call_arguments.delta" in kinds
        assert [e.sequence_number for e in events] == list(range(len(events)))
        final = events[-1].response
        assert isinstance(final, openai.types.responses.Response)
        assert [i.type for i in final.output] == ["reasoning", "function_call"]
        assert final.usage is not None and final.usage.input_tokens > 0
        deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
        assert deltas == final.output[1].arguments == '{"path":"a.py"}'

    def test_the_sdk_stream_helper_accumulates_text_deltas(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        model.enqueue(Message.assistant("A reply long enough to come in several deltas, " * 4))
        with raw.responses.stream(model=GPT, input="Say something.") as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        assert len(deltas) > 1
        assert "".join(deltas) == final.output_text == "A reply long enough to come in several deltas, " * 4

    def test_a_reply_cut_at_max_output_tokens_ends_on_response_incomplete(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        model.enqueue(Message.assistant(words(0, 200)))
        events = list(raw.responses.create(model=GPT, input="Go on.", max_output_tokens=16, stream=True))
        assert events[-1].type == "response.incomplete"
        assert events[-1].response.incomplete_details.reason == "max_output_tokens"


class TestLocalStoredResponses:
    def test_previous_response_id_continues_the_stored_conversation(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        _read_then_answer(model)
        first = raw.responses.create(model=GPT, input="What does a.py do?", tools=TOOLS)
        call = first.output[-1]
        # Only the new input: the tool's output answers a call the provider holds.
        second = raw.responses.create(
            model=GPT,
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "print('hi')"}],
        )
        assert second.output_text == "It prints hi."
        assert second.previous_response_id == first.id

    def test_an_unknown_or_unstored_response_is_not_found(self, raw: openai.OpenAI) -> None:
        with pytest.raises(openai.NotFoundError, match="Previous response with id 'resp_nope' not found"):
            raw.responses.create(model=GPT, previous_response_id="resp_nope", input="Hi.")
        unstored = raw.responses.create(model=GPT, input="Hi.", store=False)
        with pytest.raises(openai.NotFoundError, match="not found") as caught:
            raw.responses.create(model=GPT, previous_response_id=unstored.id, input="Again.")
        assert caught.value.body["code"] == "previous_response_not_found"  # type: ignore[index]

    def test_a_tool_result_without_its_call_is_refused_without_previous_response_id(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        _read_then_answer(model)
        first = raw.responses.create(model=GPT, input="What does a.py do?", tools=TOOLS)
        with pytest.raises(openai.BadRequestError, match="preceeding message"):
            raw.responses.create(
                model=GPT,
                input=[{"type": "function_call_output", "call_id": first.output[-1].call_id, "output": "x"}],
            )


class TestLocalReasoningRules:
    def _first(self, raw: openai.OpenAI, model: LocalModel, **kwargs: Any) -> list[dict[str, Any]]:
        _read_then_answer(model)
        first = raw.responses.create(model=GPT, input="What does a.py do?", tools=TOOLS, **kwargs)
        history = [{"role": "user", "content": "What does a.py do?"}, *_items(first)]
        return [*history, {"type": "function_call_output", "call_id": "call_1", "output": "print('hi')"}]

    def test_encrypted_content_comes_only_when_included(self, raw: openai.OpenAI, model: LocalModel) -> None:
        plain = self._first(raw, model)
        assert plain[1]["type"] == "reasoning" and "encrypted_content" not in plain[1]
        sealed = self._first(raw, model, include=ENCRYPTED)
        assert sealed[1]["encrypted_content"]

    def test_resent_reasoning_items_are_accepted(self, raw: openai.OpenAI, model: LocalModel) -> None:
        history = self._first(raw, model, include=ENCRYPTED)
        assert raw.responses.create(model=GPT, input=history, tools=TOOLS).output_text == "It prints hi."

    def test_a_reasoning_item_without_its_following_item_is_refused(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        history = self._first(raw, model)
        del history[2]  # the function call the reasoning came with
        with pytest.raises(openai.BadRequestError, match="without its required following item"):
            raw.responses.create(model=GPT, input=history[:2], tools=TOOLS)

    def test_encrypted_content_the_provider_did_not_seal_is_refused(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        history = self._first(raw, model, include=ENCRYPTED)
        history[1] = {**history[1], "encrypted_content": "Zm9yZ2Vk"}
        with pytest.raises(openai.BadRequestError, match="could not be verified") as caught:
            raw.responses.create(model=GPT, input=history, tools=TOOLS)
        assert caught.value.code == "invalid_encrypted_content"

    def test_an_unstored_reasoning_item_needs_its_encrypted_content(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        history = self._first(raw, model, store=False)
        with pytest.raises(
            openai.NotFoundError, match="Items are not persisted when `store` is set to false"
        ):
            raw.responses.create(model=GPT, input=history, tools=TOOLS, store=False)
        model.discard_script(0)
        sealed = self._first(raw, model, store=False, include=ENCRYPTED)
        answer = raw.responses.create(model=GPT, input=sealed, tools=TOOLS, store=False)
        assert answer.output_text == "It prints hi."

    def test_a_stored_reasoning_item_needs_the_id_of_the_item_it_came_with(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        history = self._first(raw, model)
        assert history[2]["id"].startswith("fc_")
        del history[2]["id"]
        with pytest.raises(openai.BadRequestError, match="without its required following item"):
            raw.responses.create(model=GPT, input=history, tools=TOOLS)

    def test_an_item_named_by_its_id_needs_its_reasoning_item(
        self, raw: openai.OpenAI, model: LocalModel
    ) -> None:
        history = self._first(raw, model)
        reasoning = history.pop(1)
        with pytest.raises(openai.BadRequestError, match="without its required 'reasoning' item") as caught:
            raw.responses.create(model=GPT, input=history, tools=TOOLS)
        assert reasoning["id"] in str(caught.value)
        del history[1]["id"]  # without its id the call needs no reasoning
        model.discard_script(0)
        model.enqueue(Message.assistant("It prints hi."))
        assert raw.responses.create(model=GPT, input=history, tools=TOOLS).output_text == "It prints hi."

    def test_a_reasoning_item_needs_its_summary_field(self, raw: openai.OpenAI, model: LocalModel) -> None:
        history = self._first(raw, model)
        del history[1]["summary"]
        with pytest.raises(openai.BadRequestError, match="summary"):
            raw.responses.create(model=GPT, input=history, tools=TOOLS)


class TestReasoningInTheCanonicalForm:
    ITEMS: list[dict[str, Any]] = [  # noqa: RUF012
        {"role": "user", "content": [{"type": "input_text", "text": "Go."}]},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [
                {"type": "summary_text", "text": "First."},
                {"type": "summary_text", "text": "Then."},
            ],
            "encrypted_content": "sealed-1",
        },
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "f", "arguments": '{"x":1}'},
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "function_call", "id": "fc_2", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2", "output": "two"},
        {"type": "reasoning", "id": "rs_3", "summary": [], "encrypted_content": "sealed-3"},
        {
            "type": "message",
            "id": "msg_3",
            "role": "assistant",
            "status": "completed",
            "phase": "final_answer",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        },
    ]

    def test_reasoning_items_render_back_as_they_were_read(self) -> None:
        parsed = responses_format.parse_request({"model": GPT, "input": self.ITEMS})
        assert responses_format.render_items(parsed.request.messages, parsed.loader()) == self.ITEMS

    def test_a_reasoning_item_is_a_thinking_block_per_summary_part_in_the_assistant_message(self) -> None:
        messages = responses_format.parse_request({"model": GPT, "input": self.ITEMS}).request.messages
        assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
        first = messages[1].content
        assert first[0] == Thinking(thinking="First.", signature="sealed-1", id="rs_1")
        assert first[1] == Thinking(thinking="Then.", id="rs_1")
        assert first[3] == Thinking(thinking="", id="rs_2")

    def test_item_ids_go_out_only_beside_their_reasoning_and_the_phase_always(self) -> None:
        items = [
            {"role": "user", "content": "Go."},
            {
                "type": "message",
                "id": "msg_9",
                "role": "assistant",
                "phase": "commentary",
                "content": [{"type": "output_text", "text": "Looking.", "annotations": []}],
            },
            {"type": "function_call", "id": "fc_9", "call_id": "c9", "name": "f", "arguments": "{}"},
        ]
        parsed = responses_format.parse_request({"model": GPT, "input": items})
        assert responses_format.render_items(parsed.request.messages, parsed.loader())[1:] == [
            {
                "role": "assistant",
                "phase": "commentary",
                "content": [{"type": "output_text", "text": "Looking."}],
            },
            {"type": "function_call", "call_id": "c9", "name": "f", "arguments": "{}"},
        ]

    def test_another_providers_thinking_has_no_responses_form(self) -> None:
        message = Message.assistant(Thinking(thinking="Claude's.", signature="sig"), "Answer.")
        assert responses_format.render_items([message], lambda ref: b"") == [
            {"role": "assistant", "content": [{"type": "output_text", "text": "Answer."}]}
        ]


class TestGuardedResponsesStream:
    def test_a_streamed_agent_never_reaches_the_window_and_its_replies_are_recorded(self, gpt: Any) -> None:
        history: list[Any] = []
        prompts = []
        for turn in range(24):
            history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
            stream = gpt.responses.create(model=GPT, input=history, stream=True, max_output_tokens=512)
            assert isinstance(stream, openai.Stream)
            events = list(stream)
            final = events[-1].response
            assert events[-1].type == "response.completed"
            history += _items(final)
            prompts.append(final.usage.input_tokens)
        assert max(prompts) + 512 <= 16_000
        session = gpt.store.session(gpt.last_exchange.session_id)
        assert len(gpt.store.sessions()) == 1
        assert len(session.messages()) == 48  # every streamed reply recorded, every call matched
        assert session.latest("checkpoint") is not None

    def test_an_async_streamed_tool_loop_runs_through_the_guard(
        self, server: LocalServer, model: LocalModel
    ) -> None:
        async def main() -> tuple[str, int]:
            async with openai.AsyncOpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0) as raw:
                client = contextwindow.guard(raw, store=":memory:")
                history: list[Any] = []
                text = ""
                for turn in range(10):
                    _read_then_answer(model, call=f"call_{turn}")
                    history.append({"role": "user", "content": f"Turn {turn}: {words(turn)}"})
                    while True:
                        stream = await client.responses.create(
                            model=GPT, input=history, tools=TOOLS, stream=True, include=ENCRYPTED
                        )
                        assert isinstance(stream, openai.AsyncStream)
                        final = None
                        async for event in stream:
                            if event.type == "response.completed":
                                final = event.response
                        assert final is not None
                        history += _items(final)
                        calls = [i for i in final.output if i.type == "function_call"]
                        if not calls:
                            text = final.output_text
                            break
                        history += [
                            {
                                "type": "function_call_output",
                                "call_id": c.call_id,
                                "output": "print('hi')\n" * 200,
                            }
                            for c in calls
                        ]
                session = client.store.session(client.last_exchange.session_id)
                count = len(session.messages())
                client.store.close()
                return text, count

        text, count = asyncio.run(main())
        assert text == "It prints hi."
        assert count == 40  # user, call, results, answer: every turn, one session

    def test_the_sdk_stream_helper_is_guarded(self, gpt: Any, model: LocalModel) -> None:
        model.enqueue(Message.assistant("Streamed through the guard."))
        with gpt.responses.stream(model=GPT, input=[{"role": "user", "content": "Hi."}]) as stream:
            final = stream.get_final_response()
        assert final.output_text == "Streamed through the guard."
        session = gpt.store.session(gpt.last_exchange.session_id)
        assert [m.message.role for m in session.messages()] == ["user", "assistant"]


class TestGuardedReasoning:
    def test_reasoning_items_reach_the_provider_intact_and_are_kept_in_the_ledger(
        self, gpt: Any, model: LocalModel
    ) -> None:
        _read_then_answer(model)
        history: list[Any] = [{"role": "user", "content": "What does a.py do?"}]
        first = gpt.responses.create(model=GPT, input=history, tools=TOOLS, include=ENCRYPTED)
        history += _items(first)
        history.append({"type": "function_call_output", "call_id": "call_1", "output": "print('hi')"})
        second = gpt.responses.create(model=GPT, input=history, tools=TOOLS, include=ENCRYPTED)
        assert second.output_text == "It prints hi."
        sent = gpt.last_exchange.body["input"]
        reasoning, call = history[1], history[2]
        assert {k: reasoning[k] for k in ("type", "id", "summary", "encrypted_content")} in sent
        assert {k: call[k] for k in ("type", "id", "call_id", "name", "arguments")} in sent  # paired by id
        session = gpt.store.session(gpt.last_exchange.session_id)
        stored = [b for m in session.messages() for b in m.message.content if isinstance(b, Thinking)]
        assert [b.id for b in stored] == [first.output[0].id, second.output[0].id]
        assert stored[0].signature == reasoning["encrypted_content"]


class TestGuardedPreviousResponseId:
    def test_a_chained_agent_sends_only_new_input_while_the_providers_history_fits(
        self, gpt: Any, model: LocalModel
    ) -> None:
        _read_then_answer(model)
        first = gpt.responses.create(model=GPT, input="What does a.py do?", tools=TOOLS)
        second = gpt.responses.create(
            model=GPT,
            previous_response_id=first.id,
            tools=TOOLS,
            input=[{"type": "function_call_output", "call_id": "call_1", "output": "print('hi')"}],
        )
        assert second.output_text == "It prints hi."
        sent = gpt.last_exchange.body
        assert sent["previous_response_id"] == first.id and len(sent["input"]) == 1
        session = gpt.store.session(gpt.last_exchange.session_id)
        assert len(gpt.store.sessions()) == 1
        assert [m.message.role for m in session.messages()] == ["user", "assistant", "user", "assistant"]

    def test_a_long_chained_agent_never_sees_a_length_error(self, gpt: Any, model: LocalModel) -> None:
        previous: str | None = None
        compiled = chained = 0
        for turn in range(30):
            kwargs: dict[str, Any] = {"previous_response_id": previous} if previous else {}
            response = gpt.responses.create(
                model=GPT, input=f"Turn {turn}: {words(turn)}", max_output_tokens=512, **kwargs
            )
            previous = response.id
            sent = gpt.last_exchange.body
            if "previous_response_id" in sent:
                chained += 1
                assert sent["input"] == f"Turn {turn}: {words(turn)}"  # only the new input, as written
            else:
                compiled += 1
            assert response.usage.input_tokens + 512 <= 16_000
        session = gpt.store.session(gpt.last_exchange.session_id)
        assert len(gpt.store.sessions()) == 1 and len(session.messages()) == 60
        assert session.latest("checkpoint") is not None  # the history was folded in the ledger
        assert chained > 10 and compiled > 1  # the provider's history used while it fitted

    def test_an_earlier_response_branches_the_conversation(self, gpt: Any) -> None:
        first = gpt.responses.create(model=GPT, input="One.")
        gpt.responses.create(model=GPT, input="Two.", previous_response_id=first.id)
        gpt.responses.create(model=GPT, input="Two, again.", previous_response_id=first.id)
        branch = gpt.store.session(gpt.last_exchange.session_id)
        texts = [m.message.content[0].text for m in branch.messages()]  # type: ignore[union-attr]
        assert texts[0] == "One." and texts[2] == "Two, again." and len(texts) == 4
        assert len(gpt.store.sessions()) == 2

    def test_an_unknown_response_id_goes_out_as_written(self, gpt: Any) -> None:
        with pytest.raises(openai.NotFoundError, match="resp_elsewhere"):
            gpt.responses.create(model=GPT, input="Hi.", previous_response_id="resp_elsewhere")
        assert gpt.store.sessions() == []

    def test_a_response_made_with_store_false_is_continued_from_the_ledger(
        self, gpt: Any, model: LocalModel
    ) -> None:
        _read_then_answer(model)
        first = gpt.responses.create(model=GPT, input="What does a.py do?", tools=TOOLS, store=False)
        second = gpt.responses.create(
            model=GPT,
            previous_response_id=first.id,
            tools=TOOLS,
            store=False,
            input=[{"type": "function_call_output", "call_id": "call_1", "output": "print('hi')"}],
        )
        assert second.output_text == "It prints hi."
        sent = gpt.last_exchange.body
        assert "previous_response_id" not in sent
        # Without its encrypted content the reasoning item could not be resolved: it is left out.
        assert [i.get("type", "message") for i in sent["input"]] == [
            "message",
            "function_call",
            "function_call_output",
        ]
