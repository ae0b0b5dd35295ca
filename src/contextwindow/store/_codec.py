"""Values ⇄ stored rows, validated at the ledger's read boundary.

Writing: a message becomes ``{"message": message_to_dict(...), "block_prices": [...]}`` as compact
JSON, its free-form objects (a tool call's input, metadata) in the writer's key order: a message read
back renders as it was written, byte for byte, so a request rebuilt from the ledger (after a restart,
or an eviction from memory) is the prefix a provider's prompt cache holds. Records are canonical JSON
(sorted keys). Reading: the payload is upgraded to its kind's current format and the message is parsed with
:func:`~contextwindow.content.parse_message`; a row that does not parse is a corrupt ledger
(:class:`~contextwindow.errors.StoreError`), never a half-valid value.

Reading is the hot path of a cold compile (10,000 rows), so a row already at the current format is
validated straight from its JSON text by pydantic-core (:func:`_payload_adapter`, one ``validate_json``
call: no Python dicts built first, no second walk for the prices). It checks exactly what the general
path checks; a row it refuses goes through the general path, which names the bad field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Annotated, Any, NotRequired

import pydantic
from pydantic import Field, TypeAdapter
from typing_extensions import TypedDict

from ..content import AttachmentRef, Message, message_to_dict, parse_message
from ..errors import InvalidInput, StoreError
from ..limits import MAX_TOKENS, check_json_depth, finite, shown
from ._kinds import ENTRY_KINDS, FORMAT_VERSIONS, canonical_json, upgrade
from ._rows import AttachmentRow, EntryRow
from ._values import Entry, StoredMessage

__all__ = [
    "check_block_prices",
    "decode_entry",
    "decode_message",
    "encode_message",
    "ref_from_row",
]


def check_block_prices(prices: Sequence[float] | None, blocks: int) -> list[float] | None:
    """One finite price between 0 and ``limits.MAX_TOKENS`` per top-level block, or ``None`` when
    the caller priced nothing."""
    if prices is None:
        return None
    if isinstance(prices, str | bytes) or not isinstance(prices, Sequence):
        raise InvalidInput(f"must be a sequence of numbers, got {type(prices).__name__}", path="block_prices")
    if len(prices) != blocks:
        raise InvalidInput(f"has {len(prices)} prices for {blocks} top-level blocks", path="block_prices")
    out = []
    for index, price in enumerate(prices):
        as_float = finite(price)
        if as_float is None or not 0 <= as_float <= MAX_TOKENS:
            raise InvalidInput(
                f"must be a finite number between 0 and {MAX_TOKENS}, got {shown(price)}",
                path=f"block_prices[{index}]",
            )
        out.append(as_float)
    return out


def encode_message(message: Message, prices: list[float] | None) -> str:
    """The JSON payload of a message entry (``id`` is the entry's, kept out of the payload), its keys in
    the message's own order (the module docstring)."""
    data = message_to_dict(message)
    data.pop("id", None)
    return canonical_json({"message": data, "block_prices": prices}, path="", sort_keys=False)


def _payload(row: EntryRow) -> dict[str, Any]:
    try:
        check_json_depth(row.payload)
        data = json.loads(row.payload)
    except ValueError as exc:  # InvalidInput (too deep) is a ValueError too
        raise StoreError(
            f"entry {row.id} at position {row.position} of {row.session_id!r} is not JSON"
        ) from exc
    if not isinstance(data, dict):
        raise StoreError(
            f"entry {row.id} at position {row.position} of {row.session_id!r} is not a JSON object"
        )
    return upgrade(row.kind, row.version, data)


def _created(row: EntryRow) -> datetime:
    try:
        return datetime.fromisoformat(row.created_at)
    except ValueError as exc:
        raise StoreError(f"entry {row.id} has an unreadable time {row.created_at!r}") from exc


def decode_entry(row: EntryRow) -> Entry:
    """Any stored row as an :class:`Entry` with its payload upgraded."""
    if row.kind not in ENTRY_KINDS:
        raise StoreError(f"entry {row.id} of {row.session_id!r} has an unknown kind {row.kind!r}")
    payload = _payload(row)
    return Entry(
        id=row.id,
        session_id=row.session_id,
        position=row.position,
        kind=row.kind,
        version=FORMAT_VERSIONS[row.kind],
        payload=payload,
        created_at=_created(row),
    )


_Price = Annotated[float, Field(ge=0, le=MAX_TOKENS, allow_inf_nan=False, strict=True)]


class _MessagePayload(TypedDict):
    """A ``message`` payload at its current format (``_kinds``: format 1)."""

    message: Message
    block_prices: NotRequired[list[_Price] | None]


@cache
def _payload_adapter() -> TypeAdapter[_MessagePayload]:
    """Validates a current-format message payload from its JSON text; prices strict (no booleans), finite, ≥ 0.

    Built on first use, not at import.
    """
    return TypeAdapter(_MessagePayload)


def decode_message(row: EntryRow) -> StoredMessage:
    """A message row as a validated :class:`StoredMessage`."""
    if row.kind == "message" and row.version == FORMAT_VERSIONS["message"]:
        try:
            data = _payload_adapter().validate_json(row.payload)
        except pydantic.ValidationError:
            pass  # the general path below names the bad field
        else:
            prices = data.get("block_prices")
            parsed = data["message"]
            if prices is None or len(prices) == len(parsed.content):
                message = Message(  # not dataclasses.replace: this is the hot loop, 5x cheaper
                    role=parsed.role,
                    content=parsed.content,
                    id=row.id,
                    created_at=parsed.created_at,
                    metadata=parsed.metadata,
                )
                return StoredMessage(
                    message=message,
                    position=row.position,
                    block_prices=None if prices is None else tuple(prices),
                )
    return _decode_message_checked(row)


def _decode_message_checked(row: EntryRow) -> StoredMessage:
    """The general path: upgrade the payload, parse it, check the prices, name what is wrong."""
    if row.kind != "message":
        raise StoreError(f"entry {row.id} is a {row.kind}, not a message")
    payload = _payload(row)
    where = f"entry {row.id} at position {row.position} of {row.session_id!r}"
    data = payload.get("message")
    if not isinstance(data, dict):
        raise StoreError(f"{where} holds no message")
    try:
        message = parse_message({**data, "id": row.id})
        prices = payload.get("block_prices")
        checked = check_block_prices(prices, len(message.content))
    except InvalidInput as exc:
        raise StoreError(f"{where} is not a valid message: {exc}") from exc
    return StoredMessage(
        message=message,
        position=row.position,
        block_prices=None if checked is None else tuple(checked),
    )


def ref_from_row(row: AttachmentRow) -> AttachmentRef:
    """The metadata of a stored attachment as the ``AttachmentRef`` media blocks carry."""
    return AttachmentRef(
        id=row.id,
        sha256=row.sha256,
        media_type=row.media_type,
        size_bytes=row.size_bytes,
        width=row.width,
        height=row.height,
        duration_seconds=row.duration_seconds,
        pages=row.pages,
        token_estimate=row.token_estimate,
    )
