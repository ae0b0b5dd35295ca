"""The request being extended within one stream (:class:`LiveRequest`) and what a provider count of
it covers (:func:`shared`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..content import Block, Message, Request, Text, ToolSpec

__all__ = ["LiveRequest", "shared", "unshared"]


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
    rendered: dict[str, tuple[Block, ...]] = field(default_factory=dict)
    """The messages the request holds, by ledger id, as they render in it (what the next compile shares
    with it: the same id rendered otherwise, capped or archived, is not shared)."""
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


def shared(anchored: dict[str, tuple[Block, ...]], message: Message) -> bool:
    """Whether ``message`` is in the anchored request, rendered as it was there."""
    if message.id is None:
        return False
    content = anchored.get(message.id)
    return content is not None and (content is message.content or content == message.content)


def unshared(anchored: dict[str, tuple[Block, ...]], messages: Sequence[Message]) -> list[Message]:
    """Those of ``messages`` not :func:`shared` with the anchored request (the test inlined: this runs
    over every message of a request on each anchored compile)."""
    return [
        m
        for m in messages
        if m.id is None
        or (content := anchored.get(m.id)) is None
        or (content is not m.content and content != m.content)
    ]
