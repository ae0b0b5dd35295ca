"""What compile reads and what it returns: plain values, no store handles and no bytes.

:class:`CompileState` is a snapshot of one session's ledger as far as the next request is concerned:
the system prompt and tools, the stored messages with the raw block prices stored beside them, the
latest summary checkpoint, the archive records and media watermark already written, the calibration
multiplier and the anchor. :class:`CompiledRequest` is the request, its estimate, its makeup and every
decision taken, each with ids; it names the attachments whose bytes the renderer must load and no
others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..content import AttachmentRef, Message, Request, Text, ToolSpec

__all__ = [
    "SEGMENTS",
    "ArchiveRecord",
    "Checkpoint",
    "CompileState",
    "CompiledRequest",
    "Decisions",
    "Eviction",
    "MediaWatermark",
    "PricedMessage",
    "Truncation",
]

SEGMENTS = (
    "system",
    "tools",
    "summaries",
    "text",
    "tool_results",
    "images",
    "other_media",
    "manifest",
    "output_reserve",
)
"""The makeup's segments, in order. Every segment but ``output_reserve`` is part of the estimate."""


@dataclass(frozen=True, kw_only=True, slots=True)
class PricedMessage:
    """A stored message (its ``id`` set by the ledger) with the raw price of each top-level block.

    ``block_prices`` are unrounded, pre-multiplier prices from the ``Estimator`` that admitted the
    message; ``None`` (or a length that does not match) means compile prices the blocks itself.
    """

    message: Message
    block_prices: tuple[float, ...] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Checkpoint:
    """The latest compaction checkpoint: a summary standing for every message up to ``last_id``."""

    summary: str
    first_id: str
    last_id: str
    id: str | None = None
    summary_tokens: int | None = None
    """The summariser's output count of ``summary`` when its provider reported one: the summary's
    size in the provider's own units, which compile prices the summary by when it is above the rule's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ArchiveRecord:
    """A stale tool result replaced by a re-readable placeholder (``rewrite_version`` 1).

    The record's shape is that of maka's stale tool-result archive (https://github.com/apache/maka).
    The original stays in
    the ledger under ``message_id``; ``artifact_id`` is how the model asks for it.
    """

    artifact_id: str
    message_id: str
    tool_use_id: str
    tool_name: str
    body_sha256: str
    original_estimated_tokens: int
    original_bytes: int
    media_ids: tuple[str, ...] = ()
    reason: str = "stale_tool_result_pruned_before_compact"
    rewrite_version: int = 1

    def to_payload(self) -> dict[str, Any]:
        """The ledger payload (``kind: "archive"``)."""
        return {
            "kind": "contextwindow.archived_tool_result",
            "rewrite_version": self.rewrite_version,
            "artifact_id": self.artifact_id,
            "message_id": self.message_id,
            "tool_use_id": self.tool_use_id,
            "tool_name": self.tool_name,
            "body_sha256": self.body_sha256,
            "original_estimated_tokens": self.original_estimated_tokens,
            "original_bytes": self.original_bytes,
            "media_ids": list(self.media_ids),
            "reason": self.reason,
        }

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> ArchiveRecord:
        """Read a ledger payload written by :meth:`to_payload`."""
        return cls(
            artifact_id=str(payload["artifact_id"]),
            message_id=str(payload["message_id"]),
            tool_use_id=str(payload["tool_use_id"]),
            tool_name=str(payload.get("tool_name", "")),
            body_sha256=str(payload.get("body_sha256", "")),
            original_estimated_tokens=int(payload.get("original_estimated_tokens", 0)),
            original_bytes=int(payload.get("original_bytes", 0)),
            media_ids=tuple(str(x) for x in payload.get("media_ids", ())),
            reason=str(payload.get("reason", "stale_tool_result_pruned_before_compact")),
            rewrite_version=int(payload.get("rewrite_version", 1)),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class MediaWatermark:
    """Hysteresis watermark: media before this point stay out of line.

    ``message_id`` and ``index`` (the media item's ordinal within that message, nested tool-result
    media included, in reading order) name the oldest media item still allowed inline.
    """

    message_id: str
    index: int = 0

    def to_payload(self) -> dict[str, Any]:
        """The ledger payload (``kind: "eviction"``)."""
        return {"kind": "contextwindow.media_watermark", "message_id": self.message_id, "index": self.index}

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> MediaWatermark | None:
        """A watermark from an eviction payload, or ``None`` when the payload is not one."""
        if payload.get("kind") != "contextwindow.media_watermark" or not isinstance(
            payload.get("message_id"), str
        ):
            return None
        index = payload.get("index", 0)
        return cls(message_id=payload["message_id"], index=index if isinstance(index, int) else 0)


@dataclass(frozen=True, kw_only=True, slots=True)
class CompileState:
    """One session's ledger, as far as the next request is concerned. Holds refs, never bytes."""

    messages: Sequence[PricedMessage]
    """In order. Any sequence: a ledger session gives a lazy one whose messages are validated when
    compile first reads them (it may also offer ``id_at(i)`` and ``index_of(id)``, answered without
    decoding; compile uses them when present)."""
    system: tuple[Text, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    checkpoint: Checkpoint | None = None
    archives: tuple[ArchiveRecord, ...] = ()
    watermark: MediaWatermark | None = None
    multiplier: float = 1.0
    """The calibration multiplier learned for this (model, connection); applied per top-level block."""
    anchor: Any = None
    """The newest ``contextwindow.usage.tracker.Anchor``, or ``None``: the estimate is then cold."""
    connection: str = "default"
    """The connection the anchor must match."""
    session_id: str = ""
    """Part of each archive artifact id."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Eviction:
    """A media item that is not inline in this request: its placeholder names ``attachment_id``."""

    attachment_id: str
    message_id: str
    reason: str
    """``count``, ``depth``, ``bytes``, ``watermark``, ``wall``, or ``budget`` (its message did not fit
    the token budget with it inline)."""
    media_type: str = ""
    size_bytes: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Truncation:
    """A message cut to the per-message cap: its price before and as rendered."""

    message_id: str
    original_tokens: int
    rendered_tokens: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Decisions:
    """Everything compile did to fit, with ids. Nothing leaves the request without a line here."""

    evicted: tuple[Eviction, ...] = ()
    archived: tuple[ArchiveRecord, ...] = ()
    """Archives in effect in this request (existing and new)."""
    new_archives: tuple[ArchiveRecord, ...] = ()
    """Archives this compile decided; the caller records them in the ledger before showing them."""
    truncated: tuple[Truncation, ...] = ()
    folded: tuple[str, ...] = ()
    """``(first_id, last_id)`` of the history the checkpoint's summary stands for, when there is one."""
    omitted: tuple[str, ...] = ()
    """Ids of the visible messages left out for the budget, oldest first (none are folded)."""
    stubbed: tuple[str, ...] = ()
    """Tool-use ids whose missing result was replaced by the stub (``pairing.STUB``)."""
    dropped_results: tuple[str, ...] = ()
    """Tool-use ids of orphan results dropped because their call is not in the request."""
    watermark: MediaWatermark | None = None
    """The media watermark in force after this compile."""
    new_watermark: bool = False
    """True when this compile moved the watermark; the caller records it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CompiledRequest:
    """The next request in canonical form, ready for either format adapter, with its accounting."""

    system: tuple[Text, ...]
    tools: tuple[ToolSpec, ...]
    messages: tuple[Message, ...]
    estimated_tokens: int
    """Calibrated input estimate; anchored on the last accepted request when an anchor applies."""
    local_estimate: int
    """The calibrated estimate before anchoring (the sum of the makeup without the reserve)."""
    makeup: Mapping[str, int]
    """Tokens by segment (:data:`SEGMENTS`)."""
    decisions: Decisions
    inline_attachments: tuple[AttachmentRef, ...]
    """The only attachments whose bytes rendering may load, in order of first appearance."""
    budget: int
    """window − output reserve."""
    output_reserve: int
    request_bytes: int
    """Estimated serialized size (text as UTF-8, inline media as base64), from stored sizes."""
    model: str = ""
    anchor_reason: str | None = None
    """Why the estimate is cold, when an anchor was given but could not be used."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    names_reread: bool | None = None
    """Whether a message names the re-read tool (:func:`~contextwindow.compile.reread.names_reread` of
    ``messages``), when compile read it off its running sums; ``None``: not known, ask the messages."""

    def to_request(self, *, max_tokens: int | None = None, model: str | None = None) -> Request:
        """As a canonical :class:`~contextwindow.content.Request` for ``formats.render``."""
        return Request(
            model=model if model is not None else (self.model or None),
            system=self.system,
            tools=self.tools,
            messages=self.messages,
            max_tokens=max_tokens if max_tokens is not None else self.output_reserve,
        )
