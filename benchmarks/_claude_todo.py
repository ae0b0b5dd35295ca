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
and the prompts the person typed. The rule and the text live in the Claude Code importer
(``contextwindow.replay.importers.claude_code_unlogged``), which rebuilds them in every imported
session; this module names them for the benchmarks.

The rule's parameters (:data:`RULE`) were chosen on the FIT half only, by
``python -m benchmarks.claude_todo_reminder_probe`` (it prints every candidate's fit-half error;
the held-out sessions were not looked at to choose them). Measured there: the real deltas of the
rounds the rule marks exceed the rest of their price by the reminder's own price (≈ 100 tokens
with an empty list, 200–300 with a list); the sessions older than :attr:`Rule.since_version` show
no such excess.
"""

from __future__ import annotations

from contextwindow.replay.importers.claude_code_unlogged import TODO_RULE as RULE
from contextwindow.replay.importers.claude_code_unlogged import TODO_TEMPLATE as TEMPLATE
from contextwindow.replay.importers.claude_code_unlogged import TodoRule as Rule
from contextwindow.replay.importers.claude_code_unlogged import todo_reminder as reminder
from contextwindow.replay.importers.claude_code_unlogged import todo_reminders as reminders
from contextwindow.replay.importers.claude_code_unlogged import typed_prompt, version

__all__ = ["RULE", "TEMPLATE", "Rule", "reminder", "reminders", "typed_prompt", "version"]
