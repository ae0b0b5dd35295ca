"""The request guard: keep an agent that sends its whole history inside its model's window.

``contextwindow.guard(client)`` wraps an official ``anthropic`` or ``openai`` client (sync or async)
so that an existing agent loop changes one line; :class:`GuardCore` is the sans-IO core under it,
for hosts that make their own calls (framework adapters, the proxy).
"""

from __future__ import annotations

from ._clients import DEFAULT_STORE, STORE_ENV, GuardedAnthropic, GuardedOpenAI, guard, resolve_store
from ._core import Exchange, GuardCore
from ._steps import Reply, Send, run_async, run_sync

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "Exchange",
    "GuardCore",
    "GuardedAnthropic",
    "GuardedOpenAI",
    "Reply",
    "Send",
    "guard",
    "resolve_store",
    "run_async",
    "run_sync",
]
