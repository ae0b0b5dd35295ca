"""What a fold keeps of the task whatever the summary says: the first request, the latest instruction
it covered, the files the agent touched.

A summary is a model's writing; it may drop the one sentence that says what the session is for (a
goal section that holds a command's wrapper instead of the request), the user's newest instruction
(an open-work section filled from a todo list) or the files worked on. These are facts the engine
can read off the folded messages, so every checkpoint ends with them, carried from one checkpoint to
the next (:func:`with_task`), the summary's own words left as they are:

- the first request: the first user message's own words (text blocks that are not the harness's
  markup, ``<system-reminder>`` and the like), at most :data:`REQUEST_CHARS`;
- the latest instruction the folded span held, the same way (a newer one is in the request itself);
- the files the agent's tool calls named (``file_path``, ``path``, ``notebook_path``), the newest
  :data:`MAX_FILES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ...content import Message, Text, ToolResult, ToolUse

__all__ = ["FILE_KEYS", "MAX_FILES", "REQUEST_CHARS", "TASK_HEADING", "instruction", "with_task"]

TASK_HEADING = "## Kept by the guard"
"""The heading of the section a checkpoint ends with (read back from the previous one)."""
REQUEST_CHARS = 600
"""How much of a user request the section keeps."""
MAX_FILES = 40
"""How many file names it keeps (the newest)."""
FILE_KEYS = ("file_path", "path", "notebook_path")
"""The tool-call arguments that name a file."""

_FIRST = "First request: "
_LATEST = "Latest instruction before this summary: "
_FILES = "Files touched: "


def instruction(message: Message) -> str | None:
    """A user message's own words (``None``: not a user's instruction: tool results, or no text but
    the harness's markup)."""
    if message.role != "user" or any(isinstance(b, ToolResult) for b in message.content):
        return None
    own = [b.text for b in message.content if isinstance(b, Text) and not b.text.lstrip().startswith("<")]
    said = " ".join(" ".join(own).split())
    return said or None


def _first_said(messages: Iterable[Message]) -> str | None:
    """The first of ``messages`` that is a user's instruction, in its own words (:func:`instruction`)."""
    return next((s for m in messages if (s := instruction(m)) is not None), None)


def _clip(text: str) -> str:
    return text if len(text) <= REQUEST_CHARS else text[: REQUEST_CHARS - 1] + "…"


def _parse(summary: str | None) -> tuple[str, str | None, str | None, list[str]]:
    """``summary`` without its section, and the section's first request, latest instruction, files."""
    if not summary or TASK_HEADING not in summary:
        return summary or "", None, None, []
    body, _, section = summary.rpartition(TASK_HEADING)
    first = latest = None
    files: list[str] = []
    for line in section.splitlines():
        if line.startswith(_FIRST):
            first = line[len(_FIRST) :]
        elif line.startswith(_LATEST):
            latest = line[len(_LATEST) :]
        elif line.startswith(_FILES):
            files = [f for f in line[len(_FILES) :].split(", ") if f]
    return body.rstrip(), first, latest, files


def _files(covered: Sequence[Message]) -> list[str]:
    named: list[str] = []
    for message in covered:
        for block in message.content:
            if isinstance(block, ToolUse):
                for key in FILE_KEYS:
                    value = block.input.get(key)
                    if isinstance(value, str) and value.strip():
                        named.append(re.sub(r"\s+", " ", value.strip()))
    return named


def with_task(text: str, previous: str | None, covered: Sequence[Message]) -> str:
    """``text`` (a checkpoint's summary, or a hard cut's) ending with the section that keeps the task:
    what ``previous`` (the checkpoint it replaces) kept, updated by ``covered`` (what it folds)."""
    body, _, _, _ = _parse(text)
    _, first, latest, files = _parse(previous)
    # Only the first instruction (when the previous checkpoint kept none) and the latest are kept: each
    # is looked for from its end of the span, so a long fold reads two messages' words, not all of them.
    newest = _first_said(reversed(covered))
    if first is None and newest is not None:
        first = _clip(_first_said(covered) or newest)
    if newest is not None:
        latest = _clip(newest)
    files = list(dict.fromkeys([*files, *_files(covered)]))[-MAX_FILES:]
    lines = [TASK_HEADING]
    if first is not None:
        lines.append(_FIRST + first)
    if latest is not None and latest != first:
        lines.append(_LATEST + latest)
    if files:
        lines.append(_FILES + ", ".join(files))
    if len(lines) == 1:
        return body
    return f"{body}\n\n" + "\n".join(lines)
