"""``verify()``: every invariant of the ledger, checked from the stored rows.

What is checked, per session: positions are dense from 0; each entry's digest chains from the one
before (so an edited, dropped, reordered or half-written entry shows); the session head agrees
with the last entry; every payload reads back at the current format (messages parse, prices fit);
media refer to attachments linked to the session with the hash, type and size of the session's own
view of them; each session's attachment metadata (kept on its link) reads back valid; checkpoint
ranges name earlier messages in order. A branch (:mod:`._lineage`) is checked over what it stores
itself: its parent exists and holds the fork position, its first entry chains from its view's
entry before the fork, each edit (a row below the fork position) from its view's entry before it, and
its checkpoints may name the messages of the prefix. Per attachment: the id derives from the hash, the bytes
exist, hash to it and have the stored size. Bytes are read one attachment at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable

from ..content import attachment_id, media_refs, parse_attachment_ref
from ..errors import InvalidInput, StoreError
from ._backend import Backend
from ._codec import decode_entry, decode_message
from ._rows import GENESIS, AttachmentRow, EntryRow, NewEntry, entry_digest
from ._values import Problem

__all__ = ["verify"]


def verify(backend: Backend) -> list[Problem]:
    """Every broken invariant in the store; empty when it is sound."""
    problems: list[Problem] = []
    attachments = {row.id: row for row in backend.all_attachments()}
    links = set(backend.links())
    heads = backend.heads()
    linked = {session_id for session_id, _ in links}
    forks = backend.forks()
    for session_id in sorted(set(backend.sessions()) | linked):
        view = backend.entries(session_id, None)
        views = {row.id: row for row in backend.attachments(session_id)}
        rows = [row for row in view if row.session_id == session_id]
        start, prefix = 0, GENESIS
        fork = forks.get(session_id)
        edits: list[EntryRow] = []
        if fork is not None:
            edits = [row for row in rows if row.position < fork[1]]
            rows = rows[len(edits) :]
            problems.extend(_edits(session_id, edits, view))
            start, found = fork[1], _fork_point(session_id, fork, view, heads, problems)
            if found is not None:
                prefix = found
            elif rows:  # what the first entry chains from is gone: the rest is checked from it
                start, prefix, rows = start + 1, rows[0].digest, rows[1:]
            else:
                prefix = heads.get(session_id, (0, GENESIS))[1]
        earlier = {row.id: row.position for row in view if row.kind == "message" and row.position < start}
        problems.extend(_chain(session_id, rows, heads.get(session_id), start=start, prev=prefix))
        problems.extend(_payloads(session_id, [*edits, *rows], views, earlier))
        problems.extend(_views(session_id, views.values()))
    for row in attachments.values():
        problems.extend(_attachment(backend, row))
    for blob_id in backend.blob_ids():
        if blob_id not in attachments:
            problems.append(Problem("orphan_blob", "bytes with no attachment row", attachment_id=blob_id))
    for session_id, att in sorted(links):
        if att not in attachments:
            problems.append(
                Problem(
                    "dangling_link",
                    "session linked to a missing attachment",
                    session_id=session_id,
                    attachment_id=att,
                )
            )
    return problems


def _fork_point(
    session_id: str,
    fork: tuple[str, int],
    view: list[EntryRow],
    heads: dict[str, tuple[int, str]],
    problems: list[Problem],
) -> str | None:
    """The digest a branch's first entry chains from: its parent's entry before the fork position
    (``None``, and a problem, when the parent does not hold it)."""
    parent, at = fork
    before = next((row for row in view if row.position == at - 1), None)
    if parent not in heads or heads[parent][0] < at or before is None:
        problems.append(
            Problem(
                "missing_parent",
                f"branches from {parent!r} at {at}, which that session does not hold",
                session_id=session_id,
            )
        )
        return None
    return before.digest


def _edits(session_id: str, edits: list[EntryRow], view: list[EntryRow]) -> list[Problem]:
    """Each edit of a branch (a row below its fork position) chains from the entry before it in the
    branch's view."""
    problems = []
    digests = {row.position: row.digest for row in view}
    for row in edits:
        previous = GENESIS if row.position == 0 else digests.get(row.position - 1)
        entry = NewEntry(row.id, row.kind, row.version, row.payload, row.created_at)
        if previous is None or entry_digest(previous, session_id, row.position, entry) != row.digest:
            problems.append(
                Problem(
                    "digest_mismatch",
                    "the edit or the entry before it was changed",
                    session_id=session_id,
                    position=row.position,
                    entry_id=row.id,
                )
            )
    return problems


def _chain(
    session_id: str,
    rows: list[EntryRow],
    head: tuple[int, str] | None,
    *,
    start: int = 0,
    prev: str = GENESIS,
) -> list[Problem]:
    problems = []
    for index, row in enumerate(rows, start=start):
        if row.position != index:
            problems.append(
                Problem(
                    "position_gap",
                    f"expected position {index}",
                    session_id=session_id,
                    position=row.position,
                    entry_id=row.id,
                )
            )
        entry = NewEntry(row.id, row.kind, row.version, row.payload, row.created_at)
        if entry_digest(prev, session_id, row.position, entry) != row.digest:
            problems.append(
                Problem(
                    "digest_mismatch",
                    "the entry or the one before it was changed",
                    session_id=session_id,
                    position=row.position,
                    entry_id=row.id,
                )
            )
        prev = row.digest
    expected = (start + len(rows), prev)
    if head is None:
        if rows:
            problems.append(Problem("missing_head", "entries without a session head", session_id=session_id))
    elif head != expected:
        problems.append(
            Problem(
                "head_mismatch",
                f"head says {head[0]} entries, found {start + len(rows)}",
                session_id=session_id,
            )
        )
    return problems


def _payloads(
    session_id: str, rows: list[EntryRow], views: dict[str, AttachmentRow], earlier: dict[str, int]
) -> list[Problem]:
    """Each payload readable; media refer to this session's own view of an attachment; checkpoints
    name earlier messages (``earlier``: those of a branch's prefix)."""
    problems = []
    messages: dict[str, int] = dict(earlier)
    for row in rows:

        def problem(code: str, detail: str, row: EntryRow = row) -> Problem:
            return Problem(code, detail, session_id=session_id, position=row.position, entry_id=row.id)

        try:
            entry = decode_entry(row)
            if row.kind == "message":
                stored = decode_message(row)
                messages[row.id] = row.position
                for ref in media_refs(stored.message.content):
                    stored_ref = views.get(ref.id)
                    if stored_ref is None:
                        problems.append(problem("unlinked_attachment", f"media refer to {ref.id}"))
                    elif (stored_ref.sha256, stored_ref.media_type, stored_ref.size_bytes) != (
                        ref.sha256,
                        ref.media_type,
                        ref.size_bytes,
                    ):
                        problems.append(problem("attachment_mismatch", f"media disagree with {ref.id}"))
            elif row.kind == "checkpoint":
                first = messages.get(str(entry.payload.get("first_id")))
                last = messages.get(str(entry.payload.get("last_id")))
                if first is None or last is None or first > last:
                    problems.append(problem("bad_checkpoint_range", "range is not earlier messages in order"))
        except StoreError as exc:
            problems.append(problem("unreadable_entry", str(exc)))
    return problems


def _views(session_id: str, views: Iterable[AttachmentRow]) -> list[Problem]:
    """Each session's metadata of its attachments reads back as a valid reference and JSON meta."""
    problems = []
    for row in views:
        try:
            fields = dataclasses.asdict(row)
            del fields["meta"], fields["created_at"]
            parse_attachment_ref(fields, path="")
            if not isinstance(json.loads(row.meta), dict):
                raise ValueError("meta is not a JSON object")
        except (InvalidInput, ValueError, TypeError) as exc:
            problems.append(
                Problem(
                    "bad_attachment_meta",
                    f"this session's metadata does not read back: {exc}",
                    session_id=session_id,
                    attachment_id=row.id,
                )
            )
    return problems


def _attachment(backend: Backend, row: AttachmentRow) -> list[Problem]:
    problems = []
    if attachment_id(row.sha256) != row.id:
        problems.append(
            Problem("attachment_id_mismatch", "id does not derive from sha256", attachment_id=row.id)
        )
    data = backend.blob(row.id)
    if data is None:
        problems.append(Problem("missing_blob", "no bytes stored", attachment_id=row.id))
        return problems
    if hashlib.sha256(data).hexdigest() != row.sha256:
        problems.append(Problem("blob_hash_mismatch", "bytes do not hash to sha256", attachment_id=row.id))
    if len(data) != row.size_bytes:
        problems.append(
            Problem(
                "size_mismatch", f"{len(data)} bytes stored, {row.size_bytes} recorded", attachment_id=row.id
            )
        )
    return problems
