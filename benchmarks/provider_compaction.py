"""The providers' own context editing beside local folding, on the real Claude Code sessions.

Each session (``../shared/data/claude-code-sessions``, imported by
:func:`contextwindow.replay.importers.import_claude_code`) is replayed twice against the local provider
with its prompt cache on (Anthropic ``cache_control`` breakpoints as
:class:`~contextwindow.providers.anthropic.AnthropicProvider` marks them: the system prompt and tools,
the newest message), at a hard window of 16k and 32k tokens, on the Anthropic wire:

* **local**: ``contextwindow simulate``'s own loop (:func:`contextwindow.replay.simulate.simulate`:
  the engine folds, a summariser on the same local model);
* **provider**: the agent's whole history sent on every call, with the ``context_management`` the
  guard's ``compaction="provider"`` sends (:func:`contextwindow.compaction.anthropic_context_management`:
  ``clear_tool_uses_20250919`` from 80% of the room for input, the newest 3 tool uses kept, at least a
  tenth of the trigger cleared). A call whose history the edits cannot bring under the window is what
  the guard folds locally: counted as a *fallback* and left out of the other columns.

Columns, per strategy and window: *window use once full* (the provider's count of each accepted
request over the window, mean and smallest, over the calls from the strategy's first fold or first
applied edit on), *cached share once full* (cache reads over input on those calls), *dollars per
session* (every accepted call, summariser's included, priced by genai-prices at the session's model
with cache reads and writes: :mod:`contextwindow.cost`; a provider fallback, which the guard would fold
locally, is not priced, so the provider's dollars per session are a lower bound; *dollars / 1,000 agent
calls* divides by the agent's answered calls, the summariser's cost included on the local side), *calls* per session (provider calls, summariser's
included), *fallbacks* per 100 calls (provider only).

The OpenAI wires are not measured: Chat Completions has no provider compaction, and the local
provider does not write Responses ``compaction`` items yet.

``python -m benchmarks.provider_compaction [--quick] [--sessions N]`` from the repo root with
``PYTHONPATH=src``; writes ``benchmarks/results/provider_compaction.md``. ``--quick``: 4 sessions, 16k.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextwindow import cost
from contextwindow.compaction import ANTHROPIC_CONTEXT_BETA, anthropic_context_management
from contextwindow.content import Message, Request, ToolResult
from contextwindow.formats import loader_from
from contextwindow.models import get_profile
from contextwindow.replay import simulate as simulate_module
from contextwindow.replay.importers import import_claude_code
from contextwindow.replay.scenario import Scenario
from contextwindow.testing import LocalModel, LocalReply, LocalSettings
from contextwindow.testing.caching import provider_breakpoints
from contextwindow.usage.tracker import Usage

from ._paths import CLAUDE_SESSIONS, RESULTS

__all__ = ["main"]

WINDOWS = (16_000, 32_000)
FALLBACK_MODEL = "claude-sonnet-4-5"
OUT = RESULTS / "provider_compaction.md"
LOAD = loader_from({})


@dataclass
class Run:
    strategy: str
    window: int
    calls: int = 0
    fallbacks: int = 0
    use: list[float] = field(default_factory=list)
    read: int = 0
    input: int = 0
    dollars: float = 0.0
    accepted: int = 0
    """The agent's calls answered (the summariser's not counted)."""


def _model(scenario: Scenario) -> str:
    for name in (scenario.model, FALLBACK_MODEL):
        if name:
            try:
                get_profile(name)
            except Exception:  # an unknown model: the fallback
                continue
            return name
    return FALLBACK_MODEL


def _dollars(usage: Usage, model: str) -> float:
    priced = cost.price(usage, model) if cost.available() else None
    return float(priced.total) if priced is not None else 0.0


class _Recording(simulate_module.RecordingModel):
    """``simulate``'s model, keeping every reply (the summariser's too) for the cache and dollars."""

    replies: list[tuple[str, LocalReply]]

    def handle(self, request: Request, **kwargs: Any) -> Any:
        outcome = super().handle(request, **kwargs)
        if isinstance(outcome, LocalReply):
            self.replies.append((kwargs.get("session", "default"), outcome))
        return outcome


def _local(scenario: Scenario, model: str, window: int, scale: float) -> Run:
    replies: list[tuple[str, LocalReply]] = []
    original = simulate_module.RecordingModel

    class Recording(_Recording):
        pass

    Recording.replies = replies
    simulate_module.RecordingModel = Recording  # type: ignore[misc]
    try:
        result = asyncio.run(
            simulate_module.simulate(
                scenario, model=model, window=window, count_scale=scale, prompt_cache=True
            )
        )
    finally:
        simulate_module.RecordingModel = original  # type: ignore[misc]
    run = Run(strategy="local", window=window)
    folded_at = next((r.call for r in result.records if "compacted" in r.events), None)
    for i, (session, reply) in enumerate(replies):
        # From the first fold on (the record's call index counts the summariser's calls too).
        if session == "default" and folded_at is not None and i >= folded_at:
            run.use.append(reply.input_tokens / window)
            run.read += reply.cache.read
            run.input += reply.input_tokens
    for session, reply in replies:
        run.calls += 1
        run.accepted += session == "default"
        run.dollars += _dollars(reply.reported or Usage(), model)
    return run


def _agent_calls(scenario: Scenario) -> list[tuple[Message, ...]]:
    """The history before each scripted assistant reply: the requests an agent makes."""
    history: list[Message] = []
    pending: list[ToolResult] = []
    calls: list[tuple[Message, ...]] = []
    for turn in scenario.turns:
        history.append(turn.user)
        for step in turn.steps:
            if step.kind == "tool_result":
                pending.append(step.result)
            elif step.kind == "assistant":
                if pending:
                    history.append(Message(role="user", content=tuple(pending)))
                    pending = []
                calls.append(tuple(history))
                history.append(step.message)
        if pending:
            history.append(Message(role="user", content=tuple(pending)))
            pending = []
    return calls


def _provider(scenario: Scenario, model: str, window: int, scale: float) -> Run:
    local = LocalModel(
        LocalSettings(
            window=window, prompt_cache=True, count_scale=scale, default_model=model, clock=lambda: 0.0
        )
    )
    reserve = min(4_096, window // 8)
    room = window - reserve
    management = anthropic_context_management(int(room * 0.8))
    run = Run(strategy="provider", window=window)
    acted = False
    for messages in _agent_calls(scenario):
        request = Request(
            model=model,
            system=scenario.system,
            tools=scenario.tools,
            messages=messages,
            params={"context_management": management, "betas": [ANTHROPIC_CONTEXT_BETA]},
        )
        reply = local.handle(
            request,
            wire="anthropic",
            max_tokens=reserve,
            load=LOAD,
            breakpoints=provider_breakpoints(request),
        )
        run.calls += 1
        if not isinstance(reply, LocalReply):
            run.fallbacks += 1  # the guard folds this one locally
            continue
        run.accepted += 1
        acted = acted or bool(reply.applied_edits)
        if acted:
            run.use.append(reply.input_tokens / window)
            run.read += reply.cache.read
            run.input += reply.input_tokens
        run.dollars += _dollars(reply.reported or Usage(), model)
    return run


def _row(strategy: str, window: int, runs: Sequence[Run], sessions: int) -> str:
    use = [u for r in runs for u in r.use]
    read = sum(r.read for r in runs)
    total = sum(r.input for r in runs)
    calls = sum(r.calls for r in runs)
    fallbacks = sum(r.fallbacks for r in runs)
    mean = f"{statistics.fmean(use):.0%}" if use else "–"
    least = f"{min(use):.0%}" if use else "–"
    cached = f"{read / total:.0%}" if total else "–"
    fall = f"{100 * fallbacks / calls:.1f}" if strategy == "provider" and calls else "–"
    dollars = sum(r.dollars for r in runs)
    accepted = sum(r.accepted for r in runs)
    per_call = f"${1000 * dollars / accepted:.2f}" if accepted else "–"
    return (
        f"| {strategy} | {window // 1000}k | {mean} | {least} | {cached} | ${dollars / sessions:.3f} | "
        f"{per_call} | {calls / sessions:.1f} | {fall} |"
    )


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.provider_compaction")
    parser.add_argument("--quick", action="store_true", help="4 sessions at 16k")
    parser.add_argument("--sessions", type=int, default=None)
    args = parser.parse_args(list(argv) if argv is not None else [])
    from ._claude_sessions import recorded_scale

    files = sorted(CLAUDE_SESSIONS.rglob("*.jsonl"))
    if not files:
        print(f"no sessions under {CLAUDE_SESSIONS}: skipped", file=sys.stderr)
        return ""
    count = args.sessions or (4 if args.quick else len(files))
    files = files[:count]
    windows = WINDOWS[:1] if args.quick else WINDOWS
    started = time.perf_counter()
    runs: dict[tuple[str, int], list[Run]] = {}
    for path in files:
        scenario = import_claude_code(str(path))
        model = _model(scenario)
        scale = recorded_scale(Path(path), model)
        for window in windows:
            # A/B interleaved: both strategies on the same session and window, one after the other.
            runs.setdefault(("local", window), []).append(_local(scenario, model, window, scale))
            runs.setdefault(("provider", window), []).append(_provider(scenario, model, window, scale))
    lines = [
        f"{len(files)} real sessions, Anthropic wire, prompt cache on; {time.perf_counter() - started:.0f} s",
        "",
        "| strategy | window | window use once full (mean) | smallest | cached share once full | "
        "dollars / session (accepted calls) | dollars / 1,000 agent calls | calls / session | "
        "fallbacks / 100 calls |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for window in windows:
        for strategy in ("local", "provider"):
            lines.append(_row(strategy, window, runs[(strategy, window)], len(files)))
    table = "\n".join(lines)
    print(table)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(table + "\n")
    return table


if __name__ == "__main__":
    main(sys.argv[1:])
