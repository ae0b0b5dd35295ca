"""The ``contextwindow`` command: one typer app, one module per command group.

Commands register themselves on :data:`app` from their own modules (``demo.py``, ...), so adding a
group is a new module and one import here. typer and rich come with the ``cli`` extra.
"""

from __future__ import annotations

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="contextwindow",
    help="Keep an LLM agent inside its model's context window.",
    no_args_is_help=True,
    add_completion=False,
)
"""The ``contextwindow`` command; each command module registers on it when imported."""


@app.callback()
def _root() -> None:
    """Keep an LLM agent inside its model's context window."""


# Each module registers its commands on app when imported.
from . import count as _count  # noqa: E402
from . import run as _run  # noqa: E402
from . import serve as _serve  # noqa: E402
from . import show as _show  # noqa: E402
from . import store as _store  # noqa: E402

_ = (_count, _run, _serve, _show, _store)


def main() -> int:
    """Entry point of the ``contextwindow`` script and ``python -m contextwindow``: the exit status."""
    try:
        app()
    except SystemExit as done:  # typer's standalone mode always ends by exiting
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
