"""SWE-agent trajectories (``<instance_id>.traj``) as scenarios.

The published format (SWE-agent ``sweagent/types.py``, ``docs/usage/trajectories.md``): a JSON
object with ``trajectory`` (per step: ``response``, ``thought``, ``action``, ``observation``,
``query``, …), ``history`` and ``info``. ``history`` is what the model was shown, a list of items
with ``role`` (``system``, ``user``, ``assistant``, ``tool``), ``content`` (a string or a list of
Chat Completions parts) and ``message_type`` (``thought``, ``action``, ``observation``); with
function calling an assistant item has ``tool_calls`` (Chat Completions shape) and the ``tool`` item
answering them has ``tool_call_ids``.

``history`` is rewritten as a Chat Completions message list and read by the library's own parser.
Without function calling, actions are plain text and observations are user messages, so each step is
its own turn — which is what the model saw. An old trajectory without ``history`` is read from
``trajectory``: each step's ``response`` is a reply and its ``observation`` the next user message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._json_text import json_at, read_text
from ..scenario import Scenario, ScenarioError
from .wire import import_chat

__all__ = ["import_swe_agent", "looks_like_swe_agent"]


def looks_like_swe_agent(data: Any) -> bool:
    """Whether parsed JSON is a SWE-agent trajectory object."""
    return isinstance(data, dict) and ("history" in data or "trajectory" in data) and "messages" not in data


def import_swe_agent(path: str | Path, data: Any = None) -> Scenario:
    """Read a ``.traj`` file (or its already-parsed ``data``); errors name the history item."""
    path = Path(path)
    if data is None:
        data = json_at(read_text(path), where=str(path))
    if not looks_like_swe_agent(data):
        raise ScenarioError(
            "not a SWE-agent trajectory: expected an object with history or trajectory", where=str(path)
        )
    history = data.get("history")
    messages = _from_history(history, path) if history else _from_steps(data.get("trajectory"), path)
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    scenario = import_chat(messages, name=path.stem, where=str(path))
    model = _model_name(data)
    description = f"SWE-agent trajectory {path.name}" + (
        f" (exit: {info['exit_status']})" if info.get("exit_status") else ""
    )
    return Scenario(
        name=scenario.name,
        description=description,
        model=model,
        system=scenario.system,
        tools=scenario.tools,
        turns=scenario.turns,
        sources=scenario.sources,
    )


def _from_history(history: Any, path: Path) -> list[dict[str, Any]]:
    if not isinstance(history, list):
        raise ScenarioError("expected a list", where=str(path), field="history")
    out: list[dict[str, Any]] = []
    for i, item in enumerate(history):
        field = f"history[{i}]"
        if not isinstance(item, dict):
            raise ScenarioError("expected a history item object", where=str(path), field=field)
        role, content = item.get("role"), item.get("content", "")
        if role == "tool":
            ids = item.get("tool_call_ids") or ([item["tool_call_id"]] if "tool_call_id" in item else [])
            if not ids:
                raise ScenarioError(
                    "a tool item needs tool_call_ids", where=str(path), field=f"{field}.tool_call_ids"
                )
            out.extend({"role": "tool", "tool_call_id": str(tid), "content": content} for tid in ids)
        elif role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if item.get("tool_calls"):
                message["tool_calls"] = item["tool_calls"]
            out.append(message)
        elif role in ("system", "user"):
            out.append({"role": role, "content": content})
        else:
            raise ScenarioError(f"unknown role {role!r}", where=str(path), field=f"{field}.role")
    return out


def _from_steps(steps: Any, path: Path) -> list[dict[str, Any]]:
    if not isinstance(steps, list) or not steps:
        raise ScenarioError("a trajectory without history needs a non-empty trajectory list", where=str(path))
    first = steps[0] if isinstance(steps[0], dict) else {}
    out = [m for m in first.get("query", []) if isinstance(m, dict) and m.get("role") in ("system", "user")]
    if not any(m.get("role") == "user" for m in out):
        out.append({"role": "user", "content": "(the trajectory does not record the task)"})
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise ScenarioError("expected a step object", where=str(path), field=f"trajectory[{i}]")
        out.append({"role": "assistant", "content": str(step.get("response") or step.get("action") or "")})
        if step.get("observation"):
            out.append({"role": "user", "content": str(step["observation"])})
    return out


def _model_name(data: dict[str, Any]) -> str | None:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = json_at(config, where="replay_config")
        except ScenarioError:
            return None
    if isinstance(config, dict):
        model = (config.get("agent") or {}).get("model") or {}
        name = model.get("name") if isinstance(model, dict) else None
        return name if isinstance(name, str) else None
    return None
