"""What the local provider remembers per session, bounded in bytes.

A ``cumulative`` usage report needs, per session, the last request of the stream, its reply and the
running total. A client chooses the session names (a header), so the memory is bounded by what the
remembered requests hold, in bytes, least recently used session first out: a client sending many
sessions, or large requests, cannot make it grow past ``max_bytes``. A session pushed out starts a
new stream on its next request (its total restarts), as after a provider's own restart.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from ..content import Message, Request
from ..usage.tracker import Usage

__all__ = ["SESSION_BYTES", "SessionStream", "SessionStreams", "retained_bytes"]

SESSION_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionStream:
    """One session's stream: the last request, its reply, and the usage total so far."""

    request: Request
    reply: Message
    total: Usage | None = None
    """The running total of a ``cumulative`` report; ``None`` when no total is kept."""


def retained_bytes(*values: object) -> int:
    """The bytes ``values`` hold, counting each object once (strings, containers and dataclasses)."""
    seen: set[int] = set()
    stack: list[object] = list(values)
    total = 0
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        total += sys.getsizeof(value)
        if isinstance(value, str | bytes | int | float | bool) or value is None:
            continue
        if isinstance(value, Mapping):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, tuple | list | set | frozenset):
            stack.extend(value)
        elif dataclasses.is_dataclass(value):
            stack.extend(getattr(value, f.name) for f in dataclasses.fields(value))
    return total


class SessionStreams:
    """Session name → :class:`SessionStream`, within ``max_bytes`` (see the module docstring). Thread-safe."""

    def __init__(self, max_bytes: int = SESSION_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[str, tuple[SessionStream, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        """What the remembered streams hold now, in bytes."""

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, session: str) -> SessionStream | None:
        with self._lock:
            found = self._entries.get(session)
            if found is None:
                return None
            self._entries.move_to_end(session)
            return found[0]

    def put(self, session: str, stream: SessionStream) -> None:
        """Remember ``stream`` for ``session``; one larger than the whole bound is not remembered."""
        size = retained_bytes(session, stream)
        with self._lock:
            old = self._entries.pop(session, None)
            if old is not None:
                self.bytes -= old[1]
            if size > self.max_bytes:
                return
            self._entries[session] = (stream, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped
