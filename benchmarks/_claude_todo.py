"""Claude Code's TodoWrite reminder: content the API received that the session log does not record.

Claude Code (from some version after 1.0.56) adds a meta user message to a request when the model
has not called ``TodoWrite`` for a while::

    <system-reminder>
    The TodoWrite tool hasn't been used recently. ... ignore if not applicable.

    Here are the existing contents of your todo list:

    [1. [completed] ... 2. [in_progress] ...]
    </system-reminder>

The log keeps neither the message nor the fact that it was sent, but it keeps everything the rule
reads: the assistant lines (Claude Code logs one line per content block), the ``TodoWrite`` inputs
and the prompts the person typed. :func:`reminders` replays the rule over a log and returns the
text each call received, so ``_claude_sessions`` can rebuild the round as the API received it.

The rule's parameters (:data:`RULE`) were chosen on the FIT half only, by
``python -m benchmarks.claude_todo_reminder_probe`` (it prints every candidate's fit-half error;
the held-out sessions were not looked at to choose them). Measured there: the real deltas of the
rounds the rule marks exceed the rest of their price by the reminder's own price (≈ 100 tokens
with an empty list, 200–300 with a list); the sessions older than :attr:`Rule.since_version` show
no such excess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RULE", "TEMPLATE", "Rule", "reminder", "reminders", "typed_prompt", "version"]

TEMPLATE = (
    "The TodoWrite tool hasn't been used recently. If you're working on tasks that would benefit"
    " from tracking progress, consider using the TodoWrite tool to track progress. Also consider"
    " cleaning up the todo list if has become stale and no longer matches what you are working on."
    " Only use it if it's relevant to the current work. This is just a gentle reminder - ignore if"
    " not applicable.\n"
)
"""The reminder's fixed text as public analyses of Claude Code's ``messages.ts`` quote it."""


@dataclass(frozen=True)
class Rule:
    """When Claude Code sends the reminder, in the log's own units.

    A *turn* is one assistant log line that is not thinking only (Claude Code logs each content
    block of a reply as its own line). Before each API call, the reminder is sent when the session
    has a todo list (a ``TodoWrite`` happened), at least ``since_write`` turns passed since the
    last ``TodoWrite`` and at least ``between`` since the last reminder.
    """

    since_write: int
    between: int
    typed_prompt_resets: bool
    """A prompt the person typed restarts the count since the last reminder."""
    since_version: tuple[int, ...]
    """The oldest Claude Code version (``version`` field of the log) the rule applies to."""
    needs_list: bool = True
    """Only after a ``TodoWrite`` (else also when the model never wrote a list)."""


RULE = Rule(since_write=6, between=3, typed_prompt_resets=True, since_version=(1, 0, 128))
"""Chosen on the fit half by ``benchmarks/claude_todo_reminder_probe.py`` (least summed absolute
residual in tokens over the fit rounds, and the lowest fit p90 on rounds ≥ 500 tokens)."""


def version(entry: dict[str, Any]) -> tuple[int, ...]:
    """Claude Code's version that wrote a log entry; ``(0,)`` when the entry does not say."""
    parts = []
    for part in str(entry.get("version") or "0").split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def reminder(todos: list[dict[str, Any]]) -> str:
    """The reminder text as ``messages.ts`` builds it, wrapped in ``<system-reminder>``."""
    text = TEMPLATE
    items = "\n".join(f"{i + 1}. [{t.get('status')}] {t.get('content')}" for i, t in enumerate(todos))
    if items:
        text += f"\n\nHere are the existing contents of your todo list:\n\n[{items}]"
    return f"<system-reminder>\n{text}\n</system-reminder>"


def typed_prompt(entry: dict[str, Any]) -> bool:
    """A user entry the person typed (not a tool result, not Claude Code's meta text)."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
        return False
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, str):
        return bool(content)
    return bool(content) and all(b.get("type") != "tool_result" for b in content)


def _blocks(entry: dict[str, Any]) -> list[dict[str, Any]]:
    content = (entry.get("message") or {}).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def reminders(entries: list[dict[str, Any]], rule: Rule = RULE) -> dict[int, str]:
    """Line of each API call's first assistant entry → the reminder text sent before that call.

    A list whose items are all completed is sent empty (Claude Code clears a finished list).
    """
    out: dict[int, str] = {}
    since_write = since_reminder = 10**9
    todos: list[dict[str, Any]] | None = None if rule.needs_list else []
    seen: set[Any] = set()
    for number, entry in enumerate(entries):
        if rule.typed_prompt_resets and typed_prompt(entry):
            since_reminder = 0
            continue
        if entry.get("type") != "assistant":
            continue
        message = entry.get("message") or {}
        blocks = _blocks(entry)
        if message.get("usage") and message.get("id") not in seen:
            due = since_write >= rule.since_write and since_reminder >= rule.between
            if todos is not None and due and version(entry) >= rule.since_version:
                out[number] = reminder(todos)
                since_reminder = 0
        seen.add(message.get("id"))
        if blocks and all(b.get("type") in ("thinking", "redacted_thinking") for b in blocks):
            continue
        writes = [b for b in blocks if b.get("type") == "tool_use" and b.get("name") == "TodoWrite"]
        if writes:
            listed = list((writes[-1].get("input") or {}).get("todos") or [])
            todos = [] if all(t.get("status") == "completed" for t in listed) else listed
            since_write = 0
        else:
            since_write += 1
        since_reminder += 1
    return out
