"""``contextwindow serve`` and ``contextwindow proxy`` as processes: started, answering, stopped."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from contextwindow.cli import app
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.transform import transform_for
from contextwindow.store import open_store
from contextwindow.store._sqlite import SqliteBackend
from server_support import running

runner = CliRunner()


class TestProxyCommand:
    def test_an_upstream_that_is_not_http_is_refused_with_exit_2(self) -> None:
        result = runner.invoke(app, ["proxy", "--upstream", "ftp://example.org"])
        assert result.exit_code == 2

    def test_help_names_every_flag(self) -> None:
        result = runner.invoke(app, ["proxy", "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
        for flag in ("--upstream", "--port", "--host", "--store", "--window", "--durability"):
            assert flag in result.output

    def test_a_durability_that_is_neither_normal_nor_full_is_refused_with_exit_2(self) -> None:
        result = runner.invoke(app, ["proxy", "--upstream", "http://127.0.0.1:1", "--durability", "fsync"])
        assert result.exit_code == 2

    @pytest.mark.parametrize(("given", "pragma"), [((), 1), (("full",), 2), (("normal",), 1)])
    def test_the_ledger_commits_without_waiting_for_the_disk_unless_told_full(
        self, tmp_path: Path, given: tuple[str, ...], pragma: int
    ) -> None:
        # SQLite's synchronous: 1 = NORMAL (a commit survives the process's crash), 2 = FULL.
        transform, described = transform_for(
            store=str(tmp_path / "p.sqlite"), window=None, **dict(zip(["durability"], given, strict=False))
        )
        assert isinstance(transform, GuardTransform)
        backend = transform.store._backend()
        assert isinstance(backend, SqliteBackend)
        assert backend._db.execute("PRAGMA synchronous").fetchone()[0] == pragma
        assert ("full" if pragma == 2 else "normal") in described
        transform.store.close()

    @pytest.mark.parametrize("name", [":memory:", "memory:", "memory://"])
    def test_every_name_of_the_in_memory_store_opens_it_whatever_the_durability(self, name: str) -> None:
        transform, _ = transform_for(store=name, window=None, durability="full")
        assert isinstance(transform, GuardTransform)
        assert type(transform.store._backend()).__name__ == "MemoryBackend"

    def test_a_compaction_that_is_not_local_provider_or_auto_is_refused_with_exit_2(self) -> None:
        result = runner.invoke(app, ["proxy", "--upstream", "http://127.0.0.1:1", "--compaction", "server"])
        assert result.exit_code == 2
        assert "must be local, provider or auto" in result.output

    @pytest.mark.parametrize("mode", ["local", "provider", "auto"])
    def test_the_compaction_chosen_reaches_the_guard_of_every_conversation(
        self, tmp_path: Path, mode: str
    ) -> None:
        transform, described = transform_for(
            store=str(tmp_path / "p.sqlite"),
            window=None,
            compaction=mode,  # type: ignore[arg-type]
        )
        assert isinstance(transform, GuardTransform)
        core = transform._core("anthropic", None, "t", 60_000)
        assert core.options.compaction == mode
        assert f"compaction {mode}" in described
        transform.store.close()

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
