"""Answering the model's re-reads: a :data:`~contextwindow.compile.reread.READ_ARCHIVED` call is
answered from the ledger (:func:`~contextwindow.compile.reread.read_archived`), as a round's result."""

from __future__ import annotations

from ..compile.reread import read_archived
from ..content import ToolResult, ToolUse
from ..errors import InvalidInput
from ..store import Session
from .tool_results import round_result

__all__ = ["answer_reread"]


def answer_reread(session: Session, use: ToolUse, cap_chars: int) -> tuple[ToolResult, bool]:
    """The answer to ``use`` (a ``read_archived`` call) as it rides into a round, within
    ``cap_chars``, and whether the cap cut it. An unknown id is an error result, never an exception."""
    try:
        content = read_archived(session, str(use.input.get("id", "")))
    except InvalidInput as exc:
        return ToolResult(tool_use_id=use.id, content=str(exc), is_error=True), False
    return round_result(ToolResult(tool_use_id=use.id, content=content), cap_chars)
