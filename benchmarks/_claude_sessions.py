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
Files are split into ``fit`` and ``holdout`` per generation (one file in three held out).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextwindow.content import Message, Text, ToolResult, ToolUse

from ._paths import CLAUDE_SESSIONS

__all__ = ["EXPLAINED_CHARS_PER_TOKEN", "ROOT", "Round", "explained", "generation", "rounds"]

ROOT = CLAUDE_SESSIONS


@dataclass(frozen=True)
class Round:
    source: str
    model: str
    delta: int
    messages: tuple[Message, ...]

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
prompt, a sub-agent's second call, tool-list changes). A round above 5 logged more than was sent
(ExitPlanMode's logged result echoes the whole plan). Such a delta is not the price of the logged
content, whatever method prices it. The benchmark reports every method on all rounds AND on the
explained ones; the Claude fit uses the explained ones only. The rule looks only at the log
(characters and the real delta), never at any method's estimate.
"""


def explained(round_: Round) -> bool:
    """True when the logged content can be what the round's real delta paid for (see above)."""
    lo, hi = EXPLAINED_CHARS_PER_TOKEN
    return lo * round_.delta <= round_.chars <= hi * round_.delta


def generation(model: str) -> str:
    """The tokenizer family of a Claude model id (models.py: Opus 4.7 and later use the newer one)."""
    from contextwindow.models import get_profile

    return get_profile(model).tokenizer


def _prompt(usage: dict[str, Any]) -> int:
    return sum(
        int(usage.get(k) or 0)
        for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )


def _blocks(content: Any) -> list[Any] | None:
    """Canonical blocks of a log entry's content, or None when the round cannot be priced."""
    if isinstance(content, str):
        return [Text(text=content)] if content else []
    out: list[Any] = []
    for b in content or []:
        kind = b.get("type")
        if kind == "text":
            out.append(Text(text=b.get("text", "")))
        elif kind == "tool_use":
            out.append(ToolUse(id=b.get("id", ""), name=b.get("name", ""), input=b.get("input") or {}))
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


def _file_rounds(path: Path) -> list[Round]:
    calls: list[tuple[str, str, int, list[Any]]] = []  # (id, model, prompt, entries after the call)
    current: dict[str, Any] | None = None
    pending: list[Any] = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        kind = entry.get("type")
        message = entry.get("message") or {}
        if kind == "assistant" and message.get("usage"):
            mid = message.get("id")
            if current is not None and current["id"] == mid:
                current["assistant"].append(message.get("content"))
                continue
            if current is not None:
                calls.append(
                    (current["id"], current["model"], current["prompt"], [current["assistant"], pending])
                )
            current = {
                "id": mid,
                "model": message.get("model", ""),
                "prompt": _prompt(message["usage"]),
                "assistant": [message.get("content")],
            }
            pending = []
        elif kind == "user" and current is not None:
            if entry.get("isCompactSummary"):
                pending.append(None)
            else:
                pending.append(message.get("content"))
    if current is not None:
        calls.append((current["id"], current["model"], current["prompt"], [current["assistant"], pending]))
    out = []
    for (_, model, prompt, (assistant, users)), (_, next_model, next_prompt, _) in itertools.pairwise(calls):
        delta = next_prompt - prompt
        if delta <= 0 or model != next_model or not model.startswith("claude") or None in users:
            continue
        a_blocks: list[Any] = []
        ok = True
        for content in assistant:
            blocks = _blocks(content)
            if blocks is None:
                ok = False
                break
            a_blocks.extend(blocks)
        u_blocks: list[Any] = []
        for content in users:
            blocks = _blocks(content)
            if blocks is None:
                ok = False
                break
            u_blocks.extend(blocks)
        if not ok or not a_blocks:
            continue
        messages = [Message(role="assistant", content=tuple(a_blocks))]
        if u_blocks:
            messages.append(Message(role="user", content=tuple(u_blocks)))
        out.append(Round(str(path.relative_to(ROOT)), model, delta, tuple(messages)))
    return out


def rounds(which: str) -> list[Round]:
    """Every priceable round of the files assigned to ``which`` (``fit``, ``holdout`` or ``all``).

    Within each tokenizer generation, files are ordered by a hash of their path and every third is
    held out, so both generations have held-out sessions.
    """
    by_generation: dict[str, list[tuple[bytes, list[Round]]]] = {}
    for path in sorted(ROOT.rglob("*.jsonl")):
        found = _file_rounds(path)
        if not found:
            continue
        rel = str(path.relative_to(ROOT))
        by_generation.setdefault(generation(found[0].model), []).append(
            (hashlib.sha256(rel.encode()).digest(), found)
        )
    out: list[Round] = []
    for files in by_generation.values():
        for i, (_, found) in enumerate(sorted(files, key=lambda f: f[0])):
            held = i % 3 == 1
            if which == "all" or (which == "holdout") == held:
                out.extend(found)
    return out
