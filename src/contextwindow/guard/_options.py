"""The guard's options, one frozen value shared by ``guard(client)``, the adapters and the proxy.

Cheap to import (``import contextwindow`` loads it): the types it names are imported for type
checkers only, and :func:`resolve_store` loads the store when it is called.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compaction import CompactionMode
    from ..compile import Policy
    from ..engine.observe import EventHook
    from ..engine.settings import EngineSettings
    from ..store import Store

__all__ = ["DEFAULT_STORE", "GUARD_DURABILITY", "STORE_ENV", "GuardOptions", "resolve_store"]

STORE_ENV = "CONTEXTWINDOW_STORE"
"""The environment variable naming the store ``guard(client)`` uses when none is given."""
DEFAULT_STORE = ".contextwindow/guard.sqlite"
"""Where ``guard(client)`` keeps its ledger when no ``store`` is given and ``$CONTEXTWINDOW_STORE``
is unset: a SQLite file under the working directory (``store=":memory:"`` keeps it in memory)."""
GUARD_DURABILITY = "normal"
"""How a ledger the guard opens itself commits (:func:`~contextwindow.store.open_store`'s
``durability``): without waiting for the disk. An acknowledged call survives the process's own crash;
an OS crash or power loss may drop the last few commits, and those are recovered from the next
request, because the agent resends its history (what is appended again is what was lost; a lost
summary is made again), as the proxy's ledger is (``contextwindow proxy --durability``). With
``"full"``, each of a call's commits waits for an fsync."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardOptions:
    """How a guard fits requests: what ``guard(client, **options)`` takes, and what the adapters and
    the proxy build. Every field has a default, so ``GuardOptions()`` is the guard as it comes."""

    store: Store | str | Path | None = None
    """A :class:`~contextwindow.store.Store`, or what :func:`~contextwindow.store.open_store` takes
    (a path, ``sqlite:///…``, ``postgresql://…``, ``":memory:"``); ``None``: ``$CONTEXTWINDOW_STORE``
    or :data:`DEFAULT_STORE` (:func:`resolve_store`)."""
    session: str | None = None
    """The session id to keep the conversation under; ``None``: recognised by its first message."""
    summarizer: Any = None
    """Who writes summary checkpoints: ``None`` (the guarded client or model itself, with
    :attr:`summary_model` if given), another client or model of the host's kind (``guard(client)``:
    sync for a sync client, async for an async one), or ``False`` (no summaries: history that does
    not fit is cut, with a note in its place)."""
    summary_model: str | None = None
    """The model that writes summaries; ``None``: the request's own model."""
    context_window: int | None = None
    """The window to fit when it is smaller than the model's profile says; ``None``: the profile's,
    then what the provider's first rejection teaches."""
    policy: Policy | None = None
    """The compile :class:`~contextwindow.compile.Policy`; ``None``: the default one."""
    settings: EngineSettings | None = None
    """The :class:`~contextwindow.engine.EngineSettings`; ``None``: the defaults."""
    reread: bool = True
    """Offer the model ``read_archived`` when a placeholder in the request names it, and answer its
    calls from the ledger without the agent seeing them (not on streamed calls)."""
    compaction: CompactionMode = "local"
    """Who makes a long conversation fit (:mod:`contextwindow.compaction`): ``"local"`` (the engine
    folds), ``"provider"`` (the provider's own context editing, sent with the agent's request, when
    what it leaves fits; else local folding) or ``"auto"`` (whichever costs less in dollars)."""

    on_event: EventHook | None = None
    """Called with every event the guard's engines produce, as they are produced (folds, evictions,
    requests sent, usage with its cost, windows learned, ``max_tokens`` lowered;
    :mod:`~contextwindow.engine.observe`); what it raises reaches the agent's call."""

    cache_mb: float | None = 256.0
    """The megabytes of conversation state a guard keeps in memory (an estimate: the proxy's
    ``--cache-mb`` rule); past it the least recently used conversations are forgotten, and read back
    from the ledger when a request continues one. ``None``: no bound."""

    def __post_init__(self) -> None:
        if self.compaction not in ("local", "provider", "auto"):
            from ..errors import InvalidInput

            raise InvalidInput("must be local, provider or auto", path="compaction")

    @property
    def summarize(self) -> bool:
        """Whether history that does not fit is summarised (else it is cut, with a note)."""
        return self.summarizer is not False


def resolve_store(store: Store | str | Path | None) -> Store:
    """The guard's ledger: ``store`` itself, what :func:`~contextwindow.store.open_store` opens from it,
    or (``None``) ``$CONTEXTWINDOW_STORE`` else :data:`DEFAULT_STORE`, its directory created.

    A store the guard opens itself commits at :data:`GUARD_DURABILITY`; a ``Store`` given is used as
    it was opened (``open_store(path, durability="full")`` for every commit to wait for the disk)."""
    from ..store import Store, in_memory, open_store

    if isinstance(store, Store):
        return store
    if store is None:
        store = os.environ.get(STORE_ENV) or DEFAULT_STORE
    if in_memory(str(store)):
        return open_store(store)
    if isinstance(store, str | Path) and "://" not in str(store):
        Path(store).parent.mkdir(parents=True, exist_ok=True)
    return open_store(store, durability=GUARD_DURABILITY)
