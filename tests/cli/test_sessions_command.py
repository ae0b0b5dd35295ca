"""``contextwindow sessions``, ``inspect`` as the guard sees a session, ``prune`` and ``doctor``'s size
line, over real ledgers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwindow import Message, open_store
from contextwindow.cli import app
from contextwindow.cli._common import EXIT_BAD_INPUT
from contextwindow.cli.sessions import parse_since

runner = CliRunner()
BUNDLED = (
    Path(__file__).resolve().parents[2] / "src" / "contextwindow" / "data" / "coding_agent_anthropic.json"
)
LONG_ID = "guard-" + "1c46e0b5" * 12


@pytest.fixture(scope="module")
def learned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ledger the engine wrote: a provider serving 7,000 tokens of a declared 24,000."""
    from contextwindow.replay.importers import load_any
    from contextwindow.replay.simulate import simulate_sync

    path = tmp_path_factory.mktemp("ledger") / "agent.db"
    result = simulate_sync(
        load_any(BUNDLED), model="claude-sonnet-4-6", window=24_000, provider_window=7_000, store=str(path)
    )
    assert result.summary["window_learned"] == 7_000
    with open_store(path) as store:  # a second session, of a model genai-prices does not know
        session = store.session(LONG_ID)
        session.append(Message.user("hello"))
        session.record("anchor", {"anchor": {"model": "my-own-model", "connection": "c", "input_tokens": 9}})
        session.record("usage", {"fresh_input": 9, "cache_read": 0, "cache_write": 0, "output": 1})
    return path


def listed(*args: str) -> list[dict[str, object]]:
    result = runner.invoke(app, ["sessions", *args, "--json"])
    assert result.exit_code == 0, result.output
    rows: list[dict[str, object]] = json.loads(result.stdout)
    return rows


class TestSessions:
    def test_a_session_that_learned_a_smaller_window_says_so_with_its_model_and_calls(
        self, learned: Path
    ) -> None:
        [row] = [r for r in listed(str(learned)) if r["id"] == "simulation"]
        assert row["model"] == "claude-sonnet-4-6"
        assert (row["window"], row["learned_window"]) == (7_000, 7_000)
        assert row["calls"] == 4 and row["messages"] == 9 and row["folds"] == 0
        assert isinstance(row["last_request_tokens"], int) and 0 < row["last_request_tokens"] <= 7_000
        assert row["created_at"] <= row["last_call_at"]  # type: ignore[operator]

    def test_the_cost_is_priced_per_call_and_a_model_without_a_price_has_none(self, learned: Path) -> None:
        pytest.importorskip("genai_prices")
        from contextwindow.cost import price
        from contextwindow.usage.tracker import Usage

        rows = {r["id"]: r for r in listed(str(learned))}
        usage = rows["simulation"]["usage"]
        assert isinstance(usage, dict)
        expected = price(Usage(**usage), "claude-sonnet-4-6")
        assert expected is not None
        assert rows["simulation"]["cost_usd"] == pytest.approx(float(expected.total), abs=1e-5)
        assert rows[LONG_ID]["model"] == "my-own-model" and rows[LONG_ID]["cost_usd"] is None

    def test_ids_are_printed_whole_in_the_table(self, learned: Path) -> None:
        result = runner.invoke(app, ["sessions", str(learned)])
        assert result.exit_code == 0, result.output
        [line] = [line for line in result.stdout.splitlines() if LONG_ID in line]
        assert "my-own-model" in line  # the row is one line, the id on it whole
        assert "…" not in result.stdout
        assert "7,000 (learned)" in result.stdout

    def test_filters_by_model_and_by_time(self, learned: Path) -> None:
        assert [r["id"] for r in listed(str(learned), "--model", "my-own-model")] == [LONG_ID]
        assert listed(str(learned), "--model", "gpt-4o") == []
        assert len(listed(str(learned), "--since", "30d")) == 2
        tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
        assert listed(str(learned), "--since", tomorrow) == []

    def test_a_store_that_does_not_exist_is_a_user_error_and_is_not_created(self, tmp_path: Path) -> None:
        result = runner.invoke(app, ["sessions", str(tmp_path / "none.db")])
        assert result.exit_code == EXIT_BAD_INPUT
        assert not (tmp_path / "none.db").exists()

    def test_a_since_that_is_neither_a_time_nor_a_duration_is_exit_2(self, learned: Path) -> None:
        result = runner.invoke(app, ["sessions", str(learned), "--since", "yesterday"])
        assert result.exit_code == EXIT_BAD_INPUT
        assert "--since" in result.output


class TestAGuardedRun:
    def test_a_guarded_agent_on_a_provider_serving_less_shows_its_learned_window(
        self, tmp_path: Path
    ) -> None:
        anthropic = pytest.importorskip("anthropic")
        import contextwindow
        from contextwindow.testing import LocalModel, LocalServer, LocalSettings

        path = tmp_path / "guard.db"
        with LocalServer(LocalModel(LocalSettings(window=16_000))) as server:
            raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
            client = contextwindow.guard(raw, store=str(path))
            history: list[dict[str, object]] = []
            try:
                for turn in range(10):
                    words = " ".join(f"word{turn}_{i}" for i in range(400))
                    history.append({"role": "user", "content": f"Turn {turn}: {words}"})
                    reply = client.messages.create(
                        model="claude-sonnet-4-6", max_tokens=1024, messages=history
                    )
                    history.append({"role": "assistant", "content": reply.content})
                session_id = client.last_exchange.session_id
            finally:
                client.store.close()
                raw.close()
        [row] = listed(str(path))
        assert row["id"] == session_id  # whole, as inspect takes it
        assert row["model"] == "claude-sonnet-4-6" and row["learned_window"] == 16_000
        assert row["messages"] == 20 and row["calls"] >= 10 and row["max_tokens"] == 1024
        out = json.loads(runner.invoke(app, ["inspect", str(path), session_id, "--json"]).stdout)
        assert (out["model"], out["window"], out["window_learned"]) == ("claude-sonnet-4-6", 16_000, True)
        assert out["output_reserve"] == 1024
        # What the store learned of the endpoint and model, for every session on it.
        taught = {(lesson["what"], lesson["wire"]): lesson for lesson in out["store_learned"]}
        assert taught[("window", "anthropic")]["value"] == 16_000
        assert taught[("calibration", "anthropic")]["connection"] == "default"
        shown = runner.invoke(app, ["inspect", str(path), session_id], env={"COLUMNS": "300"}).stdout
        assert "the store learned of this model" in shown and "window 16,000 tokens (anthropic)" in shown


class TestInspectShowsTheSystemAndTools:
    def test_the_system_prompt_and_tools_the_last_request_held_are_in_the_makeup(
        self, tmp_path: Path
    ) -> None:
        anthropic = pytest.importorskip("anthropic")
        import contextwindow
        from contextwindow.testing import LocalModel, LocalServer, LocalSettings

        path = tmp_path / "guard.db"
        system = "You are a careful assistant. " * 60
        tools = [
            {
                "name": f"tool_{i}",
                "description": "Reads a file of the project and returns its text. " * 5,
                "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
            for i in range(3)
        ]
        with LocalServer(LocalModel(LocalSettings(window=16_000))) as server:
            raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
            client = contextwindow.guard(raw, store=str(path))
            try:
                history = [{"role": "user", "content": "hello"}]
                client.messages.create(
                    model="claude-sonnet-4-6", max_tokens=512, system=system, tools=tools, messages=history
                )
                session_id = client.last_exchange.session_id
            finally:
                client.store.close()
                raw.close()
        [row] = listed(str(path))
        assert row["head_tokens"]["system"] > 300 and row["head_tokens"]["tools"] > 100
        out = json.loads(runner.invoke(app, ["inspect", str(path), session_id, "--json"]).stdout)
        assert out["makeup"]["system"] == row["head_tokens"]["system"]
        assert out["makeup"]["tools"] == row["head_tokens"]["tools"]
        assert out["from"]["head"] == "session"
        assert out["estimated_tokens"] > out["makeup"]["system"] + out["makeup"]["tools"]


class TestInspectSeesTheSessionAsTheGuardDoes:
    def test_the_sessions_own_model_learned_window_and_max_tokens(self, learned: Path) -> None:
        [row] = [r for r in listed(str(learned)) if r["id"] == "simulation"]
        result = runner.invoke(app, ["inspect", str(learned), "simulation", "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["model"] == "claude-sonnet-4-6"
        assert out["window"] == 7_000 and out["window_learned"] is True
        assert out["output_reserve"] == row["max_tokens"] and isinstance(row["max_tokens"], int)
        assert out["from"] == {
            "model": "session",
            "window": "session",
            "reserve": "session",
            "head": "session",
        }
        assert out["estimated_tokens"] <= 7_000

    def test_an_option_overrides_what_the_ledger_says(self, learned: Path) -> None:
        args = ["inspect", str(learned), "simulation", "--json", "-m", "gpt-4o", "--window", "50000"]
        out = json.loads(runner.invoke(app, [*args, "--reserve", "1234"]).stdout)
        assert (out["model"], out["window"], out["output_reserve"]) == ("gpt-4o", 50_000, 1_234)
        assert out["window_learned"] is False
        assert out["from"] == {"model": "option", "window": "option", "reserve": "option", "head": "session"}

    def test_the_table_says_the_window_was_learned_and_where_each_figure_came_from(
        self, learned: Path
    ) -> None:
        result = runner.invoke(app, ["inspect", str(learned), "simulation"], env={"COLUMNS": "300"})
        assert result.exit_code == 0, result.output
        said = " ".join(result.stdout.split())  # the title wraps at the table's width
        assert "(7,000-token window, learned)" in said
        assert "model from the session's ledger" in said

    def test_a_session_with_no_records_compiles_for_the_default_model(self, tmp_path: Path) -> None:
        path = tmp_path / "bare.db"
        with open_store(path) as store:
            store.session("bare").append(Message.user("hi"))
        out = json.loads(runner.invoke(app, ["inspect", str(path), "bare", "--json"]).stdout)
        assert out["model"] == "claude-sonnet-4-6"
        assert out["from"] == {"model": "default", "window": "model", "reserve": "policy", "head": "none"}

    def test_a_session_not_in_the_store_points_to_the_list_of_sessions(self, tmp_path: Path) -> None:
        path = tmp_path / "many.db"
        with open_store(path) as store:
            for index in range(7):
                store.session(f"s{index}").append(Message.user("hi"))
        result = runner.invoke(app, ["inspect", str(path), "nope"], env={"COLUMNS": "500"})
        assert result.exit_code == EXIT_BAD_INPUT
        said = " ".join(result.output.split())
        assert "and 2 more" in said and f"contextwindow sessions {path}" in said and "…" not in said


class TestParseSince:
    @pytest.mark.parametrize(
        ("text", "ago"),
        [
            ("30d", timedelta(days=30)),
            ("12h", timedelta(hours=12)),
            ("90m", timedelta(minutes=90)),
            ("2w", timedelta(weeks=2)),
        ],
    )
    def test_a_duration_is_that_long_ago(self, text: str, ago: timedelta) -> None:
        now = datetime(2026, 6, 1, tzinfo=UTC)
        assert parse_since(text, now=now) == now - ago

    def test_an_iso_date_without_a_zone_is_utc(self) -> None:
        assert parse_since("2026-05-01") == datetime(2026, 5, 1, tzinfo=UTC)


def _ledger(path: Path, sessions: int) -> None:
    with open_store(path) as store:
        for index in range(sessions):
            store.session(f"s{index}").append(Message.user("x" * 50_000))


class TestPrune:
    def test_older_than_keeps_recent_sessions(self, tmp_path: Path) -> None:
        path = tmp_path / "a.db"
        _ledger(path, 3)
        result = runner.invoke(app, ["prune", str(path), "--older-than", "1h", "--json"])
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["sessions"] == []
        with open_store(path) as store:
            assert len(store.sessions()) == 3

    def test_max_mb_removes_the_oldest_until_the_file_fits_and_doctor_is_clean(self, tmp_path: Path) -> None:
        path = tmp_path / "b.db"
        _ledger(path, 8)  # 50 KB of text a session
        assert path.stat().st_size > 400_000
        result = runner.invoke(app, ["prune", str(path), "--max-mb", "0.2", "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        removed = out["sessions"]
        assert removed == [f"s{i}" for i in range(len(removed))] and 0 < len(removed) < 8  # oldest first
        assert out["file_bytes_after"] == path.stat().st_size <= 200_000
        doctor = runner.invoke(app, ["doctor", str(path)])
        assert doctor.exit_code == 0, doctor.output
        assert "clean" in doctor.stdout and f"{8 - len(removed)} session(s)" in doctor.stdout
        assert "MB on disk" in doctor.stdout

    def test_dry_run_removes_nothing(self, tmp_path: Path) -> None:
        path = tmp_path / "c.db"
        _ledger(path, 2)
        result = runner.invoke(app, ["prune", str(path), "--max-mb", "0", "--dry-run"])
        assert result.exit_code == 0, result.output
        assert "would remove 2 session(s)" in result.stdout
        with open_store(path) as store:
            assert store.sessions() == ["s0", "s1"]

    @pytest.mark.parametrize(
        "args",
        [[], ["--older-than", "soon"], ["--max-mb", "-1"]],
        ids=["nothing", "bad-duration", "negative"],
    )
    def test_bad_options_are_exit_2_and_remove_nothing(self, tmp_path: Path, args: list[str]) -> None:
        path = tmp_path / "d.db"
        _ledger(path, 1)
        result = runner.invoke(app, ["prune", str(path), *args])
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        with open_store(path) as store:
            assert store.sessions() == ["s0"]

    def test_pruning_a_store_that_does_not_exist_creates_nothing(self, tmp_path: Path) -> None:
        result = runner.invoke(app, ["prune", str(tmp_path / "none.db"), "--max-mb", "1"])
        assert result.exit_code == EXIT_BAD_INPUT
        assert not (tmp_path / "none.db").exists()
