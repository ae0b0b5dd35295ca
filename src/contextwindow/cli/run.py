"""``contextwindow simulate SCENARIO`` and ``contextwindow demo``: scenarios through the engine.

Both run :func:`contextwindow.replay.simulate.simulate` — the real engine, compiler, summariser and ledger
against the local provider's hard window — and show a summary. ``demo`` runs the bundled scenario (a
coding agent reading the standard library, taking screenshots, receiving photos mid-turn, a turn in
Chinese) on a small window and writes a report with a chart to ``./contextwindow-report/``.
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..engine.precount import COUNT_MODES
from ..errors import ScenarioError
from ..replay.report import SUMMARY_ROWS, format_value
from ..replay.simulate import SimulationResult, simulate_sync
from ..usage.tracker import USAGE_MODES, UsageMode
from ._app import app
from ._common import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, emit_json, fail, guarded

__all__ = ["demo", "simulate_command"]


def _run(scenario: Any, console: Console | None, record: IO[str] | None, **options: Any) -> SimulationResult:
    """Run with a progress bar on ``console`` (none when printing JSON)."""
    if console is None:
        return simulate_sync(scenario, record=record, **options)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("provider calls", total=scenario.calls)
        return simulate_sync(
            scenario, record=record, progress=lambda n: bar.update(task, completed=n), **options
        )


def _summary_table(result: SimulationResult, title: str) -> Table:
    table = Table(title=title)
    table.add_column("")
    table.add_column("value", justify="right")
    for key, label in SUMMARY_ROWS:
        table.add_row(label, format_value(result.summary.get(key), key))
    return table


@app.command("simulate")
def simulate_command(
    scenario_path: Annotated[
        Path,
        typer.Argument(
            metavar="SCENARIO",
            help="A scenario (.jsonl) or a transcript: Claude Code session, Chat/Messages JSON, SWE-agent .traj.",
        ),
    ],
    model: Annotated[
        str, typer.Option("--model", "-m", help="Model whose rules, tokenizer and window to use.")
    ],
    window: Annotated[
        int | None, typer.Option(help="Declared context window in tokens (default: the model's).")
    ] = None,
    reserve: Annotated[
        int | None,
        typer.Option(help="Output reserve: each call's max_tokens (default: min(4096, window/8))."),
    ] = None,
    usage: Annotated[
        str, typer.Option(help="How the provider reports usage: cumulative, per-call, output-only or none.")
    ] = "per-call",
    provider_window: Annotated[
        int | None, typer.Option(help="The provider rejects above this while --window stays declared.")
    ] = None,
    record: Annotated[
        Path | None, typer.Option(help="Write every request as sent, one JSON object a line, to this file.")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="Ledger to record into: SQLite path, sqlite:///…, postgresql://… (default: memory)."
        ),
    ] = None,
    count: Annotated[
        str | None,
        typer.Option(
            help="When the engine has the provider count a request before sending it: off, cold or "
            "auto (default: the engine's)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as one JSON object.")] = False,
    report: Annotated[
        Path | None,
        typer.Option(
            help="Write the session's page (index.html: every call, folds, cost) to this directory."
        ),
    ] = None,
) -> None:
    """Run a scenario or transcript through the engine against the local provider; summarise the run."""
    if usage not in USAGE_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(USAGE_MODES)}", param_hint="--usage")
    if count is not None and count not in COUNT_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(COUNT_MODES)}", param_hint="--count")
    from ..replay.importers import load_any

    if not scenario_path.exists():
        fail(f"{scenario_path}: no such file", EXIT_BAD_INPUT)
    console = None if as_json else Console()
    with guarded():
        try:
            scenario = load_any(scenario_path)
        except ScenarioError as err:
            fail(str(err), EXIT_BAD_INPUT)
        with open(record, "w", encoding="utf-8") if record else contextlib.nullcontext() as sink:
            result = _run(
                scenario,
                console,
                sink,
                model=model,
                window=window,
                reserve=reserve,
                usage=_mode(usage),
                provider_window=provider_window,
                store=store,
                count=count,
                timeline=report is not None,
            )
    if report is not None:
        from ..replay.session_page import write_session_page

        subtitle = f"{model}, window {result.summary['window']:,}, {len(result.timeline)} calls"
        page = write_session_page(result.timeline, report, title=f"{scenario.name}", subtitle=subtitle)
        if console is not None:
            console.print(f"session page: [bold]{page}[/]", soft_wrap=True)
    if as_json:
        emit_json(result.summary)
    else:
        assert console is not None
        console.print(
            _summary_table(result, f"{scenario.name}: {model}, window {result.summary['window']:,}")
        )
    if result.failed_turns:
        raise typer.Exit(EXIT_FOUND_PROBLEM)


def _mode(usage: str) -> UsageMode:
    assert usage in USAGE_MODES
    return usage


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Where to write the report.")] = Path("contextwindow-report"),
    model: Annotated[
        str, typer.Option("--model", "-m", help="Model whose rules and tokenizer to use.")
    ] = "claude-sonnet-4-6",
    window: Annotated[
        int | None, typer.Option(help="Declared window (default: the demo's small window).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the bundled scenario.")] = 0,
) -> None:
    """Run the bundled long agent scenario on a small window and write a report with a chart."""
    from ..replay.demo import DEMO_SERVED_SHARE, DEMO_WINDOW, build_demo
    from ..replay.report import write_report
    from ..replay.session_page import write_session_page

    console = Console()
    started = time.perf_counter()
    console.print(
        "[bold]contextwindow demo[/]: building the bundled scenario (a coding agent over the standard library)…"
    )
    scenario = build_demo(seed=seed)
    declared = window or DEMO_WINDOW
    served = math.floor(declared * DEMO_SERVED_SHARE)
    console.print(
        f"{scenario.calls} scripted provider calls, {len(scenario.attachment_refs())} attachments; "
        f"model {model}, declared window {declared:,} tokens; the local provider serves {served:,} "
        "(a little less, as real ones sometimes do: the engine recovers and learns it)"
    )
    with guarded():
        result = _run(
            scenario,
            console,
            None,
            model=model,
            window=declared,
            usage="per-call",
            provider_window=served,
            timeline=True,
        )
        title = f"contextwindow demo — {scenario.name}"
        subtitle = f"{model}, window {declared:,} tokens, {result.summary['calls']} calls"
        path = write_report(result.records, result.summary, out, title=title, subtitle=subtitle)
        session_page = write_session_page(result.timeline, out / "session", title=title, subtitle=subtitle)
    console.print(_summary_table(result, f"{scenario.name}: {model}, window {declared:,}"))
    console.print(f"report: [bold]{path}[/] (makeup.png, index.html) — {time.perf_counter() - started:.1f} s")
    console.print(f"session page: [bold]{session_page}[/] (click a call to see it)", soft_wrap=True)
    if result.failed_turns:
        raise typer.Exit(EXIT_FOUND_PROBLEM)
