"""The summariser: one LLM call (two at most) that turns a span of history into a checkpoint summary.

It talks to any :class:`~contextwindow.providers.Provider`, the same protocol the engine sends turns
through (maka's history-compact summariser):

- the covered span is rendered as a transcript inside ``<transcript>`` tags in one user message that
  ends with the instruction (the request always ends with a user instruction; thinking is skipped;
  media become their attachment ids), after the previous checkpoint's summary (inside
  ``<previous_summary>`` tags) on a roll-forward;
- the output is capped at 8,000 tokens; a reply cut at the cap gets one retry with a shortened
  prompt that says it was "cut off at the output limit";
- a malformed reply (:func:`~contextwindow.engine.summary_rules.find_summary_defect`) gets one stricter repair;
  never more than two provider calls in all;
- the summariser's own input must fit its window: when its estimate is over, or its provider rejects
  the input for size, the result is ``input_too_large`` and the caller folds less (halves).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ...content import (
    MediaBlock,
    Message,
    RedactedThinking,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)
from ...errors import ContextOverflow, ProviderError
from ...formats import AttachmentLoader
from ...models import ModelProfile
from ...pricing import Estimator
from ...providers import Provider, complete, output_limit_hit
from ...usage.tracker import Usage
from ..events import FoldFailure
from .summary_rules import (
    DEFAULT_SUMMARY_PROMPT,
    REQUIRED_SECTIONS,
    SUMMARY_MAX_OUTPUT_TOKENS,
    find_summary_defect,
)

__all__ = ["Summarizer", "Summary", "render_transcript"]

_SHORTER = (
    "Your previous summary was cut off at the output limit. Write it again, much shorter: keep every "
    "section, one or two lines each, and keep exact names and identifiers."
)
_REPAIR = (
    "Your previous summary could not be used ({defect}). Write it again with exactly the required "
    "sections as level-2 headings, in order, each followed by content, outside any code block, and "
    "end with a complete sentence."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """A usable summary and what it cost."""

    text: str
    calls: int
    usage: Usage | None
    """The accepted call's usage, when the provider reported one."""

    @property
    def output_tokens(self) -> int | None:
        """The provider's output count of :attr:`text` (the accepted call's), when it reported one."""
        return self.usage.output if self.usage else None


def _media_label(block: MediaBlock) -> str:
    ref = block.ref
    name = ref.id if ref is not None else getattr(block, "url", None) or "?"
    return f"[{block.type} {name}]"


def render_transcript(messages: Sequence[Message], *, tool_result_chars: int = 4_000) -> str:
    """The span as plain text the summariser can read: roles, text, tool calls and (capped) results."""
    lines: list[str] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, Text):
                lines.append(f"[{message.role}] {block.text}")
            elif isinstance(block, ToolUse):
                args = json.dumps(dict(block.input), ensure_ascii=False, separators=(",", ":"), default=str)
                lines.append(f"[tool call {block.id}] {block.name}({args})")
            elif isinstance(block, ToolResult):
                if isinstance(block.content, str):
                    body = block.content
                else:
                    body = " ".join(b.text if isinstance(b, Text) else _media_label(b) for b in block.content)
                if len(body) > tool_result_chars:
                    body = body[:tool_result_chars] + f" [… {len(body) - tool_result_chars} more characters]"
                lines.append(f"[tool result {block.tool_use_id}] {body}")
            elif isinstance(block, Thinking | RedactedThinking):
                continue
            else:
                lines.append(f"[{message.role}] {_media_label(block)}")
    return "\n".join(lines)


class Summarizer:
    """Writes checkpoint summaries through a provider (see the module docstring for the rules).

    ``instruction_suffix`` is appended to every instruction (the local provider reads a marker there);
    ``sections`` are the headings :func:`find_summary_defect` requires, and must match the prompt's.
    """

    def __init__(
        self,
        provider: Provider,
        profile: ModelProfile,
        *,
        estimator: Estimator | None = None,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        sections: Sequence[str] = REQUIRED_SECTIONS,
        max_output_tokens: int = SUMMARY_MAX_OUTPUT_TOKENS,
        instruction_suffix: str = "",
        load: AttachmentLoader | None = None,
    ) -> None:
        self.provider = provider
        self.profile = profile
        self.estimator = estimator or Estimator(profile)
        self.prompt = prompt
        self.sections = tuple(sections)
        self.max_output_tokens = min(max_output_tokens, profile.max_output_tokens)
        self.instruction_suffix = instruction_suffix
        self._load: AttachmentLoader = load or _no_bytes

    def _cap(self, max_output_tokens: int | None) -> int:
        """This call's output cap: the summariser's own, lowered to the caller's room for the summary."""
        if max_output_tokens is None:
            return self.max_output_tokens
        return max(1, min(self.max_output_tokens, max_output_tokens))

    def _request(
        self, transcript: str, previous: str | None, extra: str | None, cap: int | None = None
    ) -> Request:
        parts = []
        if previous:
            parts.append(
                "Summary of the conversation before this span:\n<previous_summary>\n"
                + previous
                + "\n</previous_summary>"
            )
        parts.append("The conversation to summarise:\n<transcript>\n" + transcript + "\n</transcript>")
        instruction = self.prompt if extra is None else f"{self.prompt}\n\n{extra}"
        if self.instruction_suffix:
            instruction += "\n" + self.instruction_suffix
        parts.append(instruction)
        return Request(
            model=self.profile.name,
            messages=(Message.user("\n\n".join(parts)),),
            max_tokens=cap or self.max_output_tokens,
        )

    def fits(
        self,
        messages: Sequence[Message],
        previous: str | None = None,
        *,
        max_output_tokens: int | None = None,
    ) -> bool:
        """Whether the summariser's own request fits its window by the estimate (erring high), with
        room for its output at ``max_output_tokens`` (default: the summariser's cap)."""
        request = self._request(render_transcript(messages), previous, None)
        return self.estimator.request(request) + self._cap(max_output_tokens) <= self.profile.context_window

    async def _call(self, request: Request) -> tuple[str, str, Usage | None]:
        cap = request.max_tokens or self.max_output_tokens
        done = await complete(self.provider, request, max_tokens=cap, load=self._load)
        text = "".join(b.text for b in done.message.content if isinstance(b, Text))
        return text, done.stop_reason, done.usage

    async def summarize(
        self,
        messages: Sequence[Message],
        *,
        previous: str | None = None,
        max_output_tokens: int | None = None,
    ) -> Summary | FoldFailure:
        """Summarise ``messages`` (rolling ``previous`` forward), or say why not. Never raises for a
        provider failure: a fold fails open; an abort (``CancelledError``) propagates.

        ``max_output_tokens`` lowers the output cap for this call (never raises it): the engine passes
        the room the request has for the summary, so a summary that would not fit beside the kept
        tail is cut at the cap and retried shorter like any other."""
        if not messages:
            return FoldFailure("no_safe_completed_span", "nothing to summarise")
        cap = self._cap(max_output_tokens)
        if not self.fits(messages, previous, max_output_tokens=cap):
            return FoldFailure("input_too_large", "the span does not fit the summariser's window")
        transcript = render_transcript(messages)
        extra: str | None = None
        calls = 0
        defect_seen: str | None = None
        while calls < 2:
            calls += 1
            try:
                text, reason, usage = await self._call(self._request(transcript, previous, extra, cap))
            except ContextOverflow:
                return FoldFailure("input_too_large", "the summariser's provider rejected the input")
            except ProviderError as exc:
                return FoldFailure("provider_error", str(exc))
            if output_limit_hit(reason):
                if calls >= 2:
                    return FoldFailure("output_length", "cut at the output limit twice")
                extra = _SHORTER
                continue
            defect = find_summary_defect(
                text,
                sections=self.sections,
                input_tokens=usage.prompt if usage is not None and usage.prompt > 0 else None,
                output_tokens=usage.output if usage is not None and usage.prompt > 0 else None,
                roll_forward=previous is not None,
            )
            if defect is None:
                return Summary(text=text.strip(), calls=calls, usage=usage)
            defect_seen = defect
            extra = _REPAIR.format(defect=defect.replace("_", " "))
        assert defect_seen is not None
        return FoldFailure(defect_seen, "still malformed after one repair")  # type: ignore[arg-type]


def _no_bytes(ref: object) -> bytes:
    raise ProviderError("the summariser's transcript carries no attachment bytes")
