"""Branches: a session that starts as a prefix of another one and goes on with entries of its own.

A branch is stored as its parent, the fork position (how many of the parent's entries it shares) and
its own entries, which take the positions from the fork position on and chain their digests from the
parent's entry before it. Nothing of the prefix is copied: storage grows with what the branch adds,
never with the history it shares. A parent may itself be a branch, so a session's entries are read
from its **lineage**: the session's own rows, then each ancestor's rows below the smallest fork
position met on the way up. Every read of a session (its entries, newest of a kind, ids, attachment
links) goes through the lineage, so a branch reads as the whole conversation it is.

A branch may also store **edits**: rows below its fork position, each standing in for the entry of
the same kind its prefix holds there (an agent that cleared an old tool result, or removed a thinking
block, sends its history back with a few messages replaced). Everything around an edit is still read
from the ancestors, so such a branch costs its edits and what it adds, never a copy of what follows
the first one. An edit's digest chains from the entry before it in the branch's view; the branch's
head digest is its view's entry before the fork position. Edits are written with the fork, in its
transaction, and never after.

A fork position never changes once written, and an ancestor's rows below it never change either (the
ledger is append-only), so a branch's view of its prefix is fixed when it is made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput, StoreError
from ._rows import GENESIS, EntryRow, NewEntry, entry_digest

__all__ = [
    "INLINE_PIECES",
    "Piece",
    "Segment",
    "alive",
    "branches_first",
    "chain_edits",
    "check_fork",
    "compose",
    "lineage",
    "live",
    "pieces_sql",
    "where",
]


@dataclass(frozen=True, slots=True)
class Segment:
    """The rows one session of a lineage contributes: its own, at positions below ``below``
    (``None``: all of them; the session being read)."""

    session_id: str
    below: int | None


def lineage(session_id: str, forks: Mapping[str, tuple[str, int]]) -> list[Segment]:
    """The segments of ``session_id``, itself first, from ``forks`` (``{branch: (parent, at)}``).

    A fork cycle cannot be written (a branch is made before anything can branch from it); one read
    from a damaged store stops where it would repeat."""
    out = [Segment(session_id, None)]
    seen = {session_id}
    bound: int | None = None
    current = session_id
    while (fork := forks.get(current)) is not None:
        parent, at = fork
        bound = at if bound is None else min(bound, at)
        if parent in seen:
            break
        seen.add(parent)
        out.append(Segment(parent, bound))
        current = parent
    return out


def alive(segments: Sequence[Segment], after: int | None) -> list[Segment]:
    """The segments that hold a position after ``after`` (all of them when ``after`` is ``None``):
    an incremental read past the fork position reads the branch's own rows only."""
    if after is None:
        return list(segments)
    return [s for s in segments if s.below is None or s.below > after + 1]


def where(segments: Sequence[Segment]) -> tuple[str, list[Any]]:
    """The SQL condition on ``entries`` (``?`` placeholders) that selects the rows of ``segments``,
    and its parameters."""
    parts: list[str] = []
    params: list[Any] = []
    for segment in segments:
        if segment.below is None:
            parts.append("session_id = ?")
            params.append(segment.session_id)
        else:
            parts.append("(session_id = ? AND position < ?)")
            params.extend((segment.session_id, segment.below))
    return "(" + " OR ".join(parts) + ")", params


@dataclass(frozen=True, slots=True)
class Piece:
    """Positions ``lo`` to ``hi`` (exclusive; ``None``: no end) of a view, read from one session."""

    session_id: str
    lo: int
    hi: int | None


def compose(
    segments: Sequence[Segment], forks: Mapping[str, tuple[str, int]], edits: Mapping[str, Sequence[int]]
) -> list[Piece]:
    """A lineage as pieces: each segment's rows from its own fork position up to its bound, and its
    edits below its fork position (``edits``: positions per session), each position read from the
    nearest session that holds it."""
    pieces: list[Piece] = []
    taken: set[int] = set()
    for segment in segments:
        sid, hi = segment.session_id, segment.below
        lo = forks[sid][1] if sid in forks else 0
        start = lo
        for cut in sorted(p for p in taken if p >= lo and (hi is None or p < hi)):
            if cut > start:
                pieces.append(Piece(sid, start, cut))
            start = cut + 1
        if hi is None or start < hi:
            pieces.append(Piece(sid, start, hi))
        for position in sorted(set(edits.get(sid, ()))):
            if position < lo and (hi is None or position < hi) and position not in taken:
                pieces.append(Piece(sid, position, position + 1))
                taken.add(position)
    return sorted(pieces, key=lambda piece: piece.lo)


def live(pieces: Sequence[Piece], after: int | None) -> list[Piece]:
    """The pieces that hold a position after ``after`` (all of them when ``after`` is ``None``)."""
    if after is None:
        return list(pieces)
    return [p for p in pieces if p.hi is None or p.hi > after + 1]


INLINE_PIECES = 32
"""Up to this many pieces a read names them in its condition; beyond, it joins a ``VALUES`` list
(SQLite refuses an expression tree deeper than 1,000)."""
_NO_END = 2**62


def pieces_sql(pieces: Sequence[Piece], after: int | None = None) -> tuple[str, str, list[Any]]:
    """``(join, condition, parameters)`` selecting the rows of ``pieces`` after position ``after``
    (``None``: all) from ``entries`` (``?`` placeholders; the join's parameters come first). Each
    piece has one lower bound on its position: SQLite takes one of two for the index's range and scans
    the rest, so ``position >= 0 AND position > n`` would read the whole session."""
    start = 0 if after is None else after + 1
    bounds = [(p.session_id, max(p.lo, start), p.hi) for p in pieces if p.hi is None or p.hi > start]
    if len(bounds) > INLINE_PIECES:
        rows = ", ".join("(?, ?, ?)" for _ in bounds)
        params: list[Any] = []
        for sid, lo, hi in bounds:
            params.extend((sid, lo, _NO_END if hi is None else hi))
        join = (
            f" JOIN (VALUES {rows}) v ON session_id = v.column1 AND position >= v.column2 "
            "AND position < v.column3"
        )
        return join, "1 = 1", params
    parts: list[str] = []
    params = []
    for sid, lo, hi in bounds:
        if lo == 0 and hi is None:
            parts.append("session_id = ?")
            params.append(sid)
        elif hi is None:
            parts.append("(session_id = ? AND position >= ?)")
            params.extend((sid, lo))
        else:
            parts.append("(session_id = ? AND position >= ? AND position < ?)")
            params.extend((sid, lo, hi))
    return "", ("(" + " OR ".join(parts) + ")") if parts else "1 = 0", params


def check_fork(at: int, length: int, edits: Sequence[tuple[int, NewEntry]]) -> None:
    """``InvalidInput`` unless ``0 < at <= length`` (the parent's) and every edit is at its own
    position of the prefix."""
    if not 0 < at <= length:
        raise InvalidInput(f"must be 1 to the parent's length {length}, got {at}", path="at")
    seen: set[int] = set()
    for position, _ in edits:
        if isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < at:
            raise InvalidInput(f"an edit must be at a position below {at}, got {position!r}", path="edits")
        if position in seen:
            raise InvalidInput(f"two edits at position {position}", path="edits")
        seen.add(position)


def chain_edits(
    branch: str,
    parent: str,
    at: int,
    view: Mapping[int, tuple[str, str]],
    edits: Sequence[tuple[int, NewEntry]],
) -> tuple[str, list[EntryRow]]:
    """The head digest of ``branch`` forked from ``parent`` at ``at`` and its edit rows, each chained
    from the entry before it in the branch's view. ``view``: ``{position: (kind, digest)}`` of the
    parent's view at least at ``at - 1``, at each edit's position and the one before it."""
    digests = {position: digest for position, (_, digest) in view.items()}
    rows: list[EntryRow] = []
    for position, entry in sorted(edits, key=lambda edit: edit[0]):
        held = view.get(position)
        previous = GENESIS if position == 0 else digests.get(position - 1)
        if held is None or previous is None:
            raise StoreError(f"session {parent!r} has no entry at position {position} (run verify)")
        if held[0] != entry.kind:
            raise InvalidInput(
                f"an edit stands in for an entry of its own kind: position {position} holds a {held[0]}, "
                f"not a {entry.kind}",
                path="edits",
            )
        digest = entry_digest(previous, branch, position, entry)
        digests[position] = digest
        rows.append(
            EntryRow(
                branch, position, entry.id, entry.kind, entry.version, entry.payload, entry.created_at, digest
            )
        )
    head = digests.get(at - 1)
    if head is None:
        raise StoreError(f"session {parent!r} has no entry at position {at - 1} (run verify)")
    return head, rows


def branches_first(lengths: dict[str, int], forks: dict[str, tuple[str, int]]) -> list[str]:
    """The sessions of ``lengths`` with every branch before the session it branches from (deepest
    first, then by id): a parent removed in the same delete as its branches goes after them."""

    def depth(session_id: str) -> int:
        return len(lineage(session_id, forks))

    return sorted(lengths, key=lambda sid: (-depth(sid), sid))
