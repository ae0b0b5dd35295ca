"""Re-reads: the tool a model calls to see an archived tool result or an evicted attachment again.

Compile replaces stale tool results with a placeholder naming an artifact id
(``tool-result-archive-…``, :mod:`.archive`) and media out of line with one naming the attachment id
(``att_…``, :mod:`.media`); both placeholders say to call :data:`READ_ARCHIVED` with that id, unless
``Policy.reread_tool`` says no tool can be offered (then they only name what was left out).
:data:`READ_ARCHIVED_TOOL` is the tool's definition, for a host (the guard, the Engine) to offer;
:func:`read_archived` is what it returns: the original result's content, or the attachment itself,
read from the ledger, where nothing is ever deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..content import Document, Image, Message, NestedBlock, Text, ToolResult, ToolSpec
from ..errors import InvalidInput
from .state import ArchiveRecord

if TYPE_CHECKING:
    from ..store import Session

__all__ = ["READ_ARCHIVED", "READ_ARCHIVED_TOOL", "names_reread", "read_archived"]

READ_ARCHIVED = "read_archived"
"""The re-read tool's name, as the placeholders spell it."""

READ_ARCHIVED_TOOL = ToolSpec(
    name=READ_ARCHIVED,
    description=(
        "Read again a tool result or an attachment that was taken out of the conversation to save room. "
        "Pass the id its placeholder names (tool-result-archive-… or att_…)."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": {"type": "string", "description": "The id the placeholder names."}},
        "required": ["id"],
    },
)
"""The re-read tool's definition."""


def read_archived(session: Session, ident: str) -> str | tuple[NestedBlock, ...]:
    """The original behind a placeholder's ``ident``: an archived result's content, or an attachment
    as a block (an image or a document). An unknown id is ``InvalidInput`` naming it."""
    if not isinstance(ident, str) or not ident:
        raise InvalidInput("the id a placeholder names is a non-empty string", path="id")
    if ident.startswith("att_"):
        ref = session.attachment(ident)
        if ref.media_type.startswith("image/"):
            return (Image(ref=ref),)
        return (Document(ref=ref),)
    for entry in session.entries(["archive"]):
        try:
            record = ArchiveRecord.from_payload(entry.payload)
        except (KeyError, TypeError, ValueError):
            continue
        if record.artifact_id != ident:
            continue
        for stored in session.messages():
            if stored.message.id != record.message_id:
                continue
            for block in stored.message.content:
                if isinstance(block, ToolResult) and block.tool_use_id == record.tool_use_id:
                    return block.content
        break
    raise InvalidInput(f"no archived result or attachment {ident!r} in this session", path="id")


def names_reread(messages: Sequence[Message]) -> bool:
    """Whether a placeholder in ``messages`` tells the model to call the re-read tool (so a host
    offers it only when there is something to read again)."""
    for message in messages:
        for block in message.content:
            if isinstance(block, Text) and READ_ARCHIVED in block.text:
                return True
            if isinstance(block, ToolResult):
                content = block.content
                if isinstance(content, str):
                    if READ_ARCHIVED in content:
                        return True
                elif any(isinstance(b, Text) and READ_ARCHIVED in b.text for b in content):
                    return True
    return False
