"""The provider protocol: send one compiled request, get typed events back.

A provider is anything with ``stream(request, *, max_tokens, load)`` returning an async iterator of
:data:`ProviderEvent`. The events of one call, in order:

- :class:`TextDelta` / :class:`ThinkingDelta` as the model writes;
- :class:`ToolCall` once a tool use is complete (its input parsed);
- :class:`UsageSample` each time the provider reports usage. A sample is the provider's figure as it
  reported it, merged field by field within the call (last writer wins): Anthropic's
  ``message_start`` then each cumulative ``message_delta``
  (https://platform.claude.com/docs/en/build-with-claude/streaming); OpenAI's one final chunk, or a
  running total on every chunk from servers that send one. A provider layer that reports a *running
  total across a tool loop* (as membrane does) shows up here unchanged;
  turning samples into each call's own usage is
  :class:`contextwindow.usage.tracker.UsageTracker`'s job, not the provider's;
- one :class:`Stop`, last, with the normalised stop reason and the assembled assistant message.

Failures are raised, typed: :class:`~contextwindow.errors.ContextOverflow` for a rejection for size
(the provider's numbers on it), :class:`~contextwindow.errors.TransientProviderError` for what is worth
retrying, :class:`~contextwindow.errors.ProviderError` for the rest. No SDK exception escapes.

:func:`complete` drains a stream into a :class:`Completion` for callers that do not stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, get_args, runtime_checkable

from ..content import Message, Request, Text, Thinking, ToolUse
from ..errors import ProviderError
from ..formats import AttachmentLoader
from ..usage.tracker import Usage

__all__ = [
    "OUTPUT_LIMIT_STOPS",
    "Completion",
    "MessageBuilder",
    "Provider",
    "ProviderEvent",
    "Stop",
    "StopReason",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "UsageSample",
    "complete",
    "normalise_stop_reason",
    "output_limit_hit",
    "request_model",
]

StopReason: TypeAlias = Literal[
    "end_turn",  # the model finished (Anthropic end_turn, OpenAI stop)
    "tool_use",  # it asked for tools (Anthropic tool_use, OpenAI tool_calls / function_call)
    "max_tokens",  # cut at max_tokens (Anthropic max_tokens, OpenAI length, Gemini MAX_TOKENS)
    "context_window",  # cut because input + output reached the window (Anthropic model_context_window_exceeded)
    "stop_sequence",
    "pause_turn",
    "refusal",
    "content_filter",
    "other",
]
"""Why a reply ended, in one vocabulary whatever the provider called it."""

_STOP_REASONS: dict[str, StopReason] = {
    **{reason: reason for reason in get_args(StopReason)},
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "max_output_tokens": "max_tokens",
    "model_context_window_exceeded": "context_window",
    "safety": "content_filter",
}


OUTPUT_LIMIT_STOPS: frozenset[StopReason] = frozenset({"max_tokens", "context_window"})
"""The stop reasons that say the reply was cut at a limit (its own, or the window), not finished."""


def normalise_stop_reason(raw: str | None) -> StopReason:
    """A provider's stop or finish reason in the normalised vocabulary; unknown ones are ``other``.
    A reason already normalised is itself."""
    if raw is None:
        return "other"
    return _STOP_REASONS.get(raw.lower(), "other")


def output_limit_hit(reason: str | None) -> bool:
    """Whether a stop reason (a provider's own or a normalised one) says the reply was cut at its
    limit: Anthropic ``max_tokens`` / ``model_context_window_exceeded``, OpenAI Chat ``length``,
    OpenAI Responses ``max_output_tokens``, Gemini ``MAX_TOKENS``."""
    return normalise_stop_reason(reason) in OUTPUT_LIMIT_STOPS


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta:
    """A piece of visible text."""

    type: Literal["text_delta"] = "text_delta"
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ThinkingDelta:
    """A piece of reasoning, or the signature that closes a thinking block."""

    type: Literal["thinking_delta"] = "thinking_delta"
    thinking: str = ""
    signature: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """A complete tool use: emitted once its input has fully arrived and parsed."""

    type: Literal["tool_call"] = "tool_call"
    tool_use: ToolUse


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageSample:
    """Usage as the provider reported it so far (merged within the call; see the module docstring)."""

    type: Literal["usage"] = "usage"
    usage: Usage


@dataclass(frozen=True, kw_only=True, slots=True)
class Stop:
    """The end of a call: the normalised reason, the provider's own word for it, the whole reply."""

    type: Literal["stop"] = "stop"
    reason: StopReason
    raw_reason: str | None
    message: Message


ProviderEvent: TypeAlias = TextDelta | ThinkingDelta | ToolCall | UsageSample | Stop
"""What a provider's stream yields: deltas, tool calls, usage samples, and one final stop."""


@runtime_checkable
class Provider(Protocol):
    """Sends one canonical request and streams the reply as :data:`ProviderEvent` values.

    ``max_tokens`` is the output bound of this call (it overrides ``request.max_tokens``); ``load``
    gives the bytes of each inline attachment the request renders (called once per attachment).
    """

    name: str
    """Who answers: ``"anthropic"``, ``"openai"``, ``"local"``: recorded with usage and anchors."""

    def stream(
        self, request: Request, *, max_tokens: int, load: AttachmentLoader
    ) -> AsyncIterator[ProviderEvent]: ...


def request_model(request: Request, default: str | None, *, provider: str) -> str:
    """The model a call names: the request's, else the provider's ``default``; neither is an error."""
    model = request.model or default
    if model is None:
        raise ProviderError("no model: name one on the request or the provider", provider=provider)
    return model


@dataclass(frozen=True, kw_only=True, slots=True)
class Completion:
    """A whole reply: the assistant message, the last usage the provider reported, the stop reason."""

    message: Message
    usage: Usage | None
    """``None`` when the provider reported no usage (then fall back to an estimate)."""
    stop_reason: StopReason
    raw_stop_reason: str | None


async def complete(
    provider: Provider, request: Request, *, max_tokens: int, load: AttachmentLoader
) -> Completion:
    """Run one call to the end and return it whole; errors are raised as the stream raises them."""
    usage: Usage | None = None
    stop: Stop | None = None
    async for event in provider.stream(request, max_tokens=max_tokens, load=load):
        if isinstance(event, UsageSample):
            usage = event.usage
        elif isinstance(event, Stop):
            stop = event
    if stop is None:
        raise ProviderError("the provider's stream ended without a stop event", provider=provider.name)
    return Completion(
        message=stop.message, usage=usage, stop_reason=stop.reason, raw_stop_reason=stop.raw_reason
    )


class MessageBuilder:
    """Assembles the assistant message of one call from its pieces, in arrival order.

    Consecutive pieces of one kind join one block until :meth:`new_block` marks a provider's block
    boundary (Anthropic's ``content_block_start``), so two text blocks stay two blocks.
    """

    def __init__(self) -> None:
        self._blocks: list[Text | Thinking | ToolUse] = []
        self._split = False

    def new_block(self) -> None:
        """The next piece starts a new block."""
        self._split = True

    def text(self, piece: str) -> None:
        last = self._blocks[-1] if self._blocks and not self._split else None
        self._split = False
        if isinstance(last, Text):
            self._blocks[-1] = Text(text=last.text + piece)
        else:
            self._blocks.append(Text(text=piece))

    def thinking(self, piece: str, signature: str | None = None) -> None:
        last = self._blocks[-1] if self._blocks and not self._split else None
        self._split = False
        if isinstance(last, Thinking) and last.signature is None:
            self._blocks[-1] = Thinking(thinking=last.thinking + piece, signature=signature)
        else:
            self._blocks.append(Thinking(thinking=piece, signature=signature))

    def tool_use(self, tool_use: ToolUse) -> None:
        self._split = False
        self._blocks.append(tool_use)

    def message(self) -> Message:
        # An empty text block is not a block (OpenAI sends "" content beside tool calls).
        blocks = tuple(b for b in self._blocks if not (isinstance(b, Text) and not b.text))
        return Message(role="assistant", content=blocks)
