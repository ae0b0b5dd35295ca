"""Compile a ledger session: read its state, compile, record what compile decided, then show it.

:func:`compile_session` is the one-call form; :class:`SessionCompiler` keeps what it has read (the
messages, the archive records) and the per-message :class:`~contextwindow.compile.CompileCache`, so
the next compile after an append reads only the new entries and re-prices nothing it has priced.

Write order (as in maka's archive, https://github.com/apache/maka): new archive records are appended to the ledger first, then the
state is read again — a rival's earlier record for the same result wins — and only then is the
request returned. A moved media watermark is recorded the same way, so a reopen compiles the same
bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from ..content import Text, ToolSpec
from ..formats import tool_specs
from ..models import ModelProfile, get_profile
from .cache import CompileCache
from .next_request import compile
from .policy import Policy
from .state import ArchiveRecord, Checkpoint, CompiledRequest, CompileState, MediaWatermark, PricedMessage

if TYPE_CHECKING:
    from ..store import MessageLog, Session

__all__ = ["SessionCompiler", "compile_session"]

_OVERLAYS = ("archive", "checkpoint", "eviction")
"""The entry kinds besides messages a compile reads."""


class SessionCompiler:
    """Incremental compiles of one ledger session. Not thread-safe: one per agent loop."""

    def __init__(self, session: Session, *, estimator: Any = None) -> None:
        self.session = session
        self.estimator = estimator
        self.cache = CompileCache()
        self._log: MessageLog | None = None
        self._priced: list[PricedMessage | None] = []
        self._archives: dict[tuple[str, str], ArchiveRecord] = {}
        self._checkpoint: Checkpoint | None = None
        self._watermark: MediaWatermark | None = None
        self._position: int | None = None
        """Where the last read of archive, checkpoint and eviction entries got to: the position of the
        last one read, or of the newest message read before it, whichever is later."""

    def state(
        self,
        *,
        system: Sequence[Text] | str = (),
        tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
        multiplier: float = 1.0,
        anchor: Any = None,
        connection: str = "default",
    ) -> CompileState:
        """The session's compile state, reading only entries appended since the last read: the
        messages, then the archive records, the latest checkpoint and the latest eviction in one read
        (the ledger is append-only, so the latest of a kind is the last one read)."""
        self._log = self.session.message_log(into=self._log)
        self._priced.extend([None] * (len(self._log) - len(self._priced)))
        for entry in self.session.entries(_OVERLAYS, after=self._position):
            self._position = entry.position
            if entry.kind == "archive":
                try:
                    record = ArchiveRecord.from_payload(entry.payload)
                except (KeyError, TypeError, ValueError):
                    continue  # not a compile archive record; another writer's shape
                self._archives.setdefault((record.message_id, record.tool_use_id), record)  # first wins
            elif entry.kind == "checkpoint":
                payload = entry.payload
                self._checkpoint = Checkpoint(
                    summary=str(payload["summary"]),
                    first_id=str(payload["first_id"]),
                    last_id=str(payload["last_id"]),
                    id=entry.id,
                    summary_tokens=_count(payload.get("summary_tokens")),
                )
            else:
                self._watermark = MediaWatermark.from_payload(entry.payload)
        # Every overlay before the newest message read was appended before it, so this read saw it:
        # the next reads start there, not at the last overlay (a session without any would be read
        # whole on every compile).
        newest = self._log.last_position
        if newest is not None and (self._position is None or newest > self._position):
            self._position = newest
        checkpoint, watermark = self._checkpoint, self._watermark
        return CompileState(
            messages=_LogView(self._log, self._priced, len(self._log)),
            system=((Text(text=system),) if system else ()) if isinstance(system, str) else tuple(system),
            tools=tool_specs(tools),
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
        system: Sequence[Text] | str = (),
        tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
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


class _LogView(Sequence[PricedMessage]):
    """A snapshot (the first ``length`` messages) of a session's :class:`~contextwindow.store.MessageLog`
    as priced messages; each row is validated by the log the first time compile reads it."""

    def __init__(self, log: MessageLog, priced: list[PricedMessage | None], length: int) -> None:
        self._log = log
        self._priced = priced  # shared by every view of this log: decoded once per compiler
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> PricedMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[PricedMessage]: ...

    def __getitem__(self, index: int | slice) -> PricedMessage | list[PricedMessage]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        hit = self._priced[index]
        if hit is None:
            stored = self._log[index]
            hit = PricedMessage(message=stored.message, block_prices=stored.block_prices)
            self._priced[index] = hit
        return hit

    def id_at(self, index: int) -> str:
        """The message id at ``index`` without decoding the row."""
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._log.id_at(index)

    def ids(self, start: int, stop: int) -> list[str]:
        """The message ids ``start:stop`` (within this snapshot) without decoding the rows."""
        return self._log.ids(max(0, start), min(max(0, stop), self._length))

    def index_of(self, message_id: str) -> int | None:
        """The index of a message id within this snapshot, or ``None``."""
        found = self._log.index_of(message_id)
        return found if found is not None and found < self._length else None


def compile_session(
    session: Session,
    *,
    model: str | ModelProfile,
    policy: Policy | None = None,
    system: Sequence[Text] | str = (),
    tools: Sequence[ToolSpec | Mapping[str, Any]] = (),
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


def _count(value: object) -> int | None:
    """A stored token count: a positive whole number, else ``None`` (a record of another shape)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
