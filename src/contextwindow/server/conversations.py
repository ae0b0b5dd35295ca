"""The proxy's conversations in memory: one guard core and one lock each, an LRU bounded in bytes.

A request is routed to its conversation before the guard reads it, by a key made of what only that
conversation has in common with its own later requests: the tenant, the API format, and the
``x-contextwindow-session`` name or else a digest of the history's first item after its system
items (an agent's history only grows, so that item stays the same). Conversations with different
keys share nothing in memory: each has its own :class:`~contextwindow.guard.GuardCore` and its own
lock, so one conversation's upstream call never waits for another's. Two requests whose keys differ
yet that the guard takes for one conversation (the same first message written two ways) are two
cores on one ledger, kept consistent as two workers are.

What the cores hold is a cache of the ledger: :class:`Conversations` keeps them least recently used
first and drops the oldest idle ones while their weight passes ``capacity`` bytes. A dropped
conversation's next request makes a new core, which reads the session back from the ledger as a
new worker would. A core's weight is an estimate, :data:`BYTES_PER_BODY_BYTE` times the size of its
latest request body: what a core keeps grows with the history it was sent (its copy of the history
read, the canonical messages, the engine's view of the session).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..guard import GuardCore

__all__ = ["BYTES_PER_BODY_BYTE", "DEFAULT_CACHE_MB", "Conversation", "Conversations", "route"]

DEFAULT_CACHE_MB = 512
"""The default bound of the conversations held in memory (``--cache-mb``)."""
BYTES_PER_BODY_BYTE = 6
"""Bytes a core holds per byte of its latest request body: measured with ``tracemalloc`` on an
agent resending its whole history over a SQLite ledger, 3.6 (3 turns of 20 KB) to 6.6 (20 turns of
2 KB), the more so the more messages the history holds."""
_MIN_WEIGHT = 72 * 1024
"""A core's own weight before any history (its engine, its dictionaries, its first messages read and
compiled): measured with ``tracemalloc`` over 200 conversations of three calls and a few short
messages held by the proxy (``benchmarks/proxy.py``'s RSS loop, in process), 73 KiB each; the
proxy's RSS grew by about 90 KiB each (1,000 held: 101 → 190 MiB)."""

_SYSTEM_ROLES = ("system", "developer")


def route(fmt: str, body: Mapping[str, Any], session: str | None) -> str:
    """The conversation key of a request within its tenant (see the module docstring)."""
    if session is not None:
        return f"{fmt}:name:{session}"
    history = body.get("input" if fmt == "openai-responses" else "messages")
    first: Any = history
    if isinstance(history, list):
        first = next((item for item in history if not _is_system(item)), None)
    digest = hashlib.sha256(
        json.dumps(first, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode()
    ).hexdigest()
    return f"{fmt}:first:{digest[:32]}"


def _is_system(item: Any) -> bool:
    return (
        isinstance(item, dict)
        and item.get("role") in _SYSTEM_ROLES
        and item.get("type", "message") == "message"
    )


@dataclass(eq=False, slots=True)
class Conversation:
    """One conversation in memory: its core, the lock its requests take one at a time, its weight."""

    core: GuardCore
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    weight: int = _MIN_WEIGHT
    users: int = 0
    """Requests holding or waiting for the conversation: it is not dropped while any does."""


class Conversations:
    """Conversations by (tenant, key), least recently used first, bounded by ``capacity`` bytes of
    estimated weight (see the module docstring). Used from the event loop only."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held: OrderedDict[tuple[str, str], Conversation] = OrderedDict()
        self.bytes = 0
        """The weight of every conversation held."""
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._held)

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._held

    def take(self, key: tuple[str, str], make: Callable[[], GuardCore]) -> Conversation:
        """The conversation of ``key`` (tenant, conversation key), with a core from ``make`` when
        none is held, marked in use until :meth:`give_back`."""
        found = self._held.get(key)
        if found is None:
            found = self._held[key] = Conversation(make())
            self.bytes += found.weight
        else:
            self._held.move_to_end(key)
        found.users += 1
        return found

    def give_back(self, conversation: Conversation, *, body_bytes: int | None = None) -> None:
        """A request is done with ``conversation``; ``body_bytes``: the size of the body it sent."""
        conversation.users -= 1
        if body_bytes is not None:
            # Held: a conversation in use is never dropped.
            weight = max(_MIN_WEIGHT, BYTES_PER_BODY_BYTE * body_bytes)
            self.bytes += weight - conversation.weight
            conversation.weight = weight
        self._shrink()

    def _shrink(self) -> None:
        if self.bytes <= self.capacity:
            return
        for key in list(self._held):
            if self.bytes <= self.capacity:
                return
            held = self._held[key]
            if held.users:
                continue  # in use: dropped once its requests are done
            del self._held[key]
            self.bytes -= held.weight
            self.evicted += 1
