"""Choosing the proxy's per-request transform from its command-line settings."""

from __future__ import annotations

from pathlib import Path

from ..store import open_store
from .guarded import GuardTransform
from .proxy import Transform, passthrough

__all__ = ["DEFAULT_PROXY_STORE", "transform_for"]

DEFAULT_PROXY_STORE = ".contextwindow/proxy.sqlite"
"""The proxy's ledger when ``--store`` is not given: an embedded SQLite file under the working directory."""


def transform_for(
    *, store: str | None, window: int | None, guard: bool = True, durability: str = "normal"
) -> tuple[Transform, str]:
    """The transform for ``contextwindow proxy`` and a short description of what it does.

    With ``guard`` (the default) each request is fitted by the guard over the ledger at ``store``
    (default :data:`DEFAULT_PROXY_STORE`) to ``window`` (default: each model's own, then what the
    upstream's rejections say); without it requests pass through unchanged.

    ``durability`` is the store's (:func:`~contextwindow.store.open_store`). The proxy defaults to
    ``"normal"``: an acknowledged call survives the proxy's own crash; an OS crash or power loss may
    drop the last few commits, and those are recovered from the next request, because the agent
    resends its whole history (what is appended again is what was lost; a lost summary is made
    again). With ``"full"`` every commit waits for the disk (an fsync each, several per call).
    """
    if not guard:
        return passthrough, "pass-through"
    where = store or DEFAULT_PROXY_STORE
    if "://" not in where and where not in (":memory:", "memory:"):
        Path(where).parent.mkdir(parents=True, exist_ok=True)
    memory = where in (":memory:", "memory://")
    ledger = open_store(None if memory else where, **({} if memory else {"durability": durability}))
    transform = GuardTransform(ledger, context_window=window)
    return transform, f"guard: store {where} ({durability}), window {window or 'per model'}"
