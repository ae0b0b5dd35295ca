"""Compile: fit the next request into the window — pure, deterministic, bounded in memory.

``compile(state, profile, policy)`` turns a :class:`CompileState` (a snapshot of a session's ledger:
messages with stored prices, the latest summary checkpoint, archive records, the media watermark, the
calibration multiplier and the anchor) into a :class:`CompiledRequest`. The words (budget, head and
tail, makeup, eviction, archive, manifest) are defined in ``docs/concepts.md``, "Compile".
"""

from __future__ import annotations

from .archive import artifact_id
from .cache import CompileCache
from .head import SUMMARY_HEADER
from .media import encoded_size, partition_refs
from .next_request import compile
from .pairing import STUB, enforce_tool_pairing
from .policy import Policy
from .session import SessionCompiler, compile_session
from .state import (
    SEGMENTS,
    ArchiveRecord,
    Checkpoint,
    CompiledRequest,
    CompileState,
    Decisions,
    Eviction,
    MediaWatermark,
    PricedMessage,
    Truncation,
)
from .truncate import truncate_content, truncation_marker

__all__ = [
    "SEGMENTS",
    "STUB",
    "SUMMARY_HEADER",
    "ArchiveRecord",
    "Checkpoint",
    "CompileCache",
    "CompileState",
    "CompiledRequest",
    "Decisions",
    "Eviction",
    "MediaWatermark",
    "Policy",
    "PricedMessage",
    "SessionCompiler",
    "Truncation",
    "artifact_id",
    "compile",
    "compile_session",
    "encoded_size",
    "enforce_tool_pairing",
    "partition_refs",
    "truncate_content",
    "truncation_marker",
]
