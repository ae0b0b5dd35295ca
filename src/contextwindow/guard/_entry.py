"""``contextwindow.guard(client)``: the entry point, cheap to import (the guard loads on first use)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compile import Policy
    from ..engine.settings import EngineSettings
    from ..store import Store

__all__ = ["DEFAULT_STORE", "STORE_ENV", "guard"]

STORE_ENV = "CONTEXTWINDOW_STORE"
"""The environment variable naming the store ``guard(client)`` uses when none is given."""
DEFAULT_STORE = ".contextwindow/guard.sqlite"
"""Where ``guard(client)`` keeps its ledger when no ``store`` is given and ``$CONTEXTWINDOW_STORE``
is unset: a SQLite file under the working directory (``store=":memory:"`` keeps it in memory)."""


def guard(
    client: Any,
    *,
    store: Store | str | Path | None = None,
    session: str | None = None,
    summarizer: Any = None,
    summary_model: str | None = None,
    context_window: int | None = None,
    policy: Policy | None = None,
    settings: EngineSettings | None = None,
    reread: bool = True,
) -> Any:
    """``client`` (``anthropic.Anthropic``/``AsyncAnthropic``, ``openai.OpenAI``/``AsyncOpenAI``)
    guarded: every call that sends a conversation is fitted to the window, and a rejection for size is
    recovered once; everything else is the client's own (:mod:`contextwindow.guard`).

    - ``store``: a :class:`~contextwindow.store.Store`, or what :func:`~contextwindow.store.open_store`
      takes (a path, ``sqlite:///…``, ``postgresql://…``, ``":memory:"``); default
      ``$CONTEXTWINDOW_STORE`` or :data:`DEFAULT_STORE`.
    - ``session``: the session id to keep the conversation under (default: recognised by its first
      message).
    - ``summarizer``: who writes summary checkpoints: ``None`` (this client, the request's model, or
      ``summary_model``), another client of the same kind (sync for a sync client, async for an async
      one), or ``False`` (no summaries: history that does not fit is cut, with a note in its place).
    - ``context_window``: the window to fit when you know it is smaller than the model's profile says
      (without it the guard learns it from the provider's first rejection).
    - ``reread``: offer the model ``read_archived`` when a placeholder in the request names it, and
      answer its calls from the ledger without the agent seeing them (not on streamed calls);
      ``False`` turns it off.
    - ``policy``, ``settings``: the compile :class:`~contextwindow.compile.Policy` and the
      :class:`~contextwindow.engine.EngineSettings`.
    """
    from ._clients import wrap

    return wrap(
        client,
        store=store,
        session=session,
        summarizer=summarizer,
        summary_model=summary_model,
        context_window=context_window,
        policy=policy,
        settings=settings,
        reread=reread,
    )
