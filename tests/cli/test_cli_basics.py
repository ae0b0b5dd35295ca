"""The command line a user expects: it runs after a plain install, --version, user errors said as such,
messages that point to things that exist, and a count that says how each row was counted."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import contextwindow
from contextwindow.cli import app
from contextwindow.cli._common import EXIT_BAD_INPUT

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "src" / "contextwindow" / "data" / "coding_agent_anthropic.json"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "contextwindow", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


class TestInstall:
    def test_typer_and_rich_are_dependencies_not_an_extra(self) -> None:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        names = {re.split(r"[<>=\[ ]", dep)[0] for dep in project["dependencies"]}
        assert {"typer", "rich"} <= names

    def test_the_script_entry_point_is_a_function_that_exists(self) -> None:
        target = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["contextwindow"]
        module, _, name = target.partition(":")
        assert callable(getattr(importlib.import_module(module), name))

    def test_without_typer_the_command_says_so_in_one_line(self) -> None:
        code = "import sys; sys.modules['typer'] = None; from contextwindow.__main__ import main; sys.exit(main())"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        assert done.stderr.strip().count("\n") == 0
        assert "typer" in done.stderr and "contextwindow[cli]" in done.stderr
        assert "Traceback" not in done.stderr


class TestVersion:
    def test_version_prints_the_librarys_version(self) -> None:
        result = runner.invoke(app, ["--version"])
        assert result.exit_code == 0
        assert result.stdout.strip() == f"contextwindow {contextwindow.__version__}"


class TestUserErrors:
    def test_count_with_anthropic_and_no_key_is_a_user_error_not_an_internal_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pytest.importorskip("anthropic")
        for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
            monkeypatch.delenv(name, raising=False)
        result = runner.invoke(app, ["count", str(BUNDLED), "--provider", "anthropic"])
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert "ANTHROPIC_API_KEY" in result.output
        assert "internal error" not in result.output and "bug" not in result.output

    def test_count_exact_on_claude_points_only_to_names_that_exist(self) -> None:
        result = runner.invoke(app, ["count", str(BUNDLED), "--exact"], env={"COLUMNS": "500"})
        assert result.exit_code == EXIT_BAD_INPUT
        named = re.findall(r"contextwindow(?:\.\w+)+", result.output)
        assert named, result.output
        for dotted in named:
            parts = dotted.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    found: object = importlib.import_module(".".join(parts[:cut]))
                except ImportError:
                    continue
                for attribute in parts[cut:]:
                    found = getattr(found, attribute)  # AttributeError: the message names nothing
                break
        assert "--provider anthropic" in result.output


class TestCountSaysHowEachRowWasCounted:
    def test_text_is_exact_with_tiktoken_and_media_and_framing_by_rule(self) -> None:
        pytest.importorskip("tiktoken")
        result = runner.invoke(app, ["count", str(BUNDLED), "--model", "gpt-4o", "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["exact"] is True
        by_kind: dict[str, set[str]] = {}
        for row in out["rows"]:
            by_kind.setdefault(row["kind"], set()).add(row["counted"])
        assert by_kind["text"] == {"exact"} and by_kind["tool"] == {"exact"}
        assert by_kind["image"] == {"rule"} and by_kind["framing"] == {"rule"}

    def test_a_model_without_a_public_tokenizer_is_counted_by_rule_on_every_row(self) -> None:
        result = runner.invoke(app, ["count", str(BUNDLED)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "counted" in result.stdout
        rows = [line for line in result.stdout.splitlines() if line.startswith("│")]
        assert rows and all("rule" in line and "exact" not in line for line in rows)
        assert "warning" not in result.output  # the rule is Claude's only way here, not a fallback

    def test_without_a_cached_tokenizer_a_warning_says_counts_fall_back(self, tmp_path: Path) -> None:
        done = run_cli(
            "count", str(BUNDLED), "--model", "gpt-4o", "--json", env={"TIKTOKEN_CACHE_DIR": str(tmp_path)}
        )
        assert done.returncode == 0, done.stderr
        assert "warning:" in done.stderr and "fitted rule" in done.stderr and str(tmp_path) in done.stderr
        out = json.loads(done.stdout)  # the warning is on stderr: stdout stays one JSON document
        assert out["exact"] is False and {row["counted"] for row in out["rows"]} == {"rule"}
