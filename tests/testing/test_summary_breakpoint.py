"""The summary checkpoint carries a cache breakpoint: a change after it (a fold's newer tail, an
archived tool result) leaves the system and the summary read from the cache."""

from __future__ import annotations

from contextwindow.compile.head import SUMMARY_HEADER
from contextwindow.content import Message, Request, Text
from contextwindow.formats import loader_from
from contextwindow.providers.anthropic import AnthropicProvider
from contextwindow.testing import LocalModel, LocalReply, LocalSettings
from contextwindow.testing.caching import Breakpoint, provider_breakpoints

LOAD = loader_from({})
SONNET = "claude-sonnet-4-6"
SUMMARY = SUMMARY_HEADER + "The user asked for an audit of the parser; three modules are done. " * 120


def _text(role: str, text: str) -> Message:
    return Message(role=role, content=(Text(text=text),))  # type: ignore[arg-type]


def _request(*tail: str, summary: bool = True) -> Request:
    head = [_text("user", SUMMARY), _text("assistant", "Understood.")] if summary else []
    messages = head + [_text("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(tail)]
    return Request(model=SONNET, system=(Text(text="You are a careful agent."),), messages=tuple(messages))


class TestSummaryBreakpoint:
    def test_a_request_opening_with_the_summary_marks_it(self) -> None:
        marks = provider_breakpoints(_request("read a.py", "done", "read b.py"))
        assert Breakpoint(at=("messages", 0, 0)) in marks
        assert len(marks) == 3  # system, summary, newest message: under Anthropic's four

    def test_a_request_without_a_summary_marks_system_and_the_newest_message(self) -> None:
        marks = provider_breakpoints(_request("read a.py", "done", "read b.py", summary=False))
        assert [m.at[0] for m in marks] == ["system", "messages"]

    def test_the_anthropic_provider_marks_the_summary_in_the_body(self) -> None:
        provider = AnthropicProvider(object())  # the client is not called to build a body
        body = provider.body(_request("read a.py", "done", "read b.py"), max_tokens=64, load=LOAD)
        first = body["messages"][0]["content"]
        assert first[-1].get("cache_control") == {"type": "ephemeral"}

    def test_a_changed_tail_still_reads_the_system_and_summary_from_the_cache(self) -> None:
        model = LocalModel(LocalSettings(prompt_cache=True))
        first = _request("read a.py " * 50, "a.py is fine", "read b.py")
        changed = _request("[archived: read a.py]", "a.py is fine", "read c.py")
        for request in (first, changed):
            reply = model.handle(
                request, wire="anthropic", max_tokens=64, load=LOAD, breakpoints=provider_breakpoints(request)
            )
            assert isinstance(reply, LocalReply)
        assert reply.cache.read > 1_000  # the summary's ~1.7k tokens, not written again
