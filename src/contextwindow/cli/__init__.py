"""The ``contextwindow`` command: one typer app, one module per command group.

Commands register themselves on :data:`app` (defined in ``_app.py``) from their own modules, so
adding a group is a new module and one import here. typer and rich are dependencies of contextwindow.
"""

from __future__ import annotations

import os

import typer
from rich.markup import escape

# Each command module registers its commands on app when imported.
from . import count as _count
from . import proxy as _proxy
from . import report as _report
from . import run as _run
from . import serve as _serve
from . import sessions as _sessions
from . import show as _show
from . import store as _store
from ._app import app

__all__ = ["app", "main"]

_ = (_count, _proxy, _report, _run, _serve, _sessions, _show, _store)


def main() -> int:
    """Entry point of the ``contextwindow`` script and ``python -m contextwindow``: the exit status.

    Exit codes: 0 done (``doctor``: the store is clean); 1 the command found a problem (``doctor``:
    broken invariants; ``simulate``: an unrecovered rejection) or failed unexpectedly; 2 bad input
    or usage (a missing, binary or malformed file, JSON nested too deep, an unknown model, a bad
    option, a port that is taken); 3 the store failed, was busy, is newer than this library, or is
    not a store. Every failure is one line on stderr, never a traceback.
    """
    try:
        result = app(standalone_mode=False)
    except typer.Abort:
        return 130
    except typer.TyperException as err:  # a bad option or argument (click's UsageError): one line, exit 2
        ctx = getattr(err, "ctx", None)
        hint = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        format_message = getattr(err, "format_message", None)
        message = format_message() if callable(format_message) else str(err)
        code = int(getattr(err, "exit_code", 2))
        return _usage(f"{message}{hint}", code) if message.strip() else code  # no arguments: help shown
    except KeyboardInterrupt:
        return 130
    except SystemExit as done:
        status = done.code
        return status if isinstance(status, int) else (0 if status is None else 1)
    except RecursionError:
        return _internal("input nested too deep for this command")
    except Exception as err:
        return _internal(f"{type(err).__name__}: {err}")
    return result if isinstance(result, int) else 0


def _usage(message: str, code: int = 2) -> int:
    from ._common import stderr

    stderr.print(f"[bold red]error:[/] {escape(' '.join(message.split()))}", soft_wrap=True)
    return code


def _internal(message: str) -> int:
    from ._common import stderr

    if os.environ.get("CONTEXTWINDOW_TRACEBACK"):
        raise
    stderr.print(
        f"[bold red]internal error:[/] {escape(' '.join(message.split())[:400])} "
        "(a bug in contextwindow; set CONTEXTWINDOW_TRACEBACK=1 to see where)",
        soft_wrap=True,
    )
    return 1
