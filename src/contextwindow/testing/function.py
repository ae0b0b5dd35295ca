"""A function as a provider: the fake for unit tests, as httpx's ``MockTransport(handler)`` and
pydantic-ai's ``FunctionModel`` are.

``FunctionProvider(handler)`` speaks the :class:`~contextwindow.providers.base.Provider` protocol.
Each call hands the request and its output bound to ``handler`` (sync or async), which answers with a
:class:`~contextwindow.content.Message`, a string (one assistant text block) or a
:class:`FunctionReply` (the message with a usage sample and the provider's stop reason), or raises a
:class:`~contextwindow.errors.ProviderError` (a :class:`~contextwindow.errors.ContextOverflow` for a
rejection for size); what it raises reaches the caller unchanged. The provider records every request
it saw. :class:`CountingFunctionProvider` also counts input, with a second function, for code that
counts before sending.

Where a test needs a provider's real tokenizer, window and error bodies, use
:class:`~contextwindow.testing.LocalProvider` instead.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeAlias

from ..content import Message, Request, Text, Thinking, ToolUse
from ..errors import UsageError
from ..formats import AttachmentLoader
from ..providers.base import (
    ProviderEvent,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    UsageSample,
    normalise_stop_reason,
)
from ..usage.tracker import Usage

__all__ = [
    "CountingFunctionProvider",
    "FunctionAnswer",
    "FunctionCounter",
    "FunctionHandler",
    "FunctionProvider",
    "FunctionReply",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class FunctionReply:
    """A handler's whole answer: the assistant message, the usage to report, the stop reason."""

    message: Message
    usage: Usage | None = None
    """Reported as one :class:`~contextwindow.providers.base.UsageSample` (``None``: no sample)."""
    stop_reason: str | None = None
    """The provider's own word (``"length"``, ``"max_tokens"``, ...), normalised on the
    :class:`~contextwindow.providers.base.Stop` event. ``None``: ``tool_use`` when the message calls
    a tool, else ``end_turn``."""


FunctionAnswer: TypeAlias = FunctionReply | Message | str
"""What a handler returns: a string is one assistant text block, a message is answered with no usage."""

FunctionHandler: TypeAlias = Callable[[Request, int], FunctionAnswer | Awaitable[FunctionAnswer]]
"""``handler(request, max_tokens)``, sync or async: the answer to one call, or a raised error."""

FunctionCounter: TypeAlias = Callable[[Request], int | Awaitable[int]]
"""``count(request)``, sync or async: the input tokens the provider would count for it."""


class FunctionProvider:
    """A :class:`~contextwindow.providers.base.Provider` whose answers come from ``handler``.

    The events of one call: a text or thinking delta per block, a tool call per tool use, the usage
    sample when the reply has one, then the stop. A handler that raises ends the call with that error
    before any event; the request is recorded either way.
    """

    def __init__(self, handler: FunctionHandler, *, name: str = "function") -> None:
        self.handler = handler
        self.name = name
        self.requests: list[Request] = []
        """Every request the provider was sent, in order (rejected ones too)."""
        self.max_tokens: list[int] = []
        """The output bound of each of those calls."""

    def stream(
        self, request: Request, *, max_tokens: int, load: AttachmentLoader
    ) -> AsyncIterator[ProviderEvent]:
        """Answer one call; see :mod:`contextwindow.providers.base` for the events."""
        return self._events(request, max_tokens)

    async def _events(self, request: Request, max_tokens: int) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        self.max_tokens.append(max_tokens)
        answer = self.handler(request, max_tokens)
        if inspect.isawaitable(answer):
            answer = await answer
        reply = _as_reply(answer)
        for block in reply.message.content:
            if isinstance(block, Text):
                yield TextDelta(text=block.text)
            elif isinstance(block, Thinking):
                yield ThinkingDelta(thinking=block.thinking, signature=block.signature)
            elif isinstance(block, ToolUse):
                yield ToolCall(tool_use=block)
        if reply.usage is not None:
            yield UsageSample(usage=reply.usage)
        raw = reply.stop_reason or (
            "tool_use" if any(isinstance(b, ToolUse) for b in reply.message.content) else "end_turn"
        )
        yield Stop(reason=normalise_stop_reason(raw), raw_reason=raw, message=reply.message)


class CountingFunctionProvider(FunctionProvider):
    """A :class:`FunctionProvider` that also counts input (``count_input_tokens``) with ``count``.

    A count is not a call: it is recorded in :attr:`counted`, not in :attr:`requests`.
    """

    def __init__(self, handler: FunctionHandler, count: FunctionCounter, *, name: str = "function") -> None:
        super().__init__(handler, name=name)
        self.count = count
        self.counted: list[Request] = []
        """Every request counted, in order."""

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int:
        """The input tokens ``count`` gives for ``request``; what it raises reaches the caller."""
        self.counted.append(request)
        counted = self.count(request)
        if inspect.isawaitable(counted):
            counted = await counted
        return counted


def _as_reply(answer: object) -> FunctionReply:
    if isinstance(answer, str):
        answer = Message.assistant(answer)
    if isinstance(answer, Message):
        answer = FunctionReply(message=answer)
    if not isinstance(answer, FunctionReply):
        kind = type(answer).__name__
        raise UsageError(f"a handler answers with a FunctionReply, a Message or a str, not {kind}")
    if answer.message.role != "assistant":
        raise UsageError(f"a handler answers with an assistant message, not a {answer.message.role} one")
    return answer
