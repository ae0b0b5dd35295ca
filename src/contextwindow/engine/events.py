"""Typed events and notes the engine emits, and the rules that decide which one fires.

A host iterates ``engine.run_turn(...)`` and gets these values: the stream's own output (text and
thinking deltas, tool calls, tool results), the usage each call reported, and what the engine did to
keep the request inside the window (``stream_restarted``, ``compacted``, ``attachments_evicted``,
``tool_results_archived``, ``overflow_recovered``), plus :class:`Note` values a host can show a user
(maka's ``system_note`` kinds). Every event is a frozen value with a ``type`` literal;
:func:`event_to_dict` gives its JSON form for the ledger. :class:`NoteBook` decides when each note
fires, with its once-per-send / once-per-session bounds. (What happens at a tool boundary is the
window's: :func:`~contextwindow.engine.window.decide_boundary`.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar

from ..content import ToolUse
from ..cost import Cost
from ..providers.base import TextDelta, ThinkingDelta, ToolCall
from ..store import Session
from ..usage.calibration import BAND
from ..usage.tracker import Usage
from .limits import WindowLimits

__all__ = [
    "TRUNCATION_RATIO",
    "AttachmentsEvicted",
    "Compacted",
    "CompactionFailed",
    "Event",
    "FoldFailure",
    "FoldFailureReason",
    "FoldPhase",
    "MaxTokensLowered",
    "Note",
    "NoteBook",
    "NoteKind",
    "OverflowRecovered",
    "RequestSent",
    "RestartReason",
    "StreamRestarted",
    "StreamResumed",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "ToolResultReady",
    "ToolResultsArchived",
    "TurnEnded",
    "UsageReported",
    "WindowLearned",
    "event_to_dict",
    "record_event",
]

RestartReason: TypeAlias = Literal["context_budget", "physical_window"]
FoldPhase: TypeAlias = Literal["pre_turn", "mid_turn", "reactive", "standalone"]
# maka history-compact-error.ts failure reasons, plus the safe-prefix failure and nothing_to_free.
FoldFailureReason: TypeAlias = Literal[
    "output_length",
    "input_too_large",
    "provider_error",
    "invalid_provider_state",
    "malformed_summary_missing_section",
    "malformed_summary_truncated",
    "malformed_summary_too_small_for_fold",
    "no_safe_completed_span",
    "nothing_to_free",
]
# maka system_note kinds: the five of its protocol epoch 106, and context_compacted,
# context_compaction_failed_open and step_limit; context_hard_cut and context_count_failed are
# contextwindow's own.
NoteKind: TypeAlias = Literal[
    "context_provider_dropping",
    "context_window_suggestion",
    "context_window_overrun",
    "context_reported_window_exceeded",
    "context_overflow_after_compaction",
    "context_compacted",
    "context_compaction_failed_open",
    "context_hard_cut",
    "context_provider_truncated",
    "context_output_cap",
    "context_count_failed",
    "step_limit",
]


@dataclass(frozen=True, slots=True)
class FoldFailure:
    """Why a fold did not happen; the engine fails open (the request goes out unchanged)."""

    reason: FoldFailureReason
    detail: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultReady:
    """A tool's result, as it will ride into the next round (after the inline cap)."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    truncated: bool = False
    end_turn: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestSent:
    """A request went to the provider: its estimate and the window it was measured against."""

    type: Literal["request_sent"] = "request_sent"
    call: int
    estimated_tokens: int
    window: int | None
    max_tokens: int
    recompiled: bool
    """False when the round was appended to the previous request without recompiling."""
    counted: bool = False
    """True when ``estimated_tokens`` is the provider's own count of this request, made before it was
    sent (``EngineSettings.count_before_send``)."""
    system_tokens: int | None = None
    """What its system prompt was estimated at (the ledger holds messages, not the system prompt)."""
    tools_tokens: int | None = None
    """What its tool definitions were estimated at."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageReported:
    """One call's own usage (a per-call delta), with the stream's running total beside it."""

    type: Literal["usage"] = "usage"
    call: int
    usage: Usage
    reported: bool
    stream_total: Usage
    cost: Cost | None = None
    """What the call cost in dollars (:mod:`contextwindow.cost`: input with cache reads and writes,
    output); ``None`` when genai-prices is not installed or does not know the model."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamRestarted:
    """The stream was cut at a tool boundary and the next request is compiled afresh (a restart).

    ``input_tokens`` is the stream's accumulated fresh input for ``context_budget`` and the projection
    for ``physical_window``; ``budget`` is ``max_stream_input_tokens`` or the window.
    """

    type: Literal["stream_restarted"] = "stream_restarted"
    reason: RestartReason
    input_tokens: int
    budget: int


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamResumed:
    """The stream continued past a boundary; ``injected_messages`` rode into the round."""

    type: Literal["stream_resumed"] = "stream_resumed"
    injected_messages: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Compacted:
    """A prefix of history was folded into a summary checkpoint."""

    type: Literal["compacted"] = "compacted"
    phase: FoldPhase
    covered_ids: tuple[str, ...]
    summary_tokens: int
    tokens_freed: int
    summarizer_calls: int


@dataclass(frozen=True, kw_only=True, slots=True)
class CompactionFailed:
    """A fold failed open: the request goes out unchanged and the reason is recorded."""

    type: Literal["compaction_failed"] = "compaction_failed"
    phase: FoldPhase
    reason: FoldFailureReason


@dataclass(frozen=True, kw_only=True, slots=True)
class AttachmentsEvicted:
    """Attachments left the request as placeholders (their bytes stay in the ledger)."""

    type: Literal["attachments_evicted"] = "attachments_evicted"
    attachment_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultsArchived:
    """Stale tool results became re-readable placeholders."""

    type: Literal["tool_results_archived"] = "tool_results_archived"
    tool_use_ids: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class OverflowRecovered:
    """The provider rejected a request for its size; the engine compacted and the retry went out."""

    type: Literal["overflow_recovered"] = "overflow_recovered"
    requested: int | None
    limit: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class WindowLearned:
    """A rejection for size named a window below the one known: compile, the projection and the
    trigger fit to ``window`` from now on (``previous`` was the window as known before)."""

    type: Literal["window_learned"] = "window_learned"
    window: int
    previous: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class MaxTokensLowered:
    """The output bound asked for (``max_tokens``) could not fit beside the smallest request that
    could be sent (system, tools, the newest message) in the window as known: it went out lowered."""

    type: Literal["max_tokens_lowered"] = "max_tokens_lowered"
    asked: int
    lowered: int
    window: int


@dataclass(frozen=True, kw_only=True, slots=True)
class Note:
    """A note for the host to show its user (maka's ``system_note``)."""

    type: Literal["note"] = "note"
    kind: NoteKind
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnded:
    """The turn is over: the model's stop reason, and how many provider calls it took."""

    type: Literal["turn_ended"] = "turn_ended"
    stop_reason: str
    calls: int
    restarts: int
    compactions: int


Event: TypeAlias = (
    TextDelta
    | ThinkingDelta
    | ToolCall
    | ToolResultReady
    | RequestSent
    | UsageReported
    | StreamRestarted
    | StreamResumed
    | Compacted
    | CompactionFailed
    | AttachmentsEvicted
    | ToolResultsArchived
    | OverflowRecovered
    | WindowLearned
    | MaxTokensLowered
    | Note
    | TurnEnded
)
"""Everything :meth:`~contextwindow.engine.Engine.run_turn` yields to a host."""


_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))


def event_to_dict(event: Event) -> dict[str, Any]:
    """The event as JSON-ready data (usage as its fields), for the ledger and for ``--json``."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        if isinstance(value, Usage):
            # Its fields are ints: what ``dataclasses.asdict`` gives, without its deep copy (2 a call).
            value = {name: getattr(value, name) for name in _USAGE_FIELDS}
        elif isinstance(value, ToolUse):
            value = dataclasses.asdict(value)
        elif isinstance(value, Cost):
            value = {"input": float(value.input), "output": float(value.output), "model": value.model}
        if isinstance(value, Mapping):
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


TRUNCATION_RATIO = BAND[0]
"""A reported input below this share of the estimate is more than calibration explains (its band
starts here): the provider most likely dropped part of the request."""


_E = TypeVar("_E", bound=Event)


def record_event(session: Session, event: _E) -> _E:
    """Record ``event`` in the session's ledger as a ``note`` record and return it."""
    session.record("note", {"event": event_to_dict(event)})
    return event


class NoteBook:
    """When each host note fires (maka's rules), with its once-per-send/session bounds.

    One ``NoteBook`` lives as long as the engine's session; :meth:`start_send` opens a new send (a
    user turn). :attr:`declared_window` is the declared window (maka's capacity), or ``None``: read
    from ``limits`` (the engine's :class:`~contextwindow.engine.limits.WindowLimits`), or given.
    """

    __slots__ = ("_dropping_fired", "_send_fired", "limits")

    def __init__(self, declared_window: int | None = None, *, limits: WindowLimits | None = None) -> None:
        self.limits = limits or WindowLimits(
            model_window=declared_window or 1, declared=declared_window, window=declared_window
        )
        self._dropping_fired = False
        self._send_fired: set[str] = set()

    @property
    def declared_window(self) -> int | None:
        """The declared window: what the host declared, not a limit learned since."""
        return self.limits.declared

    def start_send(self) -> None:
        self._send_fired.clear()

    def _once_per_send(self, kind: NoteKind, data: Mapping[str, Any]) -> Note | None:
        if kind in self._send_fired:
            return None
        self._send_fired.add(kind)
        return Note(kind=kind, data=data)

    def provider_dropping(
        self, *, input_tokens: int, prior_input_tokens: int | None, first_of_send: bool, append_only: bool
    ) -> Note | None:
        """``context_provider_dropping``: an append-only step whose usage did not grow.

        Within a send the step's input is ≤ the previous step's; on a send's first request it equals
        the prior accepted input (an unchanged count across a user message means the provider dropped
        something). Only steps that removed nothing count (``append_only``), only input > 0, and the
        note fires once per session.
        """
        if self._dropping_fired or not append_only or input_tokens <= 0 or prior_input_tokens is None:
            return None
        dropped = input_tokens == prior_input_tokens if first_of_send else input_tokens <= prior_input_tokens
        if not dropped:
            return None
        self._dropping_fired = True
        return Note(
            kind="context_provider_dropping",
            data={"input_tokens": input_tokens, "prior_input_tokens": prior_input_tokens},
        )

    def window_suggestion(self, *, last_accepted_total: int | None) -> Note | None:
        """``context_window_suggestion`` after an unrecovered overflow: declare the proven-fit total.

        Emitted only when no window is declared or the suggestion is smaller than the declared one,
        once per send.
        """
        if last_accepted_total is None or last_accepted_total <= 0:
            return None
        if self.declared_window is not None and last_accepted_total >= self.declared_window:
            return None
        data: dict[str, Any] = {"suggested_context_window": last_accepted_total}
        if self.declared_window is not None:
            data["declared_context_window"] = self.declared_window
        return self._once_per_send("context_window_suggestion", data)

    def window_overrun(self, *, input_tokens: int, output_tokens: int) -> Note | None:
        """``context_window_overrun``: a call used more than the declared window. Once per send."""
        used = input_tokens + output_tokens
        if self.declared_window is None or used <= self.declared_window:
            return None
        return self._once_per_send(
            "context_window_overrun", {"used_tokens": used, "declared_context_window": self.declared_window}
        )

    def reported_window_exceeded(
        self, *, used_tokens: int, previous_used: int | None, reported_window: int | None
    ) -> Note | None:
        """``context_reported_window_exceeded``: no declared window, and usage crossed the reported one."""
        if self.declared_window is not None or reported_window is None:
            return None
        if previous_used is None or previous_used > reported_window or used_tokens <= reported_window:
            return None
        return Note(
            kind="context_reported_window_exceeded",
            data={"used_tokens": used_tokens, "reported_context_window": reported_window},
        )

    def provider_truncated(self, *, input_tokens: int, expected_input: int) -> Note | None:
        """``context_provider_truncated``: the provider accepted a request and counted far less input
        than was sent, below :data:`TRUNCATION_RATIO` of the engine's estimate (more than calibration
        can explain), so it most likely dropped part of it without saying so (Ollama truncating to
        ``num_ctx``, OpenRouter's middle-out). Once per send."""
        if expected_input <= 0 or not 0 < input_tokens < expected_input * TRUNCATION_RATIO:
            return None
        return self._once_per_send(
            "context_provider_truncated",
            {"input_tokens": input_tokens, "expected_input_tokens": expected_input},
        )

    def output_cap(self, *, max_tokens: int, output_cap: int) -> Note:
        """``context_output_cap``: the provider refused the request's ``max_tokens`` as above the
        model's own output cap. Compaction cannot fix that: the host lowers ``max_tokens`` (or the
        profile's ``max_output_tokens``) to the cap the provider named."""
        return Note(kind="context_output_cap", data={"max_tokens": max_tokens, "output_cap": output_cap})

    def overflow_after_compaction(self) -> Note | None:
        """A fold was applied in this send and the provider still rejected. Once per send."""
        return self._once_per_send("context_overflow_after_compaction", {})

    def compacted(self, data: Mapping[str, Any]) -> Note | None:
        """``context_compacted``: a fold was applied in this send (either stage). Once per send."""
        return self._once_per_send("context_compacted", data)

    def compaction_failed_open(self, data: Mapping[str, Any]) -> Note | None:
        """``context_compaction_failed_open``: a fold failed and the request went out as it was."""
        return self._once_per_send("context_compaction_failed_open", data)
