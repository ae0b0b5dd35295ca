"""Which TodoWrite reminder rule do the FIT half's real deltas support? (chooses ``_claude_todo.RULE``)

Run from the repo root::

    PYTHONPATH=src TIKTOKEN_CACHE_DIR=/work/shared/tokenizers python -m benchmarks.claude_todo_reminder_probe

Claude Code injects ``<system-reminder>The TodoWrite tool hasn't been used recently. ... Here are
the existing contents of your todo list: [...]</system-reminder>`` as a meta user message that its
log does not record (public analyses of ``src/utils/attachments.ts``: ``turnsSinceLastTodoWrite >=
TURNS_SINCE_WRITE && turnsSinceLastReminder >= TURNS_BETWEEN_REMINDERS``, counting assistant
messages; 10/10 in the versions described, 5/3 in another). Before the rebuilt rounds carry that
text, the rule must explain the residuals of the ``fit`` half (never the held-out one). For every
candidate (thresholds in assistant log lines; whether a typed prompt restarts the count; the
oldest Claude Code version it applies to, among the versions of the fit half), this prints how
many fit rounds would carry the reminder, the summed absolute residual of the default rule in
tokens before and after adding it, and the fit half's p90 |relative error| on explained rounds
≥ 500 tokens. A rule that fires where the real deltas show nothing makes both larger. The best
candidate (least summed residual) is what ``_claude_todo.RULE`` must be; this run says whether it is.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchmarks import _claude_sessions as sessions
from benchmarks import _claude_todo as todo
from contextwindow.content import Message, Text
from contextwindow.pricing import Estimator

RESULTS = Path(__file__).resolve().parent / "results" / "claude_todo_reminder_probe.md"


def fit_files() -> list[Path]:
    """The fit half's files, split exactly as ``sessions.rounds`` splits them."""
    by_generation: dict[str, list[tuple[bytes, Path]]] = {}
    for path in sorted(sessions.ROOT.rglob("*.jsonl")):
        found = sessions.file_rounds(path, todo_rule=None)
        if found:
            rel = str(path.relative_to(sessions.ROOT)).encode()
            by_generation.setdefault(sessions.generation(found[0].model), []).append(
                (hashlib.sha256(rel).digest(), path)
            )
    return [p for files in by_generation.values() for i, (_, p) in enumerate(sorted(files)) if i % 3 != 1]


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def main() -> None:
    data = []
    versions: set[tuple[int, ...]] = set()
    for path in fit_files():
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        versions.update(todo.version(e) for e in entries if e.get("version"))
        priced = []
        for r in sessions.file_rounds(path, todo_rule=None):
            if r.injected:
                continue
            est = Estimator(r.model)
            priced.append((r, r.delta - est.messages(r.messages), est))
        data.append((entries, priced))
    candidates = [
        todo.Rule(
            since_write=since_write,
            between=between,
            typed_prompt_resets=resets,
            since_version=since,
            needs_list=needs_list,
        )
        for since in sorted(versions)
        for resets in (False, True)
        for needs_list in (True, False)
        for since_write, between in ((10, 10), (5, 3), (6, 3), (7, 3), (5, 4), (6, 4), (3, 3))
    ]
    rows = []
    for rule in candidates:
        count, before, after = 0, 0.0, 0.0
        rel_before: list[float] = []
        rel_after: list[float] = []
        for entries, priced in data:
            sent = todo.reminders(entries, rule)
            for r, residual, est in priced:
                extra = 0
                if r.lines[1] in sent:
                    count += 1
                    block = Text(text=sent[r.lines[1]])
                    extra = est.messages([Message(role="user", content=(block,))])
                before += abs(residual)
                after += abs(residual - extra)
                if r.delta >= 500 and sessions.explained(r):
                    rel_before.append(abs(residual) / r.delta)
                    rel_after.append(abs(residual - extra) / r.delta)
        rows.append((after, rule, count, before, _p90(rel_before), _p90(rel_after)))
    rows.sort(key=lambda row: (row[0], row[1].since_version))
    lines = [
        "### TodoWrite reminder rules on the fit half (rounds without flagged injections)",
        "",
        "Best first (ties: the oldest version). Σ |residual| in tokens; p90 on explained fit rounds ≥ 500.",
        "",
        "| since write ≥ | between ≥ | typed prompt resets | needs a list | from version | rounds carrying it"
        " | Σ before | Σ after | p90 before | p90 after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for after, rule, count, before, p_before, p_after in rows[:25]:
        lines.append(
            f"| {rule.since_write} | {rule.between} | {rule.typed_prompt_resets} | {rule.needs_list} | "
            f"{'.'.join(map(str, rule.since_version))} | {count} | {before:,.0f} | {after:,.0f} | "
            f"{p_before:.1%} | {p_after:.1%} |"
        )
    best = rows[0][1]
    same = (best.since_write, best.between, best.typed_prompt_resets, best.needs_list) == (
        todo.RULE.since_write,
        todo.RULE.between,
        todo.RULE.typed_prompt_resets,
        todo.RULE.needs_list,
    )
    lines += [
        "",
        f"Best: {best}. `_claude_todo.RULE` = {todo.RULE}: "
        + ("the same rule." if same else "DIFFERENT: update it."),
    ]
    table = "\n".join(lines) + "\n"
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
