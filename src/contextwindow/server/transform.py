"""Choosing the proxy's per-request transform from its command-line settings."""

from __future__ import annotations

from .proxy import Transform, passthrough

__all__ = ["transform_for"]


def transform_for(*, store: str | None, window: int | None) -> tuple[Transform, str]:
    """The transform for ``contextwindow proxy`` and a short description of what it does.

    Window keeping needs the guard core; this build forwards every request unchanged, and the
    description says that ``--store`` and ``--window`` then have no effect.
    """
    ignored = "; --store and --window have no effect without the guard" if store or window else ""
    return passthrough, f"pass-through{ignored}"
