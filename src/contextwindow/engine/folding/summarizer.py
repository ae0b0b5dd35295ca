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
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate

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


TOOL_RESULT_CHARS = 4_000
"""How much of a tool result the transcript carries (the rest is said to be there, in characters)."""


def _media_label(block: MediaBlock) -> str:
    ref = block.ref
    name = ref.id if ref is not None else getattr(block, "url", None) or "?"
    return f"[{block.type} {name}]"


def _lines(message: Message, tool_result_chars: int) -> Iterator[tuple[str, str]]:
    """``message``'s lines in the transcript, each as its label and its body (the line is the two
    joined): the body is the block's own text where it has one, so its price is the one already known."""
    for block in message.content:
        if isinstance(block, Text):
            yield f"[{message.role}] ", block.text
        elif isinstance(block, ToolUse):
            args = json.dumps(dict(block.input), ensure_ascii=False, separators=(",", ":"), default=str)
            yield f"[tool call {block.id}] ", f"{block.name}({args})"
        elif isinstance(block, ToolResult):
            if isinstance(block.content, str):
                body = block.content
            else:
                body = " ".join(b.text if isinstance(b, Text) else _media_label(b) for b in block.content)
            if len(body) > tool_result_chars:
                body = body[:tool_result_chars] + f" [… {len(body) - tool_result_chars} more characters]"
            yield f"[tool result {block.tool_use_id}] ", body
        elif isinstance(block, Thinking | RedactedThinking):
            continue
        else:
            yield f"[{message.role}] ", _media_label(block)


def render_transcript(messages: Sequence[Message], *, tool_result_chars: int = TOOL_RESULT_CHARS) -> str:
    """The span as plain text the summariser can read: roles, text, tool calls and (capped) results."""
    return "\n".join(
        label + body for message in messages for label, body in _lines(message, tool_result_chars)
    )


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
        self._frame: tuple[tuple[object, ...], int] | None = None

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
        room = self._room(previous, max_output_tokens)
        return room >= 0 and self._fitting(messages, room, previous) == len(messages)

    def fitting(
        self,
        messages: Sequence[Message],
        previous: str | None = None,
        *,
        max_output_tokens: int | None = None,
    ) -> int:
        """How many leading ``messages`` the summariser's own request can hold within its window by
        the estimate, with room for its output (as :meth:`fits`; 0 when not even the first fits).

        The request around the transcript (the previous summary, the wrappers, the instruction) is
        priced once per ``previous``. With the model's tokenizer, the transcript is priced in parts:
        each line's label and its body apart, the body being the block's own text, whose count is
        already known (:mod:`contextwindow.pricing` remembers recent texts), so a fold does not count
        its span's text again, and a span too large is cut from prefix sums. A seam only splits what
        the whole would merge: on real coding sessions the parts count 0.1–3% over the whole, never
        under. A fitted rule is not additive over parts (±15% on the same spans), so there each
        prefix tried is priced whole, by bisection."""
        return self._fitting(messages, self._room(previous, max_output_tokens), previous)

    def _room(self, previous: str | None, max_output_tokens: int | None) -> int:
        """What the transcript may take of the summariser's window, by the estimate."""
        return self.profile.context_window - self._cap(max_output_tokens) - self._frame_price(previous)

    def _fitting(self, messages: Sequence[Message], room: int, previous: str | None) -> int:
        if room < 0:
            return 0
        if not self.estimator.exact:
            return self._fitting_whole(messages, previous, room + self._frame_price(previous))
        multiplier = self.estimator.multiplier
        raw = self.estimator.raw_text
        shares = []
        for message in messages:
            labels, bodies = [], 0.0
            for label, body in _lines(message, TOOL_RESULT_CHARS):
                labels.append(label)
                bodies += raw(body)
            # The labels together, with the newline before each line: one count of short strings.
            shares.append(bodies + raw("\n" + "\n".join(labels)) if labels else 0.0)
        prices = [math.floor(total * multiplier + 0.5) for total in accumulate(shares)]
        return bisect_right(prices, room)

    def _fitting_whole(self, messages: Sequence[Message], previous: str | None, room: int) -> int:
        """:meth:`fitting` with each prefix's request priced whole (within ``room``, the request's)."""

        def fits(count: int) -> bool:
            return (
                self.estimator.request(self._request(render_transcript(messages[:count]), previous, None))
                <= room
            )

        if fits(len(messages)):
            return len(messages)
        # The count of leading prefixes (of 1, 2, … messages) that fit: fitting is monotone in the count.
        return bisect_left(range(1, len(messages)), True, key=lambda count: not fits(count))

    def _frame_price(self, previous: str | None) -> int:
        """The estimate of the summary request around an empty transcript (the previous summary, the
        wrappers and the instruction), remembered for the last ``previous`` (and prompt and estimator)."""
        key = (previous, self.prompt, self.instruction_suffix, self.estimator)
        known = self._frame
        if known is not None and known[0] == key:
            return known[1]
        price = self.estimator.request(self._request("", previous, None))
        self._frame = (key, price)
        return price

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
