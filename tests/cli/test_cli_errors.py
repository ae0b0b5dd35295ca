"""The command line never shows a traceback: one line on stderr and the documented exit code.

Run in a real process under ``python -W error`` (what a user's shell runs), and in-process through
``main`` for the cases that need no subprocess.
"""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from contextwindow import Message, open_store
from contextwindow.cli import main
from contextwindow.cli._common import EXIT_BAD_INPUT, EXIT_OK, EXIT_STORE


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command in-process through ``main`` (pytest's warnings filter is ``error`` too)."""
    import contextlib
    import io
    import os

    err, out = io.StringIO(), io.StringIO()
    previous = Path.cwd()
    saved_argv = sys.argv
    os.chdir(cwd)
    sys.argv = ["contextwindow", *args]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main()
    finally:
        os.chdir(previous)
        sys.argv = saved_argv
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def run_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The command in a real process under ``python -W error``, as a user's shell runs it."""
    return subprocess.run(
        [sys.executable, "-W", "error", "-m", "contextwindow", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "TIKTOKEN_CACHE_DIR": "/work/shared/tokenizers"},
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:"), lines[0]
    return lines[0]


def deep_json(levels: int) -> str:
    return "[" * levels + "]" * levels


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "binary.json").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "utf16.json").write_text(json.dumps({"messages": []}), encoding="utf-16")
    (tmp_path / "deep.json").write_text(deep_json(100_000))
    deep_input: object = {}
    for _ in range(300):
        deep_input = {"a": deep_input}
    request = {
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "n", "input": deep_input}],
            }
        ]
    }
    (tmp_path / "deep_input.json").write_text(json.dumps(request))
    (tmp_path / "empty.db").write_bytes(b"")
    (tmp_path / "text.db").write_text("not a database\n")
    return tmp_path


class TestBadFilesAreOneLineAndExitTwo:
    @pytest.mark.parametrize(
        ("args", "reason"),
        [
            (("show", "binary.json"), "not UTF-8"),
            (("show", "utf16.json"), "not UTF-8"),
            (("show", "deep.json"), "nests deeper"),
            (("show", "deep_input.json"), "nests deeper"),
            (("count", "deep.json", "--model", "gpt-4o"), "nests deeper"),
            (("count", "deep_input.json", "--model", "gpt-4o"), "nests deeper"),
            (("count", "binary.json", "--model", "gpt-4o"), "not UTF-8"),
            (("simulate", "deep.json", "--model", "gpt-4o"), "nests deeper"),
            (("simulate", "binary.json", "--model", "gpt-4o"), "not UTF-8"),
            (("show", "missing.json"), "no such file"),
        ],
        ids=lambda v: "-".join(v) if isinstance(v, tuple) else None,
    )
    def test_with_the_reason(self, files: Path, args: tuple[str, ...], reason: str) -> None:
        result = run(*args, cwd=files)
        assert result.returncode == EXIT_BAD_INPUT
        assert reason in one_line_error(result)


class TestLookingIntoAStoreChangesNothing:
    @pytest.mark.parametrize("command", [("doctor",), ("inspect", "s")], ids=["doctor", "inspect"])
    @pytest.mark.parametrize(
        ("name", "reason"), [("empty.db", "the file is empty"), ("text.db", "not an SQLite database")]
    )
    def test_a_file_that_is_not_a_store_is_said_so_and_left_as_it_was(
        self, files: Path, command: tuple[str, ...], name: str, reason: str
    ) -> None:
        before = digest(files / name)
        listing = sorted(p.name for p in files.iterdir())
        result = run(command[0], name, *command[1:], cwd=files)
        assert result.returncode == EXIT_STORE
        assert "not a contextwindow store" in one_line_error(result) and reason in result.stderr
        assert digest(files / name) == before
        assert sorted(p.name for p in files.iterdir()) == listing

    def test_another_sqlite_database_is_not_a_store_and_is_left_alone(self, tmp_path: Path) -> None:
        import sqlite3

        path = tmp_path / "other.db"
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE t (x)")
        db.commit()
        db.close()
        before = digest(path)
        result = run("doctor", str(path), cwd=tmp_path)
        assert result.returncode == EXIT_STORE and "no ledger" in one_line_error(result)
        assert digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["other.db"]

    def test_a_real_store_is_read_without_a_byte_or_a_file_changing(self, tmp_path: Path) -> None:
        path = tmp_path / "ledger.db"
        with open_store(path) as store:
            store.session("s").append(Message.user("hello"))
        before = digest(path)
        for args in (("doctor", str(path)), ("inspect", str(path), "s")):
            result = run(*args, cwd=tmp_path)
            assert result.returncode == EXIT_OK, result.stderr
        assert digest(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["ledger.db"]

    def test_a_read_only_store_refuses_writes(self, tmp_path: Path) -> None:
        from contextwindow.errors import UsageError

        path = tmp_path / "ledger.db"
        open_store(path).close()
        with open_store(path, read_only=True) as store, pytest.raises(UsageError, match="read-only"):
            store.session("s").note("x")


class TestInARealProcess:
    @pytest.mark.parametrize(
        "args",
        [("show", "binary.json"), ("count", "deep_input.json", "--model", "gpt-4o"), ("doctor", "empty.db")],
        ids=["show-binary", "count-deep", "doctor-empty"],
    )
    def test_no_traceback_under_python_w_error(self, files: Path, args: tuple[str, ...]) -> None:
        result = run_process(*args, cwd=files)
        assert result.returncode in (EXIT_BAD_INPUT, EXIT_STORE)
        one_line_error(result)


class TestServeCommandLineErrors:
    def test_a_taken_port_is_one_line_and_exit_two(self, tmp_path: Path) -> None:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            result = run_process("serve", "--port", str(taken.getsockname()[1]), cwd=tmp_path)
        assert result.returncode == EXIT_BAD_INPUT and "cannot listen" in one_line_error(result)

    @pytest.mark.parametrize("args", [("--port", "70000"), ("--port", "-1"), ("--port", "x")], ids=str)
    def test_an_invalid_port_is_one_line_and_exit_two(self, tmp_path: Path, args: tuple[str, ...]) -> None:
        result = run("serve", *args, cwd=tmp_path)
        assert result.returncode == EXIT_BAD_INPUT and "--port" in one_line_error(result)

    def test_an_invalid_host_is_one_line_and_exit_two(self, tmp_path: Path) -> None:
        result = run_process("serve", "--host", "no..such..host", "--port", "0", cwd=tmp_path)
        assert result.returncode == EXIT_BAD_INPUT and "cannot listen" in one_line_error(result)


class TestMain:
    def test_usage_errors_are_one_line_and_exit_two(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setattr(sys, "argv", ["contextwindow", "no-such-command"])
        assert main() == EXIT_BAD_INPUT
        err = capsys.readouterr().err
        assert err.startswith("error:") and len(err.strip().splitlines()) == 1

    def test_an_unexpected_failure_is_one_line_and_exit_one(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        import contextwindow.cli.show as show

        def broken(path: object) -> object:
            raise RuntimeError("boom")

        monkeypatch.setattr(show, "load_request", broken)
        monkeypatch.setattr(sys, "argv", ["contextwindow", "show"])
        monkeypatch.delenv("CONTEXTWINDOW_TRACEBACK", raising=False)
        assert main() == 1
        err = capsys.readouterr().err
        assert "internal error" in err and "RuntimeError: boom" in err and "Traceback" not in err

    def test_the_help_documents_the_exit_codes(
        self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
    ) -> None:
        monkeypatch.setattr(sys, "argv", ["contextwindow", "--help"])
        monkeypatch.setenv("COLUMNS", "200")
        assert main() == EXIT_OK
        out = " ".join(capsys.readouterr().out.split())
        assert "Exit codes: 0 done" in out and "3 the store failed" in out
