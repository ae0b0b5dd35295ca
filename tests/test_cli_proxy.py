"""``contextwindow serve`` and ``contextwindow proxy`` as processes: started, answering, stopped."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from typer.testing import CliRunner

from contextwindow.cli import app
from contextwindow.store import open_store
from server_support import running

runner = CliRunner()


class TestProxyCommand:
    def test_an_upstream_that_is_not_http_is_refused_with_exit_2(self) -> None:
        result = runner.invoke(app, ["proxy", "--upstream", "ftp://example.org"])
        assert result.exit_code == 2

    def test_help_names_every_flag(self) -> None:
        result = runner.invoke(app, ["proxy", "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        for flag in ("--upstream", "--port", "--host", "--store", "--window"):
            assert flag in result.output

    def test_serve_and_proxy_processes_answer_through_each_other(self, tmp_path: Path) -> None:
        body = {
            "model": "claude-haiku-4-5",
            "max_tokens": 20,
            "messages": [{"role": "user", "content": "hi"}],
        }
        store = tmp_path / "proxy.sqlite"
        with (
            running("serve", "--window", "5000") as local,
            running("proxy", "--upstream", local, "--store", str(store)) as proxy,
        ):
            assert httpx.get(local + "/health").json()["status"] == "ok"
            assert httpx.get(proxy + "/health").json()["upstream"] == local
            direct = httpx.post(local + "/v1/messages", json=body)
            through = httpx.post(proxy + "/v1/messages", json=body, headers={"x-api-key": "k"})
        assert through.status_code == direct.status_code == 200
        assert through.json()["usage"]["input_tokens"] == direct.json()["usage"]["input_tokens"]
        assert json.loads(through.content)["type"] == "message"
        assert store.exists()  # the guard kept the conversation in the proxy's ledger
        with open_store(str(store)) as ledger:
            [session] = ledger.sessions()
        result = runner.invoke(app, ["inspect", str(store), session, "--model", "claude-haiku-4-5", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["messages_stored"] == 2  # the agent's message and the reply
