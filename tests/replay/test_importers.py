"""Importers of real transcripts, on real Claude Code sessions and hand-written files to the published formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _shared import CLAUDE_SESSIONS, require
from contextwindow.content import Image, Text, ToolResult, ToolUse
from contextwindow.replay.importers import detect_kind, import_chat, import_claude_code, load_any
from contextwindow.replay.importers._assemble import ENDS_HERE, NO_RESULT
from contextwindow.replay.scenario import Scenario, ScenarioError
from contextwindow.replay.scenario_file import dumps_scenario, loads_scenario

DATA = Path(__file__).parents[1] / "data"


class TestDetection:
    @pytest.mark.parametrize(
        ("name", "kind"),
        [
            pytest.param("claude_code_tools.jsonl", "claude-code", id="claude-code"),
            pytest.param("claude_code_image.jsonl", "claude-code", id="claude-code-image"),
            pytest.param("openai_chat.json", "chat", id="chat-request"),
            pytest.param("swe_agent.traj", "swe-agent", id="swe-agent"),
        ],
    )
    def test_kind_comes_from_the_content(self, tmp_path: Path, name: str, kind: str) -> None:
        renamed = tmp_path / "transcript.txt"  # the name says nothing
        renamed.write_bytes((DATA / name).read_bytes())
        assert detect_kind(renamed) == kind

    def test_a_bare_message_list_is_chat(self, tmp_path: Path) -> None:
        path = tmp_path / "m.json"
        path.write_text(
            json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        )
        assert detect_kind(path) == "chat" and load_any(path).calls == 1

    def test_unknown_content_is_a_clear_error(self, tmp_path: Path) -> None:
        path = tmp_path / "x.json"
        path.write_text('{"hello": 1}')
        with pytest.raises(ScenarioError, match="cannot tell what this file is"):
            load_any(path)


class TestClaudeCode:
    def test_merges_one_reply_written_over_several_lines(self) -> None:
        s = load_any(DATA / "claude_code_tools.jsonl")
        first = s.scripted_replies()[0]
        kinds = [b.type for b in first.content]
        assert kinds == ["thinking", "text", "tool_use", "tool_use", "tool_use"]  # lines 5–9, one message id
        assert s.model == "claude-sonnet-4-5-20250929"

    def test_meta_and_prompt_lines_before_the_reply_are_one_user_message(self) -> None:
        user = load_any(DATA / "claude_code_tools.jsonl").turns[0].user
        assert len(user.content) == 2 and all(isinstance(b, Text) for b in user.content)

    def test_calls_cut_off_by_the_transcript_get_an_error_result_and_a_closing_reply(self) -> None:
        s = load_any(DATA / "claude_code_tools.jsonl")
        results = s.tool_results()
        recorded = [r for r in results.values() if r.content != NO_RESULT]
        assert len(results) == 6 and len(recorded) == 4  # 3 + 1 of the 3 results in the excerpt
        assert all(r.is_error for r in results.values() if r.content == NO_RESULT)
        last = s.scripted_replies()[-1]
        assert last.content == (Text(text=ENDS_HERE),) and last.metadata["imported"] == "placeholder"

    def test_real_screenshot_becomes_a_measured_attachment(self) -> None:
        s = load_any(DATA / "claude_code_image.jsonl")
        (ref,) = s.attachment_refs()
        assert (ref.width, ref.height, ref.media_type) == (199, 99, "image/png")
        assert isinstance(s.turns[0].user.content[-2], Image)
        assert len(s.load_attachment(ref)) == ref.size_bytes

    def test_user_lines_after_the_last_reply_start_a_closed_turn(self) -> None:
        s = load_any(DATA / "claude_code_image.jsonl")
        assert len(s.turns) == 2
        assert s.turns[1].replies[-1].content == (Text(text=ENDS_HERE),)

    def test_an_imported_session_survives_a_scenario_file_round_trip(self) -> None:
        s = load_any(DATA / "claude_code_image.jsonl")
        assert (
            loads_scenario(dumps_scenario(s)).scripted_replies()[0].content == s.scripted_replies()[0].content
        )

    def test_a_broken_line_is_named(self, tmp_path: Path) -> None:
        lines = (DATA / "claude_code_tools.jsonl").read_text().splitlines()
        entry = json.loads(lines[6])
        entry["message"]["content"][0]["input"] = "not an object"
        lines[6] = json.dumps(entry)
        path = tmp_path / "s.jsonl"
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ScenarioError, match=r"s.jsonl:7: message\.content\[0\]\.input"):
            load_any(path)

    def test_every_shared_real_session_imports(self) -> None:
        root = require(CLAUDE_SESSIONS, "the shared Claude Code session corpus")
        files = sorted(root.rglob("*.jsonl"))
        assert files
        for path in files:
            s = load_any(path)
            assert s.calls >= 1, path


def _user_texts(scenario: Scenario) -> list[str]:
    messages = [t.user for t in scenario.turns] + [i.message for t in scenario.turns for i in t.injections]
    return [b.text for m in messages for b in m.content if isinstance(b, Text)]


class TestClaudeCodeUnlogged:
    """The importer adds the reminders Claude Code sent without logging them, where the log shows them."""

    DEEP_MANIFEST = "real_projects/-src-deep-manifest/a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"

    def test_a_plan_mode_session_carries_one_reminder_per_call_in_plan_mode(self) -> None:
        path = require(CLAUDE_SESSIONS, "the shared Claude Code session corpus") / self.DEEP_MANIFEST
        texts = _user_texts(import_claude_code(path))
        plan = [t for t in texts if t.startswith("<system-reminder>\nPlan mode is on.")]
        # its two plan-mode spans: 4 calls, then 8 (the benchmark's rounds, one reminder each)
        assert len(plan) == 12
        assert all("/.claude/plans/" in t for t in plan)

    def test_unlogged_false_imports_only_what_the_log_records(self) -> None:
        path = require(CLAUDE_SESSIONS, "the shared Claude Code session corpus") / self.DEEP_MANIFEST
        texts = _user_texts(import_claude_code(path, unlogged=False))
        assert not any(t.startswith("<system-reminder>\nPlan mode is on.") for t in texts)

    def test_a_session_without_plan_mode_or_todo_list_is_unchanged(self) -> None:
        with_reminders = load_any(DATA / "claude_code_tools.jsonl")
        assert with_reminders == import_claude_code(DATA / "claude_code_tools.jsonl", unlogged=False)


class TestChat:
    def test_tool_messages_are_scripted_results_and_late_user_text_is_injected(self) -> None:
        s = load_any(DATA / "openai_chat.json")
        assert s.model == "gpt-4o" and [t.name for t in s.tools] == ["run_sql", "deploy_log"]
        first = s.turns[0]
        assert set(first.tool_results) == {"call_q1", "call_d1", "call_q2"}
        (injection,) = first.injections
        assert injection.round == 1 and "marketing email" in injection.message.content[0].text  # type: ignore[union-attr]
        assert len(s.turns) == 2

    def test_inline_image_is_decoded(self) -> None:
        (ref,) = load_any(DATA / "openai_chat.json").attachment_refs()
        assert (ref.width, ref.height) == (64, 40)

    def test_anthropic_message_lists_read_too(self) -> None:
        s = import_chat(
            [
                {"role": "user", "content": "list files"},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a", "name": "ls", "input": {}}],
                },
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x.py"}]},
                {"role": "assistant", "content": "x.py"},
            ]
        )
        assert s.tool_results() == {"a": ToolResult(tool_use_id="a", content="x.py")}

    def test_bad_field_is_named(self) -> None:
        with pytest.raises(ScenarioError, match=r"messages\[0\]\.role"):
            import_chat(
                [{"role": "robot", "content": "x"}, {"role": "tool", "tool_call_id": "q", "content": ""}]
            )


class TestSweAgent:
    def test_history_with_function_calls_becomes_tool_uses_and_results(self) -> None:
        s = load_any(DATA / "swe_agent.traj")
        assert s.model == "claude-sonnet-4-20250514"
        assert s.system[0].text.startswith("SETTING:")
        uses = [b for r in s.scripted_replies() for b in r.content if isinstance(b, ToolUse)]
        assert [u.name for u in uses] == ["bash", "str_replace_editor", "submit"]
        assert uses[1].input["view_range"] == [1470, 1480]
        assert "1474" in str(s.tool_results()["call_7d1f0c"].content)
        assert "submitted" in s.description

    def test_old_trajectory_without_history_reads_the_steps(self, tmp_path: Path) -> None:
        data = json.loads((DATA / "swe_agent.traj").read_text())
        del data["history"]
        path = tmp_path / "old.traj"
        path.write_text(json.dumps(data))
        s = load_any(path)
        # Observations are user messages: one turn per step, the last observation closed by a placeholder.
        assert s.calls == 4 and len(s.turns) == 4
        assert s.scripted_replies()[-1].content == (Text(text=ENDS_HERE),)

    def test_bad_history_item_is_named(self, tmp_path: Path) -> None:
        data = json.loads((DATA / "swe_agent.traj").read_text())
        del data["history"][3]["tool_call_ids"]
        path = tmp_path / "bad.traj"
        path.write_text(json.dumps(data))
        with pytest.raises(ScenarioError, match=r"history\[3\]\.tool_call_ids"):
            load_any(path)
