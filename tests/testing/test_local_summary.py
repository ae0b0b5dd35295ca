"""The local provider's summaries, as the engine's summariser asks for them: readable and extractive."""

from __future__ import annotations

import asyncio

from contextwindow.content import Message, ToolResult, ToolUse
from contextwindow.engine.folding.summarizer import Summarizer, Summary
from contextwindow.engine.folding.summary_rules import REQUIRED_SECTIONS, find_summary_defect
from contextwindow.models import get_profile
from contextwindow.testing import LocalProvider, LocalSettings

MODEL = "claude-sonnet-4-5"
MARKER = "[[contextwindow:summarize]]"


def summarizer() -> Summarizer:
    provider = LocalProvider(settings=LocalSettings(default_model=MODEL))
    return Summarizer(provider, get_profile(MODEL), instruction_suffix=MARKER)


def summarize(messages: list[Message], previous: str | None = None) -> str:
    done = asyncio.run(summarizer().summarize(messages, previous=previous, max_output_tokens=2_000))
    assert isinstance(done, Summary), done
    return done.text


def sections(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("## "):
            current = line[3:]
            out[current] = ""
        elif current:
            out[current] += line + "\n"
    return out


def span(task: str, path: str, step: str) -> list[Message]:
    use = ToolUse(id=f"toolu_{step}", name="Read", input={"file_path": path})
    return [
        Message.user(task),
        Message.assistant(f"I will read {path} to find the failing branch.", use),
        Message(
            role="user", content=(ToolResult(tool_use_id=use.id, content=f"def {step}():\n    return 1"),)
        ),
        Message.assistant(f"The bug is in {step}; I will change its return value next."),
    ]


class TestLocalSummaries:
    def test_has_exactly_the_required_sections_in_order(self) -> None:
        text = summarize(span("Fix the parser crash in lexer.py please.", "src/lexer.py", "lex"))
        assert list(sections(text)) == list(REQUIRED_SECTIONS)
        assert find_summary_defect(text) is None

    def test_the_goal_is_the_first_user_request(self) -> None:
        text = summarize(span("Fix the parser crash in lexer.py please.", "src/lexer.py", "lex"))
        assert "Fix the parser crash in lexer.py please." in sections(text)["Goal"]

    def test_files_come_from_the_tool_calls(self) -> None:
        text = summarize(span("Fix the parser crash.", "src/lexer.py", "lex"))
        assert "Read src/lexer.py" in sections(text)["Files and artefacts"]

    def test_summarises_the_transcript_not_the_instructions(self) -> None:
        text = summarize(span("Fix the parser crash.", "src/lexer.py", "lex"))
        assert "compacting" not in text and "contextwindow:summarize" not in text
        assert "The conversation to summarise" not in text

    def test_headings_inside_the_transcript_are_not_taken_for_sections(self) -> None:
        messages = span("Write the release notes.", "NOTES.md", "notes")
        messages.append(Message.user("Use this layout:\n## Added\n## Fixed\n## Removed"))
        assert list(sections(summarize(messages))) == list(REQUIRED_SECTIONS)

    def test_a_roll_forward_keeps_the_goal_and_adds_the_new_span(self) -> None:
        first = summarize(span("Fix the parser crash in lexer.py please.", "src/lexer.py", "lex"))
        second = summarize(span("Now also fix the printer.", "src/printer.py", "emit"), previous=first)
        parts = sections(second)
        assert list(parts) == list(REQUIRED_SECTIONS)
        assert "Fix the parser crash in lexer.py please." in parts["Goal"]
        assert "src/lexer.py" in parts["Files and artefacts"]
        assert "src/printer.py" in parts["Files and artefacts"]
        assert "emit" in parts["Latest state"]
        assert "Now also fix the printer." in parts["Open work"]

    def test_the_latest_todo_list_is_the_open_work(self) -> None:
        todo = ToolUse(
            id="toolu_todo",
            name="TodoWrite",
            input={
                "todos": [
                    {"content": "Port the lexer", "status": "completed"},
                    {"content": "Port the printer", "status": "in_progress"},
                ]
            },
        )
        messages = [
            Message.user("Port the toolchain to Rust."),
            Message.assistant("Planning the port in three steps.", todo),
            Message(role="user", content=(ToolResult(tool_use_id=todo.id, content="ok"),)),
        ]
        open_work = sections(summarize(messages))["Open work"]
        assert "Port the printer (in_progress)" in open_work
        assert "Port the lexer" not in open_work

    def test_is_deterministic(self) -> None:
        messages = span("Fix the parser crash.", "src/lexer.py", "lex")
        assert summarize(messages) == summarize(messages)
