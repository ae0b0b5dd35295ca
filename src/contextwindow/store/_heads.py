"""The heads a batch has appended to: an append to the same session later in the batch reads none.

A session's head row (its length and newest digest) is read, under the session's lock, by every
append. Within a batch the transaction holds that lock until it ends (SQLite's write lock,
PostgreSQL's row lock), so no other writer can move the head meanwhile, and what an append in the
batch left it at is what the next one would read: a guarded call records its reply as five appends
to one session in one batch, and each read the head row (and inserted-or-ignored the session row)
again. The heads are known only inside a batch, and forgotten whenever they may be wrong: by any
write other than an append, and by any write or nested batch that fails (its savepoint undone, what
it appended is gone).
"""

from __future__ import annotations

__all__ = ["BatchHeads"]


class BatchHeads:
    """A SQL backend's heads known within its current batch (see the module docstring)."""

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, tuple[int, str]] | None = None
        """``None`` outside a batch."""

    @property
    def open(self) -> bool:
        """Whether a batch is open (the outermost one began and has not ended)."""
        return self._known is not None

    def begin(self) -> None:
        """The outermost batch begins: nothing is known yet."""
        self._known = {}

    def end(self) -> None:
        """The outermost batch ended (committed or not): nothing is known any more."""
        self._known = None

    def take(self, session_id: str) -> tuple[int, str] | None:
        """The head ``(length, digest)`` an append in this batch left ``session_id`` at, or ``None``
        (then read it). Taken out: an append that fails leaves it unknown."""
        return self._known.pop(session_id, None) if self._known is not None else None

    def keep(self, session_id: str, length: int, head: str) -> None:
        """An append in this batch left ``session_id`` at ``(length, head)``."""
        if self._known is not None:
            self._known[session_id] = (length, head)

    def forget(self) -> None:
        """A write that may move a head, or one undone: nothing is known until appended again."""
        if self._known is not None:
            self._known.clear()
