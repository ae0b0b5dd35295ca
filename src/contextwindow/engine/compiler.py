"""What the engine asks of a compiler (:class:`Compiler`, :class:`Compiled`), and its default one: compile's incremental :class:`~contextwindow.compile.SessionCompiler`
with the engine's per-turn escalations mapped onto the policy.

The engine hands over what a compile needs beyond the ledger: the calibration multiplier and the
newest anchor (so the estimate is anchored on the provider's real count). The escalation rungs arrive
as ``overrides`` and tighten the policy for the rest of the turn: ``evict_media`` keeps only the
newest image inline, within a quarter of the byte budget; ``archive_tool_results`` archives every
stale result outside the newest turn, text over 256 tokens included; ``evict_all_media`` (taken only
when the newest message alone does not fit) sends no media inline at all. One incremental compiler is kept
per session, so a compile after an append reads only the new entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..compile import CompiledRequest, Decisions, Policy, SessionCompiler
from ..compile.session import system_texts
from ..content import Message, Text, ToolSpec
from ..formats import tool_specs
from ..models import ModelProfile
from ..store import Session
from ..usage.tracker import Anchor

__all__ = ["Compiled", "Compiler", "EngineCompiler"]


class Compiled(Protocol):
    """What the engine needs of a compiled request (``contextwindow.compile.CompiledRequest``)."""

    @property
    def system(self) -> tuple[Text, ...]: ...
    @property
    def tools(self) -> tuple[ToolSpec, ...]: ...
    @property
    def messages(self) -> tuple[Message, ...]: ...
    @property
    def estimated_tokens(self) -> int: ...
    @property
    def local_estimate(self) -> int: ...
    @property
    def output_reserve(self) -> int: ...
    @property
    def decisions(self) -> Decisions: ...


class Compiler(Protocol):
    """Fits the session's next request: ``(session, profile, overrides, *, multiplier, anchor,
    connection) -> Compiled`` (:class:`~contextwindow.engine.compiler.EngineCompiler` by default).

    ``overrides`` are the engine's per-turn escalations (``evict_media``, ``archive_tool_results``)
    for the compile policy; ``multiplier`` the calibration learned so far; ``anchor`` the newest
    anchor, on which the estimate is anchored.
    """

    def __call__(
        self,
        session: Session,
        profile: ModelProfile,
        overrides: frozenset[str],
        *,
        multiplier: float,
        anchor: Anchor | None,
        connection: str,
    ) -> Compiled: ...


@dataclass
class EngineCompiler:
    """``EngineCompiler(policy, system=..., tools=...)`` is a ``Compiler`` for :class:`~contextwindow.engine.loop.Engine`.

    ``system`` is a string or text blocks; ``tools`` are ``ToolSpec`` values or wire tool definitions
    (Anthropic's or OpenAI's), as :func:`~contextwindow.formats.tool_specs` reads them.
    """

    policy: Policy = field(default_factory=Policy)
    system: Sequence[Text] | str = ()
    tools: Sequence[ToolSpec | Mapping[str, Any]] = ()
    _compilers: dict[str, SessionCompiler] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.system = system_texts(self.system)
        self.tools = tool_specs(self.tools)

    def policy_for(self, overrides: frozenset[str]) -> Policy:
        """The policy with the turn's escalations applied."""
        policy = self.policy
        if "evict_media" in overrides:
            policy = policy.with_(
                max_inline_images=1, inline_media_bytes=max(1, policy.inline_media_bytes // 4)
            )
        if "evict_all_media" in overrides:
            policy = policy.with_(inline_media_bytes=1)
        if "archive_tool_results" in overrides:
            policy = policy.with_(
                recent_turns_full=1, archive_text_over_tokens=256, archive_stale_results=True
            )
        return policy

    def __call__(
        self,
        session: Session,
        profile: ModelProfile,
        overrides: frozenset[str],
        *,
        multiplier: float = 1.0,
        anchor: Anchor | None = None,
        connection: str = "default",
    ) -> CompiledRequest:
        compiler = self._compilers.get(session.id)
        if compiler is None or compiler.session is not session:
            compiler = self._compilers[session.id] = SessionCompiler(session)
        return compiler.compile(
            model=profile,
            policy=self.policy_for(overrides),
            system=system_texts(self.system),
            tools=tool_specs(self.tools),
            multiplier=multiplier,
            anchor=anchor,
            connection=connection,
        )
