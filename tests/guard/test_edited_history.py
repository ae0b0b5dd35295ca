"""An agent that edits its history: every field that reaches the provider is compared.

The guard is stepped by hand (no client, no server): each call's request is what the provider would get.
"""

from __future__ import annotations

from typing import Any

import pytest

import contextwindow
from contextwindow import Message
from contextwindow.guard import GuardCore, Reply, Send, run_sync

CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-4o"
PDF = "JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCnRyYWlsZXIKPDwvUm9vdCAxIDAgUj4+CiUlRU9G"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _call(core: GuardCore, body: dict[str, Any], reply: str = "ok") -> dict[str, Any]:
    """One agent call through ``core``: the body the provider was sent."""
    sent: list[Send] = []

    def perform(step: Send) -> Any:
        sent.append(step)
        return {}

    exchange = run_sync(core.request(body), perform)
    exchange.finish(Reply(message=Message.assistant(reply), stop_reason="end_turn"))
    return sent[-1].body


def _document(title: str) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf", "data": PDF}
    return {"type": "document", "source": source, "title": title, "context": f"about {title}"}


def _image(detail: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG, "detail": detail}}


class TestAnthropicEdits:
    @pytest.mark.parametrize(
        ("first", "edited"),
        [
            (_document("Q1 report"), _document("Q2 report")),
            ({"type": "text", "text": "Read a.py"}, {"type": "text", "text": "Read b.py"}),
        ],
        ids=["document-title", "text"],
    )
    def test_an_edited_block_goes_out_as_the_agent_sent_it(self, first: Any, edited: Any) -> None:
        core = GuardCore(contextwindow.open_store(), "anthropic", overflow=lambda exc: None)
        opening = {"role": "user", "content": [first, {"type": "text", "text": "Summarise."}]}
        body = {"model": CLAUDE, "max_tokens": 100, "messages": [opening]}
        _call(core, body, "Summary one.")
        again = {"role": "user", "content": [edited, {"type": "text", "text": "Summarise."}]}
        history = [
            again,
            {"role": "assistant", "content": "Summary one."},
            {"role": "user", "content": "More."},
        ]
        sent = _call(core, {**body, "messages": history})
        out = sent["messages"][0]["content"][0]
        for field in ("title", "context") if edited["type"] == "document" else ("text",):
            assert out[field] == edited[field]

    def test_a_moved_cache_control_is_the_same_conversation(self) -> None:
        store = contextwindow.open_store()
        core = GuardCore(store, "anthropic", overflow=lambda exc: None)
        first = {
            "role": "user",
            "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}],
        }
        body = {"model": CLAUDE, "max_tokens": 100, "messages": [first]}
        _call(core, body, "Hello.")
        moved = [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": "Hello."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Go", "cache_control": {"type": "ephemeral"}}],
            },
        ]
        _call(core, {**body, "messages": moved})
        assert len(store.sessions()) == 1


class TestEditedRequestFields:
    """The fields but the history are read once while they repeat (``HistoryReader.plain``): an agent
    that edits its tools or system prompt, in place or anew, sends them as they are now."""

    @staticmethod
    def _tools(description: str) -> list[dict[str, Any]]:
        schema = {"type": "object", "properties": {"path": {"type": "string", "description": description}}}
        return [{"name": "read_file", "description": "Reads a file.", "input_schema": schema}]

    @pytest.mark.parametrize("how", ["in place", "anew"])
    def test_an_edited_tool_and_system_prompt_go_out_as_the_agent_sent_them(self, how: str) -> None:
        core = GuardCore(contextwindow.open_store(), "anthropic", overflow=lambda exc: None)
        tools = self._tools("the path")
        system = [{"type": "text", "text": "Be brief."}]
        history: list[Any] = [{"role": "user", "content": "Read a.py"}]
        body = {"model": CLAUDE, "max_tokens": 100, "system": system, "tools": tools, "messages": history}
        first = _call(core, body, "Read.")
        assert first["tools"] == self._tools("the path")
        if how == "in place":
            tools[0]["input_schema"]["properties"]["path"]["description"] = "a path in the repository"
            system[0]["text"] = "Be very brief."
        else:
            body = {**body, "tools": self._tools("a path in the repository")}
            body["system"] = [{"type": "text", "text": "Be very brief."}]
        history += [{"role": "assistant", "content": "Read."}, {"role": "user", "content": "Now b.py"}]
        sent = _call(core, body)
        assert sent["tools"] == self._tools("a path in the repository")
        assert sent["system"] == [{"type": "text", "text": "Be very brief."}]
        again = _call(core, body)  # unchanged since: the same as it was sent
        assert again["tools"] == sent["tools"] and again["system"] == sent["system"]


class TestOpenAIEdits:
    @pytest.mark.parametrize(
        ("first", "edited"),
        [
            (
                {"role": "user", "name": "alice", "content": "Hi"},
                {"role": "user", "name": "bob", "content": "Hi"},
            ),
            ({"role": "user", "content": [_image("low")]}, {"role": "user", "content": [_image("high")]}),
        ],
        ids=["name", "image-detail"],
    )
    def test_an_edited_message_goes_out_as_the_agent_sent_it(self, first: Any, edited: Any) -> None:
        core = GuardCore(contextwindow.open_store(), "openai", overflow=lambda exc: None)
        _call(core, {"model": GPT, "messages": [first]}, "Hello.")
        history = [edited, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More."}]
        sent = _call(core, {"model": GPT, "messages": history})
        out = sent["messages"][0]
        if "name" in edited:
            assert out["name"] == edited["name"]
        else:
            assert out["content"][0]["image_url"]["detail"] == "high"


class TestNotABranch:
    def test_what_the_provider_never_sees_differently_is_the_same_conversation(self) -> None:
        # An SDK's model_dump() extras (citations: None), key order and absent vs None fields.
        store = contextwindow.open_store()
        core = GuardCore(store, "anthropic", overflow=lambda exc: None)
        body = {"model": CLAUDE, "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]}
        _call(core, body, "Hello.")
        dumped = {"citations": None, "text": "Hello.", "type": "text"}
        history = [
            {"content": [{"text": "Hi", "type": "text"}], "role": "user"},
            {"role": "assistant", "content": [dumped]},
            {"role": "user", "content": "Go on."},
        ]
        _call(core, {**body, "messages": history})
        assert len(store.sessions()) == 1


class TestNotABranchOnOpenAI:
    def test_an_sdk_dumped_reply_with_its_extras_is_the_same_conversation(self) -> None:
        # ChatCompletionMessage.model_dump(): refusal, annotations, audio, function_call, tool_calls.
        store = contextwindow.open_store()
        core = GuardCore(store, "openai", overflow=lambda exc: None)
        _call(core, {"model": GPT, "messages": [{"role": "user", "content": "Hi"}]}, "Hello.")
        dumped = {
            "content": "Hello.",
            "refusal": None,
            "role": "assistant",
            "annotations": [],
            "audio": None,
            "function_call": None,
            "tool_calls": None,
        }
        history = [
            {"content": "Hi", "role": "user", "name": None},
            dumped,
            {"role": "user", "content": "Go on."},
        ]
        _call(core, {"model": GPT, "messages": history})
        assert len(store.sessions()) == 1

    def test_text_as_a_string_or_as_one_text_part_is_the_same_conversation(self) -> None:
        store = contextwindow.open_store()
        core = GuardCore(store, "openai", overflow=lambda exc: None)
        _call(core, {"model": GPT, "messages": [{"role": "user", "content": "Hi"}]}, "Hello.")
        history = [
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
            {"role": "user", "content": "Go on."},
        ]
        _call(core, {"model": GPT, "messages": history})
        assert len(store.sessions()) == 1


class TestNotABranchOnAnthropic:
    def test_a_dumped_tool_use_and_a_moved_cache_control_on_a_result_are_the_same_conversation(self) -> None:
        store = contextwindow.open_store()
        core = GuardCore(store, "anthropic", overflow=lambda exc: None)
        use = {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.py", "lines": 10}}
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "print(1)"}
        body = {"model": CLAUDE, "max_tokens": 100}
        opening = [
            {"role": "user", "content": "Read a.py"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [{**result, "cache_control": {"type": "ephemeral"}}]},
        ]
        _call(core, {**body, "messages": opening}, "Done.")
        # What the SDK's ToolUseBlock.model_dump() gives back (keys reordered, no cache_control).
        dumped_use = {
            "id": "toolu_1",
            "input": {"lines": 10, "path": "a.py"},
            "name": "read",
            "type": "tool_use",
        }
        history = [
            opening[0],
            {"role": "assistant", "content": [dumped_use]},
            {"role": "user", "content": [result]},
            {"role": "assistant", "content": [{"citations": None, "text": "Done.", "type": "text"}]},
            {
                "role": "user",
                "content": [{"type": "text", "text": "Thanks", "cache_control": {"type": "ephemeral"}}],
            },
        ]
        _call(core, {**body, "messages": history})
        assert len(store.sessions()) == 1
