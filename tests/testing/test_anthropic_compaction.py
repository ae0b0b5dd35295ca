"""The local provider's Anthropic server-side compaction, through the real SDK: refused where the API
refuses it, triggered at its threshold, reported as the API reports it, and read back as the API reads
it (https://platform.claude.com/docs/en/build-with-claude/compaction)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.compaction import COMPACT_BETA
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

SONNET = "claude-sonnet-4-6"
RESULT = "line of a long file that the agent read earlier in the session. " * 60  # about 700 tokens
TOOLS = [{"name": "read_file", "description": "Read.", "input_schema": {"type": "object", "properties": {}}}]


def history(rounds: int = 80) -> list[dict[str, Any]]:
    """A tool-reading session of about 850 tokens a round (80 rounds: about 69k tokens)."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for i in range(rounds):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": f"f{i}"}}
        out.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i} {RESULT}"}
        out.append({"role": "user", "content": [result]})
    return out


def compact(trigger: int = 50_000, **more: Any) -> dict[str, Any]:
    return {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": trigger}, **more}]
    }


@pytest.fixture
def client() -> Iterator[Any]:
    with (
        LocalServer(LocalModel(LocalSettings(default_model=SONNET))) as server,
        anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0) as sdk,
    ):
        yield sdk


def create(client: Any, messages: list[dict[str, Any]], management: Any = None, **more: Any) -> Any:
    extra = {} if management is None else {"context_management": management}
    return client.beta.messages.create(
        model=SONNET, max_tokens=50, tools=TOOLS, messages=messages, betas=[COMPACT_BETA], **extra, **more
    )


def count(client: Any, messages: list[dict[str, Any]]) -> int:
    return int(
        client.beta.messages.count_tokens(
            model=SONNET, tools=TOOLS, messages=messages, betas=[COMPACT_BETA]
        ).input_tokens
    )


def sent_back(response: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]}


class TestRefusals:
    # The SDK's BetaCompact20260112EditParam: type, trigger, pause_after_compaction, instructions.
    @pytest.mark.parametrize(
        ("more", "field"),
        [
            ({"pause_after_compaction": "yes"}, "pause_after_compaction"),
            ({"instructions": 3}, "instructions"),
            ({"keep": {"type": "tool_uses", "value": 2}}, "keep"),
        ],
    )
    def test_a_bad_field_of_the_edit_is_refused(self, client: Any, more: dict[str, Any], field: str) -> None:
        with pytest.raises(anthropic.BadRequestError, match=field):
            create(client, history(3), compact(**more))

    def test_a_compaction_block_without_the_beta_header_is_refused(self, client: Any) -> None:
        block = {"role": "assistant", "content": [{"type": "compaction", "content": "Earlier: read files."}]}
        messages = [*history(3), block, {"role": "user", "content": "go on"}]
        with pytest.raises(anthropic.BadRequestError, match=COMPACT_BETA):
            client.messages.create(model=SONNET, max_tokens=50, tools=TOOLS, messages=messages)

    # BetaCompactionBlockParam: "Empty string content is not allowed"; it has no other fields.
    @pytest.mark.parametrize(
        ("block", "field"),
        [
            ({"type": "compaction", "content": ""}, "content"),
            ({"type": "compaction", "content": "Earlier.", "summary": "x"}, "summary"),
            ({"type": "compaction", "content": 7}, "content"),
        ],
    )
    def test_a_malformed_compaction_block_is_refused(
        self, client: Any, block: dict[str, Any], field: str
    ) -> None:
        messages = [
            *history(3),
            {"role": "assistant", "content": [block]},
            {"role": "user", "content": "go on"},
        ]
        with pytest.raises(anthropic.BadRequestError, match=rf"messages\.7\.content\.0\.{field}"):
            create(client, messages)


class TestTrigger:
    def test_under_the_trigger_nothing_is_compacted(self, client: Any) -> None:
        response = create(client, history(), compact(trigger=100_000))
        assert [b.type for b in response.content] == ["text"]
        assert response.usage.iterations is None

    def test_at_the_trigger_the_response_opens_with_the_summary_and_answers_from_it(
        self, client: Any
    ) -> None:
        whole = count(client, history())
        assert whole >= 50_000
        response = create(client, history(), compact())
        assert [b.type for b in response.content] == ["compaction", "text"]
        assert response.stop_reason == "end_turn"
        summary = response.content[0].content
        assert "read_file" in summary
        kinds = [(i.type, i.input_tokens) for i in response.usage.iterations]
        # The compaction pass read the whole request; the reply, the summary alone.
        assert kinds[0] == ("compaction", whole)
        assert kinds[1][0] == "message" and kinds[1][1] < 2_000
        # The top-level usage leaves the compaction pass out.
        assert response.usage.input_tokens == kinds[1][1]
        assert response.usage.output_tokens == response.usage.iterations[1].output_tokens
        assert response.usage.iterations[0].output_tokens > 100

    def test_pause_after_compaction_returns_the_block_alone(self, client: Any) -> None:
        response = create(client, history(), compact(pause_after_compaction=True))
        assert response.stop_reason == "compaction"
        assert [b.type for b in response.content] == ["compaction"]
        assert [i.type for i in response.usage.iterations] == ["compaction"]
        assert response.usage.input_tokens == response.usage.output_tokens == 0

    def test_the_stream_carries_the_block_as_one_delta(self, client: Any) -> None:
        whole = create(client, history(), compact())
        with client.beta.messages.stream(
            model=SONNET,
            max_tokens=50,
            tools=TOOLS,
            messages=history(),
            betas=[COMPACT_BETA],
            context_management=compact(),
        ) as stream:
            kinds = [e.delta.type for e in stream if e.type == "content_block_delta"]
            final = stream.get_final_message()
        assert kinds[0] == "compaction_delta"
        assert [b.type for b in final.content] == ["compaction", "text"]
        assert final.content[0].content == whole.content[0].content
        assert [i.type for i in final.usage.iterations] == ["compaction", "message"]


class TestSentBack:
    def test_what_is_before_the_newest_block_is_dropped(self, client: Any) -> None:
        response = create(client, history(), compact())
        summary, reply = response.content[0].content, response.content[1].text
        follow = {"role": "user", "content": "go on"}
        # The block is read as a user turn with its summary; what followed it in the turn stays.
        alone = [{"role": "user", "content": summary}, {"role": "assistant", "content": reply}, follow]
        assert count(client, [*history(), sent_back(response), follow]) == count(client, alone)
        again = create(client, [*history(), sent_back(response), follow], compact())
        assert [b.type for b in again.content] == ["text"]  # what is left is under the trigger

    def test_a_block_after_pausing_is_joined_to_the_turn_that_follows(self, client: Any) -> None:
        paused = create(client, history(), compact(pause_after_compaction=True))
        follow = {"role": "user", "content": "go on"}
        joined = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": paused.content[0].content},
                    {"type": "text", "text": "go on"},
                ],
            }
        ]
        assert count(client, [sent_back(paused), follow]) == count(client, joined)

    # BetaCompactionBlock: "Clients may round-trip compaction blocks with null content; the server
    # treats them as no-ops."
    def test_a_failed_compaction_block_is_a_no_op(self, client: Any) -> None:
        failed = {
            "role": "assistant",
            "content": [{"type": "compaction", "content": None}, {"type": "text", "text": "ok"}],
        }
        follow = {"role": "user", "content": "go on"}
        without = [*history(3), {"role": "assistant", "content": "ok"}, follow]
        assert count(client, [*history(3), failed, follow]) == count(client, without)
