"""The engine's default compiler: a ledger session → ``CompileState`` → ``compile``.

It reads what compile needs from the ledger (messages with their stored block prices, the latest
checkpoint, archive records, the media watermark), compiles, and records the decisions compile asks
the caller to record (new archives, a moved watermark) *before* the request is shown, as §11's write
order wants. The engine's escalation rungs arrive as ``overrides`` and tighten the policy for the
rest of the turn: ``evict_media`` keeps only the newest image inline within a quarter of the byte
budget; ``archive_tool_results`` archives every stale result outside the newest turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .compile import (
    ArchiveRecord,
    Checkpoint,
    CompiledRequest,
    CompileState,
    MediaWatermark,
    Policy,
    PricedMessage,
    compile,
)
from .content import Text, ToolSpec
from .models import ModelProfile
from .store import Session

__all__ = ["SessionCompiler"]


@dataclass
class SessionCompiler:
    """``SessionCompiler(policy, system=..., tools=...)`` is a ``Compiler`` for :class:`~contextwindow.engine.Engine`."""

    policy: Policy
    system: Sequence[Text] = ()
    tools: Sequence[ToolSpec] = ()

    def policy_for(self, overrides: frozenset[str]) -> Policy:
        policy = self.policy
        if "evict_media" in overrides:
            policy = policy.with_(
                max_inline_images=1, inline_media_bytes=max(1, policy.inline_media_bytes // 4)
            )
        if "archive_tool_results" in overrides:
            policy = policy.with_(
                recent_turns_full=1, archive_text_over_tokens=256, archive_stale_results=True
            )
        return policy

    def state(self, session: Session) -> CompileState:
        messages = tuple(
            PricedMessage(message=s.message, block_prices=s.block_prices) for s in session.messages()
        )
        entry = session.latest("checkpoint")
        checkpoint = (
            None
            if entry is None
            else Checkpoint(
                summary=str(entry.payload["summary"]),
                first_id=str(entry.payload["first_id"]),
                last_id=str(entry.payload["last_id"]),
                id=entry.id,
            )
        )
        archives = tuple(ArchiveRecord.from_payload(e.payload) for e in session.entries(["archive"]))
        watermark = None
        for e in session.entries(["eviction"]):
            watermark = MediaWatermark.from_payload(e.payload) or watermark
        return CompileState(
            messages=messages,
            system=tuple(self.system),
            tools=tuple(self.tools),
            checkpoint=checkpoint,
            archives=archives,
            watermark=watermark,
            session_id=session.id,
        )

    def __call__(self, session: Session, profile: ModelProfile, overrides: frozenset[str]) -> CompiledRequest:
        compiled = compile(self.state(session), profile, self.policy_for(overrides))
        for record in compiled.decisions.new_archives:
            session.record("archive", record.to_payload())
        if compiled.decisions.new_watermark and compiled.decisions.watermark is not None:
            session.record("eviction", compiled.decisions.watermark.to_payload())
        return compiled
