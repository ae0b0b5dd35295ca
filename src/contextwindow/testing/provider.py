"""The local provider in process: the :class:`~contextwindow.providers.base.Provider` protocol over a
:class:`~.model.LocalModel`, with no HTTP in between.

It raises exactly what the SDK adapters raise for the same answer: a rejection's status and body go
through the same classifier, so a window rejection is a ``ContextOverflow`` with both numbers, an
overload a ``TransientProviderError``. Usage is one :class:`~.base.UsageSample` per call, carrying the
figure the usage setting reports (``none``: no sample).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

from ..content import Message, Request, Text, Thinking, ToolUse
from ..errors import ProviderError, TransientProviderError
from ..formats import AttachmentLoader, WireFormat
from ..formats.openai import carried
from ..providers.base import (
    ProviderEvent,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    UsageSample,
    normalise_stop_reason,
)
from ..providers.errors import is_transient_status
from ..providers.overflow import classify
from .model import LocalModel, LocalSettings, Rejection
from .wire import text_pieces

__all__ = ["LocalProvider", "rejection_error"]


def rejection_error(rejection: Rejection, *, provider: str = "local") -> ProviderError:
    """A local rejection as the error tree's equivalent, as
    :func:`~contextwindow.providers.errors.map_sdk_error` maps an SDK's."""
    overflow = classify(rejection.status, dict(rejection.body), provider=provider, headers=rejection.headers)
    if overflow is not None:
        return overflow
    kind = TransientProviderError if is_transient_status(rejection.status) else ProviderError
    return kind(
        rejection.message or f"HTTP {rejection.status}",
        status=rejection.status,
        body=dict(rejection.body),
        headers=rejection.headers,
        provider=provider,
    )


class LocalProvider:
    """The local provider as a ``Provider``. ``wire`` picks whose error texts and limits it imitates.

    ``LocalProvider(settings=LocalSettings(window=8000, usage="cumulative"), script=[...])`` or
    ``LocalProvider(model)`` to share one :class:`LocalModel` (say, with a server).
    """

    name = "local"

    def __init__(
        self,
        model: LocalModel | None = None,
        *,
        settings: LocalSettings | None = None,
        script: Iterable[Message] = (),
        wire: WireFormat = "anthropic",
        session: str = "default",
    ) -> None:
        if model is not None and (settings is not None or script):
            raise ValueError("pass either a LocalModel or settings/script, not both")
        self.model = model or LocalModel(settings, script=script)
        self.wire: WireFormat = wire
        self.session = session
        self.counts = 0
        """Requests counted by :meth:`count_input_tokens` (counts are not calls)."""

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int:
        """The input count a call with ``request`` would report (:meth:`LocalModel.count_input`), in
        every usage setting, as the real count endpoints answer whatever the call's usage reports;
        bad input is refused with the call's own error. Not a call: :attr:`counts` goes up, nothing
        else does."""
        if self.model.settings.delay_seconds:
            await asyncio.sleep(self.model.settings.delay_seconds)
        counted = self.model.count_input(request, wire=self.wire, load=load)
        if isinstance(counted, Rejection):
            raise rejection_error(counted)
        self.counts += 1
        return counted.input_tokens

    async def stream(
        self, request: Request, *, max_tokens: int, load: AttachmentLoader
    ) -> AsyncIterator[ProviderEvent]:
        """Answer one call; see :mod:`contextwindow.providers.base` for the events."""
        if self.model.settings.delay_seconds:
            await asyncio.sleep(self.model.settings.delay_seconds)
        outcome = self.model.handle(
            request, wire=self.wire, max_tokens=max_tokens, load=load, session=self.session
        )
        if isinstance(outcome, Rejection):
            raise rejection_error(outcome)
        message = outcome.message
        if self.wire == "openai":
            # A Chat Completions reply has no form for thinking (over HTTP it is not rendered; its
            # tokens stay in the output count, as reasoning tokens do): in process it arrives so too.
            message = carried((message,))[-1]
        for block in message.content:
            if isinstance(block, Text):
                for piece in text_pieces(block.text):
                    yield TextDelta(text=piece)
            elif isinstance(block, Thinking):
                for piece in text_pieces(block.thinking):
                    yield ThinkingDelta(thinking=piece)
                if block.signature:
                    yield ThinkingDelta(signature=block.signature)
            elif isinstance(block, ToolUse):
                yield ToolCall(tool_use=block)
        if outcome.reported is not None:
            yield UsageSample(usage=outcome.reported)
        yield Stop(
            reason=normalise_stop_reason(outcome.stop_reason),
            raw_reason=outcome.stop_reason,
            message=message,
        )
