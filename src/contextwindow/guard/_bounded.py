"""The guard's conversations in memory, least recently used first, bounded in bytes.

What a guard core holds of a conversation (its chain, its engine, compile's memo, the wire memo) is
a cache of the ledger: :class:`Bound` weighs each conversation by what it was sent and, past its
capacity, forgets the least recently used ones, which the next request that continues one reads back
from the ledger as a new process would. It is the rule of the proxy's own LRU
(:mod:`contextwindow.server.conversations`, ``--cache-mb``): an estimated weight per conversation,
:data:`BYTES_PER_BYTE` times what its messages hold, the least recently used dropped first and never
the one in use.

A :class:`Bound` holds no callback: :meth:`Bound.grew` returns the keys it let go and its owner drops
them. A bound method of the owner kept here would make owner and bound a reference cycle, and then
nothing a dropped owner held (a whole guard core's conversations, when the proxy evicts it) would be
freed until the collector's next full pass, which a serving process runs rarely
(:func:`contextwindow.server.runner.tune_gc`): the proxy's memory grew with every conversation it
evicted instead of staying at its ``--cache-mb``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

from ..content import Message, Text, ToolResult, ToolUse

__all__ = ["BYTES_PER_BYTE", "DEFAULT_CACHE_MB", "Bound", "message_bytes"]

DEFAULT_CACHE_MB = 256.0
"""The default bound of a guard core's conversations in memory (``GuardOptions.cache_mb``)."""
BYTES_PER_BYTE = 12
"""Bytes a conversation holds in memory per byte of its messages' text (the chain, the canonical
messages, compile's bases and renders, the wire memo); measured with ``benchmarks/guard_cost.py``'s
RSS rows, as the proxy's ``BYTES_PER_BODY_BYTE`` was."""
MIN_WEIGHT = 16 * 1024
"""A conversation's own weight before any history (its engine, its dictionaries)."""

K = TypeVar("K")


def message_bytes(message: Message) -> int:
    """A cheap size of ``message``: its text, tool inputs and results, and a fixed share per block."""
    size = 64
    for block in message.content:
        if isinstance(block, Text):
            size += len(block.text)
        elif isinstance(block, ToolResult):
            content = block.content
            size += 64 + (
                len(content)
                if isinstance(content, str)
                else sum(len(b.text) if isinstance(b, Text) else 256 for b in content)
            )
        elif isinstance(block, ToolUse):
            size += 64 + len(str(block.input))
        else:
            size += 256
    return size


class Bound(Generic[K]):
    """Keys least recently used first, each with a weight; past ``capacity`` bytes (``None``: no
    bound) the oldest are let go, never the one just used."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self._weights: OrderedDict[K, int] = OrderedDict()
        self.bytes = 0
        """The weight of every key held."""
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._weights)

    def grew(self, key: K, messages: Iterable[Message]) -> list[K]:
        """``key`` was used, and holds ``messages`` more: the oldest others go while over capacity,
        and are returned, oldest first, for the owner to forget."""
        old = self._weights.pop(key, None)
        weight = (MIN_WEIGHT if old is None else old) + BYTES_PER_BYTE * sum(
            message_bytes(m) for m in messages
        )
        self._weights[key] = weight
        self.bytes += weight - (old or 0)
        return self._shrink(key)

    def drop(self, key: K) -> None:
        """Forget ``key``'s weight (it left memory some other way)."""
        weight = self._weights.pop(key, None)
        if weight is not None:
            self.bytes -= weight

    def _shrink(self, keep: K) -> list[K]:
        gone: list[K] = []
        if self.capacity is None:
            return gone
        while self.bytes > self.capacity and len(self._weights) > 1:
            oldest = next(iter(self._weights))
            if oldest == keep:
                break
            self.bytes -= self._weights.pop(oldest)
            self.evicted += 1
            gone.append(oldest)
        return gone
