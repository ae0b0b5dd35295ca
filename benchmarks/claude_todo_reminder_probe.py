"""Does Claude Code's unlogged TodoWrite reminder explain the fit half's Claude residuals?

Run from the repo root::

    PYTHONPATH=src TIKTOKEN_CACHE_DIR=/work/shared/tokenizers python -m benchmarks.claude_todo_reminder_probe

Claude Code injects ``<system-reminder>The TodoWrite tool hasn't been used recently. ... Here are
the existing contents of your todo list: [1. [status] content ...]</system-reminder>`` as a meta
user message that its log does not record (public analyses of ``src/utils/attachments.ts``:
``turnsSinceLastTodoWrite >= TURNS_SINCE_WRITE && turnsSinceLastReminder >=
TURNS_BETWEEN_REMINDERS``, counting assistant messages backwards from the end; 10/10 in the
versions described, 5/3 in another). Before adding that text to a reconstructed round, the rule
must explain the residuals of the ``fit`` half (never the held-out one). For every candidate
(turns counted as assistant log lines or as API calls; thresholds; whether a list with nothing
left to do is reminded), this prints how many fit rounds would carry the reminder and the summed
relative error of the default rule before and after adding it. A rule that fires where the real
deltas show nothing makes the sum larger. Diagnostic only: it changes no coefficients.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from benchmarks import _claude_sessions as sessions
from contextwindow.content import Message, Text
from contextwindow.pricing import Estimator

RESULTS = Path(__file__).resolve().parent / "results" / "claude_todo_reminder_probe.md"

TEMPLATE = (
    "The TodoWrite tool hasn't been used recently. If you're working on tasks that would benefit"
    " from tracking progress, consider using the TodoWrite tool to track progress. Also consider"
    " cleaning up the todo list if has become stale and no longer matches what you are working on."
    " Only use it if it's relevant to the current work. This is just a gentle reminder - ignore if"
    " not applicable.\n"
)


def reminder(todos: list[dict[str, Any]]) -> str:
    """The reminder text as messages.ts builds it, wrapped in ``<system-reminder>``."""
    text = TEMPLATE
    items = "\n".join(f"{i + 1}. [{t.get('status')}] {t.get('content')}" for i, t in enumerate(todos))
    if items:
        text += f"\n\nHere are the existing contents of your todo list:\n\n[{items}]"
    return f"<system-reminder>\n{text}\n</system-reminder>"


def fires(
    entries: list[dict[str, Any]], since_write: int, between: int, active: bool, unit: str
) -> dict[int, Any]:
    """Line of each call the rule puts a reminder before, with the todo list it carries."""
    out: dict[int, Any] = {}
    sw = sb = 10**6
    todos: list[dict[str, Any]] = []
    seen: set[Any] = set()
    first = True
    for i, e in enumerate(entries):
        if e.get("type") != "assistant":
            continue
        message = e.get("message") or {}
        if message.get("usage") and message.get("id") not in seen:
            live = any(t.get("status") != "completed" for t in todos)
            if not first and sw >= since_write and sb >= between and (live or not active):
                out[i] = list(todos)
                sb = 0
            first = False
            if unit == "calls":
                sw, sb = sw + 1, sb + 1
        seen.add(message.get("id"))
        writes = [
            b
            for b in message.get("content") or []
            if b.get("type") == "tool_use" and b.get("name") == "TodoWrite"
        ]
        if writes:
            todos, sw = list(writes[-1].get("input", {}).get("todos", [])), 0
            sb += unit == "lines"
        elif unit == "lines":
            sw, sb = sw + 1, sb + 1
    return out


def fit_files() -> list[Path]:
    """The fit half's files, split exactly as ``sessions.rounds`` splits them."""
    by_generation: dict[str, list[tuple[bytes, Path]]] = {}
    for path in sorted(sessions.ROOT.rglob("*.jsonl")):
        found = sessions.file_rounds(path)
        if found:
            rel = str(path.relative_to(sessions.ROOT)).encode()
            by_generation.setdefault(sessions.generation(found[0].model), []).append(
                (hashlib.sha256(rel).digest(), path)
            )
    return [p for files in by_generation.values() for i, (_, p) in enumerate(sorted(files)) if i % 3 != 1]


def main() -> None:
    data = []
    for path in fit_files():
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        if "TodoWrite" not in path.read_text():
            continue
        priced = [
            (r, r.delta - Estimator(r.model).messages(r.messages))
            for r in sessions.file_rounds(path)
            if not r.injected
        ]
        data.append((entries, priced))
    lines = [
        "### TodoWrite reminder rules on the fit half (rounds without flagged injections)",
        "",
        "| turns | since write ≥ | between ≥ | only a live list | rounds carrying it | Σ rel. error before | after |",
        "|---|---|---|---|---|---|---|",
    ]
    for unit in ("lines", "calls"):
        for active in (False, True):
            for since_write, between in ((10, 10), (5, 3), (6, 3), (3, 3)):
                count, before, after = 0, 0.0, 0.0
                for entries, priced in data:
                    fired = fires(entries, since_write, between, active, unit)
                    for r, residual in priced:
                        extra = 0
                        if r.lines[1] in fired:
                            count += 1
                            block = Text(text=reminder(fired[r.lines[1]]))
                            extra = Estimator(r.model).messages([Message(role="user", content=(block,))])
                        before += abs(residual) / r.delta
                        after += abs(residual - extra) / r.delta
                lines.append(
                    f"| {unit} | {since_write} | {between} | {active} | {count} | {before:.2f} | {after:.2f} |"
                )
    table = "\n".join(lines) + "\n"
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
