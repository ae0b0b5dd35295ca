"""The Claude round builder prices what the API received and flags what the log cannot show.

These rounds are the only ground truth for Claude's tokenizer (``benchmarks/_claude_sessions.py``);
each test writes a tiny Claude Code log in the shape the real ones have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchmarks import _claude_sessions as sessions

from contextwindow.content import Text, ToolUse

MODEL = "claude-opus-4-5-20251101"
PLAN = "# Plan: add tar support\n\n1. helper\n2. tests\n" * 20


class _Log:
    """Builds a session log: assistant calls with a running prompt size, and user entries."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.prompt = 10_000
        self.calls = 0

    def call(self, *blocks: dict[str, Any], grow: int = 600) -> None:
        self.calls += 1
        self.prompt += grow
        usage = {
            "input_tokens": 1,
            "cache_read_input_tokens": self.prompt - 1,
            "cache_creation_input_tokens": 0,
        }
        for block in blocks:  # one line per content block, sharing the message id
            message = {"id": f"msg_{self.calls}", "model": MODEL, "usage": usage, "content": [block]}
            self.lines.append({"type": "assistant", "message": message})

    def user(self, content: Any, **extra: Any) -> None:
        self.lines.append({"type": "user", "message": {"role": "user", "content": content}, **extra})

    def result(self, tool_id: str, text: str, *, error: bool = False) -> None:
        block = {"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": error}
        self.user([block])

    def system(self, text: str) -> None:
        self.lines.append({"type": "system", "content": text, "level": "info"})

    def write(self, tmp_path: Path) -> list[sessions.Round]:
        path = tmp_path / "session.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in self.lines) + "\n")
        return sessions.file_rounds(path)


def _tool(tool_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _plan_session() -> _Log:
    log = _Log()
    log.call(_text("Hello."))
    log.user("Add tar support, plan it first.")  # typed prompt: plan mode starts here
    log.call(
        _text("Writing the plan."),
        _tool("t1", "Write", file_path="/home/u/.claude/plans/wolf.md", content=PLAN),
    )
    log.result("t1", "File created successfully")
    log.call(_tool("t2", "ExitPlanMode", plan=PLAN))
    log.result("t2", "User has approved your plan.\n\n## Approved Plan:\n" + PLAN)
    log.call(_tool("t3", "Bash", command="ls"))
    log.result("t3", "README.md")
    log.call(_text("Done."))
    return log


class TestReconstruction:
    def test_exit_plan_mode_in_plan_file_mode_is_priced_with_its_real_empty_input(
        self, tmp_path: Path
    ) -> None:
        rounds = _plan_session().write(tmp_path)
        exit_use = next(
            b
            for r in rounds
            for m in r.messages
            for b in m.content
            if isinstance(b, ToolUse) and b.name == "ExitPlanMode"
        )
        assert dict(exit_use.input) == {}

    def test_exit_plan_mode_written_by_the_model_keeps_its_plan(self, tmp_path: Path) -> None:
        log = _Log()
        log.call(_text("Planning."))
        log.user("Plan it.")
        log.call(_tool("t1", "ExitPlanMode", plan=PLAN))  # older versions: no plan file, the model wrote it
        log.result("t1", "User has approved your plan.")
        log.call(_text("Done."))
        exit_use = next(
            b
            for r in log.write(tmp_path)
            for m in r.messages
            for b in m.content
            if isinstance(b, ToolUse) and b.name == "ExitPlanMode"
        )
        assert exit_use.input["plan"] == PLAN


class TestPlanModeReminder:
    """Plan mode's unlogged reminder is rebuilt in every round sent while plan mode is on."""

    def test_rounds_inside_a_plan_mode_span_carry_the_reminder(self, tmp_path: Path) -> None:
        rounds = _plan_session().write(tmp_path)
        carrying = [("plan-mode reminder" in r.added) for r in rounds]
        # the typed prompt and the plan Write's result are sent in plan mode; the approved
        # ExitPlanMode's result and later turns are not
        assert carrying == [True, True, False, False]
        assert not any(r.injected for r in rounds)

    def test_a_plan_file_session_gets_the_plan_file_form_naming_its_file(self, tmp_path: Path) -> None:
        first, second, *_ = _plan_session().write(tmp_path)
        before, after = first.messages[-1].content[-1], second.messages[-1].content[-1]
        assert isinstance(before, Text) and isinstance(after, Text)
        assert "There is no plan file yet: create it at /home/u/.claude/plans/wolf.md" in before.text
        assert "A plan file already exists at /home/u/.claude/plans/wolf.md" in after.text
        assert "### Phase 5: Call ExitPlanMode" in after.text

    def test_a_rejected_exit_keeps_plan_mode_on(self, tmp_path: Path) -> None:
        log = _Log()
        log.call(_text("Hi."))
        log.user("Plan a feature.")
        log.call(_tool("t1", "ExitPlanMode", plan=PLAN))
        log.result("t1", "The user doesn't want to proceed with this tool use.", error=True)
        log.call(_tool("t2", "ExitPlanMode", plan=PLAN))
        log.result("t2", "User has approved your plan.")
        log.call(_text("Done."))
        rounds = log.write(tmp_path)
        assert [("plan-mode reminder" in r.added) for r in rounds] == [True, True, False]
        reminder = rounds[0].messages[-1].content[-1]
        assert isinstance(reminder, Text)
        assert "Plan mode is on" in reminder.text and "Phase" not in reminder.text  # no plan file

    def test_permission_mode_plan_marks_the_entry(self, tmp_path: Path) -> None:
        log = _Log()
        log.call(_text("Hi."))
        log.user("Think about it first.", permissionMode="plan")
        log.call(_text("Thinking."))
        log.user("Now go.", permissionMode="default")
        log.call(_text("Going."))
        assert [r.added for r in log.write(tmp_path)] == [("plan-mode reminder",), ()]

    @pytest.mark.parametrize(("form", "plan_file"), [("plan-file", "/u/.claude/plans/a.md"), ("short", None)])
    def test_the_stand_in_is_the_published_reminders_size(self, form: str, plan_file: str | None) -> None:
        from _shared import encoding
        from contextwindow.replay.importers import claude_code_unlogged as unlogged

        text = unlogged.plan_mode_reminder(plan_file=plan_file, exists=True)
        published = unlogged.PLAN_MODE_PUBLISHED_O200K[form]  # type: ignore[index]
        count = len(encoding("o200k_base").encode(text))
        assert abs(count - published) <= 0.05 * published


class TestInjections:
    def test_an_edit_hook_flags_its_round_and_the_next(self, tmp_path: Path) -> None:
        log = _Log()
        log.call(_tool("t1", "Edit", file_path="a.py", old_string="x", new_string="y"))
        log.result("t1", "The file a.py has been updated.")
        log.system("PostToolUse:Edit [uv run ruff format] completed successfully: 1 file reformatted")
        log.call(_tool("t2", "Bash", command="pytest"))
        log.result("t2", "1 passed")
        log.call(_tool("t3", "Bash", command="git status"))
        log.result("t3", "clean")
        log.call(_text("Done."))
        assert [r.injected for r in log.write(tmp_path)] == [("edit hook",), ("edit hook",), ()]

    def test_a_plain_round_is_neither_flagged_nor_changed(self, tmp_path: Path) -> None:
        log = _Log()
        log.call(_text("Let me look."), _tool("t1", "Read", file_path="a.py"))
        log.result("t1", "     1\u2192print('hi')\n" * 200)
        log.call(_text("Done."))
        (round_,) = log.write(tmp_path)
        assert round_.injected == ()
        assert round_.delta == 600
        assert [m.role for m in round_.messages] == ["assistant", "user"]


def _todo_session(version: str = "2.0.55", *, typed_at: int | None = None, calls: int = 12) -> _Log:
    """A TodoWrite, then ``calls`` one-tool calls (one log line each), optionally a typed prompt."""
    log = _Log()
    todos = [{"content": "add tar", "status": "in_progress"}, {"content": "tests", "status": "pending"}]
    log.call(_tool("w", "TodoWrite", todos=todos))
    log.result("w", "Todos have been modified successfully.")
    for k in range(calls):
        log.call(_tool(f"b{k}", "Bash", command=f"step {k}"))
        log.result(f"b{k}", "ok")
        if typed_at == k:
            log.user("Also handle zip files.")
    log.call(_text("Done."))
    for line in log.lines:
        line["version"] = version
    return log


def _carrying(rounds: list[sessions.Round]) -> list[int]:
    return [k for k, r in enumerate(rounds) if "todo reminder" in r.added]


class TestTodoReminder:
    """Claude Code's unlogged TodoWrite reminder is rebuilt by its rule (``_claude_todo.RULE``)."""

    def test_the_reminder_is_sent_after_six_turns_then_every_three(self, tmp_path: Path) -> None:
        # round k is paid before call k + 1, which follows k turns since the write
        assert _carrying(_todo_session().write(tmp_path)) == [6, 9, 12]

    def test_the_reminder_carries_the_todo_list_as_a_user_text_block(self, tmp_path: Path) -> None:
        from contextwindow.content import Text

        rounds = _todo_session().write(tmp_path)
        last = rounds[6].messages[-1]
        assert last.role == "user"
        assert isinstance(last.content[-1], Text)
        assert "hasn't been used recently" in last.content[-1].text
        assert "1. [in_progress] add tar\n2. [pending] tests" in last.content[-1].text

    def test_a_finished_list_is_reminded_empty(self) -> None:
        from benchmarks import _claude_todo as todo

        assert "existing contents" not in todo.reminder([])
        assert todo.reminder([]).startswith("<system-reminder>\nThe TodoWrite tool")

    def test_a_typed_prompt_restarts_the_count_since_the_last_reminder(self, tmp_path: Path) -> None:
        # reminded in round 6; the prompt typed in round 8 restarts the count: 3 turns later, round 11
        assert _carrying(_todo_session(typed_at=7).write(tmp_path)) == [6, 11]

    def test_versions_older_than_the_rule_get_no_reminder(self, tmp_path: Path) -> None:
        assert _carrying(_todo_session("1.0.56").write(tmp_path)) == []

    def test_no_reminder_without_a_todo_list(self, tmp_path: Path) -> None:
        log = _Log()
        for k in range(12):
            log.call(_tool(f"b{k}", "Bash", command="ls"))
            log.result(f"b{k}", "ok")
        for line in log.lines:
            line["version"] = "2.0.55"
        assert _carrying(log.write(tmp_path)) == []

    def test_the_rule_off_adds_nothing(self, tmp_path: Path) -> None:
        path = tmp_path / "session.jsonl"
        path.write_text("\n".join(json.dumps(line) for line in _todo_session().lines) + "\n")
        assert not any(r.added for r in sessions.file_rounds(path, todo_rule=None))


@pytest.mark.parametrize(
    ("chars", "delta", "injected", "expected"),
    [
        (2_000, 600, (), True),
        (400, 600, (), False),  # under 1 character per token: unlogged content
        (4_000, 600, (), False),  # over 5: logged more than was sent
        (2_000, 600, ("edit hook",), False),
    ],
    ids=["plain", "too-few-chars", "too-many-chars", "injected"],
)
def test_explained_applies_both_rules(
    chars: int, delta: int, injected: tuple[str, ...], expected: bool
) -> None:
    from contextwindow.content import Message, Text

    round_ = sessions.Round(
        "s", MODEL, delta, (Message(role="user", content=(Text(text="a" * chars),)),), (0, 1), injected
    )
    assert sessions.explained(round_) is expected
