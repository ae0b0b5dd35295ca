"""The providers' own compaction beside local folding, on the real Claude Code sessions.

Each session (``../shared/data/claude-code-sessions``, imported by
:func:`contextwindow.replay.importers.import_claude_code`) is replayed against the local provider with
its prompt cache on, at a hard window of 16k and 32k tokens, each strategy on the same session and
window one after the other (A/B interleaved). Every agent call is answered with the session's own
assistant message (the same output in every row). Rows:

* **local**, Anthropic wire (the session's Claude model) and OpenAI wire (:data:`OPENAI_MODEL`):
  ``contextwindow simulate``'s own loop (:func:`contextwindow.replay.simulate.simulate`: the engine
  folds, a summariser on the same local model);
* **anthropic clearing**: the agent's whole history sent on every call, with the ``context_management``
  the guard's ``compaction="provider"`` sends (:func:`contextwindow.compaction.anthropic_context_management`:
  ``clear_tool_uses_20250919`` from 80% of the room for input, the newest 3 tool uses kept, at least a
  tenth of the trigger cleared). A call whose history the edits cannot bring under the window is what
  the guard folds locally: counted as a *fallback* and left out of the other columns;
* **anthropic compaction** (``compact_20260112``, from 80% of the room, as the guard sends it): the
  agent appends each reply with its ``compaction`` block, the local provider compacting and reading
  from the newest block on as Anthropic documents it (:mod:`contextwindow.testing.anthropic_compaction`:
  the compaction pass billed); not applicable where the trigger would be under its 50,000-token
  minimum (16k and 32k: the row says so; ``--windows 100000`` measures it);
* **openai compaction**: Responses with ``context_management`` compaction from 80% of the room, the
  input since the newest ``compaction`` item (what the guard sends:
  :func:`contextwindow.compaction.guarded_body`), the local provider compacting as OpenAI documents it
  (:mod:`contextwindow.testing.openai_compaction`: both passes billed);
* **auto**, each wire: per session, the strategy ``"auto"``'s cost model
  (:func:`contextwindow.compaction.per_call_dollars`, at the session's own head and growth per call;
  :func:`contextwindow.compaction.cheapest` of local, the provider's clearing or compaction, and on the
  Anthropic wire where the window takes its trigger Anthropic's compaction) prices cheapest, at that
  strategy's measured cost; the row names what it picked and in how many sessions. Below the table, the model is checked against the
  measured dollars per agent call, session by session: its ratio to the measured figure per strategy
  (median, range) and how often it picks the strategy that measured cheaper.

Columns, per row: *window use once full* (the provider's count of each accepted agent request over the
window, mean and smallest, from the strategy's first fold, applied edit or compaction on), *cached share
once full* (cache reads over input on those calls), *dollars per session* (every accepted call,
summariser's and compaction passes included, priced by genai-prices at the row's model with cache reads
and writes: :mod:`contextwindow.cost`; a fallback, which the guard would fold locally, is not priced),
*dollars / 100 agent calls*, *compactions / 100 calls* (folds, applied edits or compaction items per 100
agent calls once full), *fallbacks / 100 calls*.

``python -m benchmarks.provider_compaction [--quick] [--sessions N]`` from the repo root with
``PYTHONPATH=src``; writes ``benchmarks/results/provider_compaction.md``. ``--quick``: 4 sessions, 16k;
``--windows 16000,100000``: those windows instead.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from contextwindow import cost
from contextwindow.compaction import (
    ANTHROPIC_CONTEXT_BETA,
    COMPACT_BETA,
    COMPACTION_MINIMUM_TRIGGER,
    PROVIDER_TRIGGER,
    anthropic_compaction_management,
    anthropic_context_management,
    cheapest,
    compaction_trigger,
    per_call_dollars,
)
from contextwindow.content import Message, Request, Text, ToolResult
from contextwindow.formats import loader_from
from contextwindow.models import get_profile
from contextwindow.replay import simulate as simulate_module
from contextwindow.replay.importers import import_claude_code
from contextwindow.replay.scenario import Scenario
from contextwindow.testing import LocalModel, LocalReply, LocalSettings
from contextwindow.testing.anthropic_compaction import compacting_answer
from contextwindow.testing.caching import provider_breakpoints
from contextwindow.testing.openai_compaction import compacting_call
from contextwindow.testing.responses import ResponsesMemory
from contextwindow.usage.tracker import Usage

from ._paths import CLAUDE_SESSIONS, RESULTS

__all__ = ["main"]

WINDOWS = (16_000, 32_000)
FALLBACK_MODEL = "claude-sonnet-4-5"
OPENAI_MODEL = "gpt-5"
"""The model of the OpenAI rows (o200k: the local tokenizer is its own, no count scale)."""
OUT = RESULTS / "provider_compaction.md"
LOAD = loader_from({})


@dataclass
class Run:
    strategy: str
    window: int
    wire: str = "anthropic"
    calls: int = 0
    fallbacks: int = 0
    compactions: int = 0
    full_calls: int = 0
    use: list[float] = field(default_factory=list)
    read: int = 0
    input: int = 0
    dollars: float = 0.0
    accepted: int = 0
    """The agent's calls answered (the summariser's not counted)."""
    growth: list[int] = field(default_factory=list)
    """Each agent call's growth over the one before (the provider's count), for the cost model."""
    full_dollars: float = 0.0
    """The dollars of the calls once full (a fold's summariser call, a compaction pass included)."""

    @property
    def per_call(self) -> float:
        """Dollars per agent call once full: what ``"auto"``'s cost model predicts."""
        return self.full_dollars / self.full_calls if self.full_calls else 0.0


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


def _local(scenario: Scenario, model: str, window: int, scale: float, wire: str) -> Run:
    replies: list[tuple[str, LocalReply]] = []
    original = simulate_module.RecordingModel

    class Recording(_Recording):
        pass

    Recording.replies = replies
    simulate_module.RecordingModel = Recording  # type: ignore[misc]
    try:
        result = asyncio.run(
            simulate_module.simulate(
                scenario,
                model=model,
                window=window,
                count_scale=scale,
                prompt_cache=True,
                wire=wire,  # type: ignore[arg-type]
            )
        )
    finally:
        simulate_module.RecordingModel = original  # type: ignore[misc]
    run = Run(strategy="local", window=window, wire=wire)
    folded_at = next((r.call for r in result.records if "compacted" in r.events), None)
    run.compactions = sum("compacted" in r.events for r in result.records)
    previous = None
    for i, (session, reply) in enumerate(replies):
        if session != "default":
            continue
        if previous is not None and reply.input_tokens > previous:
            run.growth.append(reply.input_tokens - previous)
        previous = reply.input_tokens
        # From the first fold on (the record's call index counts the summariser's calls too).
        if folded_at is not None and i >= folded_at:
            run.full_calls += 1
            run.use.append(reply.input_tokens / window)
            run.read += reply.cache.read
            run.input += reply.input_tokens
    for i, (session, reply) in enumerate(replies):
        run.calls += 1
        run.accepted += session == "default"
        priced = _dollars(reply.reported or Usage(), model)
        run.dollars += priced
        if folded_at is not None and i >= folded_at:
            run.full_dollars += priced
    return run


def _agent_calls(scenario: Scenario) -> list[tuple[tuple[Message, ...], Message]]:
    """The history before each scripted assistant reply, and that reply: the requests an agent makes."""
    history: list[Message] = []
    pending: list[ToolResult] = []
    calls: list[tuple[tuple[Message, ...], Message]] = []
    for turn in scenario.turns:
        history.append(turn.user)
        for step in turn.steps:
            if step.kind == "tool_result":
                pending.append(step.result)
            elif step.kind == "assistant":
                if pending:
                    history.append(Message(role="user", content=tuple(pending)))
                    pending = []
                calls.append((tuple(history), step.message))
                history.append(step.message)
        if pending:
            history.append(Message(role="user", content=tuple(pending)))
            pending = []
    return calls


def _accepted(run: Run, reply: LocalReply, model: str, *, acted: bool) -> None:
    run.accepted += 1
    priced = _dollars(reply.reported or Usage(), model)
    run.dollars += priced
    if acted:
        run.full_calls += 1
        run.full_dollars += priced
        run.use.append(reply.input_tokens / run.window)
        run.read += reply.cache.read
        run.input += reply.input_tokens


def _anthropic(scenario: Scenario, model: str, window: int, scale: float) -> Run:
    local = LocalModel(
        LocalSettings(
            window=window, prompt_cache=True, count_scale=scale, default_model=model, clock=lambda: 0.0
        )
    )
    reserve = min(4_096, window // 8)
    room = window - reserve
    management = anthropic_context_management(int(room * PROVIDER_TRIGGER))
    run = Run(strategy="anthropic clearing", window=window)
    acted = False
    for messages, answer in _agent_calls(scenario):
        request = Request(
            model=model,
            system=scenario.system,
            tools=scenario.tools,
            messages=messages,
            params={"context_management": management, "betas": [ANTHROPIC_CONTEXT_BETA]},
        )
        local.enqueue(answer)
        reply = local.handle(
            request,
            wire="anthropic",
            max_tokens=reserve,
            load=scenario.load_attachment,
            breakpoints=provider_breakpoints(request),
        )
        run.calls += 1
        if not isinstance(reply, LocalReply):
            run.fallbacks += 1  # the guard folds this one locally
            local.discard_script(0)
            continue
        acted = acted or bool(reply.applied_edits)
        run.compactions += bool(reply.applied_edits)
        _accepted(run, reply, model, acted=acted)
    return run


def _anthropic_compaction(scenario: Scenario, model: str, window: int, scale: float) -> Run | None:
    """Anthropic's server-side compaction as the guard sends it (``None`` where the window cannot take
    its trigger): the agent appends each reply, the compaction block included, and the provider reads
    the conversation from the newest block on (:mod:`contextwindow.testing.anthropic_compaction`)."""
    reserve = min(4_096, window // 8)
    trigger = compaction_trigger(window - reserve)
    if trigger is None:
        return None
    local = LocalModel(
        LocalSettings(
            window=window, prompt_cache=True, count_scale=scale, default_model=model, clock=lambda: 0.0
        )
    )
    params = {"context_management": anthropic_compaction_management(trigger), "betas": [COMPACT_BETA]}
    run = Run(strategy="anthropic compaction", window=window)
    kept: list[Message] = []
    seen = 0
    acted = False
    for messages, answer in _agent_calls(scenario):
        kept.extend(messages[seen:])
        seen = len(messages)
        request = Request(
            model=model, system=scenario.system, tools=scenario.tools, messages=tuple(kept), params=params
        )
        local.enqueue(answer)
        reply, compaction = compacting_answer(
            local,
            request,
            max_tokens=reserve,
            load=scenario.load_attachment,
            session="default",
            breakpoints=provider_breakpoints(request),
            betas=[COMPACT_BETA],
        )
        run.calls += 1
        if not isinstance(reply, LocalReply):
            run.fallbacks += 1  # the guard folds this one locally
            local.discard_script(0)
            continue
        if compaction is not None:
            acted = True
            run.compactions += 1
            summary = str(compaction.block["content"])
            kept = [Message(role="user", content=(Text(text=summary),))]  # read from the block on
            pass_dollars = _dollars(compaction.usage, model)
            run.dollars += pass_dollars
            run.full_dollars += pass_dollars
        kept.append(answer)
        seen += 1
        _accepted(run, reply, model, acted=acted)
    return run


def _openai(scenario: Scenario, model: str, window: int) -> Run:
    local = LocalModel(
        LocalSettings(window=window, prompt_cache=True, default_model=model, clock=lambda: 0.0)
    )
    memory = ResponsesMemory()
    reserve = min(4_096, window // 8)
    threshold = int((window - reserve) * PROVIDER_TRIGGER)
    run = Run(strategy="openai compaction", window=window, wire="openai")
    kept: list[Message] = []
    seen = 0
    acted = False
    calls = _agent_calls(scenario)
    for n, (messages, answer) in enumerate(calls):
        kept.extend(messages[seen:])
        seen = len(messages)
        request = Request(
            model=model,
            system=scenario.system,
            tools=scenario.tools,
            messages=tuple(kept),
            max_tokens=reserve,
        )
        local.enqueue(answer)
        reply, item, pruned = compacting_call(
            local, memory, request, threshold=threshold, load=scenario.load_attachment, session="default"
        )
        run.calls += 1
        if not isinstance(reply, LocalReply):
            # What is left since the newest compaction item is over the window: the guard folds
            # locally, and goes on folding (a naive agent's input has no newer compaction item).
            run.fallbacks += len(calls) - n
            run.calls += len(calls) - n - 1
            break
        if item is not None:
            acted = True
            run.compactions += 1
            kept = list(pruned.messages)  # the agent appends the item; the guard drops what precedes it
        kept.append(answer)
        seen += 1
        _accepted(run, reply, model, acted=acted)
    return run


def _auto(
    local: Run, provider: Run, compacted: Run | None, model: str, shape: tuple[int, int]
) -> tuple[Run, dict[str, float] | None]:
    """The strategy ``"auto"``'s cost model (:func:`contextwindow.compaction.cheapest` of
    :func:`~contextwindow.compaction.per_call_dollars`) prices cheapest for this session, and the
    model's figures; ``shape``: the session's head and the agent's output per call."""
    head, output = shape
    growth = int(statistics.median(local.growth)) if local.growth else 1
    room = local.window - min(4_096, local.window // 8)
    wire = "anthropic" if local.wire == "anthropic" else "openai-responses"
    # What the clearing leaves is known when the guard decides (its plan): here, as measured.
    cleared = provider.input // provider.full_calls if provider.full_calls else None
    predicted = per_call_dollars(
        model,
        wire=wire,
        room=room,
        head=head,
        growth=max(1, growth),
        whole=room,
        cleared=cleared,
        output=output,
    )
    if predicted is None:
        return local, None
    offered = {k: v for k, v in predicted.items() if k != "compaction" or compacted is not None}
    runs = {"local": local, "provider": provider, "compaction": compacted}
    pick = runs[cheapest(offered)]
    assert pick is not None
    return pick, predicted


def _picked(runs: Sequence[Run]) -> str:
    """What ``"auto"`` picked over the sessions: each strategy and in how many sessions."""
    return ", ".join(f"{name} {n}" for name, n in Counter(r.strategy for r in runs).most_common())


def _row(strategy: str, wire: str, window: int, runs: Sequence[Run], sessions: int) -> str:
    use = [u for r in runs for u in r.use]
    read = sum(r.read for r in runs)
    total = sum(r.input for r in runs)
    calls = sum(r.calls for r in runs)
    fallbacks = sum(r.fallbacks for r in runs)
    full = sum(r.full_calls for r in runs)
    mean = f"{statistics.fmean(use):.0%}" if use else "–"
    least = f"{min(use):.0%}" if use else "–"
    cached = f"{read / total:.0%}" if total else "–"
    fall = f"{100 * fallbacks / calls:.1f}" if calls and strategy != "local" else "–"
    dollars = sum(r.dollars for r in runs)
    accepted = sum(r.accepted for r in runs)
    per_100 = f"${100 * dollars / accepted:.3f}" if accepted else "–"
    compactions = f"{100 * sum(r.compactions for r in runs) / full:.1f}" if full else "–"
    return (
        f"| {strategy} | {wire} | {window // 1000}k | {mean} | {least} | {cached} | ${dollars / sessions:.3f} | "
        f"{per_100} | {compactions} | {fall} |"
    )


def _check(rows: list[tuple[Run, Run, dict[str, float] | None]]) -> list[str]:
    """The cost model against the measured dollars per agent call, per wire and window."""
    out = []
    groups: dict[tuple[str, int, str], list[tuple[Run, Run, dict[str, float] | None]]] = {}
    for local, provider, predicted in rows:
        groups.setdefault((local.wire, local.window, provider.strategy), []).append(
            (local, provider, predicted)
        )
    for (wire, window, strategy), group in sorted(groups.items()):
        # The sessions both strategies filled (a fold, an applied edit or a compaction each).
        priced = [
            (loc, prov, p) for loc, prov, p in group if p is not None and loc.full_calls and prov.full_calls
        ]
        if not priced:
            continue
        local_ratio = [p["local"] / loc.per_call for loc, _, p in priced if loc.per_call]
        provider_ratio = [p["provider"] / prov.per_call for _, prov, p in priced if prov.per_call]
        agree = sum((p["provider"] < p["local"]) == (prov.per_call < loc.per_call) for loc, prov, p in priced)

        def span(values: list[float]) -> str:
            if not values:
                return "–"
            return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"

        out.append(
            f"| {wire} | {window // 1000}k | {strategy} | {span(local_ratio)} | {span(provider_ratio)} | "
            f"{agree}/{len(priced)} |"
        )
    return out


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.provider_compaction")
    parser.add_argument("--quick", action="store_true", help="4 sessions at 16k")
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument(
        "--windows",
        type=str,
        default=None,
        help="comma-separated windows (e.g. 100000: Anthropic compaction)",
    )
    args = parser.parse_args(list(argv) if argv is not None else [])
    from contextwindow.pricing import Estimator

    from ._claude_sessions import recorded_scale

    files = sorted(CLAUDE_SESSIONS.rglob("*.jsonl"))
    if not files:
        print(f"no sessions under {CLAUDE_SESSIONS}: skipped", file=sys.stderr)
        return ""
    count = args.sessions or (4 if args.quick else len(files))
    files = files[:count]
    windows = WINDOWS[:1] if args.quick else WINDOWS
    if args.windows:
        windows = tuple(int(w) for w in args.windows.split(","))
    started = time.perf_counter()
    runs: dict[tuple[str, str, int], list[Run]] = {}
    checks: list[tuple[Run, Run, dict[str, float] | None]] = []
    for path in files:
        scenario = import_claude_code(str(path))
        model = _model(scenario)
        scale = recorded_scale(Path(path), model)
        answers = [answer for _, answer in _agent_calls(scenario)]
        output = (
            int(statistics.fmean(Estimator(get_profile(model)).messages([a]) for a in answers))
            if answers
            else 0
        )
        for window in windows:
            # A/B interleaved: every strategy on the same session and window, one after the other.
            for wire, name in (("anthropic", model), ("openai", OPENAI_MODEL)):
                local = _local(scenario, name, window, scale if wire == "anthropic" else 1.0, wire)
                if wire == "anthropic":
                    provider = _anthropic(scenario, name, window, scale)
                else:
                    provider = _openai(scenario, name, window)
                head = Estimator(get_profile(name)).request(
                    Request(model=name, system=scenario.system, tools=scenario.tools)
                )
                compacted = (
                    _anthropic_compaction(scenario, name, window, scale) if wire == "anthropic" else None
                )
                pick, predicted = _auto(local, provider, compacted, name, (head, output))
                checks.append((local, provider, predicted))
                if compacted is not None and predicted is not None and "compaction" in predicted:
                    # The same check for Anthropic's compaction: its figure in the provider's place.
                    checks.append((local, compacted, {**predicted, "provider": predicted["compaction"]}))
                runs.setdefault(("local", wire, window), []).append(local)
                runs.setdefault((provider.strategy, wire, window), []).append(provider)
                runs.setdefault(("auto", wire, window), []).append(replace(pick))
                if compacted is not None:
                    runs.setdefault(("anthropic compaction", wire, window), []).append(compacted)
    lines = [
        f"{len(files)} real sessions, prompt cache on; Anthropic rows at each session's Claude model, OpenAI "
        f"rows at {OPENAI_MODEL}; {time.perf_counter() - started:.0f} s",
        "",
        "| strategy | wire | window | window use once full (mean) | smallest | cached share once full | "
        "dollars / session | dollars / 100 agent calls | compactions / 100 calls once full | "
        "fallbacks / 100 calls |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for window in windows:
        for wire, strategies in (
            ("anthropic", ("local", "anthropic clearing", "anthropic compaction", "auto")),
            ("openai", ("local", "openai compaction", "auto")),
        ):
            for strategy in strategies:
                if strategy == "anthropic compaction" and (strategy, wire, window) not in runs:
                    lines.append(
                        f"| {strategy} | {wire} | {window // 1000}k | n/a: its trigger is at least "
                        f"{COMPACTION_MINIMUM_TRIGGER:,} tokens, over the window | | | | | | |"
                    )
                    continue
                chosen = runs[(strategy, wire, window)]
                label = f"auto: {_picked(chosen)}" if strategy == "auto" else strategy
                lines.append(_row(label, wire, window, chosen, len(files)))
    lines += [
        "",
        "auto's cost model against the measured dollars per agent call once full, per session (predicted /",
        "measured: median and range), and how often it picks the strategy that measured cheaper, over the",
        "sessions both strategies filled:",
        "",
        "| wire | window | provider strategy | local: predicted / measured | provider: predicted / measured | "
        "picks the cheaper |",
        "|---|---|---|---|---|---|",
        *_check(checks),
    ]
    table = "\n".join(lines)
    print(table)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(table + "\n")
    return table


if __name__ == "__main__":
    main(sys.argv[1:])
