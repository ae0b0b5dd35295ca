"""The guard's sans-IO seam: the core asks for calls, a driver makes them.

The guard core is written as coroutines that never touch the network or an event loop. Where it
needs a provider call (the agent's request, a summary) it awaits :class:`Ask` with a :class:`Send`
step; the step travels out through the coroutine to whoever is stepping it, and the answer (or the
exception the call raised) is sent back in. Two drivers step the same coroutine:

- :func:`run_sync` makes each call with a blocking client; it needs no event loop, so it works in a
  plain script and inside a running one (a notebook cell, a sync callback in an async server);
- :func:`run_async` awaits each call on an async client.

So sync and async share one implementation, and the core is testable without any client: step it by
hand and answer each :class:`Send` with what you like.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ..content import Message
from ..usage.tracker import Usage

__all__ = ["Ask", "Reply", "Send", "run_async", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class Send:
    """A call the core needs made: ``body`` in the client's wire format.

    ``purpose`` is ``"request"`` for the agent's own call (answer with the client's result, whatever
    it is: a response, a stream), ``"count"`` for counting that request's input instead of sending it
    (Anthropic's ``count_tokens``), or ``"summary"`` for a summariser call (answer with a
    :class:`Reply`).
    """

    body: Mapping[str, Any]
    purpose: Literal["request", "count", "summary"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Reply:
    """A provider's answer in canonical form: the assistant message, its usage, its stop reason."""

    message: Message
    usage: Usage | None = None
    """``None`` when the provider reported none."""
    stop_reason: str | None = None
    """The provider's own word (``end_turn``, ``tool_calls``, ``length``, ...)."""
    extra: Mapping[str, Any] = field(default_factory=dict)


class Ask:
    """``answer = await Ask(step)``: hand ``step`` to the driver and wait for its answer."""

    __slots__ = ("step",)

    def __init__(self, step: Send) -> None:
        self.step = step

    def __await__(self) -> Generator[Send, Any, Any]:
        answer = yield self.step
        return answer


def run_sync(coro: Coroutine[Any, Any, T], perform: Callable[[Send], Any]) -> T:
    """Step ``coro`` to its end, making each call with the blocking ``perform``."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = coro.throw(error) if error is not None else coro.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if not isinstance(step, Send):  # pragma: no cover - the core awaits nothing else
            coro.close()
            raise RuntimeError(f"the guard core awaited {step!r}, not a call")
        try:
            answer, error = perform(step), None
        except Exception as exc:  # the call's failure goes back into the core to decide on
            answer, error = None, exc


async def run_async(coro: Coroutine[Any, Any, T], perform: Callable[[Send], Awaitable[Any]]) -> T:
    """Step ``coro`` to its end, awaiting each call on ``perform``."""
    answer: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = coro.throw(error) if error is not None else coro.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        if not isinstance(step, Send):  # pragma: no cover - the core awaits nothing else
            coro.close()
            raise RuntimeError(f"the guard core awaited {step!r}, not a call")
        try:
            answer, error = await perform(step), None
        except Exception as exc:
            answer, error = None, exc
