"""``python -m contextwindow``: the command line (see :mod:`contextwindow.cli`)."""

from __future__ import annotations

from .cli import main

__all__: list[str] = []

if __name__ == "__main__":
    raise SystemExit(main())
