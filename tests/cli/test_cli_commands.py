"""The ``count``, ``inspect``, ``doctor`` and ``serve`` commands: output, JSON and exit codes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwindow import Estimator, Message, open_store
from contextwindow.cli import app
from contextwindow.cli._common import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM
from contextwindow.formats import parse_any

runner = CliRunner()
BUNDLED = (
    Path(__file__).resolve().parents[2] / "src" / "contextwindow" / "data" / "coding_agent_anthropic.json"
)


def _store(path: Path, messages: int = 40) -> None:
    estimator = Estimator("claude-sonnet-4-6")
    with open_store(path) as store:
        session = store.session("s1")
        for i in range(messages):
            user = Message.user(f"question {i} " + "lorem ipsum dolor " * 120)
            session.append(user, block_prices=[estimator.raw_block(b) for b in user.content])
            session.append(Message.assistant(f"answer {i}"))


class TestCount:
    def test_json_total_is_the_estimators_price_of_the_request(self) -> None:
        result = runner.invoke(app, ["count", str(BUNDLED), "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.output)
        request = parse_any(json.loads(BUNDLED.read_text())).request
        assert out["total"] == Estimator(out["model"]).request(request)
        assert out["total"] == sum(row["tokens"] for row in out["rows"])
        assert out["by_kind"]["image"] > 0 and out["format"] == "anthropic"

    def test_the_model_option_changes_the_rules(self) -> None:
        claude = json.loads(runner.invoke(app, ["count", str(BUNDLED), "--json"]).output)
        gpt = json.loads(runner.invoke(app, ["count", str(BUNDLED), "--json", "--model", "gpt-4o"]).output)
        assert gpt["model"] == "gpt-4o" and gpt["by_kind"]["image"] != claude["by_kind"]["image"]

    def test_a_table_names_the_total_and_the_window(self) -> None:
        result = runner.invoke(app, ["count", str(BUNDLED)], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "-token window" in result.output

    @pytest.mark.parametrize(
        ("content", "args", "expected"),
        [
            pytest.param(None, [], "no such file", id="missing-file"),
            pytest.param("{not json", [], "not valid JSON", id="bad-json"),
            pytest.param(
                '{"messages": [{"role": "robot", "content": "x"}]}',
                ["--model", "gpt-4o"],
                "messages[0].role",
                id="bad-field",
            ),
            pytest.param('{"messages": [{"role": "user", "content": "x"}]}', [], "--model", id="no-model"),
            pytest.param(
                '{"messages": [{"role": "user", "content": "x"}]}',
                ["--model", "gpt-9"],
                "register(",
                id="unknown-model",
            ),
        ],
    )
    def test_bad_input_exits_2_with_a_message_a_person_can_act_on(
        self, tmp_path: Path, content: str | None, args: list[str], expected: str
    ) -> None:
        path = tmp_path / "request.json"
        if content is not None:
            path.write_text(content)
        result = runner.invoke(app, ["count", str(path), *args], env={"COLUMNS": "300"})
        assert result.exit_code == EXIT_BAD_INPUT
        assert expected in result.output.replace("\n", "")


class TestInspect:
    def test_shows_the_next_requests_makeup_and_what_was_left_out(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        _store(path)
        result = runner.invoke(app, ["inspect", str(path), "s1", "--window", "8000", "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.output)
        assert out["messages_stored"] == 80
        assert 0 < out["messages_sent"] < 80
        # _store alternates user and assistant: a tail whose first kept message is an answer is sent
        # behind a short user message of compile's own (not stored).
        opened = len(out["omitted"]) % 2 == 1
        assert len(out["omitted"]) == out["messages_stored"] - out["messages_sent"] + opened
        assert out["estimated_tokens"] + out["makeup"]["output_reserve"] <= 8000

    def test_writes_nothing(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        _store(path)
        with open_store(path) as store:
            before = len(store.session("s1").entries())
        runner.invoke(app, ["inspect", str(path), "s1", "--window", "8000"])
        with open_store(path) as store:
            assert len(store.session("s1").entries()) == before

    def test_a_missing_store_is_not_created(self, tmp_path: Path) -> None:
        result = runner.invoke(app, ["inspect", str(tmp_path / "none.db"), "s1"])
        assert result.exit_code == EXIT_BAD_INPUT and not (tmp_path / "none.db").exists()


class TestDoctor:
    def test_a_clean_store_exits_0(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        _store(path, messages=3)
        result = runner.invoke(app, ["doctor", str(path)])
        assert result.exit_code == 0 and "clean" in result.output

    def test_a_tampered_store_exits_1_and_names_the_problem(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        _store(path, messages=3)
        with sqlite3.connect(path) as db:
            db.execute("UPDATE entries SET payload = replace(payload, 'question', 'QUESTION')")
        result = runner.invoke(app, ["doctor", str(path), "--json"])
        assert result.exit_code == EXIT_FOUND_PROBLEM
        assert "digest_mismatch" in {p["code"] for p in json.loads(result.output)}


class TestServe:
    def test_rejects_an_unknown_usage_mode(self) -> None:
        result = runner.invoke(app, ["serve", "--usage", "sometimes"])
        assert result.exit_code == 2 and "--usage" in result.output
