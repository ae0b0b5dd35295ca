"""Compile a ledger session: read its state, compile, record what compile decided, then show it.

:func:`compile_session` is the one-call form; :class:`SessionCompiler` keeps what it has read (the
messages, the archive records) and the per-message :class:`~contextwindow.compile.CompileCache`, so
the next compile after an append reads only the new entries and re-prices nothing it has priced.

Write order (seed §11): new archive records are appended to the ledger first, then the state is read
again — a rival's earlier record for the same result wins — and only then is the request returned.
A moved media watermark is recorded the same way, so a reopen compiles the same bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..content import Text, ToolSpec
from ..models import ModelProfile, get_profile
from .compiler import CompileCache, compile
from .policy import Policy
from .state import ArchiveRecord, Checkpoint, CompiledRequest, CompileState, MediaWatermark, PricedMessage

if TYPE_CHECKING:
    from ..store import Session

__all__ = ["SessionCompiler", "compile_session"]


class SessionCompiler:
    """Incremental compiles of one ledger session. Not thread-safe: one per agent loop."""

    def __init__(self, session: Session, *, estimator: Any = None) -> None:
        self.session = session
        self.estimator = estimator
        self.cache = CompileCache()
        self._messages: list[PricedMessage] = []
        self._frozen: tuple[PricedMessage, ...] = ()
        self._last_position: int | None = None
        self._archives: dict[tuple[str, str], ArchiveRecord] = {}
        self._archive_position: int | None = None

    def state(
        self,
        *,
        system: tuple[Text, ...] | str = (),
        tools: tuple[ToolSpec, ...] = (),
        multiplier: float = 1.0,
        anchor: Any = None,
        connection: str = "default",
    ) -> CompileState:
        """The session's compile state, reading only entries appended since the last read."""
        new = self.session.messages(after=self._last_position)
        if new:
            self._messages.extend(PricedMessage(message=s.message, block_prices=s.block_prices) for s in new)
            self._last_position = new[-1].position
            self._frozen = tuple(self._messages)
        for entry in self.session.entries(["archive"], after=self._archive_position):
            self._archive_position = entry.position
            try:
                record = ArchiveRecord.from_payload(entry.payload)
            except (KeyError, TypeError, ValueError):
                continue  # not a compile archive record; another writer's shape
            self._archives.setdefault((record.message_id, record.tool_use_id), record)  # first wins
        checkpoint = None
        latest = self.session.latest("checkpoint")
        if latest is not None:
            payload = latest.payload
            checkpoint = Checkpoint(
                summary=str(payload["summary"]),
                first_id=str(payload["first_id"]),
                last_id=str(payload["last_id"]),
                id=latest.id,
            )
        watermark = None
        eviction = self.session.latest("eviction")
        if eviction is not None:
            watermark = MediaWatermark.from_payload(eviction.payload)
        if isinstance(system, str):
            system = (Text(text=system),) if system else ()
        return CompileState(
            messages=self._frozen,
            system=system,
            tools=tools,
            checkpoint=checkpoint,
            archives=tuple(self._archives.values()),
            watermark=watermark,
            multiplier=multiplier,
            anchor=anchor,
            connection=connection,
            session_id=self.session.id,
        )

    def compile(
        self,
        *,
        model: str | ModelProfile,
        policy: Policy | None = None,
        system: tuple[Text, ...] | str = (),
        tools: tuple[ToolSpec, ...] = (),
        multiplier: float = 1.0,
        anchor: Any = None,
        connection: str = "default",
    ) -> CompiledRequest:
        """Compile the session's next request; record new archives and a moved watermark first."""
        profile = get_profile(model)
        kwargs: dict[str, Any] = {
            "system": system,
            "tools": tools,
            "multiplier": multiplier,
            "anchor": anchor,
            "connection": connection,
        }
        state = self.state(**kwargs)
        result = compile(state, profile, policy, estimator=self.estimator, cache=self.cache)
        decisions = result.decisions
        wrote = False
        for record in decisions.new_archives:
            self.session.record("archive", record.to_payload())
            wrote = True
        if decisions.new_watermark and decisions.watermark is not None:
            self.session.record("eviction", decisions.watermark.to_payload())
            wrote = True
        if wrote:  # show only what the ledger now says (a rival's earlier record wins)
            result = compile(
                self.state(**kwargs), profile, policy, estimator=self.estimator, cache=self.cache
            )
        return result


def compile_session(
    session: Session,
    *,
    model: str | ModelProfile,
    policy: Policy | None = None,
    system: tuple[Text, ...] | str = (),
    tools: tuple[ToolSpec, ...] = (),
    multiplier: float = 1.0,
    anchor: Any = None,
    connection: str = "default",
    estimator: Any = None,
) -> CompiledRequest:
    """One compile of a ledger session (a fresh :class:`SessionCompiler`; keep one for incremental use)."""
    return SessionCompiler(session, estimator=estimator).compile(
        model=model,
        policy=policy,
        system=system,
        tools=tools,
        multiplier=multiplier,
        anchor=anchor,
        connection=connection,
    )
