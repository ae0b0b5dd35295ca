"""Which thinking blocks a request is charged for: the Anthropic API strips earlier turns' thinking on
some models.

Anthropic documents (https://platform.claude.com/docs/en/build-with-claude/context-windows and
https://platform.claude.com/docs/en/build-with-claude/extended-thinking) that thinking blocks of
earlier turns sent back are stripped from the context and not counted, except on the models that keep
them: Opus 4.5 and later, Sonnet 4.6 and later. Earlier Opus and Sonnet models, and Haiku models
through 4.5, keep only the current turn's thinking, which must be sent back with the tool results it
led to: a tool-use loop in progress is one turn, and it ends at the next user turn that answers no
tool call. A model of another provider, or a Claude line or version not listed, is taken to
keep every block (they are charged wherever they are, which errs high).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..content import Message, ToolResult

__all__ = ["current_turn_start", "keeps_prior_thinking", "thinking_stripped_before"]

_CLAUDE = re.compile(r"claude-(opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?![0-9])")
_KEEPS_FROM = {"opus": (4, 5), "sonnet": (4, 6), "haiku": (4, 6)}
"""The first version of each Claude line known to keep earlier turns' thinking (Haiku: none through
4.5 does, and a later one is taken to)."""


def keeps_prior_thinking(model: str) -> bool:
    """Whether the API keeps (and charges) thinking blocks of earlier turns for ``model``."""
    name = model.lower()
    if name.startswith("claude-3"):
        return False
    found = _CLAUDE.search(name)
    if found is None:
        return True
    version = (int(found.group(2)), int(found.group(3) or 0))
    return version >= _KEEPS_FROM[found.group(1)]


def current_turn_start(messages: Sequence[Message]) -> int:
    """The index of the first message of the current turn: the start of the last run of consecutive
    user messages (the API merges them into one user turn) that holds no tool result (0 when there
    is none). A user turn that answers tool calls continues the tool-use loop, even with text beside
    the results (an agent's reminders)."""
    index = len(messages)
    while index > 0:
        end = index
        while index > 0 and messages[index - 1].role == "user":
            index -= 1
        if index < end and not any(
            isinstance(b, ToolResult) for message in messages[index:end] for b in message.content
        ):
            return index
        index -= 1 if index == end else 0
    return 0


def thinking_stripped_before(messages: Sequence[Message], model: str) -> int:
    """Thinking blocks of the messages before this index are not charged for ``model`` (0: none)."""
    return 0 if keeps_prior_thinking(model) else current_turn_start(messages)
