"""``contextwindow.guard(client)``: the entry point, cheap to import (the guard loads on first use)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

from ._options import GuardOptions

if TYPE_CHECKING:
    from ..store import Store
    from ._clients import _Guarded
    from ._core import Exchange

__all__ = ["guard", "last_exchange", "store_of"]

ClientT = TypeVar("ClientT")
"""The guarded client's own type: ``guard(anthropic.Anthropic())`` is typed ``anthropic.Anthropic``."""


def guard(client: ClientT, options: GuardOptions | None = None, /, **fields: Any) -> ClientT:
    """``client`` (``anthropic.Anthropic``/``AsyncAnthropic``, ``openai.OpenAI``/``AsyncOpenAI``)
    guarded: every call that sends a conversation is fitted to the window, and a rejection for size is
    recovered once; everything else is the client's own (:mod:`contextwindow.guard`). A type checker
    sees the client's own type, so the SDK's methods and responses keep their types; the guard's
    ``last_exchange`` and ``store`` are :func:`last_exchange` and :func:`store_of` to it.

    The options are a :class:`GuardOptions` or its fields as keywords (``store``, ``session``,
    ``summarizer``, ``summary_model``, ``context_window``, ``policy``, ``settings``, ``reread``,
    ``compaction``, ``on_event``);
    keywords given with ``options`` replace those fields of it. An unknown keyword raises
    ``TypeError``.
    """
    from ._clients import wrap

    if options is None:
        options = GuardOptions(**fields)
    elif fields:
        options = dataclasses.replace(options, **fields)
    wrapped: ClientT = wrap(client, options)
    return wrapped


def last_exchange(client: object) -> Exchange | None:
    """A guarded client's ``last_exchange``, typed: the latest call this thread or asyncio task made
    through it. Raises ``TypeError`` for a client :func:`guard` did not return."""
    return _guarded(client).last_exchange


def store_of(client: object) -> Store:
    """A guarded client's ``store``, typed: the ledger it keeps its sessions in."""
    return _guarded(client).store


def _guarded(client: object) -> _Guarded:
    from ._clients import _Guarded

    if not isinstance(client, _Guarded):
        raise TypeError(f"not a client contextwindow.guard() returned: {type(client).__name__}")
    return client
