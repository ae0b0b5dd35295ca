"""``Store`` and ``Session``: the ledger's contract, the same over every backend.

A session is an append-only, totally ordered list of entries (messages, usage records, anchors,
calibration records, compaction checkpoints, eviction and archive records, notes) plus the
attachments it may read. Everything is checked before anything is written: a call that raises left
the store exactly as it was. Reads validate what they return (the ledger's read boundary), so a
corrupt row is a :class:`~contextwindow.errors.StoreError`, never a half-valid value.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import Any, Self

from ..attachments import make_ref, normal_media_type
from ..content import (
    AttachmentRef,
    Message,
    ToolUse,
    media_refs,
    message_as_data,
    parse_message,
)
from ..errors import InvalidInput, StoreError, UsageError
from ..limits import shown
from . import _prune
from ._backend import Backend
from ._budgets import Budgets
from ._codec import check_block_prices, decode_entry, decode_message, encode_message, ref_from_row
from ._kinds import ENTRY_KINDS, FORMAT_VERSIONS, ID_PREFIXES, canonical_json, check_payload
from ._lazy import MessageLog, Validated
from ._rows import AttachmentRow, NewEntry, SessionRow, new_id, now_iso
from ._values import Entry, Problem, Pruned, SessionInfo, StoredMessage, StoreSize
from ._verify import verify

__all__ = ["STORE_SESSIONS", "Session", "Store"]

STORE_SESSIONS = "~contextwindow/"
"""The prefix of the sessions a store keeps of its own (what was learned of the providers' windows,
for every conversation on it): left out of :meth:`Store.sessions` and :meth:`Store.session_infos`."""

VALIDATED_MESSAGES = 1024
"""How many validated messages a :class:`Session` handle shares between its message logs
(:class:`~._lazy.Validated`): what it appended, and what they decoded."""

_REF_FIELDS = ("width", "height", "duration_seconds", "pages", "token_estimate")
MAX_SESSION_ID = 256
_ATTACHMENT_ID = re.compile(r"att_[0-9a-f]{32}")


class Store:
    """A ledger of sessions. Use :func:`~contextwindow.store.open_store` to get one.

    Thread-safe: one connection per store, guarded by a lock; for parallel writers, open one store
    per process (SQLite) or per worker (PostgreSQL). ``close()`` (or leaving a ``with`` block)
    releases it; any later call is a :class:`~contextwindow.errors.UsageError`.
    """

    def __init__(self, backend: Backend, *, budgets: Budgets | None = None) -> None:
        self._backend_ref: Backend | None = backend
        self.budgets = budgets or Budgets()
        self.url = backend.url

    def _backend(self) -> Backend:
        if self._backend_ref is None:
            raise UsageError(f"the store {self.url} is closed")
        return self._backend_ref

    @property
    def schema_version(self) -> int:
        """The schema version of the database (0 for the memory store)."""
        return self._backend().schema_version

    @property
    def writable(self) -> bool:
        """False when a newer library wrote the database: writes raise ``SchemaTooNew``."""
        return self._backend().writable

    def session(self, session_id: str) -> Session:
        """A handle on one session; the session exists once something is written to it."""
        if not isinstance(session_id, str) or not 0 < len(session_id) <= MAX_SESSION_ID:
            raise InvalidInput(f"must be a string of 1 to {MAX_SESSION_ID} characters", path="session_id")
        if not session_id.isprintable():
            raise InvalidInput("must not contain control characters", path="session_id")
        self._backend()
        return Session(self, session_id)

    def sessions(self, prefix: str = "") -> list[str]:
        """The ids of every session with something in it, sorted; with ``prefix``, those whose id
        starts with it (one pass over the sessions, none over their entries). The store's own
        sessions (:data:`STORE_SESSIONS`: what was learned of the providers) are listed only when
        ``prefix`` names them."""
        if not isinstance(prefix, str):
            raise InvalidInput(f"must be a string, got {type(prefix).__name__}", path="prefix")
        found = self._backend().sessions(prefix)
        if prefix.startswith(STORE_SESSIONS):
            return found
        return [sid for sid in found if not sid.startswith(STORE_SESSIONS)]

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Everything written through this store inside the block is one transaction: committed
        together when the block ends (one commit: one fsync where the durability asks for one), or
        not at all when it raises. A write that raises inside undoes only itself, so the block may
        catch it and go on. Batches nest.

        Other writers wait for the block (SQLite: the file's write lock; PostgreSQL: the rows it
        locked), and so do other threads on this store: keep it short, no network calls inside. A
        handle's :attr:`Session.appended` counts the appends that returned, a batch rolled back
        included.
        """
        with self._backend().batch():
            yield

    def verify(self) -> list[Problem]:
        """Check every invariant (digest chains, dense positions, references, attachment hashes).

        Returns what is wrong; an empty list means the store is sound. Reads attachment bytes one at
        a time to hash them, so memory stays bounded by the largest attachment.
        """
        return verify(self._backend())

    def session_infos(self) -> list[SessionInfo]:
        """Every session with an entry, sorted by id: entries per kind, first and newest entry times
        and payload size, from one grouped read (no payload is read or decoded)."""
        return [
            _info(row)
            for row in self._backend().session_rows()
            if not row.session_id.startswith(STORE_SESSIONS)
        ]

    def size(self) -> StoreSize:
        """How much the store holds: sessions, entries, payload and attachment bytes (each
        attachment once), and the size on disk where the store has a file of its own."""
        return _prune.size(self._backend())

    def prune(
        self,
        *,
        last_before: datetime | None = None,
        max_bytes: int | None = None,
        dry_run: bool = False,
        reclaim: bool = True,
    ) -> Pruned:
        """Remove whole sessions: every one whose newest entry is older than ``last_before`` (an
        aware datetime), then, with ``max_bytes``, the next oldest until the rest hold no more than
        that (:attr:`StoreSize.bytes`). A session a remaining branch reads its prefix from
        (:meth:`Session.branch_from`) is kept, and goes once its branches go (in the same prune
        when they qualify too). A session goes with all its entries and attachment links;
        attachments no remaining session links go with their bytes. One transaction: the store
        verifies clean afterwards, and a session appended to since the plan was read is kept.

        ``dry_run`` removes nothing and says what would go. ``reclaim`` (SQLite) rewrites the file
        so it shrinks (``VACUUM``: as long as the file takes to copy). Prune sessions no agent is
        writing: a removed session written again starts afresh.
        """
        return _prune.prune(
            self._backend(), last_before=last_before, max_bytes=max_bytes, dry_run=dry_run, reclaim=reclaim
        )

    def close(self) -> None:
        """Release the connection; idempotent."""
        backend, self._backend_ref = self._backend_ref, None
        if backend is not None:
            backend.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._backend_ref is None else "open"
        return f"<Store {self.url} {state}>"


def _info(row: SessionRow) -> SessionInfo:
    return SessionInfo(
        id=row.session_id,
        entries=row.length,
        kinds=dict(row.kinds),
        created_at=datetime.fromisoformat(row.first_at),
        last_at=datetime.fromisoformat(row.last_at),
        payload_bytes=row.payload_bytes,
        parent=row.parent,
    )


class Session:
    """One session of a store: append entries, read them back, attach and read media."""

    def __init__(self, store: Store, session_id: str) -> None:
        self._store = store
        self.id = session_id
        self.appended = 0
        """How many entries were appended through this handle (messages and records)."""
        self._validated = Validated(VALIDATED_MESSAGES)
        """What this handle appended and its logs decoded: a :meth:`message_log` takes those rather
        than validate their payloads again (the same values; the ledger is append-only)."""

    def __repr__(self) -> str:
        return f"<Session {self.id!r} of {self._store.url}>"

    # -- messages ---------------------------------------------------------------------------------

    def append(
        self, message: Message, *, block_prices: Sequence[float] | None = None, expect: int | None = None
    ) -> StoredMessage:
        """Append a message; the ledger gives it its id, position and (if absent) ``created_at``.

        ``block_prices`` are the raw (pre-multiplier) prices of its top-level blocks from pricing,
        one per block, finite and ≥ 0. Media must reference attachments of this session (from
        :meth:`attach`) with matching hash, type and size, within the per-message budget. With
        ``expect``, the append is conditional (see :meth:`extend`).
        """
        [stored] = self.extend(
            [message], block_prices=None if block_prices is None else [block_prices], expect=expect
        )
        return stored

    def extend(
        self,
        messages: Sequence[Message],
        *,
        block_prices: Sequence[Sequence[float] | None] | None = None,
        expect: int | None = None,
    ) -> list[StoredMessage]:
        """Append several messages in one transaction: all of them, in order, or none.

        ``block_prices`` has one entry per message (each as :meth:`append` takes it). With ``expect``
        (a :meth:`length` the caller read), the append happens only if the session still holds
        exactly that many entries when the write takes the session's lock; otherwise nothing is
        written and :class:`~contextwindow.errors.SessionMoved` says another writer appended since.
        This is how several processes sharing a session avoid appending what another one already did.
        """
        backend = self._store._backend()
        if isinstance(messages, Message) or not isinstance(messages, Sequence):
            raise InvalidInput("must be a sequence of Messages", path="messages")
        if block_prices is not None and (
            isinstance(block_prices, str | bytes)
            or not isinstance(block_prices, Sequence)
            or len(block_prices) != len(messages)
        ):
            raise InvalidInput(f"needs one entry per message ({len(messages)})", path="block_prices")
        if expect is not None and (isinstance(expect, bool) or not isinstance(expect, int) or expect < 0):
            raise InvalidInput(f"must be a session length ≥ 0, got {shown(expect)}", path="expect")
        now = now_iso()
        prepared = [
            self._prepared(backend, message, None if block_prices is None else block_prices[i], now)
            for i, message in enumerate(messages)
        ]
        if not prepared:
            return []
        rows = backend.append(self.id, [entry for entry, _, _ in prepared], expect=expect)
        self.appended += len(rows)
        stored = [
            StoredMessage(
                message=replace(canonical, id=row.id),
                position=row.position,
                block_prices=None if prices is None else tuple(prices),
            )
            for row, (_, canonical, prices) in zip(rows, prepared, strict=True)
        ]
        self._validated.keep(stored)
        return stored

    def _prepared(
        self,
        backend: Backend,
        message: Message,
        block_prices: Sequence[float] | None,
        now: str,
        *,
        reader: str | None = None,
    ) -> tuple[NewEntry, Message, list[float] | None]:
        """A message checked and encoded for the backend (nothing written); its media must be
        attached to ``reader`` (default: this session)."""
        if not isinstance(message, Message):
            raise InvalidInput(f"must be a Message, got {type(message).__name__}", path="message")
        data = message_as_data(message)
        data.pop("id", None)
        if data["created_at"] is None:
            data["created_at"] = now
        # Validated from its fields, never by serialising it first: a wrongly typed field is then
        # InvalidInput naming it, whatever the warnings filter, and a valid message warns nothing.
        canonical = parse_message(data, path="message")
        prices = check_block_prices(block_prices, len(canonical.content))
        # The free-form JSON of a message must be checked before dumping: pydantic's JSON mode would
        # quietly turn a NaN into null.
        canonical_json(canonical.metadata, path="message.metadata")
        for index, block in enumerate(canonical.content):
            if isinstance(block, ToolUse):
                canonical_json(block.input, path=f"message.content[{index}].input")
        self._check_refs(backend, media_refs(canonical.content), reader or self.id)
        entry = NewEntry(
            id=new_id(ID_PREFIXES["message"]),
            kind="message",
            version=FORMAT_VERSIONS["message"],
            payload=encode_message(canonical, prices),
            created_at=now,
        )
        return entry, canonical, prices

    def length(self) -> int:
        """How many entries (all kinds) the session holds in the store now: one indexed read.

        Entries are never removed, so the length is the session's sequence number. A holder that
        knows the length it last read and what it appended since (:attr:`appended`) can tell whether
        another writer appended meanwhile.
        """
        return self._store._backend().length(self.id)

    def branch_from(
        self,
        parent: Session | str,
        at: int,
        *,
        edits: Mapping[int, Message] | None = None,
        edit_prices: Mapping[int, Sequence[float] | None] | None = None,
    ) -> None:
        """Start this session, which must be new, as the first ``at`` entries of ``parent``: a branch.

        Nothing is copied: the branch stores its parent and the fork position, and what is appended
        to it from then on (its entries take the positions from ``at`` on). Every read sees the whole
        conversation: :meth:`length` is ``at`` at once, :meth:`messages`, :meth:`entries`,
        :meth:`latest` and :meth:`attachments` read the parent's first ``at`` entries (and what the
        parent may read) before the branch's own. ``at`` counts entries of every kind, as
        :meth:`length` does, from 1 to the parent's length. A session that exists already is
        :class:`~contextwindow.errors.SessionMoved` (nothing written); a branch of a branch reads
        through both. A parent is kept by :meth:`Store.prune` while a branch of it remains.

        ``edits`` (``{position: message}``, each position below ``at`` holding a message of the
        prefix) replace those messages in the branch's view, and only there: each is stored once, with
        a new id (``edit_prices``: its block prices, as :meth:`append` takes them), and everything
        around it is still read from the parent. A record of the prefix that names an edited
        message's id (a checkpoint's range, an archive) is stored again at its position naming the
        edit. Media of an edit must be attached to the parent. All of it in one transaction.
        """
        parent_id = parent.id if isinstance(parent, Session) else parent
        if not isinstance(parent_id, str) or not parent_id:
            raise InvalidInput(f"must be a session or its id, got {shown(parent)}", path="parent")
        if isinstance(at, bool) or not isinstance(at, int):
            raise InvalidInput(f"must be a number of entries, got {shown(at)}", path="at")
        if parent_id == self.id:
            raise InvalidInput("a session cannot branch from itself", path="parent")
        backend = self._store._backend()
        if not edits:
            backend.fork(self.id, parent_id, at)
            return
        if not isinstance(edits, Mapping):
            raise InvalidInput("must map positions to messages", path="edits")
        now, prices = now_iso(), edit_prices or {}
        written = {
            position: self._prepared(backend, message, prices.get(position), now, reader=parent_id)[0]
            for position, message in edits.items()
        }
        # A record names a message only after it: one read from the first edit on finds both.
        following = [r for r in backend.entries(parent_id, None, after=min(written) - 1) if r.position < at]
        renamed = {r.id: written[r.position].id for r in following if r.position in written}
        for r in following:
            if r.kind != "message" and any(old in r.payload for old in renamed):
                payload = canonical_json(_renamed(json.loads(r.payload), renamed))
                written[r.position] = NewEntry(
                    new_id(ID_PREFIXES[r.kind]), r.kind, r.version, payload, r.created_at
                )
        backend.fork(self.id, parent_id, at, sorted(written.items()))

    def position_of(self, entry_id: str) -> int | None:
        """The position of one entry of this session (of its prefix too, for a branch), or ``None``
        when it holds no entry of that id: one indexed read."""
        if not isinstance(entry_id, str):
            raise InvalidInput(f"must be an entry id, got {shown(entry_id)}", path="entry_id")
        found = self._store._backend().locate(self.id, [entry_id])
        return found[entry_id][0] if entry_id in found else None

    @property
    def parent(self) -> tuple[str, int] | None:
        """``(parent session id, fork position)`` when this session is a branch (:meth:`branch_from`);
        ``None`` for a session of its own. The fork is recorded on the nearest ancestor that stores
        the entry before the fork position."""
        return self._store._backend().fork_of(self.id)

    def _check_refs(self, backend: Backend, refs: list[AttachmentRef], reader: str) -> None:
        stored: list[AttachmentRef] = []
        for ref in {ref.id: ref for ref in refs}.values():
            row = backend.attachment(reader, ref.id) if _ATTACHMENT_ID.fullmatch(ref.id) else None
            if row is None:
                raise InvalidInput(
                    f"attachment {ref.id} is not attached to session {self.id!r}; "
                    "call session.attach(data, media_type) first",
                    path="message.content",
                )
            if (row.sha256, row.media_type, row.size_bytes) != (ref.sha256, ref.media_type, ref.size_bytes):
                raise InvalidInput(
                    f"attachment {ref.id} does not match the stored one (sha256, media type or size differ)",
                    path="message.content",
                )
            stored.append(ref_from_row(row))
        self._store.budgets.check_message(stored)

    def messages(self, *, after: int | None = None) -> list[StoredMessage]:
        """Every message, in order, validated; with ``after``, only those at a later position
        (an incremental read: compile's cache loads only what was appended since)."""
        rows = self._store._backend().entries(self.id, ["message"], after=after)
        return [decode_message(row) for row in rows]

    def message_log(self, *, after: int | None = None, into: MessageLog | None = None) -> MessageLog:
        """The messages as a :class:`MessageLog`: each validated when first read, ids free.

        With ``into``, the rows after ``into.last_position`` are appended to that log and it is
        returned (``after`` is then ignored): an incremental reader keeps one log per session.
        """
        if into is not None:
            after = into.last_position
        rows = self._store._backend().entries(self.id, ["message"], after=after)
        if into is None:
            return MessageLog(rows, known=self._validated)
        into.extend(rows)
        return into

    # -- other entries ----------------------------------------------------------------------------

    def record(self, kind: str, payload: Mapping[str, Any]) -> Entry:
        """Append a non-message entry (see the kinds in :mod:`contextwindow.store`); returns it stored.

        A ``checkpoint`` needs ``summary`` and the covered range ``first_id``/``last_id``: message
        ids of this session, first not after last.
        """
        backend = self._store._backend()
        data = check_payload(kind, payload)
        text = canonical_json(data)
        if kind == "checkpoint":
            self._check_range(backend, data["first_id"], data["last_id"])
        entry = NewEntry(
            id=new_id(ID_PREFIXES[kind]),
            kind=kind,
            version=FORMAT_VERSIONS[kind],
            payload=text,
            created_at=now_iso(),
        )
        [row] = backend.append(self.id, [entry])
        self.appended += 1
        return decode_entry(row)

    def _check_range(self, backend: Backend, first: str, last: str) -> None:
        found = backend.locate(self.id, [first, last])
        for key, entry_id in (("first_id", first), ("last_id", last)):
            if found.get(entry_id, (0, ""))[1] != "message":
                raise InvalidInput(
                    f"{entry_id!r} is not a message of session {self.id!r}", path=f"payload.{key}"
                )
        if found[first][0] > found[last][0]:
            raise InvalidInput("the covered range ends before it starts", path="payload.last_id")

    def record_checkpoint(self, summary: str, *, first_id: str, last_id: str, **extra: Any) -> Entry:
        """A compaction checkpoint: ``summary`` stands for the messages ``first_id``..``last_id``."""
        return self.record(
            "checkpoint", {**extra, "summary": summary, "first_id": first_id, "last_id": last_id}
        )

    def note(self, text: str, **extra: Any) -> Entry:
        """A note for the host (``{"text": ..., **extra}``)."""
        return self.record("note", {**extra, "text": text})

    def entries(self, kinds: Iterable[str] | None = None, *, after: int | None = None) -> list[Entry]:
        """Entries in order, all kinds or only ``kinds`` (and only after position ``after``, when
        given); payloads upgraded to the current format."""
        wanted = None if kinds is None else self._kinds(kinds)
        return [decode_entry(row) for row in self._store._backend().entries(self.id, wanted, after=after)]

    def latest(self, kind: str) -> Entry | None:
        """The newest entry of one kind, or ``None``."""
        [checked] = self._kinds([kind])
        row = self._store._backend().latest(self.id, checked)
        return None if row is None else decode_entry(row)

    @staticmethod
    def _kinds(kinds: Iterable[str]) -> list[str]:
        if isinstance(kinds, str) or not isinstance(kinds, Iterable):
            raise InvalidInput("must be a collection of kinds, not one string", path="kinds")
        out: list[str] = []
        for kind in kinds:
            if not isinstance(kind, str) or kind not in ENTRY_KINDS:
                raise InvalidInput(
                    f"unknown entry kind {shown(kind)}; one of {', '.join(sorted(ENTRY_KINDS))}", path="kinds"
                )
            if kind not in out:
                out.append(kind)
        return out

    # -- attachments ------------------------------------------------------------------------------

    def attach(self, data: bytes, media_type: str, **meta: Any) -> AttachmentRef:
        """Store bytes once by SHA-256 and link them to this session; returns this session's metadata.

        The media rule is :func:`contextwindow.attachments.make_ref`'s: bytes not empty and of their
        media type, dimensions from the header within the budget. ``width``, ``height``,
        ``duration_seconds``, ``pages`` and ``token_estimate`` in ``meta`` fill what the header does
        not say (a width or height contradicting it is refused), and any other JSON ``meta`` is kept
        (:meth:`attachment_meta`). Identical bytes are stored once, but metadata and stamps belong to
        the session's link to them: another session attaching the same bytes sees and pays only what
        it attached them with. Attaching the same bytes again in one session keeps the first link.
        """
        backend = self._store._backend()
        budgets = self._store.budgets
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidInput(f"must be bytes, got {type(data).__name__}", path="data")
        if not isinstance(media_type, str):
            raise InvalidInput(f"must be a string, got {type(media_type).__name__}", path="media_type")
        media_type = normal_media_type(media_type)
        budgets.check_media_type(media_type)
        raw = bytes(data)
        budgets.check_size(len(raw))
        given = {key: meta.pop(key) for key in _REF_FIELDS if key in meta}
        extra = canonical_json(meta, path="meta")
        ref = make_ref(
            raw,
            media_type,
            max_image_side=budgets.max_image_side,
            max_image_pixels=budgets.max_image_pixels,
            **given,
        )
        row = AttachmentRow(
            id=ref.id,
            sha256=ref.sha256,
            media_type=ref.media_type,
            size_bytes=ref.size_bytes,
            width=ref.width,
            height=ref.height,
            duration_seconds=ref.duration_seconds,
            pages=ref.pages,
            token_estimate=ref.token_estimate,
            meta=extra,
            created_at=now_iso(),
        )
        return ref_from_row(backend.put_attachment(self.id, row, raw))

    def _row(self, ref_or_id: AttachmentRef | str) -> AttachmentRow:
        att = ref_or_id.id if isinstance(ref_or_id, AttachmentRef) else ref_or_id
        if not isinstance(att, str):
            raise InvalidInput(
                f"must be an AttachmentRef or an id, got {type(att).__name__}", path="attachment"
            )
        # An id that cannot be an attachment's is refused before any backend sees it (PostgreSQL
        # would refuse a NUL in it with a driver error of its own).
        row = self._store._backend().attachment(self.id, att) if _ATTACHMENT_ID.fullmatch(att) else None
        if row is None:
            raise InvalidInput(f"no attachment {att!r} in session {self.id!r}", path="attachment")
        return row

    def attachment(self, ref_or_id: AttachmentRef | str) -> AttachmentRef:
        """Metadata of an attachment of this session; never reads its bytes."""
        return ref_from_row(self._row(ref_or_id))

    def attachment_meta(self, ref_or_id: AttachmentRef | str) -> dict[str, Any]:
        """The extra metadata given to :meth:`attach` (a fresh dict)."""
        meta: dict[str, Any] = json.loads(self._row(ref_or_id).meta)
        return meta

    def attachments(self) -> list[AttachmentRef]:
        """Metadata of every attachment of this session, in the order they were first attached."""
        return [ref_from_row(row) for row in self._store._backend().attachments(self.id)]

    def read_attachment(self, ref_or_id: AttachmentRef | str) -> bytes:
        """The bytes of one attachment of this session, checked against their hash.

        Another session's attachment is refused even with the right id: access follows the links
        made by :meth:`attach`, not knowledge of the hash.
        """
        row = self._row(ref_or_id)
        data = self._store._backend().read_blob(self.id, row.id)
        if data is None or hashlib.sha256(data).hexdigest() != row.sha256:
            raise StoreError(f"the bytes of attachment {row.id} are missing or do not match their sha256")
        return data


def _renamed(value: Any, ids: Mapping[str, str]) -> Any:
    """``value`` (a decoded payload) with every string equal to a key of ``ids`` replaced by its value."""
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_renamed(item, ids) for item in value]
    if isinstance(value, dict):
        return {key: _renamed(item, ids) for key, item in value.items()}
    return value
