"""Choosing the proxy's per-request transform from its command-line settings."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..store import in_memory, open_store
from .conversations import DEFAULT_CACHE_MB
from .guarded import GuardTransform
from .limits import MIB
from .proxy import Transform, passthrough
from .tenants import Tenants, secret_file_for, tenant_secret

if TYPE_CHECKING:
    from ..compaction import CompactionMode

__all__ = ["DEFAULT_PROXY_STORE", "describe", "transform_for"]

DEFAULT_PROXY_STORE = ".contextwindow/proxy.sqlite"
"""The proxy's ledger when ``--store`` is not given: an embedded SQLite file under the working directory."""


def transform_for(
    *,
    store: str | None,
    window: int | None,
    guard: bool = True,
    durability: str = "normal",
    tenant_header: str | None = None,
    tenant_secret_file: str | None = None,
    cache_mb: int = DEFAULT_CACHE_MB,
    compaction: CompactionMode = "local",
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

    Conversations belong to tenants (:mod:`.tenants`): by the API key, or by ``tenant_header``; the
    secret is read from ``tenant_secret_file`` (or ``$CONTEXTWINDOW_TENANT_SECRET``), else kept
    beside the store. At most ``cache_mb`` MiB of conversations are held in memory. ``compaction``
    is the guard's (:mod:`contextwindow.compaction`): ``"local"`` folds, ``"provider"`` sends the
    provider's own compaction or context editing, ``"auto"`` whichever costs less per call.
    """
    if not guard:
        return passthrough, "pass-through"
    where = store or DEFAULT_PROXY_STORE
    memory = in_memory(where)
    if "://" not in where and not memory:
        Path(where).parent.mkdir(parents=True, exist_ok=True)
    ledger = open_store(None if memory else where, **({} if memory else {"durability": durability}))
    if tenant_secret_file is not None:
        secret = tenant_secret(Path(tenant_secret_file), configured=True)
    else:
        secret = tenant_secret(secret_file_for(where))
    transform = GuardTransform(
        ledger,
        context_window=window,
        tenants=Tenants(secret, header=tenant_header),
        cache_bytes=cache_mb * MIB,
        compaction=compaction,
    )
    return transform, describe(
        store=store,
        window=window,
        guard=guard,
        durability=durability,
        tenant_header=tenant_header,
        compaction=compaction,
    )


def describe(
    *,
    store: str | None,
    window: int | None,
    guard: bool = True,
    durability: str = "normal",
    tenant_header: str | None = None,
    compaction: str = "local",
) -> str:
    """What :func:`transform_for` with these settings does, in a few words (the proxy's first line)."""
    if not guard:
        return "pass-through"
    tenants = f"tenants by {tenant_header}" if tenant_header else "tenants by API key"
    where = store or DEFAULT_PROXY_STORE
    return (
        f"guard: store {where} ({durability}), window {window or 'per model'}, {tenants}, "
        f"compaction {compaction}"
    )
