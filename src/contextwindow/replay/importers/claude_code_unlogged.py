"""What Claude Code sent that its session log does not record, rebuilt from what the log does record.

Claude Code adds *system reminders* to the user turn of a request: text wrapped in
``<system-reminder>`` that the model reads but the ``~/.claude/projects/…/<session>.jsonl`` log does
not keep. Two are deterministic given the log, so :func:`unlogged` rebuilds them:

- the **TodoWrite reminder**, sent when the model has not called ``TodoWrite`` for a while; its
  rule (:class:`TodoRule`) reads only the assistant lines, the ``TodoWrite`` inputs and the typed
  prompts, all of which the log keeps;
- the **plan-mode reminder**, sent with every request while plan mode is on. Plan mode is read
  from the log (:func:`plan_mode_indexes`): ``permissionMode: "plan"`` where newer versions log it,
  else the span a plan-file ``Write`` or an ``ExitPlanMode`` call evidences.

The TodoWrite reminder's words are short and quoted by public analyses of Claude Code; it is
rebuilt word for word. The plan-mode reminder's words are Claude Code's own and are not reproduced:
the text sent here is a stand-in in this project's words that says the same thing, section by
section, at the published text's size (:data:`PLAN_MODE_PUBLISHED_O200K`), which is what pricing
needs. Content the log cannot evidence (a ``PostToolUse`` hook's notice of a reformatted file, a
sub-agent's tool list) is not invented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "PLAN_FILE_DIR",
    "PLAN_MODE_PUBLISHED_O200K",
    "TODO_RULE",
    "TODO_TEMPLATE",
    "TodoRule",
    "plan_mode_indexes",
    "plan_mode_reminder",
    "plan_mode_reminders",
    "todo_reminder",
    "todo_reminders",
    "typed_prompt",
    "unlogged",
    "version",
]

Entry = dict[str, Any]

TODO_TEMPLATE = (
    "The TodoWrite tool hasn't been used recently. If you're working on tasks that would benefit"
    " from tracking progress, consider using the TodoWrite tool to track progress. Also consider"
    " cleaning up the todo list if has become stale and no longer matches what you are working on."
    " Only use it if it's relevant to the current work. This is just a gentle reminder - ignore if"
    " not applicable.\n"
)
"""The TodoWrite reminder's fixed text as public analyses of Claude Code's ``messages.ts`` quote it."""


@dataclass(frozen=True, kw_only=True)
class TodoRule:
    """When Claude Code sends the TodoWrite reminder, in the log's own units.

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


TODO_RULE = TodoRule(since_write=6, between=3, typed_prompt_resets=True, since_version=(1, 0, 128))
"""Chosen on the fit half of the real sessions by ``benchmarks/claude_todo_reminder_probe.py``
(least summed absolute residual in tokens over the fit rounds)."""

PLAN_FILE_DIR = "/.claude/plans/"
"""Claude Code (2.0.5x and later) keeps the plan of plan mode in a file under ``~/.claude/plans/``."""

PLAN_MODE_PUBLISHED_O200K: dict[Literal["plan-file", "short"], int] = {"plan-file": 814, "short": 143}
"""``o200k_base`` tokens of Claude Code's own plan-mode reminder, wrapper included, as public
extractions of its prompts print it (Piebald-AI's claude-code-system-prompts,
"System Reminder: Plan mode is active"): the five-phase plan-file text of 2.0.5x with an existing
plan file, and the short text of earlier versions. The stand-ins below are kept within a few
percent of these (a test checks it)."""

_PLAN_FILE_REMINDER = (
    "Plan mode is on. The person has asked you not to carry anything out yet, so until they say otherwise you must not edit any file except the plan file named below, must not run tools that change anything (no commits, no configuration changes), and must not alter the state of the system in any other way. This instruction takes precedence over any other instruction you have been given.\n"
    "\n"
    "## The plan file\n"
    "{plan_file}\n"
    "Write the plan into this file bit by bit as you learn more. It is the one file you may change; everything else you may only read.\n"
    "\n"
    "## How to plan\n"
    "\n"
    "### Phase 1: Understand the request\n"
    "Aim: understand exactly what the person wants, by reading the relevant code and by asking them. During this phase, delegate searching only to sub-agents of the Explore type.\n"
    "\n"
    "1. Concentrate on the request itself and on the code that it touches.\n"
    "\n"
    "2. **Start as many as 3 Explore sub-agents at the same time** (one message, several tool calls) so the code base is covered quickly.\n"
    "   - One sub-agent is enough when the work is confined to a few known files, when the person named the files, or when the change is small and targeted.\n"
    "   - Use more than one when the scope is unclear, when several parts of the code base are involved, or when existing conventions must be understood before planning.\n"
    "   - Prefer fewer, better searches: never more than 3 sub-agents, and usually a single one will do.\n"
    "   - When you do start several, give each a distinct focus. For instance: one looks for existing implementations, one studies related components, one looks at the tests.\n"
    "\n"
    "3. Once you have read the code, ask the person about anything in the request that is still ambiguous, using the AskUserQuestion tool, before going further.\n"
    "\n"
    "### Phase 2: Design\n"
    "Aim: decide how the work will be done.\n"
    "\n"
    "Start a Plan sub-agent to work out an implementation from what the person wants and from what Phase 1 found.\n"
    "\n"
    "You may run up to 1 such sub-agent at once.\n"
    "\n"
    "**When to use it:**\n"
    "- **Normally**: start at least one Plan sub-agent for most tasks; a second view checks your understanding and brings up alternatives\n"
    "- **Skip it**: only for trivial work such as a typo, a one-line change or a plain rename\n"
    "\n"
    "Tell the sub-agent:\n"
    "- what Phase 1 found, with file names and code paths\n"
    "- the requirements and the limits the work must respect\n"
    "- that you want a detailed, step-by-step implementation plan back\n"
    "\n"
    "### Phase 3: Check\n"
    "Aim: go over what Phase 2 produced and make sure it matches what the person meant.\n"
    "1. Open the key files the sub-agents pointed at, to understand them better yourself\n"
    "2. Check that the proposed plan answers the original request and nothing else\n"
    "3. Ask the person, with AskUserQuestion, about anything still open\n"
    "\n"
    "### Phase 4: Write the final plan\n"
    "Aim: put the final plan in the plan file, the only file you are allowed to change.\n"
    "- Describe only the approach you recommend, not every option you weighed\n"
    "- Keep it short enough to read at a glance, yet precise enough to carry out\n"
    "- List the paths of the files that will have to change\n"
    "\n"
    "### Phase 5: Call ExitPlanMode\n"
    "When the plan file is final and your questions have been answered, finish your turn by calling ExitPlanMode so the person knows the planning is done.\n"
    "This matters: a turn in plan mode ends in one of two ways only, with a question to the person or with a call to ExitPlanMode. Do not stop for any other reason.\n"
    "\n"
    "You may ask the person questions at any stage. Do not guess at what they intend. The aim is a well-researched plan, with every open point settled before any implementation starts."
)
"""Plan-file mode (a session that writes its plan under ``~/.claude/plans/``), in this project's words."""

_SHORT_REMINDER = (
    "Plan mode is on. The person has asked you not to carry anything out yet: you must not edit files, must not run tools that change anything (no commits, no configuration changes), and must not alter the state of the system in any other way. This takes precedence over any other instruction you have been given, including earlier requests to make edits. Instead:\n"
    "1. Answer the request in full, reading whatever you need.\n"
    "2. When your research is done, present the plan by calling the ExitPlanMode tool, which asks the person to approve it. Until they have approved the plan, make no change to any file and run no tool that changes the state of the system."
)
"""Earlier versions (no plan file; the model passes its plan to ``ExitPlanMode``), in this project's words."""


def version(entry: Entry) -> tuple[int, ...]:
    """Claude Code's version that wrote a log entry; ``(0,)`` when the entry does not say."""
    parts = []
    for part in str(entry.get("version") or "0").split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def typed_prompt(entry: Entry) -> bool:
    """A user entry the person typed (not a tool result, not Claude Code's meta text)."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
        return False
    content = _message(entry).get("content")
    if isinstance(content, str):
        return bool(content)
    return (
        isinstance(content, list)
        and bool(content)
        and all(isinstance(b, dict) and b.get("type") != "tool_result" for b in content)
    )


def _message(entry: Entry) -> dict[str, Any]:
    # a malformed line is the importer's to report, with its line number: here it holds nothing
    message = entry.get("message")
    return message if isinstance(message, dict) else {}


def _input(block: dict[str, Any]) -> dict[str, Any]:
    value = block.get("input")
    return value if isinstance(value, dict) else {}


def _blocks(entry: Entry) -> list[dict[str, Any]]:
    content = _message(entry).get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _tool_uses(entry: Entry) -> list[dict[str, Any]]:
    if entry.get("type") != "assistant":
        return []
    return [b for b in _blocks(entry) if b.get("type") == "tool_use"]


def _plan_write(block: dict[str, Any]) -> str | None:
    target = str(_input(block).get("file_path", ""))
    return target if block.get("name") == "Write" and PLAN_FILE_DIR in target else None


def todo_reminder(todos: Sequence[dict[str, Any]]) -> str:
    """The TodoWrite reminder as ``messages.ts`` builds it, wrapped in ``<system-reminder>``."""
    text = TODO_TEMPLATE
    items = "\n".join(f"{i + 1}. [{t.get('status')}] {t.get('content')}" for i, t in enumerate(todos))
    if items:
        text += f"\n\nHere are the existing contents of your todo list:\n\n[{items}]"
    return f"<system-reminder>\n{text}\n</system-reminder>"


def _calls(entries: Sequence[Entry]) -> list[int]:
    """Index of each API call's first assistant entry (one reply is logged as several lines)."""
    out: list[int] = []
    seen: set[Any] = set()
    for i, entry in enumerate(entries):
        message = _message(entry)
        if entry.get("type") == "assistant" and message.get("usage") and message.get("id") not in seen:
            out.append(i)
        if entry.get("type") == "assistant":
            seen.add(message.get("id"))
    return out


def todo_reminders(entries: Sequence[Entry], rule: TodoRule = TODO_RULE) -> dict[int, str]:
    """Index of each API call's first assistant entry → the TodoWrite reminder sent before it.

    A list whose items are all completed is sent empty (Claude Code clears a finished list).
    """
    out: dict[int, str] = {}
    calls = set(_calls(entries))
    since_write = since_reminder = 10**9
    todos: list[dict[str, Any]] | None = None if rule.needs_list else []
    for number, entry in enumerate(entries):
        if rule.typed_prompt_resets and typed_prompt(entry):
            since_reminder = 0
            continue
        if entry.get("type") != "assistant":
            continue
        blocks = _blocks(entry)
        if number in calls:
            due = since_write >= rule.since_write and since_reminder >= rule.between
            if todos is not None and due and version(entry) >= rule.since_version:
                out[number] = todo_reminder(todos)
                since_reminder = 0
        if blocks and all(b.get("type") in ("thinking", "redacted_thinking") for b in blocks):
            continue
        writes = [b for b in blocks if b.get("type") == "tool_use" and b.get("name") == "TodoWrite"]
        if writes:
            todos_in = _input(writes[-1]).get("todos")
            listed = [t for t in todos_in if isinstance(t, dict)] if isinstance(todos_in, list) else []
            todos = [] if all(t.get("status") == "completed" for t in listed) else listed
            since_write = 0
        else:
            since_write += 1
        since_reminder += 1
    return out


def plan_mode_indexes(entries: Sequence[Entry]) -> set[int]:
    """Indexes of the user entries Claude Code sent while plan mode was on.

    Plan mode is on for an entry that carries ``permissionMode: "plan"`` (newer versions log it),
    and for a span the log evidences without that field: from the last prompt the person typed
    before a Write to a plan file or an ``ExitPlanMode`` call (only plan mode asks for either) up to
    the ``ExitPlanMode`` the person approved (a rejected one keeps plan mode on; a session that
    ends in plan mode keeps it to the end).
    """
    prompts = [i for i, e in enumerate(entries) if typed_prompt(e)]
    exits: dict[str, int] = {}
    evidence: list[int] = []
    approved: list[int] = []
    for i, e in enumerate(entries):
        for b in _tool_uses(e):
            if b.get("name") == "ExitPlanMode" or _plan_write(b) is not None:
                evidence.append(i)
            if b.get("name") == "ExitPlanMode":
                exits[b.get("id", "")] = i
        if e.get("type") == "user":
            for b in _blocks(e):
                if b.get("type") == "tool_result" and b.get("tool_use_id") in exits and not b.get("is_error"):
                    approved.append(exits[b["tool_use_id"]])
    found = {
        i for i, e in enumerate(entries) if e.get("type") == "user" and e.get("permissionMode") == "plan"
    }
    previous_exit = -1
    for first in evidence:
        if first <= previous_exit:
            continue
        start = max((p for p in prompts if previous_exit < p < first), default=previous_exit + 1)
        end = min((a for a in approved if a >= first), default=len(entries))
        found.update(i for i in range(start, end) if entries[i].get("type") == "user")
        previous_exit = end
    return found


def plan_mode_reminder(*, plan_file: str | None, exists: bool = False) -> str:
    """The plan-mode reminder (a stand-in, see the module docstring), wrapped in ``<system-reminder>``.

    ``plan_file`` is the session's plan file (plan-file mode), or None for the earlier short form.
    """
    if plan_file is None:
        text = _SHORT_REMINDER
    else:
        info = (
            f"A plan file already exists at {plan_file}; read it and edit it with the Edit tool."
            if exists
            else f"There is no plan file yet: create it at {plan_file} with the Write tool."
        )
        text = _PLAN_FILE_REMINDER.replace("{plan_file}", info)
    return f"<system-reminder>\n{text}\n</system-reminder>"


def plan_mode_reminders(entries: Sequence[Entry]) -> dict[int, str]:
    """Index of each API call's first assistant entry → the plan-mode reminder sent before it.

    A call carries the reminder when a user entry since the previous call was sent in plan mode.
    The plan-file form is used when the session writes a plan file (the path is the first one it
    writes; "exists" once a Write to it came before the call), else the short form.
    """
    in_plan = plan_mode_indexes(entries)
    if not in_plan:
        return {}
    writes = [(i, path) for i, e in enumerate(entries) for b in _tool_uses(e) if (path := _plan_write(b))]
    plan_file = writes[0][1] if writes else None
    out: dict[int, str] = {}
    previous = -1
    for call in _calls(entries):
        if any(i in in_plan for i in range(previous + 1, call)):
            exists = plan_file is not None and any(i < call for i, _ in writes)
            out[call] = plan_mode_reminder(plan_file=plan_file, exists=exists)
        previous = call
    return out


def unlogged(entries: Sequence[Entry], *, todo_rule: TodoRule | None = TODO_RULE) -> dict[int, list[str]]:
    """Index of each API call's first assistant entry → the reminders Claude Code added before it.

    ``entries`` are a session's log lines in order (lines other than ``user`` and ``assistant``
    may be left out). The reminders are meta user messages that Claude Code merges into the user
    turn before the call: plan mode's first, then the TodoWrite reminder. ``todo_rule`` None
    leaves the TodoWrite reminder out.
    """
    out: dict[int, list[str]] = {}
    for index, text in plan_mode_reminders(entries).items():
        out.setdefault(index, []).append(text)
    if todo_rule is not None:
        for index, text in todo_reminders(entries, todo_rule).items():
            out.setdefault(index, []).append(text)
    return out
