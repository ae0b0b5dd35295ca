"""Every checkpoint ends with what the engine read of the task off the folded messages (the first
request, the latest instruction it covered, the files touched), carried from one to the next."""

from __future__ import annotations

from contextwindow.content import Message, Text, ToolResult, ToolUse
from contextwindow.engine.folding.task import MAX_FILES, TASK_HEADING, instruction, with_task


def _call(n: int, path: str) -> Message:
    return Message.assistant(ToolUse(id=f"t{n}", name="Read", input={"file_path": path}))


def _result(n: int) -> Message:
    return Message(role="user", content=(ToolResult(tool_use_id=f"t{n}", content=(Text(text="ok"),)),))


class TestTheSectionACheckpointEndsWith:
    def test_it_holds_the_first_request_the_latest_instruction_and_the_files(self) -> None:
        covered = [
            Message(
                role="user",
                content=(Text(text="<system-reminder>x</system-reminder>"), Text(text="Fix the parser")),
            ),
            _call(1, "/src/parser.py"),
            _result(1),
            Message.user("Now add a test"),
        ]
        text = with_task("## Goal\nsomething else", None, covered)
        assert text.startswith("## Goal\nsomething else\n\n" + TASK_HEADING)
        assert "First request: Fix the parser" in text
        assert "Latest instruction before this summary: Now add a test" in text
        assert "Files touched: /src/parser.py" in text

    def test_a_later_checkpoint_keeps_the_first_request_and_adds_the_files(self) -> None:
        first = with_task("one", None, [Message.user("Fix the parser"), _call(1, "/a.py"), _result(1)])
        second = with_task("two", first, [Message.user("And the lexer"), _call(2, "/b.py"), _result(2)])
        assert second.count(TASK_HEADING) == 1 and second.startswith("two\n\n")
        assert "First request: Fix the parser" in second
        assert "Latest instruction before this summary: And the lexer" in second
        assert "Files touched: /a.py, /b.py" in second

    def test_a_summary_that_copied_the_section_gets_it_once(self) -> None:
        first = with_task("one", None, [Message.user("Fix the parser")])
        again = with_task(first, first, [_call(1, "/a.py"), _result(1)])
        assert again.count(TASK_HEADING) == 1 and "First request: Fix the parser" in again

    def test_markup_alone_and_tool_results_are_no_instruction(self) -> None:
        assert instruction(Message.user("<system-reminder>plan mode</system-reminder>")) is None
        assert instruction(_result(1)) is None
        assert with_task("s", None, [_result(1)]) == "s"

    def test_it_keeps_the_newest_files_only(self) -> None:
        covered = [m for n in range(MAX_FILES + 5) for m in (_call(n, f"/f{n}.py"), _result(n))]
        text = with_task("s", None, covered)
        assert "/f4.py," not in text and f"/f{MAX_FILES + 4}.py" in text
