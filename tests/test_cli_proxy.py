"""``contextwindow serve`` and ``contextwindow proxy`` as processes: started, answering, stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from typer.testing import CliRunner

from contextwindow.cli import app

runner = CliRunner()


@contextmanager
def running(*args: str) -> Iterator[str]:
    """``python -m contextwindow ARGS --port 0``: yields its base URL, stops it with SIGINT."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "contextwindow", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert " on http://" in line, line + (process.stderr.read() if process.stderr else "")
        yield line.split(" on ", 1)[1].split()[0]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


class TestProxyCommand:
    def test_an_upstream_that_is_not_http_is_refused_with_exit_2(self) -> None:
        result = runner.invoke(app, ["proxy", "--upstream", "ftp://example.org"])
        assert result.exit_code == 2

    def test_help_names_every_flag(self) -> None:
        result = runner.invoke(app, ["proxy", "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        for flag in ("--upstream", "--port", "--host", "--store", "--window"):
            assert flag in result.output

    def test_serve_and_proxy_processes_answer_through_each_other(self) -> None:
        body = {
            "model": "claude-haiku-4-5",
            "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
        }
        with running("serve", "--window", "5000") as local, running("proxy", "--upstream", local) as proxy:
            assert httpx.get(local + "/health").json()["status"] == "ok"
            assert httpx.get(proxy + "/health").json()["upstream"] == local
            direct = httpx.post(local + "/v1/messages", json=body)
            through = httpx.post(proxy + "/v1/messages", json=body, headers={"x-api-key": "k"})
        assert through.status_code == direct.status_code == 200
        assert through.json()["usage"] == direct.json()["usage"]
        assert json.loads(through.content)["type"] == "message"
