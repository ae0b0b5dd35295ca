"""Stale tool results: older results that carry media, or whose text is large, become re-readable
placeholders (maka's stale tool-result archive, https://github.com/apache/maka).

A result is a candidate when it lies outside the newest ``policy.recent_turns_full`` turns and it
carries media (always) or its raw price is over ``policy.archive_text_over_tokens``.
The decision is a pure function of the message, its turn and the policy; the record (maka's shape)
is what the ledger keeps, and a recorded archive wins over a fresh decision, so a rival's earlier
record is what shows. The original stays in the ledger under its message id.

The artifact id is sent to the model, so it must not carry the ledger's message id (random, minted
at append): two runs of the same session would send different bytes and price them differently.
maka's ``runtimeEventId`` is therefore the message's place in the session (:func:`event_ref`), which
names the same event uniquely within the session and is the same in every run.
"""

from __future__ import annotations

import hashlib
import json

from ..content import ToolResult, block_to_dict, media_refs
from .policy import Policy
from .reread import READ_ARCHIVED
from .state import ArchiveRecord

__all__ = ["archive_record", "artifact_id", "event_ref", "is_candidate", "placeholder_result"]


def is_candidate(result: ToolResult, raw_price: float, policy: Policy) -> bool:
    """Media → always; text only → over the threshold."""
    if not isinstance(result.content, str) and media_refs(result.content):
        return True
    return raw_price > policy.archive_text_over_tokens


def event_ref(position: int) -> str:
    """The runtime-event stand-in of the message at ``position`` (0-based) of its session's messages:
    deterministic, unlike the ledger's id (see the module docstring)."""
    if position < 0:
        raise ValueError(f"a message position is >= 0, got {position}")
    return f"message-{position}"


def artifact_id(
    *, session_id: str, event: str, tool_use_id: str, tool_name: str, body_sha256: str, version: int = 1
) -> str:
    """``'tool-result-archive-' + sha256(JSON{sessionId, runtimeEventId, toolCallId, toolName,
    bodySha256, rewriteVersion}).hex[:32]`` (maka's artifact id); ``event`` is the runtime event id
    (:func:`event_ref` of the message in compile)."""
    body = json.dumps(
        {
            "sessionId": session_id,
            "runtimeEventId": event,
            "toolCallId": tool_use_id,
            "toolName": tool_name,
            "bodySha256": body_sha256,
            "rewriteVersion": version,
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return "tool-result-archive-" + hashlib.sha256(body.encode()).hexdigest()[:32]


def archive_record(
    result: ToolResult, *, raw_price: float, session_id: str, message_id: str, event: str, tool_name: str
) -> ArchiveRecord:
    """The archive record for ``result``: hashed over its canonical JSON (refs, not bytes).
    ``message_id`` is the ledger's id of the carrying message (where the original stays); ``event``
    is what the artifact id hashes in its place (:func:`event_ref`)."""
    body = json.dumps(block_to_dict(result), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    encoded = body.encode()
    sha = hashlib.sha256(encoded).hexdigest()
    refs = [] if isinstance(result.content, str) else media_refs(result.content)
    return ArchiveRecord(
        artifact_id=artifact_id(
            session_id=session_id,
            event=event,
            tool_use_id=result.tool_use_id,
            tool_name=tool_name,
            body_sha256=sha,
        ),
        message_id=message_id,
        tool_use_id=result.tool_use_id,
        tool_name=tool_name,
        body_sha256=sha,
        original_estimated_tokens=max(0, round(raw_price)),
        original_bytes=len(encoded) + sum(ref.size_bytes for ref in refs),
        media_ids=tuple(dict.fromkeys(ref.id for ref in refs)),
    )


def placeholder_result(result: ToolResult, record: ArchiveRecord, *, reread: bool = True) -> ToolResult:
    """The result as shown once archived: same call id (pairing holds), a text naming the artifact;
    with ``reread`` (``Policy.reread_tool``) it says to call :data:`READ_ARCHIVED` with its id."""
    media = f", with attachments {', '.join(record.media_ids)}" if record.media_ids else ""
    how = f"; call {READ_ARCHIVED} with this id to read it again" if reread else ""
    text = (
        f"[tool result archived as {record.artifact_id}: {record.tool_name or 'tool'} output of about "
        f"{record.original_estimated_tokens} tokens{media}{how}]"
    )
    return ToolResult(tool_use_id=result.tool_use_id, content=text, is_error=result.is_error)
