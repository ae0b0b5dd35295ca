"""The local provider's OpenAI Responses compaction, through the real ``openai`` SDK over HTTP:
``context_management`` compaction items written and read back, ``POST /responses/compact`` served
strictly (https://developers.openai.com/api/docs/guides/compaction)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.content import Message, Text
from contextwindow.formats import loader_from
from contextwindow.formats import responses as responses_format
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

openai = LazyModule("openai")

GPT = "gpt-4o"
WINDOW = 16_000
FILE = "a line of the file the agent read, long enough to matter. " * 100  # about 1,200 tokens
COMPACT = [{"type": "compaction", "compact_threshold": 6_000}]


def history(rounds: int) -> list[dict[str, Any]]:
    """A Responses input of ``rounds`` file reads, about 1.2k tokens each."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "Read every file, then say what they do."}]
    for i in range(rounds):
        out.append({"type": "function_call", "call_id": f"call_{i}", "name": "read_file", "arguments": "{}"})
        out.append({"type": "function_call_output", "call_id": f"call_{i}", "output": f"{i} {FILE}"})
    return out


@pytest.fixture
def model() -> LocalModel:
    return LocalModel(LocalSettings(window=WINDOW, prompt_cache=True))


@pytest.fixture
def client(model: LocalModel) -> Iterator[Any]:
    with (
        LocalServer(model) as server,
        openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0) as raw,
    ):
        yield raw


def dumped(response: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in response.output]


class TestServerSideCompaction:
    def test_under_the_threshold_nothing_is_compacted(self, client: Any) -> None:
        response = client.responses.create(model=GPT, input=history(2), context_management=COMPACT)
        assert [i["type"] for i in dumped(response)] == ["message"]

    def test_over_the_threshold_the_output_starts_with_a_compaction_item(self, client: Any) -> None:
        response = client.responses.create(model=GPT, input=history(6), context_management=COMPACT)
        items = dumped(response)
        assert [i["type"] for i in items] == ["compaction", "message"]
        assert items[0]["id"].startswith("cmp_") and items[0]["encrypted_content"]
        # Both passes billed: the compaction read the whole input, the reply only the item.
        assert response.usage.input_tokens > 6 * 1_000

    def test_the_next_call_reads_the_item_as_its_summary(self, client: Any) -> None:
        first = client.responses.create(model=GPT, input=history(6), context_management=COMPACT)
        item = dumped(first)[0]
        after = [item, {"role": "user", "content": "And now?"}]
        response = client.responses.create(model=GPT, input=after)
        # Counted as the summary it seals (well under the 7k it replaced, and under its sealed text).
        assert response.usage.input_tokens < 1_500
        assert response.usage.input_tokens < len(item["encrypted_content"]) / 4

    def test_items_before_a_compaction_item_are_still_read_and_billed(self, client: Any) -> None:
        # OpenAI does not treat a compaction item as a truncation marker (pydantic/pydantic-ai#7224).
        first = client.responses.create(model=GPT, input=history(6), context_management=COMPACT)
        item = dumped(first)[0]
        ask = {"role": "user", "content": "And now?"}
        pruned = client.responses.create(model=GPT, input=[item, ask])
        whole = client.responses.create(model=GPT, input=[*history(6), item, ask])
        assert whole.usage.input_tokens > pruned.usage.input_tokens + 6 * 1_000

    def test_a_foreign_compaction_item_is_refused(self, client: Any) -> None:
        forged = {"type": "compaction", "id": "cmp_x", "encrypted_content": "bm90IG91cnM="}
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.create(model=GPT, input=[forged, {"role": "user", "content": "Hi"}])
        assert refused.value.code == "invalid_encrypted_content"

    def test_a_stream_carries_the_compaction_item(self, client: Any) -> None:
        stream = client.responses.create(model=GPT, input=history(6), context_management=COMPACT, stream=True)
        events = list(stream)
        kinds = [e.type for e in events]
        assert "response.compaction.compacting" in kinds
        done = events[-1].response
        assert done.output[0].type == "compaction"


class TestCompactEndpoint:
    def test_the_output_is_the_user_messages_and_one_compaction_item(self, client: Any) -> None:
        compacted = client.responses.compact(model=GPT, input=history(6))
        assert compacted.object == "response.compaction"
        kinds = [(i.type, getattr(i, "role", None)) for i in compacted.output]
        assert kinds == [("message", "user"), ("compaction", None)]
        assert compacted.usage.input_tokens > 6 * 1_000
        # The compacted window is the next call's input, as the guide has it.
        follow = [i.model_dump(exclude_none=True, warnings=False) for i in compacted.output]
        response = client.responses.create(model=GPT, input=[*follow, {"role": "user", "content": "Next?"}])
        assert response.usage.input_tokens < 1_500

    def test_an_unknown_parameter_is_refused(self, client: Any) -> None:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.compact(model=GPT, input=history(1), extra_body={"tools": []})
        assert refused.value.code == "unknown_parameter" and refused.value.param == "tools"

    def test_no_input_is_refused(self, client: Any) -> None:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.compact(model=GPT)
        assert refused.value.code == "missing_required_parameter"

    def test_an_input_over_the_window_is_refused(self, client: Any) -> None:
        with pytest.raises(openai.BadRequestError) as refused:
            client.responses.compact(model=GPT, input=history(16))
        assert refused.value.code == "context_length_exceeded"


class TestFormat:
    def test_a_compaction_item_parses_and_renders_back_as_itself(self) -> None:
        item = {"type": "compaction", "id": "cmp_1", "encrypted_content": "sealed"}
        parsed = responses_format.parse_request(
            {"model": GPT, "input": [item, {"role": "user", "content": "Hi"}]}
        )
        first = parsed.request.messages[0]
        assert first.content == (Text(text="sealed"),)
        assert responses_format.render_items(list(parsed.request.messages), loader_from({}))[0] == item

    def test_a_plain_user_message_is_not_a_compaction_item(self) -> None:
        assert responses_format.compaction_item(Message.user("sealed")) is None
