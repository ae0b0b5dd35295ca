"""The local provider's ``context_management``: refused where the APIs refuse it, applied to what it
counts and bills, reported as the APIs report it, and cached consistently.

Anthropic: https://platform.claude.com/docs/en/build-with-claude/context-editing and
https://platform.claude.com/docs/en/build-with-claude/compaction; OpenAI:
https://developers.openai.com/api/docs/guides/context-management."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.compaction import (
    ANTHROPIC_CONTEXT_BETA,
    CLEARED_TOOL_RESULT,
    COMPACT_BETA,
    apply_anthropic_edits,
)
from contextwindow.content import Message, Request, Text, Thinking, ToolResult, ToolUse
from contextwindow.formats import loader_from
from contextwindow.testing import LocalModel, LocalReply, LocalServer, LocalSettings
from contextwindow.testing.caching import Breakpoint
from contextwindow.testing.model import Rejection

anthropic = LazyModule("anthropic")

LOAD = loader_from({})
SONNET = "claude-sonnet-4-6"
RESULT = "line of a long file that the agent read earlier in the session. " * 60  # about 700 tokens


def tool_history(rounds: int = 6) -> Request:
    messages: list[Message] = [Message(role="user", content=(Text(text="Read the files."),))]
    for i in range(rounds):
        messages.append(
            Message(
                role="assistant",
                content=(ToolUse(id=f"toolu_{i}", name="read_file", input={"path": f"f{i}"}),),
            )
        )
        messages.append(
            Message(role="user", content=(ToolResult(tool_use_id=f"toolu_{i}", content=f"{i} {RESULT}"),))
        )
    return Request(model=SONNET, system=(Text(text="You read files. " * 400),), messages=tuple(messages))


def clear(trigger: int = 1_000, keep: int = 2, **more: Any) -> dict[str, Any]:
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": trigger},
        "keep": {"type": "tool_uses", "value": keep},
        **more,
    }
    return {"edits": [edit]}


def managed(request: Request, management: Any, betas: tuple[str, ...] = (ANTHROPIC_CONTEXT_BETA,)) -> Request:
    return replace(request, params={**request.params, "context_management": management, "betas": list(betas)})


def ask(model: LocalModel, request: Request, *marks: Breakpoint) -> LocalReply | Rejection:
    return model.handle(request, wire="anthropic", max_tokens=50, load=LOAD, breakpoints=marks or None)


def refused(model: LocalModel, request: Request) -> str:
    outcome = ask(model, request)
    assert isinstance(outcome, Rejection), outcome
    assert outcome.status == 400
    assert outcome.body["error"]["type"] == "invalid_request_error"
    return outcome.message


class TestAnthropicRefusals:
    # https://platform.claude.com/docs/en/build-with-claude/context-editing: "use the beta header
    # context-management-2025-06-27"; without it the API does not know the field.
    def test_context_management_without_its_beta_header_is_refused(self) -> None:
        message = refused(LocalModel(), managed(tool_history(), clear(), betas=()))
        assert ANTHROPIC_CONTEXT_BETA in message

    # https://platform.claude.com/docs/en/build-with-claude/compaction: compact_20260112 needs
    # compact-2026-01-12, the context-editing beta is not enough.
    def test_compaction_needs_its_own_beta(self) -> None:
        compact = {"edits": [{"type": "compact_20260112"}]}
        assert COMPACT_BETA in refused(LocalModel(), managed(tool_history(), compact))
        outcome = ask(LocalModel(), managed(tool_history(), compact, betas=(COMPACT_BETA,)))
        assert isinstance(outcome, LocalReply)

    def test_an_unknown_edit_type_is_refused(self) -> None:
        message = refused(LocalModel(), managed(tool_history(), {"edits": [{"type": "clear_everything"}]}))
        assert "'clear_everything'" in message and "clear_tool_uses_20250919" in message

    # The compaction docs' parameter table: the trigger is input_tokens, at least 50,000.
    @pytest.mark.parametrize(
        "trigger",
        [
            {"type": "input_tokens", "value": 10_000},
            {"type": "tool_uses", "value": 60_000},
            {"type": "input_tokens"},
        ],
    )
    def test_a_bad_compaction_trigger_is_refused(self, trigger: dict[str, Any]) -> None:
        compact = {"edits": [{"type": "compact_20260112", "trigger": trigger}]}
        refused(LocalModel(), managed(tool_history(), compact, betas=(COMPACT_BETA,)))

    def test_a_clearing_trigger_of_another_kind_is_refused(self) -> None:
        bad = {"edits": [{"type": "clear_tool_uses_20250919", "trigger": {"type": "messages", "value": 3}}]}
        assert "trigger.type" in refused(LocalModel(), managed(tool_history(), bad))

    # The context-editing docs: combined with other strategies, clear_thinking_20251015 comes first.
    def test_clear_thinking_after_another_edit_is_refused(self) -> None:
        edits = clear()["edits"] + [{"type": "clear_thinking_20251015"}]
        assert "first" in refused(LocalModel(), managed(tool_history(), {"edits": edits}))


class TestAnthropicEdits:
    def test_old_tool_results_are_cleared_counted_and_reported(self) -> None:
        request = tool_history()
        plain = ask(LocalModel(), request)
        edited = ask(LocalModel(), managed(request, clear(keep=2)))
        assert isinstance(plain, LocalReply) and isinstance(edited, LocalReply)
        assert edited.applied_edits is not None and len(edited.applied_edits) == 1
        edit = edited.applied_edits[0].wire()
        assert edit["type"] == "clear_tool_uses_20250919"
        assert edit["cleared_tool_uses"] == 4
        assert edit["cleared_input_tokens"] == plain.input_tokens - edited.input_tokens > 4 * 600
        assert edited.reported is not None and edited.reported.prompt == edited.input_tokens

    def test_below_the_trigger_nothing_is_cleared_and_the_report_is_empty(self) -> None:
        edited = ask(LocalModel(), managed(tool_history(), clear(trigger=1_000_000)))
        assert isinstance(edited, LocalReply) and edited.applied_edits == ()

    def test_clear_at_least_that_cannot_be_met_leaves_the_context_alone(self) -> None:
        least = {"type": "input_tokens", "value": 100_000}
        edited = ask(LocalModel(), managed(tool_history(), clear(clear_at_least=least)))
        assert isinstance(edited, LocalReply) and edited.applied_edits == ()

    def test_excluded_tools_and_the_newest_uses_are_kept(self) -> None:
        def count(r: Request) -> int:
            return LocalModel().count(r).input_tokens

        edits = clear(keep=1, exclude_tools=["read_file"])["edits"]
        same, applied = apply_anthropic_edits(tool_history(), edits, count)
        assert applied == () and same == tool_history()
        edited, applied = apply_anthropic_edits(tool_history(), clear(keep=1)["edits"], count)
        results = [b for m in edited.messages for b in m.content if isinstance(b, ToolResult)]
        assert [r.content == CLEARED_TOOL_RESULT for r in results] == [True] * 5 + [False]

    def test_old_thinking_is_cleared_keeping_the_newest_turn(self) -> None:
        messages = []
        for i in range(3):
            messages.append(Message(role="user", content=(Text(text=f"question {i}"),)))
            thought = Thinking(thinking="let me think about it " * 50, signature="sig")
            messages.append(Message(role="assistant", content=(thought, Text(text=f"answer {i}"))))
        messages.append(Message(role="user", content=(Text(text="and now?"),)))
        request = Request(model=SONNET, messages=tuple(messages))
        edited = ask(LocalModel(), managed(request, {"edits": [{"type": "clear_thinking_20251015"}]}))
        assert isinstance(edited, LocalReply) and edited.applied_edits is not None
        assert edited.applied_edits[0].wire()["cleared_thinking_turns"] == 2
        assert edited.applied_edits[0].cleared_input_tokens > 100


class TestCache:
    def test_a_cleared_result_invalidates_the_cache_from_there_and_the_edited_prefix_caches(self) -> None:
        model = LocalModel(LocalSettings(prompt_cache=True, clock=lambda: 1_000.0))
        request = tool_history()
        last = len(request.messages) - 1
        marks = (Breakpoint(at=("system", 0)), Breakpoint(at=("messages", last, 0)))
        first = ask(model, request, *marks)
        again = ask(model, request, *marks)
        assert isinstance(first, LocalReply) and isinstance(again, LocalReply)
        assert again.cache.read > 0.9 * again.input_tokens  # unedited: the whole prefix is read
        cleared = ask(model, managed(request, clear(keep=2)), *marks)
        assert isinstance(cleared, LocalReply)
        system_only = first.cache.write - (again.cache.read - cleared.cache.read)
        assert 0 < cleared.cache.read < 0.5 * cleared.input_tokens  # only the system prompt survives
        assert cleared.cache.read <= system_only + 1
        repeat = ask(model, managed(request, clear(keep=2)), *marks)
        assert isinstance(repeat, LocalReply)
        assert repeat.cache.read > 0.9 * repeat.input_tokens  # the same edits: the edited prefix is read


class TestOpenAI:
    # https://developers.openai.com/api/docs/guides/context-management: entries of type "compaction".
    def test_an_entry_of_another_type_is_refused(self) -> None:
        request = replace(
            tool_history(), model="gpt-4o", params={"context_management": [{"type": "truncate"}]}
        )
        outcome = LocalModel().handle(request, wire="openai", max_tokens=50, load=LOAD)
        assert isinstance(outcome, Rejection) and outcome.status == 400
        assert outcome.body["error"]["param"] == "context_management[0].type"

    def test_a_compaction_entry_is_accepted(self) -> None:
        entry = [{"type": "compaction", "compact_threshold": 200_000}]
        request = replace(tool_history(), model="gpt-4o", params={"context_management": entry})
        outcome = LocalModel().handle(request, wire="openai", max_tokens=50, load=LOAD)
        assert isinstance(outcome, LocalReply)


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(LocalModel(LocalSettings(default_model=SONNET))) as running:
        yield running


def sdk_messages() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "Read the files."}]
    for i in range(5):
        use = {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": f"f{i}"}}
        out.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"{i} {RESULT}"}
        out.append({"role": "user", "content": [result]})
    return out


TOOLS = [{"name": "read_file", "description": "Read.", "input_schema": {"type": "object", "properties": {}}}]


class TestThroughTheSDK:
    def test_the_beta_client_gets_applied_edits_in_the_response(self, server: LocalServer) -> None:
        with anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0) as client:
            response = client.beta.messages.create(
                model=SONNET,
                max_tokens=50,
                tools=TOOLS,
                messages=sdk_messages(),
                betas=[ANTHROPIC_CONTEXT_BETA],
                context_management=clear(keep=1),
            )
            assert response.context_management is not None
            edit = response.context_management.applied_edits[0]
            assert edit.type == "clear_tool_uses_20250919" and edit.cleared_tool_uses == 4
            assert edit.cleared_input_tokens > 4 * 600
            streamed = client.beta.messages.create(
                model=SONNET,
                max_tokens=50,
                tools=TOOLS,
                messages=sdk_messages(),
                betas=[ANTHROPIC_CONTEXT_BETA],
                context_management=clear(keep=1),
                stream=True,
            )
            deltas = [e for e in streamed if e.type == "message_delta"]
            assert deltas[0].context_management is not None
            assert deltas[0].context_management.applied_edits[0].cleared_tool_uses == 4

    def test_without_the_beta_the_sdk_raises_bad_request(self, server: LocalServer) -> None:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        with client, pytest.raises(anthropic.BadRequestError, match="context-management-2025-06-27"):
            client.beta.messages.create(
                model=SONNET,
                max_tokens=50,
                tools=TOOLS,
                messages=sdk_messages(),
                context_management=clear(keep=1),
            )
