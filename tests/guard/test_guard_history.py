"""The guard reads only what is new in an agent's history, and reads exactly what a whole read would."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.guard._history import HistoryReader
from contextwindow.guard._match import chain
from contextwindow.guard._wire import FORMATS

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _anthropic_history(turns: int) -> list[Any]:
    history: list[Any] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"Step {turn}: read the file."})
        use = anthropic.types.ToolUseBlock(
            id=f"toolu_{turn}", name="read_file", input={"path": f"{turn}.py"}, type="tool_use"
        )
        history.append(
            {"role": "assistant", "content": [anthropic.types.TextBlock(text="Reading.", type="text"), use]}
        )
        content: list[dict[str, Any]] = [{"type": "text", "text": f"contents {turn} " * 50}]
        if turn % 2:
            content.append(
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
            )
        history.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": content}]}
        )
        history.append(
            {"role": "assistant", "content": [anthropic.types.TextBlock(text=f"Done {turn}.", type="text")]}
        )
    return history


def _openai_history(turns: int) -> list[Any]:
    history: list[Any] = [{"role": "system", "content": "You read files."}]
    for turn in range(turns):
        history.append({"role": "user", "content": f"Step {turn}: read two files."})
        calls = [
            {
                "id": f"call_{turn}_{i}",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a"}'},
            }
            for i in range(2)
        ]
        history.append(
            openai.types.chat.ChatCompletionMessage.model_validate(
                {"role": "assistant", "content": None, "tool_calls": calls}
            )
        )
        for call in calls:
            history.append(
                {"role": "tool", "tool_call_id": call["id"], "content": f"file {call['id']} " * 40}
            )
        if turn % 2:
            url = "data:image/png;base64," + PNG
            history.append({"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]})
        history.append(openai.types.chat.ChatCompletionMessage(role="assistant", content=f"Done {turn}."))
    return history


def _body(fmt: str, history: list[Any]) -> dict[str, Any]:
    if fmt == "anthropic":
        return {"model": "claude-sonnet-4-6", "max_tokens": 256, "system": "Be brief.", "messages": history}
    return {"model": "gpt-4o", "messages": history}


def _whole(fmt: str, body: dict[str, Any]) -> Any:
    return HistoryReader(FORMATS[fmt], "messages").read(body)  # type: ignore[index]


def _calls(history: list[Any]) -> list[list[Any]]:
    """The agent's successive requests: each ends before a reply (where the agent calls)."""
    out = []
    for n in range(1, len(history) + 1):
        item = history[n - 1]
        role = item.get("role") if isinstance(item, dict) else item.role
        following = history[n] if n < len(history) else None
        next_role = (
            None
            if following is None
            else (following.get("role") if isinstance(following, dict) else following.role)
        )
        if role != "assistant" and next_role in ("assistant", None):
            out.append(history[:n])
    return out


class TestHistoryReader:
    @pytest.mark.parametrize("fmt", ["anthropic", "openai"])
    def test_reading_only_what_is_new_gives_what_a_whole_read_gives(self, fmt: str) -> None:
        history = _anthropic_history(6) if fmt == "anthropic" else _openai_history(6)
        reader = HistoryReader(FORMATS[fmt], "messages")  # type: ignore[index]
        continued = 0
        for prefix in _calls(history):
            body = _body(fmt, list(prefix))
            read, whole = reader.read(body), _whole(fmt, body)
            continued += read.new_from > 0
            assert read.parsed.request == whole.parsed.request
            assert read.hashes == whole.hashes == chain(whole.parsed.request.messages)
            new_media = {ref for ref in whole.parsed.attachments if ref in read.parsed.attachments}
            assert set(read.parsed.attachments) == new_media  # only the new part's bytes
        assert continued == len(_calls(history)) - 1  # every call after the first read only its news

    def test_an_earlier_message_edited_in_place_is_read_again(self) -> None:
        history = _openai_history(3)
        reader = HistoryReader(FORMATS["openai"], "messages")
        calls = _calls(history)
        reader.read(_body("openai", list(calls[-2])))
        tool = next(m for m in calls[-1] if isinstance(m, dict) and m.get("role") == "tool")
        tool["content"] = "edited in place"
        body = _body("openai", list(calls[-1]))
        read = reader.read(body)
        assert read.new_from == 0
        assert read.parsed.request == _whole("openai", copy.deepcopy(body)).parsed.request

    def test_a_history_that_ended_with_an_assistant_message_is_read_whole(self) -> None:
        reader = HistoryReader(FORMATS["anthropic"], "messages")
        prefill = [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi"}]
        reader.read(_body("anthropic", prefill))
        grown = [*prefill, {"role": "assistant", "content": " there."}, {"role": "user", "content": "Again."}]
        read = reader.read(_body("anthropic", grown))
        assert read.new_from == 0
        assert read.parsed.request == _whole("anthropic", _body("anthropic", grown)).parsed.request

    def test_openai_tool_results_that_straddle_the_cut_are_read_whole(self) -> None:
        reader = HistoryReader(FORMATS["openai"], "messages")
        calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            for i in range(2)
        ]
        first = [
            {"role": "user", "content": "Go."},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": "c0", "content": "zero"},
        ]
        reader.read(_body("openai", first))
        grown = [*first, {"role": "tool", "tool_call_id": "c1", "content": "one"}]
        read = reader.read(_body("openai", grown))
        assert read.new_from == 0
        assert read.parsed.request == _whole("openai", _body("openai", grown)).parsed.request

    def test_unread_is_what_follows_the_history_read_before(self) -> None:
        """What the guard asks of the messages it has not seen (a ``compaction`` block handed back) is
        asked of exactly those: the items after a history read before, every item when the one
        before was edited in place; the read that follows takes the same lookup."""
        history = _anthropic_history(3)
        reader = HistoryReader(FORMATS["anthropic"], "messages")
        calls = _calls(history)
        assert reader.unread(_body("anthropic", list(calls[0]))) == calls[0]
        reader.read(_body("anthropic", list(calls[0])))
        grown = list(calls[1])
        assert reader.unread(_body("anthropic", grown)) == grown[len(calls[0]) :]
        assert reader.read(_body("anthropic", grown)).new_from == len(calls[0])
        grown[0]["content"] = [{"type": "compaction", "content": "edited in place"}]
        assert reader.unread(_body("anthropic", list(calls[2]))) == calls[2]
        assert reader.unread({"messages": "not a list"}) == ()


def _tools(fmt: str = "anthropic") -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    if fmt == "openai":
        function = {"description": "Reads a file.", "parameters": schema}
        return [{"type": "function", "function": {"name": f"tool_{i}", **function}} for i in range(3)]
    return [{"name": f"tool_{i}", "description": "Reads a file.", "input_schema": schema} for i in range(3)]


class TestTheFieldsButTheHistory:
    """A body's fields but the history (model, system, tools) are read once while they repeat."""

    @pytest.mark.parametrize("fmt", ["anthropic", "openai"])
    def test_tools_equal_by_value_are_read_once_and_read_as_a_whole_read_reads_them(self, fmt: str) -> None:
        history = _anthropic_history(3) if fmt == "anthropic" else _openai_history(3)
        reader = HistoryReader(FORMATS[fmt], "messages")  # type: ignore[index]
        first_tools = None
        for prefix in _calls(history):
            # A new list of new dicts each call, as a framework builds them: equal by value.
            body = reader.plain({**_body(fmt, list(prefix)), "tools": _tools(fmt)})
            read = reader.read(body)
            assert read.parsed.request == _whole(fmt, copy.deepcopy(body)).parsed.request
            tools = read.parsed.request.tools
            assert len(tools) == 3
            if first_tools is None:
                first_tools = tools
            assert all(a is b for a, b in zip(tools, first_tools, strict=True))  # read once

    def test_a_tool_edited_in_place_is_read_again(self) -> None:
        reader = HistoryReader(FORMATS["anthropic"], "messages")
        tools = _tools()
        calls = _calls(_anthropic_history(2))
        reader.read(reader.plain({**_body("anthropic", list(calls[0])), "tools": tools}))
        tools[1]["input_schema"]["properties"]["path"]["description"] = "edited in place"
        body = reader.plain({**_body("anthropic", list(calls[1])), "tools": tools})
        read = reader.read(body)
        assert (
            read.parsed.request.tools[1].input_schema["properties"]["path"]["description"]
            == "edited in place"
        )
        assert read.parsed.request == _whole("anthropic", copy.deepcopy(body)).parsed.request

    def test_plain_dumps_the_fields_and_leaves_the_history_as_given(self) -> None:
        reader = HistoryReader(FORMATS["anthropic"], "messages")
        history = _anthropic_history(1)
        body = reader.plain(
            {**_body("anthropic", history), "temperature": anthropic.NOT_GIVEN, "metadata": {"user_id": "u"}}
        )
        assert "temperature" not in body
        assert body["messages"] is history
        again = reader.plain(
            {**_body("anthropic", history), "temperature": anthropic.NOT_GIVEN, "metadata": {"user_id": "u"}}
        )
        assert again["metadata"] is body["metadata"]  # the same plain fields
        other = reader.plain({**_body("anthropic", history), "metadata": {"user_id": "v"}})
        assert other["metadata"] == {"user_id": "v"}
