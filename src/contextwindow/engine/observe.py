"""What an engine tells the host besides the events it yields: the ``on_event`` callback, the log
lines of the ``contextwindow.engine`` logger, and a record of each provider call for tracers.

:class:`CallObserver` sees every event the engine produces, once, as it is produced. It hands each
to the host's ``on_event`` (the stream's own text and thinking deltas excepted: those are the
host's to read from ``run_turn``, one per token), logs the decisions at DEBUG, and sums what each
call did into a :class:`CallSummary`: at INFO one line per provider call (its session, the tokens of
the host's own request when the host said them, the tokens sent, the window, the usage, the cost
and what was done), and the record goes to every tracer registered with :func:`add_tracer`
(:mod:`contextwindow.otel` registers one that makes OpenTelemetry spans). Nothing is logged per
token, and no message content is logged at all: a line names tokens, ids and reasons.

Like every library's, the ``contextwindow`` logger has a ``NullHandler`` and no level: it is
silent until the application configures logging (``logging.basicConfig(level=logging.INFO)``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..cost import Cost
from ..errors import ContextOverflow
from ..usage.tracker import Usage
from .events import (
    AttachmentsEvicted,
    Compacted,
    CompactionFailed,
    Event,
    MaxTokensLowered,
    Note,
    OverflowRecovered,
    RequestSent,
    StreamRestarted,
    TextDelta,
    ThinkingDelta,
    ToolResultsArchived,
    UsageReported,
    WindowLearned,
)

__all__ = ["CallObserver", "CallSummary", "CallTracer", "EventHook", "add_tracer", "remove_tracer"]

EventHook = Callable[[Event], None]
"""The host's ``on_event``: called with each event as the engine produces it (not the stream's text
and thinking deltas). It runs on the engine's own path: what it raises reaches the caller."""

log = logging.getLogger("contextwindow.engine")

_warned: set[tuple[str, str]] = set()


def warn_once(logger: logging.Logger, message: str) -> None:
    """``message`` as a warning on ``logger``, once per process: a fact about the setup (a missing
    tokenizer, a guessed profile, a strategy that falls back), not about one call."""
    if (logger.name, message) not in _warned:
        _warned.add((logger.name, message))
        logger.warning(message)


@dataclass(slots=True)
class CallSummary:
    """What one provider call sent, what it cost, and what the engine did for it since the call
    before: the INFO line and the span say this."""

    session: str
    model: str
    provider: str
    call: int = 0
    """The call's number among the engine's calls, from 1."""
    started_ns: int = 0
    """When the request went out (``time.time_ns()``)."""
    ended_ns: int = 0
    asked_tokens: int | None = None
    """The estimate of the host's own request before it was fitted (the guard's agent request),
    when the host said it (:meth:`CallObserver.asked`)."""
    sent_tokens: int = 0
    counted: bool = False
    """``sent_tokens`` is the provider's own count of the request, made before it was sent."""
    window: int | None = None
    max_tokens: int = 0
    usage: Usage | None = None
    """The call's own usage; ``None`` when refused or unreported."""
    cost: Cost | None = None
    finish_reason: str | None = None
    refused: ContextOverflow | None = None
    """The provider's rejection for size, when it refused the request."""
    folds: int = 0
    tokens_freed: int = 0
    archived: int = 0
    evicted: int = 0
    restarts: int = 0
    recovered: bool = False
    """The request is the retry after a rejection for size."""
    learned_window: int | None = None
    max_tokens_lowered: tuple[int, int] | None = None
    """``(asked, lowered)`` when the output bound went out lowered."""
    failures: list[str] = field(default_factory=list)
    """Why folds failed open, in order."""

    def actions(self) -> list[str]:
        """What was done, in words, for the log line."""
        done: list[str] = []
        if self.folds:
            done.append(f"folded {self.folds} ({self.tokens_freed:,} tokens freed)")
        if self.archived:
            done.append(f"archived {self.archived} tool results")
        if self.evicted:
            done.append(f"evicted {self.evicted} attachments")
        if self.restarts:
            done.append(f"restarted the stream {self.restarts}×")
        if self.learned_window is not None:
            done.append(f"window learned {self.learned_window:,}")
        if self.recovered:
            done.append("retried after a rejection for size")
        if self.max_tokens_lowered is not None:
            done.append(f"max_tokens lowered {self.max_tokens_lowered[0]:,} → {self.max_tokens_lowered[1]:,}")
        done.extend(f"fold failed open ({reason})" for reason in self.failures)
        return done


class CallTracer(Protocol):
    """Receives each finished :class:`CallSummary` (:mod:`contextwindow.otel`'s tracer makes a span)."""

    def record(self, call: CallSummary) -> None: ...


_tracers: list[CallTracer] = []


def add_tracer(tracer: CallTracer) -> None:
    """Give every engine's finished calls to ``tracer`` from now on (process-wide)."""
    if tracer not in _tracers:
        _tracers.append(tracer)


def remove_tracer(tracer: CallTracer) -> None:
    """Stop giving calls to ``tracer``."""
    if tracer in _tracers:
        _tracers.remove(tracer)


class CallObserver:
    """Sees an engine's events as they are produced (see the module docstring): ``session``,
    ``model`` and ``provider`` name the engine's calls; ``on_event`` is the host's callback."""

    __slots__ = ("_next", "calls", "on_event")

    def __init__(self, *, session: str, model: str, provider: str, on_event: EventHook | None = None) -> None:
        self.on_event = on_event
        self.calls = 0
        """The provider calls this engine made so far (refused ones too)."""
        self._next = CallSummary(session=session, model=model, provider=provider)

    @property
    def watched(self) -> bool:
        """Whether a call's line or span will be made (INFO is on, or a tracer is registered): a
        figure only they show is worth computing."""
        return bool(_tracers) or log.isEnabledFor(logging.INFO)

    def asked(self, tokens: int) -> None:
        """The host's own request, before it was fitted, is ``tokens`` (the guard's agent request):
        the next call's line and span report it beside the tokens sent."""
        self._next.asked_tokens = tokens

    def event(self, event: Event) -> Event:
        """``event`` was produced: handed to ``on_event``, logged at DEBUG, summed into the call it
        belongs to; a :class:`RequestSent` starts the call, a :class:`UsageReported` ends it."""
        if isinstance(event, TextDelta | ThinkingDelta):
            return event
        if self.on_event is not None:
            self.on_event(event)
        self._sum(event)
        if log.isEnabledFor(logging.DEBUG):
            said = _debug_line(event)
            if said:
                log.debug("session %s: %s", self._next.session, said)
        return event

    def refused(self, rejection: ContextOverflow) -> None:
        """The provider refused the request sent for its size: the call ends refused, and the next
        is its retry, of the same request the host asked."""
        asked = self._next.asked_tokens
        self._next.refused = rejection
        self._finish()
        self._next.recovered = True
        self._next.asked_tokens = asked

    def _sum(self, event: Event) -> None:
        call = self._next
        match event:
            case RequestSent():
                self.calls += 1
                call.call, call.started_ns = self.calls, time.time_ns()
                call.sent_tokens, call.counted = event.estimated_tokens, event.counted
                call.window, call.max_tokens = event.window, event.max_tokens
            case UsageReported():
                call.usage, call.cost = (event.usage if event.reported else None), event.cost
                self._finish()
            case Compacted():
                call.folds += 1
                call.tokens_freed += event.tokens_freed
            case ToolResultsArchived():
                call.archived += len(event.tool_use_ids)
            case AttachmentsEvicted():
                call.evicted += len(event.attachment_ids)
            case StreamRestarted():
                call.restarts += 1
            case WindowLearned():
                call.learned_window = event.window
            case MaxTokensLowered():
                call.max_tokens_lowered = (event.asked, event.lowered)
            case CompactionFailed():
                call.failures.append(event.reason)
            case _:
                pass

    def replied(self, finish_reason: str) -> None:
        """The provider answered the call under way; its reply stopped for ``finish_reason``."""
        self._next.finish_reason = finish_reason

    def _finish(self) -> None:
        call, self._next = (
            self._next,
            CallSummary(session=self._next.session, model=self._next.model, provider=self._next.provider),
        )
        call.ended_ns = time.time_ns()
        if call.started_ns == 0:
            call.started_ns = call.ended_ns
        if log.isEnabledFor(logging.INFO):
            log.info("%s", info_line(call))
        for tracer in tuple(_tracers):
            tracer.record(call)


def info_line(call: CallSummary) -> str:
    """The INFO line of one call: its session, tokens asked and sent, the window, usage, cost, and
    what was done."""
    parts = [f"session {call.session} call {call.call} ({call.model}):"]
    if call.asked_tokens is not None:
        parts.append(f"asked {call.asked_tokens:,} tokens,")
    sent = "counted" if call.counted else "estimated"
    window = f"{call.window:,}" if call.window is not None else "unknown"
    parts.append(
        f"sent {call.sent_tokens:,} ({sent}) in a {window}-token window, max_tokens {call.max_tokens:,};"
    )
    if call.refused is not None:
        limit = call.refused.limit
        parts.append(f"refused for size (limit {limit:,})" if limit is not None else "refused for size")
    elif call.usage is None:
        parts.append("usage unreported")
    else:
        usage = call.usage
        parts.append(
            f"input {usage.prompt:,} (cache read {usage.cache_read:,}, write {usage.cache_write:,}), "
            f"output {usage.output:,}"
        )
        if call.cost is not None:
            parts.append(f"${call.cost.total:.4f}")
    done = call.actions()
    if done:
        parts.append("— " + ", ".join(done))
    return " ".join(parts)


def _debug_line(event: Event) -> str | None:
    """A decision in words (no message content), or ``None`` for an event not worth a line."""
    match event:
        case Compacted():
            return (
                f"folded {len(event.covered_ids)} messages ({event.phase}): {event.tokens_freed:,} tokens "
                f"freed, summary {event.summary_tokens:,} tokens, {event.summarizer_calls} summariser calls"
            )
        case CompactionFailed():
            return f"fold failed open ({event.phase}): {event.reason}"
        case ToolResultsArchived():
            return f"archived {len(event.tool_use_ids)} tool results: {', '.join(event.tool_use_ids)}"
        case AttachmentsEvicted():
            return f"evicted {len(event.attachment_ids)} attachments: {', '.join(event.attachment_ids)}"
        case StreamRestarted():
            return (
                f"stream restarted ({event.reason}): {event.input_tokens:,} tokens against {event.budget:,}"
            )
        case WindowLearned():
            return f"window learned: {event.window:,} (was {event.previous})"
        case MaxTokensLowered():
            return (
                f"max_tokens {event.asked:,} lowered to {event.lowered:,} for a {event.window:,}-token window"
            )
        case OverflowRecovered():
            return f"recovered from a rejection for size (requested {event.requested}, limit {event.limit})"
        case RequestSent():
            return f"sending call {event.call}: {event.estimated_tokens:,} tokens, max_tokens {event.max_tokens:,}"
        case Note():
            return f"note {event.kind} {dict(event.data)}"
        case _:
            return None
