"""The session browser, rendered by headless Chromium: the chart drawn, no script error, a click on a
call shows its details; and the timeline it is drawn from, read from a guarded run's ledger.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it). Without it the rendering tests skip on a
developer's machine and fail under ``CI=true``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import contextwindow
from _shared import LazyModule
from contextwindow.cli import app
from contextwindow.replay.session_page import write_session_page
from contextwindow.replay.timeline import TimelineCall, read_timeline
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

WINDOW = 16_000
TURNS = 12


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing: .ci/run installs Debian's chromium for the session page tests")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def _render(
    page: Path, tmp: Path, *, call: int | None = None, screenshot: Path | None = None
) -> tuple[str, str]:
    """The DOM after the page's scripts ran, and Chromium's log (console messages included)."""
    url = page.resolve().as_uri() + (f"#call={call}" if call is not None else "")
    profile = tmp / f"profile-{call}-{screenshot is not None}"
    args = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1200,900",
    ]
    args += [f"--screenshot={screenshot}"] if screenshot is not None else ["--dump-dom"]
    done = subprocess.run([*args, url], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, done.stderr


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A guarded run on a provider serving less than the profile says, kept in a SQLite ledger."""
    path = tmp_path_factory.mktemp("ledger") / "guard.sqlite"
    with LocalServer(LocalModel(LocalSettings(effective_window=WINDOW))) as server:
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0, timeout=60)
        client = contextwindow.guard(raw, store=str(path))
        history: list[dict[str, Any]] = []
        for turn in range(TURNS):
            history.append({"role": "user", "content": f"Turn {turn}: " + "word " * 1_500})
            response = client.messages.create(model="claude-sonnet-4-5", max_tokens=1_024, messages=history)
            history.append({"role": "assistant", "content": response.content})
        session = client.last_exchange.session_id
        client.store.close()
        raw.close()
    yield path, session


def _timeline(ledger: tuple[Path, str]) -> list[TimelineCall]:
    path, session = ledger
    with open_store(str(path), read_only=True) as store:
        return read_timeline(store.session(session), model="claude-sonnet-4-5")


class TestTimeline:
    def test_a_guarded_run_reads_back_call_by_call(self, ledger: tuple[Path, str]) -> None:
        calls = _timeline(ledger)
        assert len(calls) == TURNS + 1  # the turns, and the call the provider refused
        refused = [c for c in calls if c.refused]
        assert len(refused) == 1 and refused[0].usage is None
        retry = calls[calls.index(refused[0]) + 1]
        kinds = [a.kind for a in retry.actions]
        assert "window_learned" in kinds and "retried" in kinds
        assert retry.window == WINDOW and refused[0].window is not None and refused[0].window > WINDOW
        folds = [a for c in calls for a in c.actions if a.kind == "folded"]
        assert folds and all(a.text for a in folds)  # each fold shows its summary's text
        assert [c.turn for c in calls if c.turn_start] == list(range(1, TURNS + 1))
        assert all(c.usage is not None for c in calls if not c.refused)

    def test_each_answered_call_is_priced(self, ledger: tuple[Path, str]) -> None:
        pytest.importorskip("genai_prices")
        calls = _timeline(ledger)
        for call in calls:
            if call.usage is None:
                assert call.cost is None
                continue
            # Claude Sonnet 4.5: $3 per million input tokens, $15 per million output tokens.
            assert call.cost == pytest.approx(
                (call.usage.prompt * 3 + call.usage.output * 15) / 1e6, rel=1e-9
            )


class TestReportCommand:
    def test_report_writes_one_self_contained_page(self, ledger: tuple[Path, str], tmp_path: Path) -> None:
        path, session = ledger
        result = CliRunner().invoke(app, ["report", str(path), session, "--out", str(tmp_path / "out")])
        assert result.exit_code == 0, result.output
        page = (tmp_path / "out" / "index.html").read_text("utf-8")
        assert session in page
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched at view time

    def test_an_unknown_session_is_one_line_naming_the_sessions_command(
        self, ledger: tuple[Path, str], tmp_path: Path
    ) -> None:
        path, _ = ledger
        result = CliRunner().invoke(app, ["report", str(path), "nope", "--out", str(tmp_path)])
        assert result.exit_code == 2
        assert "contextwindow sessions" in result.output


@pytest.fixture(scope="module")
def page(ledger: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    calls = _timeline(ledger)
    return write_session_page(calls, tmp_path_factory.mktemp("page"), title=f"Session {ledger[1]}")


class TestRenderedInChromium:
    def test_the_chart_is_drawn_with_no_script_error(self, page: Path, tmp_path: Path) -> None:
        dom, log = _render(page, tmp_path)
        assert 'data-drawn="13"' in dom
        assert "data-errors" not in dom
        assert not re.search(r"CONSOLE.*(Uncaught|Error)", log), log[-2000:]
        assert dom.count('class="bar"') == TURNS + 1
        assert 'data-kind="refused"' in dom
        assert 'id="window-line"' in dom
        assert dom.count('class="turn"') == TURNS - 1

    def test_a_click_on_a_call_shows_its_details(
        self, page: Path, tmp_path: Path, ledger: tuple[Path, str]
    ) -> None:
        calls = _timeline(ledger)
        retry = next(c for i, c in enumerate(calls) if i > 0 and calls[i - 1].refused)
        dom, _ = _render(page, tmp_path, call=retry.index)
        shown = re.search(r'<div id="details">(.*?)</div>\s*<div id="tip"', dom, re.S)
        assert shown is not None
        details = shown.group(1)
        assert f"Call {retry.index} · turn {retry.turn}" in details
        assert "window learned: 16,000" in details
        assert "refused for size (limit 16000): retried" in details
        assert 'class="bar selected"' in dom

    def test_a_screenshot_shows_the_chart(self, page: Path, tmp_path: Path) -> None:
        shot = tmp_path / "page.png"
        _render(page, tmp_path, screenshot=shot)
        assert shot.stat().st_size > 10_000
        kept = os.environ.get("CONTEXTWINDOW_KEEP_SCREENSHOT")
        if kept:
            shutil.copy(shot, kept)


def _small_scenario(turns: int = 3) -> Any:
    from replay_support import coding_scenario

    return coding_scenario(turns, result="lorem ipsum " * 300)


class TestSimulateAndDemoWriteThePage:
    def test_simulate_report_writes_the_sessions_page(self, tmp_path: Path) -> None:
        from contextwindow.replay.scenario_file import dump_scenario

        scenario = tmp_path / "s.jsonl"
        dump_scenario(_small_scenario(), scenario)
        out = tmp_path / "page"
        args = [
            "simulate",
            str(scenario),
            "-m",
            "claude-sonnet-4-5",
            "--window",
            "8000",
            "--report",
            str(out),
        ]
        result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        dom, _ = _render(out / "index.html", tmp_path, call=1)
        drawn = re.search(r'data-drawn="(\d+)"', dom)
        assert drawn is not None and int(drawn.group(1)) >= 12  # a call per scripted reply, at least
        assert dom.count('class="turn"') == 2
        assert "Call 1 · turn 1" in dom
        assert "Turn 0: audit the module and report." in dom  # the message appended before call 1

    def test_the_demo_writes_the_same_page_with_the_learned_window(self, tmp_path: Path) -> None:
        out = tmp_path / "report"
        result = CliRunner().invoke(app, ["demo", "--out", str(out)], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        page = out / "session" / "index.html"
        dom, log = _render(page, tmp_path)
        assert "data-errors" not in dom and not re.search(r"CONSOLE.*Uncaught", log)
        assert 'data-kind="refused"' in dom  # the demo's provider serves less than declared
        path = re.search(r'<path d="([^"]+)"[^>]*id="window-line"', dom)
        assert path is not None
        heights = {float(point.split(",")[1]) for point in re.split(r"[ML]", path.group(1)) if point}
        assert len(heights) == 2  # the window line steps once, where the window was learned
