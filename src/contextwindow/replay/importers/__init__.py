"""Real transcripts as scenarios, and :func:`load_any`, which tells what a file is from its content.

Kinds read:

=================  ===========================================================================
``scenario``       a contextwindow scenario file (JSON Lines of events; ``docs/scenarios.md``)
``claude-code``    a Claude Code session (JSON Lines; ``~/.claude/projects/…/<session>.jsonl``)
``chat``           an OpenAI Chat Completions or Anthropic Messages request, or a bare message list
``swe-agent``      a SWE-agent trajectory (``<instance_id>.traj``: ``history``, ``trajectory``, ``info``)
=================  ===========================================================================
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeAlias

from .._json_text import json_at, read_text
from ..scenario import Scenario, ScenarioError
from ..scenario_file import load_scenario
from .claude_code import import_claude_code, looks_like_claude_code
from .swe_agent import import_swe_agent, looks_like_swe_agent
from .wire import import_chat, import_chat_file

__all__ = [
    "TranscriptKind",
    "detect_kind",
    "import_chat",
    "import_chat_file",
    "import_claude_code",
    "import_swe_agent",
    "load_any",
]

TranscriptKind: TypeAlias = Literal["scenario", "claude-code", "chat", "swe-agent"]
"""The transcript kinds :func:`load_any` recognises."""
_SCENARIO_EVENTS = frozenset({"meta", "system", "tools", "user", "assistant", "tool_result", "inject"})


def detect_kind(path: str | Path) -> TranscriptKind:
    """What kind of transcript a file is, from its content (not its name)."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as f:
            head = f.readline()  # a whole first line: a Claude Code line with a screenshot is ~1 MB
            while head and not head.strip():
                head = f.readline()
    except OSError as err:
        raise ScenarioError(f"cannot read: {err.strerror}", where=str(path)) from None
    except UnicodeDecodeError:
        raise ScenarioError("not UTF-8 text", where=str(path)) from None
    stripped = head.lstrip()
    if stripped.startswith("["):
        return "chat"
    try:
        first: Any = json_at(stripped, where=str(path))
    except ScenarioError:
        first = None
    if isinstance(first, dict):
        if looks_like_claude_code(first):
            return "claude-code"
        if first.get("type") in _SCENARIO_EVENTS:
            return "scenario"
    if stripped.startswith("{"):
        whole = _whole_json(path)
        if looks_like_swe_agent(whole):
            return "swe-agent"
        if isinstance(whole, dict) and "messages" in whole:
            return "chat"
    raise ScenarioError(
        "cannot tell what this file is: expected a scenario (JSON Lines of events), a Claude Code session, "
        "a Chat Completions or Messages request or message list, or a SWE-agent .traj",
        where=str(path),
    )


def load_any(path: str | Path) -> Scenario:
    """Any transcript :func:`detect_kind` recognises, as a scenario."""
    kind = detect_kind(path)
    if kind == "scenario":
        return load_scenario(path)
    if kind == "claude-code":
        return import_claude_code(path)
    if kind == "swe-agent":
        return import_swe_agent(path)
    return import_chat_file(path)


def _whole_json(path: Path) -> Any:
    try:
        return json_at(read_text(path), where=str(path))
    except ScenarioError:
        return None
