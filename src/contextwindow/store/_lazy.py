"""``MessageLog``: a session's message rows, validated one at a time when first read.

A cold compile of a long session sends only its newest messages (about 1,500 of 10,000 in the
benchmark): it needs the ids of every message (omitted ids, checkpoint and watermark lookups) but the
content of the ones it walks. Validating all of them up front was most of a cold compile, so the log
keeps the fetched rows and validates a row — through the same :func:`~._codec.decode_message` as
:meth:`Session.messages` — the first time its message is read. Nothing unvalidated ever leaves the
log: ids come from the ledger's own id column, messages only through the read boundary. A corrupt row
raises :class:`~contextwindow.errors.StoreError` when it is read, not before.

Decoded values are kept: the ledger is append-only, so a decoded message never goes stale. The logs
of one :class:`~contextwindow.store.Session` handle share what they validated, and what the handle
appended (:class:`Validated`): a message compile read, or the handle just wrote, is not decoded again
by the fold's own log, nor by the next compile.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import overload

from ..errors import UsageError
from ._codec import decode_message
from ._rows import EntryRow
from ._values import StoredMessage

__all__ = ["MessageLog", "Validated"]


class Validated:
    """The last ``capacity`` messages validated through one session handle, by entry id: those it
    appended, as it appended them, and those its logs decoded. Each is what a decode of its row gives,
    key order included (a message's payload keeps the writer's, :mod:`._codec`). A log takes one only
    at the row's own position."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._by_id: OrderedDict[str, StoredMessage] = OrderedDict()

    def get(self, row: EntryRow) -> StoredMessage | None:
        hit = self._by_id.get(row.id)
        return hit if hit is not None and hit.position == row.position else None

    def keep(self, messages: Iterable[StoredMessage]) -> None:
        by_id = self._by_id
        for message in messages:
            by_id[message.id] = message
        while len(by_id) > self.capacity:
            try:
                by_id.popitem(last=False)
            except KeyError:  # emptied meanwhile by another thread's trim
                break


class MessageLog(Sequence[StoredMessage]):
    """The messages of a session in order, as a sequence that validates each row on first access.

    ``extend`` appends rows read later (an incremental read with ``after=``); ``id_at``
    and ``index_of`` answer from the ledger's columns without decoding anything.
    Not thread-safe: one per reader, like a ``SessionCompiler``.
    """

    def __init__(self, rows: Sequence[EntryRow] = (), *, known: Validated | None = None) -> None:
        self._rows: list[EntryRow] = []
        self._ids: list[str] = []
        self._decoded: list[StoredMessage | None] = []
        self._index: dict[str, int] = {}
        self._known = known
        """What this log shares with the other readers of its session handle (``None``: nothing)."""
        self.extend(rows)

    def extend(self, rows: Sequence[EntryRow]) -> None:
        """Add rows that follow the last one (as a ``messages(after=...)`` read returns them)."""
        base = len(self._rows)
        known = self._known
        for offset, row in enumerate(rows):
            if row.kind != "message":
                raise UsageError(f"entry {row.id} is a {row.kind}, not a message")
            if self._rows and row.position <= self._rows[-1].position:
                raise UsageError(f"entry {row.id} at position {row.position} is not after the last one")
            self._rows.append(row)
            self._ids.append(row.id)
            self._index.setdefault(row.id, base + offset)
            self._decoded.append(known.get(row) if known is not None else None)

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> StoredMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[StoredMessage]: ...

    def __getitem__(self, index: int | slice) -> StoredMessage | list[StoredMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._rows)))]
        hit = self._decoded[index]
        if hit is None:
            hit = decode_message(self._rows[index])
            self._decoded[index] = hit
            if self._known is not None:
                self._known.keep((hit,))
        return hit

    def id_at(self, index: int) -> str:
        """The entry id of the message at ``index``, without decoding it."""
        return self._rows[index].id

    def ids(self, start: int = 0, stop: int | None = None) -> list[str]:
        """The entry ids of the messages ``start:stop``, without decoding them (one slice)."""
        return self._ids[start:stop]

    def index_of(self, entry_id: str) -> int | None:
        """Where the message with this entry id is in the log, or ``None``."""
        return self._index.get(entry_id)

    @property
    def last_position(self) -> int | None:
        """The ledger position of the newest message read, or ``None`` when the log is empty."""
        return self._rows[-1].position if self._rows else None

    @property
    def decoded(self) -> int:
        """How many rows have been validated so far (for tests and benchmarks)."""
        return sum(1 for d in self._decoded if d is not None)
