"""The local provider's summariser mode: a deterministic summary of a requested length and sections.

A request asks for a summary by carrying the marker ``[[contextwindow:summarize]]`` in its system
prompt or in the text of its last user message, or by asking in the words of contextwindow's own
summariser (:data:`~contextwindow.engine.summary_rules.DEFAULT_SUMMARY_PROMPT`, as any model would be
asked); ``[[contextwindow:summarize target_tokens=600]]``
asks for that many output tokens (default: :data:`DEFAULT_TARGET_TOKENS`, never more than the call's
``max_tokens``: a larger target is cut at ``max_tokens`` and stops with ``max_tokens``, as a real
model cut at its output cap does). The sections are the ``## Heading`` lines of the instructions (the
system prompt and that last user message), in order; with none, ``## Goal``, ``## Progress`` and
``## Next Steps`` (the sections maka's checkpoint validator requires,
https://github.com/apache/maka/pull/4559).

The body of each section is built from the words of the conversation being summarised, in order, so
the same request always gives the same summary; each section ends with a full stop (a trailing colon
reads as truncation to summary checks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ..content import Message, Request, Text, ToolResult, ToolUse
from ..engine.summary_rules import DEFAULT_SUMMARY_PROMPT

__all__ = [
    "DEFAULT_SECTIONS",
    "DEFAULT_TARGET_TOKENS",
    "SUMMARY_MARKER",
    "SummaryAsk",
    "summary_ask",
    "write_summary",
]

SUMMARY_MARKER = "[[contextwindow:summarize"
"""Written in a system prompt or last user message, asks the local provider for a summary."""
DEFAULT_TARGET_TOKENS = 400
DEFAULT_SECTIONS = ("Goal", "Progress", "Next Steps")
_MARKER = re.compile(r"\[\[contextwindow:summarize(?:\s+target_tokens=(\d+))?\s*\]\]")
_HEADING = re.compile(r"^ {0,3}##\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SUMMARISER_ASK = DEFAULT_SUMMARY_PROMPT.split(".", 1)[0]
"""The opening sentence of the summariser's own instruction."""
_FALLBACK_WORDS = ("the", "conversation", "so", "far", "covered", "the", "task", "at", "hand")


class SummaryAsk:
    """What a summarise request asks for: a target length and the sections, in order."""

    __slots__ = ("sections", "target_tokens")

    def __init__(self, target_tokens: int, sections: tuple[str, ...]) -> None:
        self.target_tokens = target_tokens
        self.sections = sections


def _texts(message: Message) -> list[str]:
    return [b.text for b in message.content if isinstance(b, Text)]


def summary_ask(request: Request) -> SummaryAsk | None:
    """The summary the request asks for, or ``None`` when it carries no marker."""
    instructions = [t.text for t in request.system]
    if request.messages and request.messages[-1].role == "user":
        instructions.extend(_texts(request.messages[-1]))
    joined = "\n".join(instructions)
    match = _MARKER.search(joined)
    if match is None and _SUMMARISER_ASK not in joined:
        return None
    target = int(match.group(1)) if match is not None and match.group(1) else DEFAULT_TARGET_TOKENS
    sections = tuple(dict.fromkeys(_HEADING.findall(joined))) or DEFAULT_SECTIONS
    return SummaryAsk(target_tokens=max(target, 1), sections=sections)


def _words(messages: Sequence[Message]) -> list[str]:
    words: list[str] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, Text):
                words.extend(block.text.split())
            elif isinstance(block, ToolResult) and isinstance(block.content, str):
                words.extend(block.content.split())
            elif isinstance(block, ToolUse):
                words.append(block.name)
    # No word may open a heading, a code fence (``` or ~~~) or a marker inside a section body.
    cleaned = [w.strip("#`~*:[]") for w in words if not w.startswith("[[")]
    return [w for w in cleaned if w] or list(_FALLBACK_WORDS)


def write_summary(request: Request, ask: SummaryAsk, count: Callable[[str], int]) -> str:
    """A summary of ``request``'s conversation with ``ask``'s sections, as close to its target as whole
    words allow without going over (``count`` is the tokenizer)."""
    history = request.messages[:-1] if request.messages and request.messages[-1].role == "user" else ()
    words = _words(history or request.messages)

    def render(n_words: int) -> str:
        per_section, extra = divmod(n_words, len(ask.sections))
        out: list[str] = []
        cursor = 0
        for i, heading in enumerate(ask.sections):
            take = per_section + (1 if i < extra else 0)
            body = [words[(cursor + j) % len(words)] for j in range(take)]
            cursor += take
            # A body ending in a word like "etc..." or "see:" would read as truncated: end it cleanly.
            text = " ".join(body).rstrip(".:：…") or "-"
            out.append(f"## {heading}\n{text}.")
        return "\n\n".join(out)

    # Bisect on the word count: the longest summary whose token count is within the target.
    low, high = 0, max(1, ask.target_tokens)
    while count(render(high)) <= ask.target_tokens and high < 1_000_000:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        if count(render(mid)) <= ask.target_tokens:
            low = mid
        else:
            high = mid
    return render(low)
