"""``contextwindow inspect STORE SESSION`` and ``contextwindow doctor STORE``: look into a ledger.

Both open the store read-only: they never create, migrate or change a file, and a path that is not a
store (an empty file, a text file) is an error saying so (exit 3). ``inspect`` compiles the
session's next request without writing anything (compile is pure; the
archive and eviction records a live compile would append are not written) and shows its makeup by
segment against the window, for the session as the guard sees it: the model its anchors name, the
window its last request was measured against (learned, when a provider served less) and the
``max_tokens`` that request was sent with, unless an option overrides them. The agent's system
prompt and tools are not in the ledger, only what they were estimated at when its last request was
sent: the makeup shows those figures (``from.head``: ``session``), or none. ``doctor`` runs the store's ``verify()`` and lists what is wrong.
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
from ..sessions import summarize_session
from ..store import Store, in_memory, open_store
from ..store.learned import lessons
from ._app import app
from ._common import EXIT_BAD_INPUT, EXIT_FOUND_PROBLEM, emit_json, fail, guarded

__all__ = ["doctor", "inspect"]

_STORE_HELP = "A store: a SQLite file path, sqlite:///PATH, or postgresql://..."


_DEFAULT_MODEL = "claude-sonnet-4-6"
"""What ``inspect`` compiles for when neither ``--model`` nor the session's ledger names a model."""


@app.command()
def inspect(
    store: Annotated[str, typer.Argument(help=_STORE_HELP)],
    session: Annotated[str, typer.Argument(help="The session id.")],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help=f"Model whose window and rules to compile for; default: the session's own ({_DEFAULT_MODEL} "
            "when its ledger names none).",
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            help="Context window (tokens); default: the one the session's last request was measured against."
        ),
    ] = None,
    reserve: Annotated[
        int | None,
        typer.Option(
            help="Output reserve (tokens); default: the max_tokens the session's last request was sent with."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the makeup and decisions as JSON.")] = False,
) -> None:
    """Show the makeup of a stored session's next request as the guard would compile it: the session's
    own model, learned window and max_tokens (from its ledger) unless an option overrides them."""
    _must_exist(store)
    with guarded(), _look_into(store) as opened:
        known = opened.sessions()
        if session not in known:
            listed = ", ".join(known[:5]) + (f", and {len(known) - 5} more" if len(known) > 5 else "")
            where = (
                f"sessions: {listed}; contextwindow sessions {store} lists them"
                if known
                else "the store is empty"
            )
            fail(f"{store}: no session {session!r} ({where})", EXIT_BAD_INPUT)
        info = next((i for i in opened.session_infos() if i.id == session), None)
        seen = None if info is None else summarize_session(opened, info)
        sources = {
            "model": "option" if model else ("session" if seen and seen.model else "default"),
            "window": "option" if window else ("session" if seen and seen.window else "model"),
            "reserve": "option" if reserve else ("session" if seen and seen.max_tokens else "policy"),
        }
        seen_model = model or (seen.model if seen else None) or _DEFAULT_MODEL
        profile = get_profile(seen_model)
        size = window or (seen.window if seen else None)
        if size is not None:
            profile = profile.with_(
                context_window=size, max_output_tokens=min(profile.max_output_tokens, size)
            )
        output = reserve or (seen.max_tokens if seen else None)
        policy = Policy() if output is None else Policy(output_reserve=output)
        handle = opened.session(session)
        state = SessionCompiler(handle).state()
        head = seen.head_tokens if seen is not None else None
        # The messages get the window less what the system prompt and tools took when last sent.
        room = profile.context_window - sum((head or {}).values())
        compiled = compile(state, profile.with_(context_window=max(room, 1)), policy)
        taught = [_plain(lesson) for lesson in lessons(opened) if lesson.model in (profile.name, seen_model)]
    decisions = compiled.decisions
    makeup, estimated = dict(compiled.makeup), compiled.estimated_tokens
    sources["head"] = "session" if head else "none"
    for segment, tokens in (head or {}).items():
        estimated += tokens - makeup.get(segment, 0)
        makeup[segment] = tokens
    learned = seen is not None and seen.learned_window is not None and sources["window"] == "session"
    summary = {
        "session": session,
        "model": profile.name,
        "window": profile.context_window,
        "window_learned": learned,
        "output_reserve": policy.reserve_for(profile.context_window, profile.max_output_tokens),
        "from": sources,
        "messages_stored": len(state.messages),
        "messages_sent": len(compiled.messages),
        "estimated_tokens": estimated,
        "makeup": makeup,
        "evicted": [_plain(d) for d in decisions.evicted],
        "archived": [_plain(d) for d in decisions.archived],
        "truncated": [_plain(d) for d in decisions.truncated],
        "folded": list(decisions.folded),
        "omitted": list(decisions.omitted),
        "store_learned": taught,
    }
    if as_json:
        emit_json(summary)
        return
    console = Console()
    table = Table(
        title=f"session {session}: next request for {profile.name} ({profile.context_window:,}-token window"
        f"{', learned' if learned else ''})"
    )
    table.add_column("segment")
    table.add_column("tokens", justify="right")
    table.add_column("share of window", justify="right")
    for segment, tokens in makeup.items():
        table.add_row(segment, f"{tokens:,}", f"{tokens / profile.context_window:.1%}")
    console.print(table)
    console.print(
        f"{len(compiled.messages)} of {len(state.messages)} stored messages sent; estimate "
        f"{estimated:,} tokens; output reserve {summary['output_reserve']:,}; evicted "
        f"{len(decisions.evicted)}, archived {len(decisions.archived)}, truncated {len(decisions.truncated)}, "
        f"folded {len(decisions.folded)}, left out (older than the window holds) {len(decisions.omitted)}",
        soft_wrap=True,
    )
    console.print(
        "model from the "
        + _said(sources["model"])
        + ", window from the "
        + _said(sources["window"])
        + ", output reserve from the "
        + _said(sources["reserve"])
        + (
            "; system prompt and tools as the session's last request was estimated to hold them"
            if head
            else "; the ledger says nothing of the agent's system prompt and tools, so they are not in it"
        ),
        soft_wrap=True,
    )
    if taught:
        console.print(
            "the store learned of this model (every session on it starts from this): " + _lessons(taught)
        )


def _lessons(taught: list[dict[str, Any]]) -> str:
    said = []
    for lesson in taught:
        where = lesson["wire"] + (f", tenant {lesson['tenant']}" if lesson["tenant"] else "")
        if lesson["what"] == "window":
            value = "withdrawn" if lesson["value"] is None else f"{lesson['value']:,} tokens"
            said.append(f"window {value} ({where})")
        else:
            value = "none" if lesson["value"] is None else f"{lesson['value']:.3f}"
            said.append(f"calibration {value} ({where}, connection {lesson['connection']})")
    return "; ".join(said)


def _said(source: str) -> str:
    return {
        "option": "option given",
        "session": "session's ledger",
        "default": f"default ({_DEFAULT_MODEL})",
        "model": "model's profile",
        "policy": "policy's default",
    }[source]


def _must_exist(store: str) -> None:
    """Looking into a store must not create one: a SQLite path that does not exist is a mistake."""
    if store.startswith(("postgresql://", "postgres://", "memory://")) or store == ":memory:":
        return
    path = Path(store.removeprefix("sqlite:///") if store.startswith("sqlite:///") else store)
    if not path.exists():
        fail(f"{store}: no such store", EXIT_BAD_INPUT)


def _look_into(store: str) -> Store:
    """The store opened read-only: looking never creates, migrates or changes anything."""
    return open_store(store) if in_memory(store) else open_store(store, read_only=True)


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
