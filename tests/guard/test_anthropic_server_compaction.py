"""``guard(client, compaction="provider")`` with Anthropic's server-side compaction: sent where clearing
tool results cannot make the request fit and the window takes its 50,000-token trigger, the
conversation the provider's from the block on, served by the strict local provider
(https://platform.claude.com/docs/en/build-with-claude/compaction)."""

from __future__ import annotations

from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.compaction import (
    COMPACT,
    COMPACT_BETA,
    cheapest,
    compaction_trigger,
    cost_model,
    guarded_body,
    holds_compaction,
    per_call_dollars,
)
from contextwindow.content import Message, Request, Text
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

CLAUDE = "claude-sonnet-4-6"
WINDOW = 100_000
TEXT = "a line the user pasted into the conversation, long enough to matter. " * 200  # about 3,000 tokens


class Recording(LocalModel):
    """The local provider, recording each call's input count and ``context_management``."""

    def __init__(self) -> None:
        super().__init__(LocalSettings(window=WINDOW))
        self.inputs: list[int] = []
        self.managed: list[Any] = []

    def handle(self, request: Any, **kwargs: Any) -> Any:
        answer = super().handle(request, **kwargs)
        self.inputs.append(getattr(answer, "input_tokens", -1))
        self.managed.append(request.params.get("context_management"))
        return answer


@pytest.fixture
def model() -> Recording:
    return Recording()


@pytest.fixture
def server(model: Recording) -> Iterator[LocalServer]:
    with LocalServer(model) as running:
        yield running


def chat(server: LocalServer, compaction: str, turns: int) -> tuple[list[Any], list[Any]]:
    """``turns`` user turns of pasted text through the guarded beta client: the history and the replies."""
    raw = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    guarded = contextwindow.guard(raw, store=":memory:", compaction=compaction, context_window=WINDOW)
    messages: list[dict[str, Any]] = []
    replies = []
    for turn in range(turns):
        messages.append({"role": "user", "content": f"{turn} {TEXT}"})
        reply = guarded.beta.messages.create(model=CLAUDE, max_tokens=1_000, messages=messages)
        replies.append(reply)
        messages.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]}
        )
    guarded.store.close()
    raw.close()  # its sockets closed here, not by the collector in a later test
    return messages, replies


class TestThePlan:
    def test_no_trigger_under_the_apis_minimum(self) -> None:
        assert compaction_trigger(62_000) is None
        assert compaction_trigger(99_000) == 79_200

    def count(self, request: Request) -> int:
        return sum(len(b.text) // 4 for m in request.messages for b in m.content if isinstance(b, Text))

    def request(self, tokens: int) -> tuple[dict[str, Any], Request]:
        text = "abcd" * tokens
        body = {"model": CLAUDE, "max_tokens": 1_000, "messages": [{"role": "user", "content": text}]}
        return body, Request(model=CLAUDE, messages=(Message(role="user", content=(Text(text=text),)),))

    def test_compaction_where_clearing_has_nothing_to_clear(self) -> None:
        body, request = self.request(85_000)
        sent = guarded_body(body, request, mode="provider", wire="anthropic", room=99_000, count=self.count)
        assert sent is not None
        [edit] = sent["extra_body"]["context_management"]["edits"]
        assert edit == {"type": COMPACT, "trigger": {"type": "input_tokens", "value": 79_200}}
        assert COMPACT_BETA in sent["extra_headers"]["anthropic-beta"]

    @pytest.mark.parametrize(("tokens", "room"), [(70_000, 99_000), (97_000, 99_000), (50_000, 60_000)])
    def test_folded_locally_under_the_trigger_past_what_the_pass_reads_or_below_the_minimum(
        self, tokens: int, room: int
    ) -> None:
        body, request = self.request(tokens)
        assert (
            guarded_body(body, request, mode="provider", wire="anthropic", room=room, count=self.count)
            is None
        )

    def conversation(self, messages: int, tokens: int) -> tuple[dict[str, Any], Request]:
        """``messages`` turns of ``tokens`` each: a conversation that grows a little every call."""
        texts = [f"{i:04d}" + "abcd" * (tokens - 1) for i in range(messages)]
        roles = ["user" if i % 2 == 0 else "assistant" for i in range(messages)]
        body = {
            "model": CLAUDE,
            "max_tokens": 1_000,
            "messages": [{"role": r, "content": t} for r, t in zip(roles, texts, strict=True)],
        }
        return body, Request(
            model=CLAUDE,
            messages=tuple(
                Message(role=r, content=(Text(text=t),))  # type: ignore[arg-type]
                for r, t in zip(roles, texts, strict=True)
            ),
        )

    def test_auto_chooses_it_where_it_is_priced_cheapest(self) -> None:
        body, request = self.conversation(85, 1_000)
        sent = guarded_body(body, request, mode="auto", wire="anthropic", room=99_000, count=self.count)
        assert sent is not None
        [edit] = sent["extra_body"]["context_management"]["edits"]
        assert edit["type"] == COMPACT
        assert COMPACT_BETA in sent["extra_headers"]["anthropic-beta"]

    @pytest.mark.parametrize("mode", ["provider", "auto"])
    def test_the_whole_request_is_priced_once_where_no_edit_applies(self, mode: str) -> None:
        # Clearing has nothing to clear here: its plan's count is the request's, and is not taken again.
        body, request = self.conversation(85, 1_000)
        whole: list[int] = []

        def count(priced: Request) -> int:
            if priced.messages == request.messages:
                whole.append(1)
            return self.count(priced)

        assert guarded_body(body, request, mode=mode, wire="anthropic", room=99_000, count=count) is not None  # type: ignore[arg-type]
        assert len(whole) == 2  # the clearing's trigger check, and what its plan leaves

    def test_auto_folds_locally_where_one_huge_message_makes_each_compaction_dearer(self) -> None:
        body, request = self.request(85_000)
        assert (
            guarded_body(body, request, mode="auto", wire="anthropic", room=99_000, count=self.count) is None
        )


class TestTheCostModel:
    """``"auto"``'s dollars for Anthropic's compaction: the pass billed as input and output, then
    calls from the head and the summary (:func:`contextwindow.compaction.per_call_dollars`)."""

    def dollars(self, growth: int, room: int = 99_000) -> dict[str, float]:
        priced = per_call_dollars(
            CLAUDE, wire="anthropic", room=room, head=2_000, growth=growth, whole=85_000
        )
        assert priced is not None
        return priced

    def test_priced_only_where_the_room_takes_the_trigger(self) -> None:
        assert "compaction" in self.dollars(1_500)
        assert "compaction" not in self.dollars(1_500, room=62_000)

    def test_cheaper_than_a_local_fold_on_small_steps_and_dearer_on_one_huge_step(self) -> None:
        small, huge = self.dollars(1_500), self.dollars(85_000)
        assert small["compaction"] < small["local"] < small["provider"]
        assert huge["compaction"] > huge["local"]

    def test_a_bigger_summary_costs_more(self, monkeypatch: pytest.MonkeyPatch) -> None:
        before = self.dollars(1_500)["compaction"]
        monkeypatch.setattr(cost_model, "ANTHROPIC_COMPACTED_SHARE", 0.2)
        assert self.dollars(1_500)["compaction"] > before

    def test_cheapest_ties_go_to_local_then_to_clearing(self) -> None:
        assert cheapest({"local": 1.0, "provider": 1.0, "compaction": 1.0}) == "local"
        assert cheapest({"local": 2.0, "provider": 1.0, "compaction": 1.0}) == "provider"
        assert cheapest({"local": 2.0, "provider": 1.5, "compaction": 1.0}) == "compaction"
        assert cheapest({"local": 2.0, "compaction": 1.0}) == "compaction"


class TestHoldsCompaction:
    """Which bodies carry a ``compaction`` block back (the guard then sends them as written)."""

    def test_a_block_anywhere_in_a_content_list_is_found(self) -> None:
        block = {"type": "compaction", "content": "summary"}
        history: list[Any] = [{"role": "user", "content": "hi"}] * 5
        assert holds_compaction({"messages": [*history, {"role": "assistant", "content": [block]}]})
        assert holds_compaction({"messages": [{"role": "assistant", "content": [{"type": "text"}, block]}]})

    def test_mappings_other_than_dict_are_read(self) -> None:
        block = MappingProxyType({"type": "compaction"})
        message = MappingProxyType({"role": "assistant", "content": [block]})
        assert holds_compaction({"messages": [message]})

    @pytest.mark.parametrize(
        "messages",
        [
            [{"role": "assistant", "content": "compaction"}],
            [{"role": "assistant", "content": [{"type": "text", "text": "compaction"}]}],
            ["compaction", None, 3, {"content": None}, {"content": ["compaction"]}],
            {"type": "compaction"},
            None,
        ],
    )
    def test_text_strings_and_malformed_bodies_hold_none(self, messages: Any) -> None:
        assert not holds_compaction({"messages": messages})


class TestThroughTheGuard:
    @pytest.mark.parametrize("mode", ["provider", "auto"])
    def test_the_provider_compacts_and_the_conversation_goes_on_from_its_block(
        self, server: LocalServer, model: Recording, mode: str
    ) -> None:
        # "auto" too: 40 turns of 3,000 tokens on a 100k window price the provider's compaction cheaper.
        messages, replies = chat(server, mode, 40)
        compacted = [i for i, r in enumerate(replies) if r.content and r.content[0].type == "compaction"]
        assert compacted, "the provider never compacted"
        assert all(i >= 0 for i in model.inputs) and max(model.inputs) <= WINDOW  # never refused
        first = compacted[0]
        assert holds_compaction({"messages": messages})
        # From the block on the provider reads the summary and what followed, not the whole history.
        assert model.inputs[first + 1] < model.inputs[first - 1] // 4
        # Every call from the block on still carries the edit, so the provider compacts again.
        assert all(m is not None and m["edits"][0]["type"] == COMPACT for m in model.managed[first + 1 :])

    def test_local_folds_itself_and_sends_no_edit(self, server: LocalServer, model: Recording) -> None:
        _, replies = chat(server, "local", 40)
        assert not any(r.content and r.content[0].type == "compaction" for r in replies)
        assert all(m is None for m in model.managed)
        assert max(model.inputs) <= WINDOW
