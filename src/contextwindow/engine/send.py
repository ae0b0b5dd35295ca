"""Sending one request and streaming its reply (:func:`stream_call`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from ..content import Request
from ..errors import ContextOverflow, ProviderError, UsageError
from ..formats import AttachmentLoader
from ..providers import Provider, Stop, TextDelta, ThinkingDelta, ToolCall, UsageSample
from ..providers.overflow import output_cap_error
from ..usage.tracker import Usage
from .events import Note, NoteBook
from .stats import TurnStats

__all__ = ["Received", "stream_call"]


@dataclass(slots=True)
class Received:
    """What one call's stream delivered besides the events passed on."""

    stop: Stop | None = None
    sample: Usage | None = None


async def stream_call(
    provider: Provider,
    request: Request,
    received: Received,
    *,
    max_tokens: int,
    load: AttachmentLoader,
    notes: NoteBook,
    stats: TurnStats,
) -> AsyncIterator[TextDelta | ThinkingDelta | ToolCall | Note]:
    """Send ``request`` (its output bound ``max_tokens``) and pass the stream's text, thinking and tool calls on; the stop and the
    usage sample land in ``received``. The stream's time is off the engine's clock (``stats`` is
    paused; the caller resumes it). A rejection for size is raised as it came; any other provider
    error is raised after an ``output_cap`` note (unrecorded) when it names the model's output cap;
    a stream without a stop event raises :class:`~contextwindow.errors.UsageError`."""
    stats.pause()
    try:
        async for event in provider.stream(request, max_tokens=max_tokens, load=load):
            if isinstance(event, TextDelta | ThinkingDelta | ToolCall):
                yield event
            elif isinstance(event, UsageSample):
                received.sample = event.usage
            elif isinstance(event, Stop):
                received.stop = event
    except ContextOverflow:
        raise
    except ProviderError as failure:
        refused = output_cap_error(failure.status, failure.body if failure.body is not None else str(failure))
        if refused is not None:
            yield notes.output_cap(max_tokens=refused.requested, output_cap=refused.cap)
        raise
    if received.stop is None:
        raise UsageError("the provider's stream ended without a stop event")
