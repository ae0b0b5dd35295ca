"""The request being extended within one stream (:class:`LiveRequest`) and what a provider count of
it covers (:func:`shared`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress, count
from operator import attrgetter, is_not
from typing import Protocol

from ..content import Block, Message, Request, Text, ToolSpec

__all__ = ["Held", "LiveRequest", "shared", "unshared"]


@dataclass(slots=True)
class Held:
    """The messages a request holds, by ledger id, as they render in it (what the next compile shares
    with it: the same id rendered otherwise, capped or archived, is not shared): those compile put in
    it, in order, and those appended to it since (rounds, replies), by id.

    Kept as the compiled sequence rather than a map of it, so that a request compiled from a history
    that only grew is compared in work proportional to what is new (:meth:`unshared`): on every
    anchored compile, and snapshotted on every reported call."""

    compiled: tuple[Message, ...] = ()
    appended: dict[str, tuple[Block, ...]] = field(default_factory=dict)
    _by_id: dict[str, tuple[Block, ...]] | None = None
    """Every compiled message's content by id, made when first needed (a compile that shares no
    leading message with it)."""

    def __setitem__(self, ledger_id: str, content: tuple[Block, ...]) -> None:
        self.appended[ledger_id] = content

    def get(self, ledger_id: str) -> tuple[Block, ...] | None:
        """The content ``ledger_id`` renders as in the request (``None``: it does not hold it)."""
        found = self.appended.get(ledger_id)
        return found if found is not None else self._compiled_by_id().get(ledger_id)

    def snapshot(self) -> Held:
        """What the request holds now, kept as it is while the request goes on growing."""
        return Held(self.compiled, dict(self.appended), self._by_id)

    def unshared(self, messages: Sequence[Message]) -> list[Message]:
        """Those of ``messages`` (a request in ledger order, as compile makes them) it does not hold
        as they render there. The leading run of ``messages`` that are its own compiled messages, the
        very objects, is held; the rest can only be among its later compiled messages or those
        appended (ids are unique and both are in ledger order), so only those are looked up."""
        compiled = self.compiled
        shared = _leading_run(messages, compiled)
        if shared == 0:
            return unshared(self, messages)
        held = {m.id: m.content for m in compiled[shared:] if m.id is not None}
        held.update(self.appended)
        return unshared(held, messages[shared:])

    def _compiled_by_id(self) -> dict[str, tuple[Block, ...]]:
        if self._by_id is None:
            by_id: dict[str | None, tuple[Block, ...]] = dict(
                zip(map(_ID, self.compiled), map(_CONTENT, self.compiled), strict=True)
            )
            by_id.pop(None, None)
            self._by_id = by_id  # type: ignore[assignment]
        return self._by_id  # type: ignore[return-value]


def _leading_run(messages: Sequence[Message], compiled: Sequence[Message]) -> int:
    """How many leading ``messages`` are the very objects of ``compiled`` at the same places (at C
    speed: the first place they differ, found by ``compress``)."""
    n = min(len(messages), len(compiled))
    return next(compress(count(), map(is_not, messages[:n], compiled[:n])), n)


_ID, _CONTENT = attrgetter("id"), attrgetter("content")


@dataclass(slots=True)
class LiveRequest:
    """The request being extended within one stream: what was compiled, and every round and reply
    appended to it since, with the figures the window decisions read."""

    system: tuple[Text, ...]
    tools: tuple[ToolSpec, ...]
    messages: list[Message]
    estimated_tokens: int
    local_estimate: int
    max_tokens: int
    output_reserve: int
    multiplier: float = 1.0
    """The calibration multiplier the request was compiled at: the units of ``local_estimate``."""
    omitted: tuple[str, ...] = ()
    """Ids compile left out for the budget that no checkpoint covers (the engine covers them)."""
    recompiled: bool = True
    uncounted: int = 0
    """The part of ``estimated_tokens`` no provider count covers (what a count before sending would
    correct, :mod:`~contextwindow.engine.precount`)."""
    counted: bool = False
    """``estimated_tokens`` is the provider's count of this very request (made before sending it)."""
    head_tokens: tuple[int, int] = (0, 0)
    """What its system prompt and its tools are estimated at (what ``request_sent`` records of them)."""
    rendered: Held = field(default_factory=Held)
    """The messages the request holds, as they render in it (what the next compile shares with it)."""
    margins: int = 0
    """What the projection priced the rounds appended since the last reported prompt above their
    estimates (``estimated_tokens`` carries the estimates): the unreported path projects with it."""

    def request(self, model: str) -> Request:
        """The request to send for ``model``."""
        return Request(
            model=model,
            system=self.system,
            tools=self.tools,
            messages=tuple(self.messages),
            max_tokens=self.max_tokens,
        )

    def add_reply(self, ledger_id: str, reply: Message, tokens: int) -> None:
        """``reply`` (stored as ``ledger_id``, estimated at ``tokens``) rides on the request: none of
        it is counted."""
        self.rendered[ledger_id] = reply.content
        self.messages.append(reply)
        self.estimated_tokens += tokens
        self.local_estimate += tokens
        self.uncounted += tokens

    def add_round(self, messages: list[Message], *, priced: int, estimate: int, local: int) -> None:
        """A round of ``messages`` rides on the request: ``estimate`` tokens by the estimator (none
        counted), ``priced`` as the projection priced it, ``local`` in compile's units."""
        self.messages.extend(messages)
        self.estimated_tokens += estimate
        self.uncounted += estimate
        self.margins += priced - estimate
        self.local_estimate += local
        self.recompiled = False

    def counted_as(self, prompt: int) -> None:
        """The provider counted the request as it stands at ``prompt`` tokens: nothing of it is
        uncounted any more."""
        self.estimated_tokens = prompt
        self.uncounted = self.margins = 0


class _Holding(Protocol):
    def get(self, ledger_id: str, /) -> tuple[Block, ...] | None: ...


def shared(anchored: _Holding, message: Message) -> bool:
    """Whether ``message`` is in the anchored request, rendered as it was there."""
    if message.id is None:
        return False
    content = anchored.get(message.id)
    return content is not None and (content is message.content or content == message.content)


def unshared(anchored: _Holding, messages: Sequence[Message]) -> list[Message]:
    """Those of ``messages`` not :func:`shared` with the anchored request (the test inlined: this runs
    over every message of a request on each anchored compile)."""
    return [
        m
        for m in messages
        if m.id is None
        or (content := anchored.get(m.id)) is None
        or (content is not m.content and content != m.content)
    ]
