"""Claude Code session transcripts (``~/.claude/projects/<cwd>/<session>.jsonl``) as scenarios.

The format, as Claude Code writes it: one JSON object a line, ``type`` one of ``user``,
``assistant``, ``system``, ``summary``, ``attachment``, ``progress``, ``queue-operation``,
``file-history-snapshot``, …; only ``user`` and ``assistant`` lines carry what the model saw, in
``message`` (an Anthropic Messages API message: ``content`` is a string or blocks — text, image,
thinking, tool_use, tool_result). One API reply is written as several ``assistant`` lines sharing
``message.id``, one per content block; they are merged back into one reply. ``isSidechain`` lines
belong to a Task sub-agent: when a file mixes both, the main thread is kept.

What Claude Code sent but did not log, where the log shows it (its plan-mode and TodoWrite
reminders; :mod:`.claude_code_unlogged`), is added to the user turn it was sent with, so the
requests a replay prices are the ones Claude Code sent; ``unlogged=False`` imports only what the
log records. Blocks the Messages API parser does not know (``tool_reference`` inside a tool result)
become a short text naming them. Each line's content goes through :func:`contextwindow.formats.anthropic.parse_wire_messages`,
so media are decoded, hashed and measured as any request's would be.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...errors import InvalidInput
from ...formats import anthropic
from .._json_text import json_at, lines
from ..scenario import Scenario, ScenarioError
from ._assemble import Assembler
from .claude_code_unlogged import unlogged as unlogged_reminders

__all__ = ["import_claude_code", "looks_like_claude_code"]

_ENTRY_TYPES = frozenset(
    {"user", "assistant", "system", "summary", "attachment", "progress", "queue-operation"}
    | {"file-history-snapshot", "permission-mode", "last-prompt"}
)


def looks_like_claude_code(first: dict[str, Any]) -> bool:
    """Whether a JSON Lines entry is a Claude Code transcript line (not a scenario event)."""
    return first.get("type") in _ENTRY_TYPES and (
        "sessionId" in first or "uuid" in first or "leafUuid" in first or "messageId" in first
    )


def import_claude_code(path: str | Path, *, unlogged: bool = True) -> Scenario:
    """Read a Claude Code session file; ``ScenarioError`` names the line of anything unreadable.

    ``unlogged`` adds the reminders Claude Code sent without logging them (see the module docstring).
    """
    path = Path(path)
    entries: list[tuple[int, dict[str, Any]]] = []
    for number, line in lines(path):
        if not line.strip():
            continue
        entry = json_at(line, where=f"{path}:{number}")
        if isinstance(entry, dict) and entry.get("type") in ("user", "assistant"):
            entries.append((number, entry))
    if any(not e.get("isSidechain", False) for _, e in entries):
        entries = [(n, e) for n, e in entries if not e.get("isSidechain", False)]
    model = next(
        (
            e["message"].get("model")
            for _, e in entries
            if e["type"] == "assistant" and isinstance(e.get("message"), dict)
        ),
        None,
    )
    session = next((e.get("sessionId") for _, e in entries if e.get("sessionId")), path.stem)
    assembler = Assembler(name=str(session), model=model, description=f"Claude Code session {path.name}")
    reminders = unlogged_reminders([e for _, e in entries]) if unlogged else {}
    for where, role, content, origins in _merged(entries, path, reminders):
        try:
            parsed = anthropic.parse_wire_messages([{"role": role, "content": content}])
        except InvalidInput as err:
            raise _located(err, where, origins, path) from None
        message = parsed.request.messages[0]
        assembler.message(message, attachments=parsed.attachments, where=where)
    return assembler.build(where=f"{path}: end")


def _located(err: InvalidInput, where: str, origins: list[tuple[int, int]], path: Path) -> ScenarioError:
    """An error in a merged reply, pointed back at the line and block it came from."""
    field = (err.path or "").removeprefix("messages[0].")
    match = re.match(r"content\[(\d+)\](.*)", field)
    if match and int(match.group(1)) < len(origins):
        line, index = origins[int(match.group(1))]
        return ScenarioError(
            err.reason, where=f"{path}:{line}", field=f"message.content[{index}]{match.group(2)}"
        )
    return ScenarioError(err.reason, where=where, field=f"message.{field}")


_Merged = tuple[str, str, list[Any], list[tuple[int, int]]]


def _merged(
    entries: list[tuple[int, dict[str, Any]]], path: Path, reminders: dict[int, list[str]]
) -> list[_Merged]:
    """(where, role, blocks, (line, index) of each block) per API message, same-id lines joined.

    ``reminders`` (index in ``entries`` of a call's first line → texts) join the user turn before
    that call, or make one when the call follows another directly.
    """
    out: list[_Merged] = []
    seen_ids: set[str] = set()
    last_id: str | None = None
    for k, (number, entry) in enumerate(entries):
        if k in reminders:
            if not out or out[-1][1] != "user":
                out.append((f"{path}:{number}", "user", [], []))
            for text in reminders[k]:
                out[-1][3].append((number, -1))
                out[-1][2].append({"type": "text", "text": text})
        where = f"{path}:{number}"
        message = entry.get("message")
        if not isinstance(message, dict):
            raise ScenarioError("expected a message object", where=where, field="message")
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise ScenarioError("expected a string or a list of blocks", where=where, field="message.content")
        blocks = [_known(b) for b in blocks]
        if entry["type"] == "assistant":
            message_id = message.get("id")
            if message_id is not None and message_id == last_id:
                for index, block in enumerate(blocks):
                    if block not in out[-1][2]:
                        out[-1][2].append(block)
                        out[-1][3].append((number, index))
                continue
            if message_id is not None and message_id in seen_ids:
                continue  # the same reply written again (a resumed session copies its history)
            if message_id is not None:
                seen_ids.add(message_id)
            last_id = message_id
            out.append((where, "assistant", list(blocks), [(number, i) for i in range(len(blocks))]))
        else:
            last_id = None
            if blocks:
                out.append((where, "user", blocks, [(number, i) for i in range(len(blocks))]))
    return [m for m in out if m[2]]


def _known(block: Any) -> Any:
    """Blocks the Messages API parser reads, unknown ones (e.g. ``tool_reference``) made text."""
    if not isinstance(block, dict):
        return block
    kind = block.get("type")
    if kind == "tool_result" and isinstance(block.get("content"), list):
        return {**block, "content": [_known(b) for b in block["content"]]}
    if kind == "tool_reference":
        return {"type": "text", "text": f"[tool reference: {block.get('tool_name', '?')}]"}
    if kind in ("text", "image", "document", "thinking", "redacted_thinking", "tool_use", "tool_result"):
        return block
    return {"type": "text", "text": f"[{kind} block not carried over]"}
