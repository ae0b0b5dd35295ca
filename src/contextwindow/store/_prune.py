"""Retention: which whole sessions a prune removes, and the size the store is left at.

A prune removes sessions, never entries out of one: a session is an append-only chain, and a chain
cut in the middle would no longer verify. The order is the newest entry's time, oldest first (ties
by id, so a plan is the same every time): ``last_before`` takes every session whose newest entry is
older than that; ``max_bytes`` then takes the next oldest until what the rest hold (their payloads
and the attachments they link, each counted once) is no more than that. The plan is made from one
grouped read; the delete then keeps any session that was appended to since it was read.

A branch reads its prefix from the session it branches from (:mod:`._lineage`), so that session is
**kept while a branch of it remains**: it is taken only once every branch of it is taken, in the
same plan (then after them), and the delete refuses it again if a branch was made since the plan.
Sizes count what each session stores itself: a branch's shared prefix is counted once, in its parent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ..errors import UsageError
from ..limits import shown
from ._backend import Backend
from ._rows import AttachmentRow, SessionRow
from ._values import Pruned, StoreSize

__all__ = ["plan", "prune", "size"]


def size(backend: Backend) -> StoreSize:
    """How much the store holds (``Store.size``)."""
    rows = backend.session_rows()
    attachments = backend.all_attachments()
    return StoreSize(
        sessions=len(rows),
        entries=sum(row.stored for row in rows),
        payload_bytes=sum(row.payload_bytes for row in rows),
        attachments=len(attachments),
        attachment_bytes=sum(row.size_bytes for row in attachments),
        file_bytes=backend.file_bytes(),
    )


def prune(
    backend: Backend, *, last_before: datetime | None, max_bytes: int | None, dry_run: bool, reclaim: bool
) -> Pruned:
    """``Store.prune``: plan from one read, then one delete that keeps sessions appended to since."""
    if last_before is None and max_bytes is None:
        raise UsageError("prune() needs last_before, max_bytes or both")
    if last_before is not None and (not isinstance(last_before, datetime) or last_before.tzinfo is None):
        raise UsageError("last_before must be a timezone-aware datetime")
    if max_bytes is not None and (
        isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0
    ):
        raise UsageError(f"max_bytes must be a whole number of bytes ≥ 0, got {shown(max_bytes)}")
    before = size(backend)
    attachments = backend.all_attachments()
    chosen, freed = plan(
        backend.session_rows(), backend.links(), attachments, last_before=last_before, max_bytes=max_bytes
    )
    if dry_run:
        after = StoreSize(
            sessions=before.sessions - len(chosen),
            entries=before.entries - sum(row.stored for row in chosen),
            payload_bytes=before.payload_bytes - sum(row.payload_bytes for row in chosen),
            attachments=before.attachments - len(freed),
            attachment_bytes=before.attachment_bytes
            - sum(a.size_bytes for a in attachments if a.id in freed),
            file_bytes=None,
        )
        return Pruned(
            tuple(row.session_id for row in chosen), tuple(sorted(freed)), before, after, dry_run=True
        )
    removed, gone = backend.delete_sessions({row.session_id: row.length for row in chosen})
    if removed and reclaim:
        backend.reclaim()
    kept = set(removed)
    ordered = tuple(row.session_id for row in chosen if row.session_id in kept)
    return Pruned(ordered, tuple(gone), before, size(backend))


def plan(
    rows: Sequence[SessionRow],
    links: Iterable[tuple[str, str]],
    attachments: Sequence[AttachmentRow],
    *,
    last_before: datetime | None,
    max_bytes: int | None,
) -> tuple[list[SessionRow], set[str]]:
    """``(sessions to remove, oldest first; attachment ids no remaining session links)``."""
    oldest_first = sorted(rows, key=lambda row: (datetime.fromisoformat(row.last_at), row.session_id))
    sizes = {row.id: row.size_bytes for row in attachments}
    linked: dict[str, set[str]] = {}
    holders: dict[str, int] = {}
    for session_id, attachment_id in set(links):
        linked.setdefault(session_id, set()).add(attachment_id)
        holders[attachment_id] = holders.get(attachment_id, 0) + 1
    held = sum(row.payload_bytes for row in rows) + sum(sizes.get(att, 0) for att in holders)
    branches: dict[str, set[str]] = {}
    for row in rows:
        if row.parent is not None:
            branches.setdefault(row.parent, set()).add(row.session_id)
    chosen: list[SessionRow] = []
    taken: set[str] = set()
    waiting: list[SessionRow] = []
    """Sessions that qualify but are kept for a branch not taken (yet)."""
    freed: set[str] = set()

    def take(row: SessionRow) -> None:
        nonlocal held
        chosen.append(row)
        taken.add(row.session_id)
        held -= row.payload_bytes
        for attachment_id in linked.get(row.session_id, ()):
            holders[attachment_id] -= 1
            if holders[attachment_id] == 0:
                freed.add(attachment_id)
                held -= sizes.get(attachment_id, 0)

    def qualifies(row: SessionRow) -> bool:
        too_old = last_before is not None and datetime.fromisoformat(row.last_at) < last_before
        return too_old or (max_bytes is not None and held > max_bytes)

    for row in oldest_first:
        if not qualifies(row):
            break  # oldest first: no later session is older, and what is held only shrinks
        if branches.get(row.session_id, set()) - taken:
            waiting.append(row)
            continue
        take(row)
        # A parent kept for its branches goes once the last of them went (if it still qualifies).
        while ready := [w for w in waiting if not branches.get(w.session_id, set()) - taken]:
            for parent in ready:
                waiting.remove(parent)
                if qualifies(parent):
                    take(parent)
    return chosen, freed
