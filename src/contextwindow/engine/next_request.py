"""The next request: compiled afresh, covered, counted before sending, and kept as the live request
of its stream (:class:`NextRequest`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ..errors import OverBudget, UsageError
from ..formats import AttachmentLoader
from ..pricing.counters import InputCounter
from ..store import Session
from .accounting import CallAccounting
from .compiler import RequestCompiler
from .counting import CountBeforeSend
from .events import Compacted, Event, Note, StreamRestarted, record_event
from .folding.folds import COVER_ROUNDS, Folding
from .live import LiveRequest

__all__ = ["NextRequest"]


class NextRequest:
    """Keeps the live request (:attr:`live`) and compiles the next one over ``requests``, covering
    what compile leaves out through ``folding`` and counting it with ``count``; events are recorded
    in ``session`` as they happen."""

    def __init__(
        self,
        session: Session,
        requests: RequestCompiler,
        folding: Folding,
        calls: CallAccounting,
        count: CountBeforeSend,
    ) -> None:
        self.session = session
        self.requests = requests
        self.folding = folding
        self.calls = calls
        self.count = count
        self.live: LiveRequest | None = None
        """The request being extended within the current stream (``None`` before the first compile)."""

    def current(self) -> LiveRequest:
        """The live request; :class:`~contextwindow.errors.UsageError` before any was prepared."""
        if self.live is None:
            raise UsageError("no request is prepared yet: call Engine.prepare first")
        return self.live

    async def fresh(
        self,
        turn_start_id: str | None,
        *,
        counter: InputCounter | None,
        reread: bool,
        retry: bool = False,
    ) -> AsyncIterator[Event]:
        """Compile the next request afresh, covering what compile would leave out (:meth:`covered`),
        and count it before sending when the window says so (``retry``: it is the retry after a
        rejection). A count that shows it over the window compiles once more; when the newest message
        alone no longer fits the tighter budget, the counted request goes as it is (the provider's
        answer decides). Raises :class:`~contextwindow.errors.OverBudget` when nothing fits."""
        async for event in self.covered(turn_start_id, reread=reread):
            yield event
        live = self.current()
        over = False
        async for event in self.counted(counter, live, retry=retry):
            over = isinstance(event, StreamRestarted)
            if not over:
                yield event
        if over:
            try:
                async for event in self.covered(turn_start_id, reread=reread):
                    yield event
            except OverBudget:
                self.live = live

    async def covered(self, turn_start_id: str | None, *, reread: bool) -> AsyncIterator[Event]:
        """Compile the next request (:attr:`live`) and cover what it leaves out
        (:meth:`~contextwindow.engine.folding.folds.Folding.cover`), compiling again: ``[summary] +
        tail``, at most ``COVER_ROUNDS`` rounds, the last one a cut: bounded, never looping. A new
        stream starts on it: the projection starts from nothing."""
        live = self._compile(reread)
        for round_ in range(COVER_ROUNDS):
            if not live.omitted:
                break
            changed = False
            async for event in self.folding.cover(
                turn_start_id, live.omitted, live.output_reserve, cut_only=round_ == COVER_ROUNDS - 1
            ):
                changed = changed or isinstance(event, Compacted)
                yield event
            if not changed:
                break
            live = self._compile(reread)
        self.live = live
        self.calls.stream_started()

    def _compile(self, reread: bool) -> LiveRequest:
        return self.requests.live(reread=reread, anchored=self.calls.anchored)

    async def counted(
        self, counter: InputCounter | None, live: LiveRequest, *, retry: bool = False
    ) -> AsyncIterator[Event]:
        """Count ``live`` before sending when the window says a decision depends on it
        (:class:`~contextwindow.engine.counting.CountBeforeSend`): a failed count's note is recorded;
        a restart it asks for is yielded unrecorded (the caller decides)."""
        load: AttachmentLoader = self.session.read_attachment
        model = self.count.model
        async for event in self.count(counter, live, lambda: live.request(model), load=load, retry=retry):
            yield record_event(self.session, event) if isinstance(event, Note) else event
