"""OpenTelemetry spans for contextwindow's provider calls (the ``otel`` extra).

::

    import contextwindow.otel

    contextwindow.otel.instrument()  # the global tracer provider, or instrument(tracer_provider=...)

From then on every call an :class:`~contextwindow.engine.Engine` makes (so every call of
``guard(client)``, the adapters and the proxy) is one span, named ``chat {model}`` as the GenAI
semantic conventions name an inference call
(https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/), with their attributes where they
apply (``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
``gen_ai.request.max_tokens``, ``gen_ai.conversation.id``: the ledger session,
``gen_ai.usage.input_tokens``: all input, cache reads and writes included,
``gen_ai.usage.cache_read.input_tokens``, ``gen_ai.usage.cache_creation.input_tokens``,
``gen_ai.usage.output_tokens``, ``gen_ai.response.finish_reasons``, ``error.type`` for a rejection
for size) and contextwindow's own under ``contextwindow.*``: the tokens of the agent's request and
of the request sent, the window, the folds and the tokens they freed, what was archived and evicted,
the window learned, ``max_tokens`` lowered, the retry, the cost in dollars. No message content is
put on a span.

The span is made when the call ends, with the times it started and ended. opentelemetry-api is
imported by :func:`instrument`, never by ``import contextwindow``.
"""

from __future__ import annotations

from typing import Any

from .engine.observe import CallSummary, add_tracer, remove_tracer
from .errors import UsageError

__all__ = ["SpanTracer", "instrument", "uninstrument"]

_EXTRA = "pip install 'contextwindow[otel]'"
_installed: list[SpanTracer] = []


class SpanTracer:
    """Makes one span per finished provider call (a :class:`~contextwindow.engine.observe.CallTracer`)
    with ``tracer``, an OpenTelemetry ``Tracer``."""

    def __init__(self, tracer: Any) -> None:
        self.tracer = tracer

    def record(self, call: CallSummary) -> None:
        from opentelemetry.trace import SpanKind, Status, StatusCode

        span = self.tracer.start_span(
            f"chat {call.model}",
            kind=SpanKind.CLIENT,
            start_time=call.started_ns,
            attributes=attributes(call),
        )
        if call.refused is not None:
            span.set_status(Status(StatusCode.ERROR, "the provider refused the request for its size"))
        span.end(end_time=call.ended_ns)


def attributes(call: CallSummary) -> dict[str, Any]:
    """The span's attributes for ``call`` (see the module docstring)."""
    out: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": call.provider.split("-")[0],
        "gen_ai.request.model": call.model,
        "gen_ai.request.max_tokens": call.max_tokens,
        "gen_ai.conversation.id": call.session,
        "contextwindow.call": call.call,
        "contextwindow.request.tokens": call.sent_tokens,
        "contextwindow.request.counted": call.counted,
        "contextwindow.folds": call.folds,
        "contextwindow.tokens_freed": call.tokens_freed,
        "contextwindow.tool_results_archived": call.archived,
        "contextwindow.attachments_evicted": call.evicted,
        "contextwindow.stream_restarts": call.restarts,
        "contextwindow.retry": call.recovered,
    }
    if call.asked_tokens is not None:
        out["contextwindow.agent_request.tokens"] = call.asked_tokens
    if call.window is not None:
        out["contextwindow.window"] = call.window
    if call.learned_window is not None:
        out["contextwindow.window_learned"] = call.learned_window
    if call.max_tokens_lowered is not None:
        out["contextwindow.max_tokens_asked"] = call.max_tokens_lowered[0]
    if call.failures:
        out["contextwindow.fold_failures"] = list(call.failures)
    if call.refused is not None:
        out["error.type"] = "context_overflow"
        if call.refused.limit is not None:
            out["contextwindow.refused.limit"] = call.refused.limit
    if call.usage is not None:
        out["gen_ai.usage.input_tokens"] = call.usage.prompt
        out["gen_ai.usage.cache_read.input_tokens"] = call.usage.cache_read
        out["gen_ai.usage.cache_creation.input_tokens"] = call.usage.cache_write
        out["gen_ai.usage.output_tokens"] = call.usage.output
    if call.finish_reason is not None and call.refused is None:
        out["gen_ai.response.finish_reasons"] = [call.finish_reason]
    if call.cost is not None:
        out["contextwindow.cost.usd"] = float(call.cost.total)
        out["contextwindow.cost.input_usd"] = float(call.cost.input)
        out["contextwindow.cost.output_usd"] = float(call.cost.output)
    return out


def instrument(tracer_provider: Any = None) -> SpanTracer:
    """Trace every engine's provider calls from now on, with ``tracer_provider``'s tracer (``None``:
    OpenTelemetry's global one); instrumenting again replaces the tracer. Returns the tracer
    registered. Raises :class:`~contextwindow.errors.UsageError` naming the ``otel`` extra when
    opentelemetry-api is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        raise UsageError(f"OpenTelemetry spans need opentelemetry-api: {_EXTRA}") from None
    from . import __version__

    uninstrument()
    tracer = trace.get_tracer("contextwindow", __version__, tracer_provider=tracer_provider)
    installed = SpanTracer(tracer)
    add_tracer(installed)
    _installed.append(installed)
    return installed


def uninstrument() -> None:
    """Stop tracing (what :func:`instrument` started)."""
    while _installed:
        remove_tracer(_installed.pop())
