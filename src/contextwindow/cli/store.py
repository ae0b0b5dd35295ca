"""``contextwindow inspect STORE SESSION`` and ``contextwindow doctor STORE``: look into a ledger.

Both open the store read-only: they never create, migrate or change a file, and a path that is not a
store (an empty file, a text file) is an error saying so (exit 3). ``inspect`` compiles the
session's next request without writing anything (compile is pure; the
archive and eviction records a live compile would append are not written) and shows its makeup by
segment against the window. ``doctor`` runs the store's ``verify()`` and lists what is wrong.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..compile import Policy, SessionCompiler, compile
from ..models import get_profile
from ..store import Store, open_store
from . import app
from ._common import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, emit_json, fail, guarded

__all__ = ["doctor", "inspect"]

_STORE_HELP = "A store: a SQLite file path, sqlite:///PATH, or postgresql://..."


@app.command()
def inspect(
    store: Annotated[str, typer.Argument(help=_STORE_HELP)],
    session: Annotated[str, typer.Argument(help="The session id.")],
    model: Annotated[
        str, typer.Option("--model", "-m", help="Model whose window and rules to compile for.")
    ] = "claude-sonnet-4-6",
    window: Annotated[int | None, typer.Option(help="Override the model's context window (tokens).")] = None,
    reserve: Annotated[
        int | None, typer.Option(help="Output reserve (tokens); default: the policy's.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the makeup and decisions as JSON.")] = False,
) -> None:
    """Show the makeup of a stored session's next request: what would be sent, and what was left out."""
    _must_exist(store)
    with guarded(), _look_into(store) as opened:
        profile = get_profile(model)
        if window is not None:
            profile = profile.with_(
                context_window=window, max_output_tokens=min(profile.max_output_tokens, window)
            )
        policy = Policy() if reserve is None else Policy(output_reserve=reserve)
        known = opened.sessions()
        if session not in known:
            listed = ", ".join(known[:5]) + (", …" if len(known) > 5 else "")
            fail(
                f"{store}: no session {session!r} ({'sessions: ' + listed if known else 'the store is empty'})",
                EXIT_BAD_INPUT,
            )
        handle = opened.session(session)
        state = SessionCompiler(handle).state()
        compiled = compile(state, profile, policy)
    decisions = compiled.decisions
    summary = {
        "session": session,
        "model": profile.name,
        "window": profile.context_window,
        "messages_stored": len(state.messages),
        "messages_sent": len(compiled.messages),
        "estimated_tokens": compiled.estimated_tokens,
        "makeup": dict(compiled.makeup),
        "evicted": [_plain(d) for d in decisions.evicted],
        "archived": [_plain(d) for d in decisions.archived],
        "truncated": [_plain(d) for d in decisions.truncated],
        "folded": list(decisions.folded),
        "omitted": list(decisions.omitted),
    }
    if as_json:
        emit_json(summary)
        return
    console = Console()
    table = Table(
        title=f"session {session}: next request for {profile.name} ({profile.context_window:,}-token window)"
    )
    table.add_column("segment")
    table.add_column("tokens", justify="right")
    table.add_column("share of window", justify="right")
    for segment, tokens in compiled.makeup.items():
        table.add_row(segment, f"{tokens:,}", f"{tokens / profile.context_window:.1%}")
    console.print(table)
    console.print(
        f"{len(compiled.messages)} of {len(state.messages)} stored messages sent; estimate "
        f"{compiled.estimated_tokens:,} tokens; evicted {len(decisions.evicted)}, archived "
        f"{len(decisions.archived)}, truncated {len(decisions.truncated)}, folded {len(decisions.folded)}, "
        f"left out (older than the window holds) {len(decisions.omitted)}"
    )


def _must_exist(store: str) -> None:
    """Looking into a store must not create one: a SQLite path that does not exist is a mistake."""
    if store.startswith(("postgresql://", "postgres://", "memory://")) or store == ":memory:":
        return
    path = Path(store.removeprefix("sqlite:///") if store.startswith("sqlite:///") else store)
    if not path.exists():
        fail(f"{store}: no such store", EXIT_BAD_INPUT)


def _look_into(store: str) -> Store:
    """The store opened read-only: looking never creates, migrates or changes anything."""
    return open_store(store) if _is_memory(store) else open_store(store, read_only=True)


def _is_memory(store: str) -> bool:
    return store in (":memory:", "memory://", "memory:")


def _plain(value: Any) -> Any:
    return (
        dataclasses.asdict(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type)
        else value
    )


@app.command()
def doctor(
    store: Annotated[str, typer.Argument(help=_STORE_HELP)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the problems as JSON.")] = False,
) -> None:
    """Check a store's invariants (hash chains, orders, references, attachment hashes). Exit 1 if any is broken."""
    _must_exist(store)
    with guarded(), _look_into(store) as opened:
        problems = opened.verify()
        size = opened.size()
    held = (
        f"{size.sessions:,} session(s), {size.entries:,} entries, {size.attachments:,} attachment(s): "
        f"{size.bytes / 1_000_000:,.2f} MB"
        + ("" if size.file_bytes is None else f" ({size.file_bytes / 1_000_000:,.2f} MB on disk)")
    )
    if as_json:
        emit_json(
            [
                {
                    "code": p.code,
                    "detail": p.detail,
                    "session": p.session_id,
                    "position": p.position,
                    "entry": p.entry_id,
                    "attachment": p.attachment_id,
                }
                for p in problems
            ]
        )
    elif not problems:
        Console().print(f"{store}: clean; {held}", soft_wrap=True)
    else:
        console = Console()
        console.print(f"{store}: {len(problems)} problem(s); {held}", soft_wrap=True)
        for problem in problems:
            console.print(f"  - {problem}")
    if problems:
        raise typer.Exit(EXIT_FOUND_PROBLEM)
