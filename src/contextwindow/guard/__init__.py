"""The request guard: keep an agent that sends its whole history inside its model's window.

:func:`guard` wraps an official ``anthropic`` or ``openai`` client (sync or async) so that an
existing agent loop changes one line (:mod:`._clients`); :class:`GuardCore` is the sans-IO core under
it (:mod:`._core`), stepped by :func:`run_sync` or :func:`run_async`, for hosts that make their own
calls (framework adapters, the proxy). :class:`GuardOptions` configures all of them; :mod:`.replies`
reads the SDKs' responses and streams as a :class:`Reply`. Importing this package is cheap: the rest
loads on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._entry import guard, last_exchange, store_of
from ._options import DEFAULT_STORE, STORE_ENV, GuardOptions, resolve_store

if TYPE_CHECKING:
    from ._clients import GuardedAnthropic, GuardedOpenAI
    from ._core import Exchange, GuardCore
    from ._steps import Reply, Send, run_async, run_sync

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "Exchange",
    "GuardCore",
    "GuardOptions",
    "GuardedAnthropic",
    "GuardedOpenAI",
    "Reply",
    "Send",
    "guard",
    "last_exchange",
    "resolve_store",
    "run_async",
    "run_sync",
    "store_of",
]

_LAZY = {
    "GuardedAnthropic": "contextwindow.guard._clients",
    "GuardedOpenAI": "contextwindow.guard._clients",
    "Exchange": "contextwindow.guard._core",
    "GuardCore": "contextwindow.guard._core",
    "Reply": "contextwindow.guard._steps",
    "Send": "contextwindow.guard._steps",
    "run_async": "contextwindow.guard._steps",
    "run_sync": "contextwindow.guard._steps",
}


def __getattr__(name: str) -> Any:
    """Load the guard's modules the first time one of their names is asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
