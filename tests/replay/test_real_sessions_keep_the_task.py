"""The summary keeps the task: on the real Claude Code sessions in ``../shared``, every request sent
after a fold still holds the session's first user request (verbatim, or in the summary), the latest
user instruction, and the names of the files the agent touched before it."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _shared import CLAUDE_SESSIONS, require
from contextwindow.content import Message, Text, ToolResult, ToolUse
from contextwindow.replay.importers import load_any
from contextwindow.replay.scenario import AssistantStep, InjectStep, Scenario
from contextwindow.replay.simulate import simulate_sync

WINDOW = 40_000
"""Small enough that the longer sessions fold several times."""

PREFIX = 60
"""How much of a user message (whitespace collapsed) must be found: enough to be that message."""

_FILE_KEYS = ("file_path", "path", "notebook_path")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def _instruction(message: Message) -> str | None:
    """A user message's own words (not tool results, not the reminders Claude Code adds)."""
    if any(isinstance(b, ToolResult) for b in message.content):
        return None
    texts = [b.text for b in message.content if isinstance(b, Text) and not b.text.lstrip().startswith("<")]
    said = _flat(" ".join(texts))
    return said or None


def _sessions() -> list[Path]:
    return sorted(require(CLAUDE_SESSIONS, "the shared Claude Code session corpus").rglob("*.jsonl"))


def _touched(scenario: Scenario, turn: int) -> set[str]:
    """The files the agent's tool calls named in the turns before ``turn`` (the calls of ``turn``
    itself may come after the request looked at)."""
    names: set[str] = set()
    for t in scenario.turns[:turn]:
        for step in t.steps:
            if isinstance(step, AssistantStep):
                for block in step.message.content:
                    if isinstance(block, ToolUse):
                        for key in _FILE_KEYS:
                            value = block.input.get(key)
                            if isinstance(value, str) and value:
                                names.add(Path(value).name)
    return names


def _strings(value: Any) -> Iterator[str]:
    """Every string in a wire request: its texts, wherever they sit."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _after_folds(scenario: Scenario) -> Iterator[tuple[int, str]]:
    """``(turn, request text)`` of each agent request the engine sent right after a fold."""
    record = io.StringIO()
    result = simulate_sync(scenario, model="claude-sonnet-4-6", window=WINDOW, record=record)
    lines = {line["call"]: line for line in map(json.loads, record.getvalue().splitlines())}
    for call in result.records:
        if "compacted" not in call.events or call.turn is None or call.rejected:
            continue
        text = _flat(" ".join(_strings(lines[call.call]["request"])))
        if "<transcript>" in text:
            continue  # the summariser's own request
        yield call.turn, text


def _latest(scenario: Scenario, turn: int) -> list[str]:
    """The latest instruction at a request of ``turn``: the newest turn's own words up to it, or one of
    the messages the user added within that turn (which came before the request is not recorded:
    any of them will do)."""
    for t in reversed(scenario.turns[: turn + 1]):
        said = _instruction(t.user)
        if said is not None:
            added = [
                s for step in t.steps if isinstance(step, InjectStep) if (s := _instruction(step.message))
            ]
            return [said, *added] if t is scenario.turns[turn] else [said]
    return []


def kept(scenario: Scenario) -> tuple[int, list[str]]:
    """How many post-fold requests were checked, and what each one lost."""
    first = next((s for t in scenario.turns if (s := _instruction(t.user))), None)
    checked, lost = 0, []
    for turn, text in _after_folds(scenario):
        checked += 1
        if first is not None and first[:PREFIX] not in text:
            lost.append(f"turn {turn}: first request {first[:PREFIX]!r}")
        latest = _latest(scenario, turn)
        if latest and not any(said[:PREFIX] in text for said in latest):
            lost.append(f"turn {turn}: latest instruction {latest[0][:PREFIX]!r}")
        for name in sorted(_touched(scenario, turn)):
            if name not in text:
                lost.append(f"turn {turn}: file {name}")
    return checked, lost


@pytest.mark.parametrize(
    "path", _sessions() if CLAUDE_SESSIONS.exists() else [None], ids=lambda p: p and p.stem[:8]
)
def test_every_request_after_a_fold_keeps_the_task(path: Path | None) -> None:
    if path is None:
        require(CLAUDE_SESSIONS, "the shared Claude Code session corpus")
        return
    checked, lost = kept(load_any(path))
    assert not lost, f"{len(lost)} losses in {checked} requests after a fold: {lost[:5]}"
