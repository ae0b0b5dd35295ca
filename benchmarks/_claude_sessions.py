"""Appended rounds of real Claude Code sessions, with Anthropic's own count of each.

Source: ``../shared/data/claude-code-sessions`` (see its NOTE.md). For two consecutive API calls of
one session file, the prompt (``input + cache_read + cache_creation``) grows by the price of what
was appended between them: the first call's assistant blocks and the user entries (tool results,
prompts) before the second. Each :class:`Round` carries that real delta and the appended content as
canonical messages, so the benchmark prices it with the real :class:`Estimator`.

Rounds are left out when they cannot be priced honestly from the log: a non-positive delta (a
compaction or a new system prompt), a model change, images (their bytes are in the log but the
dimensions are what pricing uses, and five images are no sample), thinking blocks (whether earlier
turns' thinking counts depends on the model), and compaction summaries.

The content is what the API received where the log shows it differs from what the log displays:
an ``ExitPlanMode`` in plan-file mode is priced with its real empty input (see ``_blocks``), and
Claude Code's plan-mode and TodoWrite reminders, which the log does not record but which follow
from what it does record, are added to the rounds that carried them, as the Claude Code importer
adds them (``contextwindow.replay.importers.claude_code_unlogged``; ``Round.added``).
Rounds where the log shows Claude Code injected content it does not record are kept and flagged
(``Round.injected``, :data:`INJECTIONS`); :func:`explained` leaves them out of the explained subset.
Files are split into ``fit`` and ``holdout`` per generation (one file in three held out).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextwindow.content import Message, Text, ToolResult, ToolUse
from contextwindow.replay.importers import claude_code_unlogged as unlogged

from . import _claude_todo
from ._paths import CLAUDE_SESSIONS

__all__ = [
    "EXPLAINED_CHARS_PER_TOKEN",
    "INJECTIONS",
    "ROOT",
    "Round",
    "explained",
    "file_rounds",
    "generation",
    "pooled_scale",
    "recorded_scale",
    "rounds",
]

ROOT = CLAUDE_SESSIONS


@dataclass(frozen=True)
class Round:
    source: str
    model: str
    delta: int
    messages: tuple[Message, ...]
    lines: tuple[int, int] = (0, 0)
    """0-based line numbers of the two calls' first entries in the source file."""
    injected: tuple[str, ...] = ()
    """Why the log shows Claude Code added content it does not record (see :func:`explained`)."""
    added: tuple[str, ...] = ()
    """Unlogged content rebuilt from the log's own evidence and included in ``messages``."""
    output: int = 0
    """The first call's ``output_tokens`` as its last logged line reports it: what the assistant
    message of ``messages`` cost to generate (Claude Code logs a placeholder of 1–3 on some lines)."""

    @property
    def chars(self) -> int:
        total = 0
        for message in self.messages:
            for block in message.content:
                if isinstance(block, Text):
                    total += len(block.text)
                elif isinstance(block, ToolUse):
                    total += len(json.dumps(dict(block.input))) + len(block.name)
                elif isinstance(block, ToolResult):
                    if isinstance(block.content, str):
                        total += len(block.content)
                    else:
                        total += sum(len(b.text) for b in block.content if isinstance(b, Text))
        return total


EXPLAINED_CHARS_PER_TOKEN = (1.0, 5.0)
"""Logged characters per real token of a round the log can explain.

Real agent content (English, code, JSON, tool output) runs at 1.5–4.3 characters per Claude token
in these sessions (2–3 for Opus 4.7). A round below 1 has far more tokens than its logged content
can carry: Claude Code injected something the log does not show (system reminders on a typed
prompt, a sub-agent's second call, tool-list changes). A round above 5 logged more than was sent.
"""

INJECTIONS = ("edit hook",)
"""Evidence in the log that Claude Code added content to a round that the log does not record and
that cannot be rebuilt from the log (the plan-mode and TodoWrite reminders are rebuilt instead:
``claude_code_unlogged``).

- ``edit hook``: a ``PostToolUse`` hook ran after a file edit (a formatter such as ``ruff
  format``); when it rewrote a file Claude Code has read, Claude Code sends the changed lines as an
  unlogged notice in that round or the next (claude-code-log sample: +2,400 to +6,400 tokens after
  "1 file reformatted"). Both rounds are flagged, whether or not the hook changed anything.

Detection reads only the log (``_edit_hook``), never any method's estimate.
"""


def explained(round_: Round) -> bool:
    """True when the logged content can be what the round's real delta paid for.

    Two principled rules, applied to every method alike: the log shows no injection
    (:data:`INJECTIONS`), and the logged characters per real token lie in
    :data:`EXPLAINED_CHARS_PER_TOKEN`. The benchmark reports every method on all rounds AND on the
    explained ones, with the count each rule removes; the Claude fit uses the explained ones only.
    """
    lo, hi = EXPLAINED_CHARS_PER_TOKEN
    return not round_.injected and lo * round_.delta <= round_.chars <= hi * round_.delta


def generation(model: str) -> str:
    """The tokenizer family of a Claude model id (models.py: Opus 4.7 and later use the newer one)."""
    from contextwindow.models import get_profile

    return get_profile(model).tokenizer


def _prompt(usage: dict[str, Any]) -> int:
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})


def _blocks(content: Any, plan_files: dict[str, str] | None = None) -> list[Any] | None:
    """Canonical blocks of a log entry's content, or None when the round cannot be priced.

    ``plan_files`` (path → text last written there) tracks the session's plan files: a Write to a
    plan file records its text, and an ``ExitPlanMode`` whose logged ``plan`` equals a plan file's
    text is priced with the input the API received, ``{}``. In plan-file mode the model calls
    ``ExitPlanMode`` without arguments and Claude Code copies the file into the logged input for
    display; the real deltas show it (deep-manifest session: the three such rounds pay for the plan
    once, in the tool result, never twice).
    """
    if isinstance(content, str):
        return [Text(text=content)] if content else []
    out: list[Any] = []
    for b in content or []:
        kind = b.get("type")
        if kind == "text":
            out.append(Text(text=b.get("text", "")))
        elif kind == "tool_use":
            name, tool_input = b.get("name", ""), b.get("input") or {}
            if plan_files is not None:
                target = str(tool_input.get("file_path", ""))
                if name == "Write" and unlogged.PLAN_FILE_DIR in target:
                    plan_files[target] = str(tool_input.get("content", ""))
                elif name == "ExitPlanMode" and tool_input.get("plan") in plan_files.values():
                    tool_input = {k: v for k, v in tool_input.items() if k != "plan"}
            out.append(ToolUse(id=b.get("id", ""), name=name, input=tool_input))
        elif kind == "tool_result":
            inner = b.get("content")
            if isinstance(inner, list):
                if any(x.get("type") != "text" for x in inner):
                    return None
                inner = tuple(Text(text=x.get("text", "")) for x in inner)
            out.append(
                ToolResult(tool_use_id=b.get("tool_use_id", ""), content=inner if inner is not None else "")
            )
        else:  # thinking, images, anything else
            return None
    return out


def _edit_hook(entry: dict[str, Any]) -> bool:
    """A PostToolUse hook ran after a file edit (a formatter may have rewritten the file)."""
    if entry.get("type") == "system":
        text = str(entry.get("content") or "")
        return any(f"PostToolUse:{tool}" in text for tool in EDIT_TOOLS)
    if entry.get("type") == "attachment":
        name = str((entry.get("attachment") or {}).get("hookName") or "")
        return name.startswith("PostToolUse:") and name.split(":", 1)[1] in EDIT_TOOLS
    return False


def file_rounds(path: Path, todo_rule: _claude_todo.Rule | None = _claude_todo.RULE) -> list[Round]:
    """Every priceable round of one session file, in order.

    ``todo_rule`` is the TodoWrite reminder rule replayed over the log (None: no reminders added;
    ``claude_todo_reminder_probe`` compares candidate rules that way).
    """
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    plan_reminders = unlogged.plan_mode_reminders(entries)
    todo_reminders = {} if todo_rule is None else _claude_todo.reminders(entries, todo_rule)
    # (first line, model, prompt, assistant contents, user (line, content) after the call, hook seen)
    calls: list[dict[str, Any]] = []
    for number, entry in enumerate(entries):
        kind = entry.get("type")
        message = entry.get("message") or {}
        if kind == "assistant" and message.get("usage"):
            output = int(message["usage"].get("output_tokens") or 0)
            if calls and calls[-1]["id"] == message.get("id"):
                calls[-1]["assistant"].append(message.get("content"))
                calls[-1]["output"] = max(calls[-1]["output"], output)
                continue
            calls.append(
                {
                    "id": message.get("id"),
                    "line": number,
                    "model": message.get("model", ""),
                    "prompt": _prompt(message["usage"]),
                    "assistant": [message.get("content")],
                    "users": [],
                    "hook": False,
                    "output": output,
                }
            )
        elif calls and kind == "user":
            calls[-1]["users"].append(
                (number, None if entry.get("isCompactSummary") else message.get("content"))
            )
        elif calls and _edit_hook(entry):
            calls[-1]["hook"] = True
    plan_files: dict[str, str] = {}
    out = []
    for k, (call, following) in enumerate(itertools.pairwise(calls)):
        a_blocks: list[Any] | None = []
        for content in call["assistant"]:
            blocks = _blocks(content, plan_files)
            if blocks is None or a_blocks is None:
                a_blocks = None
                continue
            a_blocks.extend(blocks)
        delta = following["prompt"] - call["prompt"]
        model = call["model"]
        users = call["users"]
        if delta <= 0 or model != following["model"] or not model.startswith("claude"):
            continue
        if any(content is None for _, content in users) or not a_blocks:
            continue
        u_blocks: list[Any] | None = []
        for _, content in users:
            blocks = _blocks(content)
            if blocks is None:
                u_blocks = None
                break
            u_blocks.extend(blocks)
        if u_blocks is None:
            continue
        added = []
        # meta user messages; Claude Code merges them into the user turn after the tool results
        if following["line"] in plan_reminders:
            u_blocks.append(Text(text=plan_reminders[following["line"]]))
            added.append("plan-mode reminder")
        if following["line"] in todo_reminders:
            u_blocks.append(Text(text=todo_reminders[following["line"]]))
            added.append("todo reminder")
        injected = []
        if call["hook"] or (k > 0 and calls[k - 1]["hook"]):
            injected.append("edit hook")
        messages = [Message(role="assistant", content=tuple(a_blocks))]
        if u_blocks:
            messages.append(Message(role="user", content=tuple(u_blocks)))
        out.append(
            Round(
                str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name,
                model,
                delta,
                tuple(messages),
                (call["line"], following["line"]),
                tuple(injected),
                tuple(added),
                call["output"],
            )
        )
    return out


def rounds(which: str, held_out_every: int = 3) -> list[Round]:
    """Every priceable round of the files assigned to ``which`` (``fit``, ``holdout`` or ``all``).

    Within each tokenizer generation, files are ordered by a hash of their path and one in
    ``held_out_every`` is held out (every third; 2: half the sessions), so both generations have
    held-out sessions.
    """
    by_generation: dict[str, list[tuple[bytes, list[Round]]]] = {}
    for path in sorted(ROOT.rglob("*.jsonl")):
        found = file_rounds(path)
        if not found:
            continue
        rel = str(path.relative_to(ROOT))
        by_generation.setdefault(generation(found[0].model), []).append(
            (hashlib.sha256(rel.encode()).digest(), found)
        )
    out: list[Round] = []
    for files in by_generation.values():
        for i, (_, found) in enumerate(sorted(files, key=lambda f: f[0])):
            held = i % held_out_every == 1
            if which == "all" or (which == "holdout") == held:
                out.extend(found)
    return out


MIN_SCALE_TOKENS = 2_000
"""A session whose explained rounds hold fewer tokens than this says too little about its own scale:
the rounds of every session of its tokenizer generation are pooled instead."""


@functools.lru_cache(maxsize=128)
def _scale_sums(path: Path) -> tuple[str, int, int]:
    """A file's tokenizer generation, and over its explained rounds: what Anthropic counted less the
    local provider's framing, and the local tokenizer's count of the same content."""
    from contextwindow.content import Request
    from contextwindow.models import get_profile
    from contextwindow.testing.counting import count_request

    real = counted = 0
    family = ""
    for round_ in file_rounds(path):
        if not explained(round_):
            continue
        family = family or generation(round_.model)
        count = count_request(Request(messages=round_.messages), get_profile(round_.model))
        real += round_.delta - count.parts["framing"]
        counted += count.input_tokens - count.parts["framing"]
    return family, real, counted


def recorded_scale(path: Path, model: str) -> float:
    """The local provider's count scale for a replay of ``path``: Anthropic's counts of the content
    appended between the session's calls over the local tokenizer's count of it (its explained rounds,
    :func:`explained`), from the session's own recorded usage; pooled over every session file of the
    same tokenizer generation as ``model`` when the session's own rounds are too few
    (:data:`MIN_SCALE_TOKENS`); 1 when there are none. Never taken from contextwindow's pricing rules."""
    _, real, counted = _scale_sums(path)
    if counted >= MIN_SCALE_TOKENS:
        return round(real / counted, 3)
    return pooled_scale(model)


def pooled_scale(model: str) -> float:
    """The count scale over the explained rounds of every session file of ``model``'s tokenizer
    generation (1 when there are none, or ``model`` is not a Claude model)."""
    if not model.startswith("claude"):
        return 1.0
    family = generation(model)
    pooled_real = pooled = 0
    for other in sorted(ROOT.rglob("*.jsonl")):
        kind, r, c = _scale_sums(other)
        if kind == family:
            pooled_real, pooled = pooled_real + r, pooled + c
    return round(pooled_real / pooled, 3) if pooled else 1.0
