"""The ``contextwindow`` command line: the entry points and the demo's honest summary."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from contextwindow.cli import app
from contextwindow.cli.show import load_request

runner = CliRunner()


class TestShow:
    def test_summarises_the_bundled_request(self) -> None:
        result = runner.invoke(app, ["show"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "7 messages (anthropic format)" in result.output
        assert "320×200 px" in result.output and "2 pages" in result.output
        assert "tool_use" in result.output and "redacted_thinking" in result.output

    def test_reads_an_openai_file(self, tmp_path: Path) -> None:
        path = tmp_path / "req.json"
        path.write_text(
            json.dumps({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]})
        )
        result = runner.invoke(app, ["show", str(path)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "1 messages (openai format)" in result.output

    def test_a_bad_file_is_exit_2_with_the_reason(self, tmp_path: Path) -> None:
        path = tmp_path / "bad.json"
        path.write_text(
            json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]})
        )
        result = runner.invoke(app, ["show", str(path)], env={"COLUMNS": "200"})
        assert result.exit_code == 2
        assert "messages[0].content[0].text" in result.output

    def test_the_bundled_request_has_real_media(self) -> None:
        _, parsed = load_request(None)
        assert len(parsed.attachments) == 2


class TestEntryPoint:
    def test_python_dash_m_runs_the_command(self) -> None:
        src = str(Path(__file__).parents[2] / "src")
        done = subprocess.run(
            [sys.executable, "-m", "contextwindow", "show"],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": src, "COLUMNS": "200", "PATH": ""},
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "attachments" in done.stdout
