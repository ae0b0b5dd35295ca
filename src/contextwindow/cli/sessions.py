"""``contextwindow sessions STORE`` and ``contextwindow prune STORE``: list a ledger's sessions, trim it.

``sessions`` opens the store read-only and prints one row per session from its records
(:mod:`contextwindow.sessions`): model, first entry, last call, messages, folds, learned window, the
last request's tokens and the cost in dollars (with the ``cost`` extra). Ids are printed whole.
``prune`` removes whole sessions older than a duration or, oldest first, down to a size
(:meth:`contextwindow.store.Store.prune`); ``--dry-run`` only says what would go.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from .. import cost
from ..sessions import SessionSummary, list_sessions
from ..store import Pruned, Store, open_store
from ._app import app
from ._common import EXIT_BAD_INPUT, emit_json, fail, guarded
from .store import _STORE_HELP, _look_into, _must_exist

__all__ = ["parse_since", "prune", "sessions"]

_DURATION = re.compile(r"(\d+)\s*(s|m|h|d|w)")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str, option: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s``: a duration, or exit 2 naming the option."""
    found = _DURATION.fullmatch(text.strip().lower())
    if not found:
        fail(f"{option} must be a duration such as 30d, 12h, 90m or 2w, not {text!r}", EXIT_BAD_INPUT)
    return timedelta(**{_UNITS[found.group(2)]: int(found.group(1))})


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """``--since``: an ISO 8601 date or time (UTC unless it says otherwise) or a duration ago."""
    if _DURATION.fullmatch(text.strip().lower()):
        return (now or datetime.now(UTC)) - parse_duration(text, "--since")
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        fail(
            f"--since must be an ISO 8601 date or time or a duration such as 30d, not {text!r}",
            EXIT_BAD_INPUT,
        )
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@app.command()
def sessions(
    store: Annotated[str, typer.Argument(help=_STORE_HELP)],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only sessions of this model.")] = None,
    since: Annotated[
        str | None,
        typer.Option(
            help="Only sessions written to since then: an ISO 8601 date or time, or a duration (30d)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the sessions as a JSON list.")] = False,
) -> None:
    """List a store's sessions: model, times, messages, folds, learned window, last request, cost."""
    _must_exist(store)
    cutoff = None if since is None else parse_since(since)
    with guarded(), _look_into(store) as opened:
        rows = list_sessions(opened, model=model, since=cutoff)
    if as_json:
        emit_json([row.as_dict() for row in rows])
        return
    console = Console()
    if not console.is_terminal:  # piped: one line a row, each id whole on it, whatever width a pipe claims
        console = Console(width=max(console.width, 160 + max((len(row.id) for row in rows), default=0)))
    if not rows:
        console.print(f"{store}: no sessions" + (" matching" if model or since else ""))
        return
    table = Table(title=f"{store}: {len(rows)} session(s)")
    for column, justify in (
        ("session", "left"),
        ("model", "left"),
        ("created", "left"),
        ("last call", "left"),
        ("messages", "right"),
        ("folds", "right"),
        ("window", "right"),
        ("last request", "right"),
        ("cost", "right"),
    ):
        # Ids are printed whole (folded, never cut): a cut id cannot be pasted into `inspect`.
        table.add_column(
            column,
            justify=justify,  # type: ignore[arg-type]
            overflow="fold",
            no_wrap=column != "session",
            min_width=8,
        )
    for row in rows:
        table.add_row(*_cells(row))
    console.print(table)
    if not cost.available():
        console.print("cost in dollars needs genai-prices: pip install 'contextwindow[cost]'")


def _cells(row: SessionSummary) -> list[str]:
    window = "" if row.window is None else f"{row.window:,}"
    if row.learned_window is not None:
        window = f"{row.learned_window:,} (learned)"
    return [
        row.id,
        row.model or "",
        _when(row.created_at),
        "" if row.last_call_at is None else _when(row.last_call_at),
        f"{row.messages:,}",
        f"{row.folds:,}",
        window,
        "" if row.last_request_tokens is None else f"{row.last_request_tokens:,}",
        "" if row.cost is None else f"${row.cost:,.4f}",
    ]


def _when(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


@app.command()
def prune(
    store: Annotated[str, typer.Argument(help=_STORE_HELP)],
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than", help="Remove sessions whose newest entry is older than this: 30d, 12h, 2w."
        ),
    ] = None,
    max_mb: Annotated[
        float | None,
        typer.Option(
            "--max-mb", help="Then remove the oldest sessions until the store holds at most this many MB."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was removed as JSON.")] = False,
) -> None:
    """Remove whole sessions (and attachments no other session uses), keeping the ledger consistent."""
    if older_than is None and max_mb is None:
        fail("prune needs --older-than, --max-mb or both", EXIT_BAD_INPUT)
    if max_mb is not None and not max_mb >= 0:
        fail(f"--max-mb must be a size ≥ 0, not {max_mb}", EXIT_BAD_INPUT)
    cutoff = None if older_than is None else datetime.now(UTC) - parse_duration(older_than, "--older-than")
    _must_exist(store)
    limit = None if max_mb is None else int(max_mb * 1_000_000)
    with guarded(), open_store(store) as opened:
        done = _prune_to(opened, cutoff, limit, dry_run=dry_run)
        left = len(opened.verify()) if not dry_run else 0
    if as_json:
        emit_json(
            {
                "dry_run": done.dry_run,
                "sessions": list(done.sessions),
                "attachments": list(done.attachments),
                "bytes_before": done.before.bytes,
                "bytes_after": done.after.bytes,
                "file_bytes_after": done.after.file_bytes,
            }
        )
    else:
        verb = "would remove" if dry_run else "removed"
        Console().print(
            f"{store}: {verb} {len(done.sessions)} session(s) and {len(done.attachments)} attachment(s); "
            f"{_mb(done.before.bytes)} → {_mb(done.after.bytes)}"
            + ("" if done.after.file_bytes is None else f" (file {_mb(done.after.file_bytes)})"),
            soft_wrap=True,
        )
    if left:
        fail(f"{store}: {left} problem(s) after pruning; run contextwindow doctor {store}", 1)


_ROUNDS = 4
"""How many times ``--max-mb`` prunes again, at the file's measured overhead, before it settles."""


def _prune_to(store: Store, cutoff: datetime | None, limit: int | None, *, dry_run: bool) -> Pruned:
    """``--max-mb`` bounds the file where the store has one (SQLite), else what it holds.

    ``Store.prune`` bounds what the sessions hold; a file holds that plus its indexes and pages, so
    the first round prunes to the limit as held and each next one to the limit scaled by what the
    file measured after it (rounds only remove more, oldest first). A dry run scales by the file as it
    is now, free pages included, so it may name a session or two more than the prune removes.
    """
    if limit is None or dry_run:
        target = limit
        size = store.size()
        if limit is not None and size.file_bytes and size.bytes:
            target = int(limit * min(1.0, size.bytes / size.file_bytes))
        return store.prune(last_before=cutoff, max_bytes=target, dry_run=dry_run)
    done = store.prune(last_before=cutoff, max_bytes=limit)
    sessions, attachments, before = list(done.sessions), list(done.attachments), done.before
    for _ in range(_ROUNDS):
        on_disk = done.after.file_bytes
        if on_disk is None or on_disk <= limit or not done.after.sessions or not done.after.bytes:
            break
        done = store.prune(max_bytes=int(limit * done.after.bytes / on_disk))
        sessions += done.sessions
        attachments += done.attachments
    return Pruned(tuple(sessions), tuple(attachments), before, done.after)


def _mb(size: int) -> str:
    return f"{size / 1_000_000:,.2f} MB"
