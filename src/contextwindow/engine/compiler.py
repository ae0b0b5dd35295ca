"""What the engine asks of a compiler (:class:`Compiler`, :class:`CompileContext`, :class:`Compiled`), its
default one (:class:`EngineCompiler`), and how the engine compiles its next request
(:class:`RequestCompiler`).

A compiler gets one :class:`CompileContext`: the session, the profile to fit, the turn's escalations
(``overrides``), the calibration multiplier and the newest anchor (so the estimate is anchored on the
provider's real count). :class:`EngineCompiler` is compile's incremental
:class:`~contextwindow.compile.SessionCompiler` with the escalations mapped onto the policy:
``evict_media`` keeps only the newest image inline, within a quarter of the byte budget;
``archive_tool_results`` archives every stale result outside the newest turn, text over 256 tokens
included. (A message that does not fit with its media inline, the newest included, is compile's own
case: its media go out of line, oldest first, as far as it needs, for that request only.) Otherwise
stale tool results are archived under pressure only (``Policy.archive_as_needed``): where the tail
walk needs the room, and not when a short tail is better cut to fill. One incremental compiler is kept per session,
so a compile after an append reads only the new entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from ..compile import CompiledRequest, Decisions, Policy, SessionCompiler
from ..compile.reread import READ_ARCHIVED, READ_ARCHIVED_TOOL, names_reread
from ..content import Message, Text, ToolSpec
from ..errors import InvalidInput
from ..formats import ToolDefinition, tool_specs
from ..models import ModelProfile
from ..store import Session
from ..usage.tracker import Anchor, AnchorBook
from .live import Held, LiveRequest
from .window import WindowState

__all__ = [
    "CompileContext",
    "Compiled",
    "Compiler",
    "EngineCompiler",
    "RequestCompiler",
    "SystemPrompt",
    "system_blocks",
]

SystemPrompt = str | Sequence[Text]
"""A system prompt as a string or as text blocks."""


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


@dataclass(frozen=True, kw_only=True, slots=True)
class CompileContext:
    """Everything a compile of the session's next request is given.

    ``overrides`` are the engine's escalations for the rest of the turn (``evict_media``,
    ``archive_tool_results``, the rejection ladder's rungs); ``multiplier`` the calibration learned so far;
    ``anchor`` the newest anchor, on which the estimate is anchored.
    """

    session: Session
    profile: ModelProfile
    overrides: frozenset[str] = frozenset()
    multiplier: float = 1.0
    anchor: Anchor | None = None
    connection: str = "default"


class Compiler(Protocol):
    """Fits the session's next request: ``compiler(context) -> Compiled``
    (:class:`EngineCompiler` by default)."""

    def __call__(self, context: CompileContext) -> Compiled: ...


def system_blocks(system: SystemPrompt) -> tuple[Text, ...]:
    """A system prompt as text blocks (an empty string is no block)."""
    if isinstance(system, str):
        return (Text(text=system),) if system else ()
    blocks = tuple(system)
    for i, block in enumerate(blocks):
        if not isinstance(block, Text):
            raise InvalidInput(f"must be a Text block, got {type(block).__name__}", path=f"system[{i}]")
    return blocks


@dataclass
class EngineCompiler:
    """``EngineCompiler(policy, system=..., tools=...)`` is a ``Compiler`` for
    :class:`~contextwindow.engine.loop.Engine`; ``system`` is a string or text blocks, ``tools`` specs
    or wire dicts (:func:`tool_specs`)."""

    policy: Policy = field(default_factory=Policy)
    system: SystemPrompt = ()
    tools: Sequence[ToolDefinition] = ()
    _compilers: dict[str, SessionCompiler] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.system = system_blocks(self.system)
        self.tools = tool_specs(self.tools)

    def policy_for(self, overrides: frozenset[str]) -> Policy:
        """The policy with the turn's escalations applied."""
        policy = self.policy
        if "evict_media" in overrides:
            policy = policy.with_(
                max_inline_images=1, inline_media_bytes=max(1, policy.inline_media_bytes // 4)
            )
        if "archive_tool_results" in overrides:
            policy = policy.with_(
                recent_turns_full=1, archive_text_over_tokens=256, archive_stale_results=True
            )
        elif policy.archive_stale_results and not policy.archive_as_needed:
            # Archive under pressure only: a stale result is archived where the request needs the
            # room, and stays whole while it fits (archives already recorded stay in force).
            policy = policy.with_(archive_as_needed=True)
        return policy

    def __call__(self, context: CompileContext) -> CompiledRequest:
        session = context.session
        compiler = self._compilers.get(session.id)
        if compiler is None or compiler.session is not session:
            compiler = self._compilers[session.id] = SessionCompiler(session)
        policy = self.policy_for(context.overrides)

        def run(policy: Policy) -> CompiledRequest:
            return compiler.compile(
                model=context.profile,
                policy=policy,
                system=system_blocks(self.system),
                tools=tool_specs(self.tools),
                multiplier=context.multiplier,
                anchor=context.anchor,
                connection=context.connection,
            )

        return run(policy)


class RequestCompiler:
    """How the engine compiles the session's next request: at the profile compile fits against
    (:meth:`~contextwindow.engine.window.WindowState.fit_profile`), with the turn's escalations, the
    calibration multiplier and the newest anchor."""

    def __init__(
        self,
        session: Session,
        compiler: Compiler,
        window: WindowState,
        anchors: AnchorBook,
        *,
        connection: str,
    ) -> None:
        self.session = session
        self.compiler = compiler
        self.window_state = window
        self.anchors = anchors
        self.connection = connection
        self.overrides: set[str] = set()
        """The turn's escalations (cleared at each turn)."""

    @property
    def window(self) -> int:
        """The window as known: declared, or as a rejection proved it (read from the window state)."""
        return self.window_state.limits.known

    def fit_profile(self) -> ModelProfile:
        """The profile compile fits against: the window as known, less the fit margin and what
        rejections taught."""
        return self.window_state.fit_profile()

    def __call__(self, profile: ModelProfile | None = None) -> Compiled:
        """Compile at ``profile`` (default: :meth:`fit_profile`) with the turn's escalations. A
        message that does not fit with its media inline goes with them out of line for that request
        (compile's own rule, nothing kept for the turn); if the newest message does not fit even so,
        it alone is too large: :class:`~contextwindow.errors.OverBudget`."""
        return self.compiler(
            CompileContext(
                session=self.session,
                profile=self.fit_profile() if profile is None else profile,
                overrides=frozenset(self.overrides),
                multiplier=self.window_state.fit.multiplier(),
                anchor=self.anchors.latest,
                connection=self.connection,
            )
        )

    def live(self, *, reread: bool, anchored: Held) -> LiveRequest:
        """Compile the next request afresh as the live request of a new stream: its output bound
        set on the window (:meth:`~contextwindow.engine.window.WindowState.compiled`), one
        calibration sample armed for it, ``read_archived`` offered when ``reread`` and a placeholder
        names it, and its uncounted part measured against ``anchored`` (the request the newest
        anchor counted). Raises :class:`~contextwindow.errors.OverBudget` as :meth:`__call__` does."""
        compiled = self()
        window = self.window_state
        estimator = window.fit.live_estimator()
        # One calibration sample per compiled request, learned from its first call (the later calls of
        # its stream are learned by what each appended: CallAccounting).
        window.calibrator.arm(compiled.local_estimate)
        tools, extra = compiled.tools, 0
        if reread and all(t.name != READ_ARCHIVED for t in tools) and _names_reread(compiled):
            tools = (*tools, READ_ARCHIVED_TOOL)
            extra = estimator.tool_spec(READ_ARCHIVED_TOOL)
        max_tokens = window.compiled(compiled.output_reserve)
        estimated = compiled.estimated_tokens + extra
        return LiveRequest(
            system=compiled.system,
            tools=tools,
            messages=list(compiled.messages),
            estimated_tokens=estimated,
            uncounted=self._uncounted(compiled, estimated, anchored),
            rendered=Held(compiled=tuple(compiled.messages)),
            local_estimate=compiled.local_estimate + extra,
            max_tokens=max_tokens,
            output_reserve=compiled.output_reserve,
            multiplier=window.fit.multiplier(),
            omitted=tuple(compiled.decisions.omitted),
            head_tokens=_head_tokens(compiled, extra),
        )

    def _uncounted(self, compiled: Compiled, estimated: int, anchored: Held) -> int:
        """The part of a fresh compile's estimate no provider count covers. Anchored, the estimate is
        the anchored request's count plus the estimated change since: what was added (messages the
        anchored request did not hold, at their price) and what was taken out (a fold's span, earlier
        thinking the API strips), whose errors need not cancel. Unanchored, all of it."""
        anchor = self.anchors.latest
        if anchor is None or compiled.estimated_tokens == compiled.local_estimate:
            return estimated
        added = self.unshared(compiled.messages, anchored)
        removed = max(0, anchor.input_tokens + added - estimated)
        return min(estimated, added + removed)

    def unshared(self, messages: Sequence[Message], counted: Held) -> int:
        """The estimate of those of ``messages`` that a counted request (its messages as rendered
        there, :attr:`LiveRequest.rendered`) did not hold: new, or rendered otherwise
        (:func:`~contextwindow.engine.live.shared`)."""
        fresh = counted.unshared(messages)
        return self.window_state.fit.live_estimator().messages(fresh) if fresh else 0


def _names_reread(compiled: Compiled) -> bool:
    """Whether a placeholder in ``compiled`` names the re-read tool: as compile knew it when it says,
    else read from the messages."""
    known = getattr(compiled, "names_reread", None)
    return known if isinstance(known, bool) else names_reread(compiled.messages)


def _head_tokens(compiled: Compiled, extra: int) -> tuple[int, int]:
    """What ``compiled``'s system prompt and tools (with ``extra`` tokens of tools the engine added)
    are estimated at, from its makeup (a compiler that gives none: zero)."""
    makeup = getattr(compiled, "makeup", None) or {}
    return int(makeup.get("system", 0)), int(makeup.get("tools", 0)) + extra
