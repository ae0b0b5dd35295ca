"""``python -m contextwindow`` and the ``contextwindow`` script: the command line (see :mod:`contextwindow.cli`).

typer and rich are dependencies of contextwindow; an install without them (a vendored copy, a
stripped environment) gets one line naming them, never a ``ModuleNotFoundError`` traceback.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

_CLI_PACKAGES = frozenset({"typer", "rich", "click"})


def main() -> int:
    """Run the command line; the exit status (see ``contextwindow --help``)."""
    try:
        from .cli import main as run
    except ImportError as missing:
        name = (missing.name or "").partition(".")[0]
        if name not in _CLI_PACKAGES:
            raise
        print(
            f"error: the contextwindow command needs {name}, which is not installed: "
            "pip install 'contextwindow[cli]'",
            file=sys.stderr,
        )
        return 1
    return run()


if __name__ == "__main__":
    raise SystemExit(main())
