"""``contextwindow report STORE SESSION --out DIR``: the session browser page of a stored session.

Read from the session's ledger records (:mod:`contextwindow.replay.timeline`), so a guard's, an
adapter's, the proxy's or an engine's session alike; written as one self-contained page
(:mod:`contextwindow.replay.session_page`) that needs no network to view.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..replay.session_page import write_session_page
from ..replay.timeline import read_timeline
from ..sessions import summarize_session
from ._app import app
from ._common import EXIT_BAD_INPUT, fail, guarded
from .store import _STORE_HELP, _look_into, _must_exist

__all__ = ["report"]


@app.command()
def report(
    store: Annotated[str, typer.Argument(help=_STORE_HELP)],
    session: Annotated[str, typer.Argument(help="The session id (contextwindow sessions STORE lists them).")],
    out: Annotated[Path, typer.Option(help="Where to write the page (index.html).")] = Path(
        "contextwindow-report"
    ),
) -> None:
    """Write a session's page: every call against the window as known then, turns, folds with their
    summaries, archived, evicted and re-read, cache reads and writes, and cost; click a call for it."""
    _must_exist(store)
    with guarded(), _look_into(store) as opened:
        info = next((i for i in opened.session_infos() if i.id == session), None)
        if info is None:
            fail(
                f"{store}: no session {session!r} (contextwindow sessions {store} lists them)", EXIT_BAD_INPUT
            )
        seen = summarize_session(opened, info)
        calls = read_timeline(opened.session(session), model=seen.model)
    subtitle = f"{seen.model or 'model unknown'} · {len(calls)} calls · {store}"
    path = write_session_page(calls, out, title=f"Session {session}", subtitle=subtitle)
    Console().print(f"report: [bold]{path}[/]", soft_wrap=True)
