"""Real Claude Code sessions through the engine, beside LangChain's ``trim_messages``, at 16k and 32k.

The 40 shared Claude Code sessions (``../shared/data/claude-code-sessions``, see its NOTE.md; imported
by :func:`contextwindow.replay.importers.import_claude_code`) and a sample of the generated long
scenarios (:mod:`benchmarks._long_scenarios`) are replayed by ``contextwindow simulate``'s own code
(:func:`contextwindow.replay.simulate.simulate`: the engine, its default compiler, a summariser on the
same local model) against the local provider enforcing a hard window of 16k and 32k tokens, in every
usage mode the provider can report (``cumulative``, ``per-call``, ``output-only``, ``none``), and once
more (``per-call``) with the provider serving only 85% of the declared window. Beside each, in the same
run, the same history goes through LangChain's ``trim_messages(strategy="last",
token_counter=count_tokens_approximately)`` to the same provider (:mod:`benchmarks._trim_peer`).

Each engine row runs twice: with counting before sending off and with the engine's default
(``EngineSettings.count_before_send``; ``--count off --count cold --count auto`` picks others).

Columns (engine):

* *count before send* and *counts /100 calls*: the setting, and how many requests the provider's
  count endpoint counted per 100 provider calls;

* *mean use once history exceeds the window*: the provider's count of each accepted request over the
  declared window, over the calls whose whole scripted history (the provider's count of it, untrimmed)
  plus the call's ``max_tokens`` no longer fits the window;
* *smallest after a fold*: the smallest such request sent after the run's first fold, over the window;
* *rejections* (recovered) and *failed turns*; *over by recount*: requests whose input, recounted from
  the recorded wire body with tiktoken directly (:mod:`benchmarks._recount`), plus ``max_tokens`` is
  over the window the provider enforces;
* *estimate error*: the engine's estimate of each request it sent against the provider's count,
  ``(estimate − count) / count``, from each run's second request on: p95 of its size and the worst
  (most negative: under) signed value, and the worst on the first request after a fold; and the same
  without the Opus 4.7 sessions (:data:`UNBANDED`);
* *folds* and *summariser calls* per 100 provider calls; *cut replies*: scripted replies the provider
  cut at the call's ``max_tokens`` (when ``simulate`` reports them);
* a second table breaks the estimate error down by kind of request (:func:`_kind`): one of a run's
  first five, the first after a fold, the first after a restart or new archives, or one within a
  stream;
* *engine ms/call*: the median over calls of the engine's own time (its turn's time over its calls;
  the provider's stream, the tools and the summariser's calls left out; wall time, so it rises with
  the machine's load).

Columns (``trim_messages``): provider rejections for size, other refusals (a trimmed history left
empty: ``start_on="human"`` finds no user message in a long tool-calling turn), requests over the
window by the same recount, window use over the same calls, and messages dropped with no summary
(mean per call once history exceeds the window, and the largest share of the history dropped).

``python -m benchmarks.real_sessions [--long N] [--workers N] [--sessions N] [--count MODE ...]`` from the repo root with
``PYTHONPATH=src``; writes ``benchmarks/results/real_sessions.md``. Each call's ``max_tokens`` is
``min(4096, window // 8)``, as ``simulate``'s default; the stream budget is off. The local provider caches
the prompt as the providers document (``prompt_cache=True``: Anthropic's ``cache_control`` breakpoints,
OpenAI's automatic prefix cache), and the cached share and the dollars are read off what it reports. The
model is each session's own (its Claude profile). The provider counts with
``o200k_base`` at a count scale (``LocalSettings.count_scale``) measured on the session's own recorded
usage: Anthropic's count of the content appended between two calls over ``o200k_base``'s
(:func:`benchmarks._claude_sessions.recorded_scale`; pooled over the sessions of the same tokenizer
generation when a session has too few such rounds, and for the generated scenarios). The engine's rule
is never used to set it, so the estimate is tested against the provider's units, not copied from them;
the independent recount uses the same scale.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from contextwindow.content import Request
from contextwindow.engine.events import Compacted, OverflowRecovered
from contextwindow.engine.settings import EngineSettings
from contextwindow.errors import InvalidInput
from contextwindow.formats import render
from contextwindow.models import get_profile
from contextwindow.replay.importers import import_claude_code
from contextwindow.replay.scenario import Scenario
from contextwindow.replay.simulate import SimulationResult, simulate

from ._paths import CLAUDE_SESSIONS, RESULTS
from ._recount import recount
from ._summarization_peer import KEEP, TRIGGER, SummaryPeerRun, run_summarization_peer
from ._trim_peer import PeerCall, PeerRun, run_trim_peer

__all__ = ["main"]

WINDOWS = (16_000, 32_000)
MODES = ("cumulative", "per-call", "output-only", "none")
SERVE_LESS = 0.85
COUNTS: tuple[str, ...] = tuple(dict.fromkeys(("off", EngineSettings().count_before_send)))
"""Counting before sending off, and the engine's default (``EngineSettings.count_before_send``), unless
``--count`` names others."""
COUNT_ORDER = ("off", "cold", "auto")
WIRES = ("anthropic", "openai")
"""The APIs the engine speaks to the local provider: Anthropic Messages (its ``cache_control``
breakpoints) and OpenAI Chat Completions (the automatic prefix cache), the session's model on both."""
STRATEGIES: dict[str, str] = {"local folding": "the engine's own folds (summary checkpoints)"}
"""How the history is kept inside the window, one row group each: the engine's local folding here;
the providers' own compaction strategies register beside it under their names (the ``strategy``
column of the engine table; ``EngineRun.strategy``)."""
PEERS = ("trim_messages", "SummarizationMiddleware")
"""LangChain's own ways to keep an agent's history in the window, run beside the engine: a trim
(:mod:`benchmarks._trim_peer`) and the summarising middleware with the local provider as its model
(:mod:`benchmarks._summarization_peer`)."""
QUICK_SESSIONS = 6
"""``--quick``: the first this many real sessions, no generated ones, the engine's default count only."""
FALLBACK_MODEL = "claude-sonnet-4-5"
UNBANDED = "claude-opus-4-7"
"""Opus 4.7's newer tokenizer: its rule prices far above ``o200k_base`` (see the sessions' NOTE.md), so
its rows are also shown apart. The local provider counts each session at the scale its own recorded
usage shows (:func:`_scale`), and calibration can learn a ratio outside its starting band from
consistent evidence, so these sessions are no longer high by design."""
OUT = RESULTS / "real_sessions.md"


@dataclass
class EngineRun:
    source: str
    kind: str
    window: int
    mode: str
    serve_less: bool
    count: str = "off"
    """``EngineSettings.count_before_send`` of the run."""
    wire: str = "anthropic"
    """The API the engine speaks to the provider (:data:`WIRES`)."""
    strategy: str = "local folding"
    """How the history is kept inside the window (:data:`STRATEGIES`; the engine's own folds here)."""
    calls_full: int = 0
    """Calls once the whole history no longer fits (the calls ``use_past`` is over)."""
    folds_full: int = 0
    """Requests once full that were the first after a fold."""
    counts_full: int = 0
    """Requests once full the provider counted before they were sent."""
    input_full: int = 0
    read_full: int = 0
    """The provider's input count and what of it was read from the prompt cache, once full."""
    dollars_input: float | None = None
    dollars_output: float | None = None
    """The session's dollars (genai-prices, the session's model): input with cache reads and writes,
    and output; the summariser's calls included. ``None``: genai-prices does not know the model."""
    counts: int = 0
    """Requests the provider counted before the engine sent them."""
    calls: int = 0
    rejections: int = 0
    recovered: int = 0
    failed_turns: int = 0
    use_past: list[float] = field(default_factory=list)
    after_fold: list[float] = field(default_factory=list)
    over_recount: int = 0
    recount_gap: int = 0
    """The largest (recount − provider count) seen: how far the two counts disagree."""
    model: str = ""
    errors: list[float] = field(default_factory=list)
    errors_after_fold: list[float] = field(default_factory=list)
    errors_by_kind: list[tuple[str, float]] = field(default_factory=list)
    """Each estimate error with the kind of request it was made for (:func:`_kind`)."""
    folds: int = 0
    summarizer_calls: int = 0
    cut_replies: int | None = None
    per_call_ms: list[float] = field(default_factory=list)
    crashed: str | None = None
    """The exception that ended the run early (its calls are not in the figures), else ``None``."""


@dataclass
class PeerRow:
    source: str
    kind: str
    window: int
    serve_less: bool
    calls: int = 0
    size_rejections: int = 0
    refused: int = 0
    empty: int = 0
    over_recount: int = 0
    use_past: list[float] = field(default_factory=list)
    dropped_past: list[int] = field(default_factory=list)
    dropped_share: float = 0.0
    wire: str = "anthropic"
    calls_full: int = 0
    input_full: int = 0
    read_full: int = 0
    dollars_input: float | None = None
    dollars_output: float | None = None
    peer: str = "trim_messages"
    """Which peer (:data:`PEERS`)."""
    folds_full: int = 0
    """Calls once full the peer summarised just before (``SummarizationMiddleware``; 0 for a trim)."""


def _sources(sessions: int | None, long: int) -> list[tuple[str, str]]:
    files = sorted(p for p in CLAUDE_SESSIONS.rglob("*.jsonl"))
    if sessions is not None:
        files = files[:sessions]
    return [("real", str(p)) for p in files] + [("long", str(i)) for i in range(long)]


def _load(kind: str, ref: str) -> Scenario:
    if kind == "real":
        return import_claude_code(ref)
    from ._long_scenarios import scenario_at

    return scenario_at(int(ref))


def _name(kind: str, ref: str) -> str:
    return Path(ref).stem[:12] if kind == "real" else f"long-{ref}"


def _model(scenario: Scenario) -> str:
    for name in (scenario.model, FALLBACK_MODEL):
        if not name:
            continue
        try:
            get_profile(name)
        except (InvalidInput, KeyError, ValueError):
            continue
        return name
    return FALLBACK_MODEL


def _scale(kind: str, ref: str, model: str) -> float:
    """The local provider's count scale: for a real session, measured on its own recorded usage
    (:func:`benchmarks._claude_sessions.recorded_scale`); for a generated one on a Claude model, pooled
    over the real sessions of its tokenizer generation (:func:`benchmarks._claude_sessions.pooled_scale`)."""
    from ._claude_sessions import pooled_scale, recorded_scale

    return recorded_scale(Path(ref), model) if kind == "real" else pooled_scale(model)


def _engine(
    scenario: Scenario,
    kind: str,
    ref: str,
    model: str,
    window: int,
    mode: str,
    less: bool,
    full: list[int],
    scale: float,
    count: str = "off",
    wire: str = "anthropic",
) -> EngineRun:
    reserve = min(4_096, window // 8)
    served = math.floor(window * SERVE_LESS) if less else None
    sink = io.StringIO()
    result = asyncio.run(
        simulate(
            scenario,
            model=model,
            window=window,
            usage=mode,  # type: ignore[arg-type]
            provider_window=served,
            record=sink,
            count_scale=scale,
            count=count,  # type: ignore[arg-type]
            prompt_cache=True,
            wire=wire,  # type: ignore[arg-type]
        )
    )
    run = EngineRun(
        source=_name(kind, ref),
        kind=kind,
        window=window,
        mode=mode,
        serve_less=less,
        model=model,
        count=count,
        wire=wire,
        counts=int(result.summary.get("counts") or 0),
    )
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    # The recount reads Anthropic Messages bodies: on the Chat Completions wire there is none.
    bodies = {line["call"]: line["request"] for line in lines if line.get("format") == "anthropic"}
    enforced = served or window
    accepted = 0
    folded = False
    first = True
    for record in result.records:
        run.calls += 1
        after = "compacted" in record.events
        folded = folded or after
        counted = record.provider_input_tokens or 0
        body = bodies.get(record.call)
        if body is not None:
            again = recount(body, scale)
            run.recount_gap = max(run.recount_gap, again - counted)
            run.over_recount += (
                again + int(body.get("max_tokens", reserve)) > enforced and not record.rejected
            )
        if record.rejected:
            run.rejections += 1
            continue
        if not first and counted > 0:
            error = (record.estimated_tokens - counted) / counted
            run.errors.append(error)
            run.errors_by_kind.append((_kind(accepted, record.events), error))
            if after:
                run.errors_after_fold.append(error)
        first = False
        whole = full[min(accepted, len(full) - 1)] if full else 0
        if whole + reserve > window:
            run.use_past.append(counted / window)
            if folded:
                run.after_fold.append(counted / window)
            run.calls_full += 1
            run.folds_full += after
            run.counts_full += record.counted
            run.input_full += counted
            run.read_full += result.cache[record.call].read if record.call < len(result.cache) else 0
        accepted += 1
    run.dollars_input, run.dollars_output = _dollars(result, model)
    run.recovered = sum(isinstance(e, OverflowRecovered) for e in result.events)
    folds = [e for e in result.events if isinstance(e, Compacted)]
    run.folds = len(folds)
    run.summarizer_calls = sum(e.summarizer_calls for e in folds)
    run.failed_turns = result.failed_turns
    cut = result.summary.get("cut_replies")
    run.cut_replies = int(cut) if isinstance(cut, int) else None
    for seconds, calls in getattr(result, "turn_overhead", ()):  # absent before simulate reported it
        run.per_call_ms.extend([1000 * seconds / calls] * calls if calls else [])
    return run


def _dollars(result: SimulationResult, model: str) -> tuple[float | None, float | None]:
    """The run's input and output dollars at genai-prices' prices for ``model``: each request the
    provider accepted (its fresh input, cache reads and cache writes as the local provider's prompt
    cache served them, and its output) and each summariser call; ``(None, None)`` when genai-prices
    is not installed or does not know the model."""
    from contextwindow.cost import available, price_all
    from contextwindow.usage.tracker import Usage

    if not available():
        return None, None
    usages = []
    for record in result.records:
        if record.rejected or not record.provider_input_tokens or record.call >= len(result.cache):
            continue
        use = result.cache[record.call]
        fresh = max(0, record.provider_input_tokens - use.read - use.write)
        usages.append(
            Usage(
                fresh_input=fresh,
                cache_read=use.read,
                cache_write=use.write,
                output=result.outputs[record.call],
            )
        )
    for prompt, output, use in result.summarizer_cache:
        fresh = max(0, prompt - use.read - use.write)
        usages.append(Usage(fresh_input=fresh, cache_read=use.read, cache_write=use.write, output=output))
    spent = price_all(usages, model)
    return (None, None) if spent is None else (float(spent.input), float(spent.output))


KINDS = ("2nd-5th request", "first after a fold", "first after a restart or archive", "within a stream")
"""The kinds of request the estimate error is broken down by (:func:`_kind`)."""


def _kind(accepted: int, events: Sequence[str]) -> str:
    """What a request was: one of the first five of its run (calibration has little or nothing to go on),
    the first after a fold or after a restart or new archives (a fresh compile), or one within a
    stream (anchored on the previous call's count)."""
    if accepted < 5:
        return KINDS[0]
    if "compacted" in events:
        return KINDS[1]
    if events:
        return KINDS[2]
    return KINDS[3]


def _kind_table(runs: list[EngineRun]) -> str:
    head = (
        "| sessions | window | usage | count before send | request | requests | estimate p95 | worst under "
        "| worst over | share beyond ±5% |\n| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |\n"
    )
    rows = []
    for kind in ("real", "long"):
        for window in WINDOWS:
            counts = sorted({r.count for r in runs}, key=COUNT_ORDER.index)
            for mode, count in ((m, c) for m in ("cumulative", "none") for c in counts):
                cell = [
                    r
                    for r in runs
                    if (r.kind, r.window, r.mode, r.serve_less, r.count) == (kind, window, mode, False, count)
                    and r.wire == "anthropic"
                ]
                for what in KINDS:
                    errors = [e for r in cell for k, e in r.errors_by_kind if k == what]
                    if not errors:
                        continue
                    beyond = sum(abs(e) > 0.05 for e in errors) / len(errors)
                    rows.append(
                        f"| {'real' if kind == 'real' else 'long (generated)'} | {window // 1000}k | {mode} "
                        f"| {count} | {what} "
                        f"| {len(errors)} | {_pct(_p95([abs(e) for e in errors]))} | {_pct(min(errors))} "
                        f"| {_pct(max(errors))} | {_pct(beyond)} |"
                    )
    return head + "\n".join(rows) + "\n"


def _peer(
    scenario: Scenario,
    kind: str,
    ref: str,
    model: str,
    window: int,
    less: bool,
    scale: float,
    wire: str = "anthropic",
    peer: str = "trim_messages",
) -> tuple[PeerRow, list[int]]:
    reserve = min(4_096, window // 8)
    served = math.floor(window * SERVE_LESS) if less else None
    runner = run_trim_peer if peer == "trim_messages" else run_summarization_peer
    ran: PeerRun | SummaryPeerRun = runner(
        scenario,
        model=model,
        window=window,
        reserve=reserve,
        served=served,
        load=scenario.load_attachment,
        render=lambda r: _render(r, scenario),
        count_scale=scale,
        wire=wire,  # type: ignore[arg-type]
    )
    summarized = ran.summarized_before if isinstance(ran, SummaryPeerRun) else [False] * len(ran.calls)
    row = PeerRow(source=_name(kind, ref), kind=kind, window=window, serve_less=less, wire=wire, peer=peer)
    enforced = served or window
    largest = 0.0
    for call, before in zip(ran.calls, summarized, strict=True):
        row.calls += 1
        row.size_rejections += call.outcome == "size"
        row.refused += call.outcome == "refused"
        row.empty += call.outcome == "empty"
        if call.recounted is not None:
            row.over_recount += call.recounted + reserve > enforced
        if call.full + reserve > window:
            row.dropped_past.append(call.dropped)
            largest = max(largest, call.dropped / max(1, call.history))
            row.folds_full += before
            if call.outcome == "ok" and call.sent is not None:
                row.use_past.append(call.sent / window)
                row.calls_full += 1
                row.input_full += call.sent
                row.read_full += call.cache_read
    row.dropped_share = largest
    row.dollars_input, row.dollars_output = _peer_dollars(ran, model)
    return row, [c.full for c in ran.calls]


def _peer_dollars(ran: PeerRun | SummaryPeerRun, model: str) -> tuple[float | None, float | None]:
    """The peer's input and output dollars at genai-prices' prices (as :func:`_dollars`), its
    summary calls included."""
    from contextwindow.cost import available, price_all
    from contextwindow.usage.tracker import Usage

    if not available():
        return None, None
    calls: Sequence[PeerCall] = ran.calls
    usages = [
        Usage(
            fresh_input=max(0, c.sent - c.cache_read - c.cache_write),
            cache_read=c.cache_read,
            cache_write=c.cache_write,
            output=c.output,
        )
        for c in calls
        if c.outcome == "ok" and c.sent
    ]
    for summary in ran.summaries if isinstance(ran, SummaryPeerRun) else ():
        usages.append(
            Usage(
                fresh_input=max(0, summary.input_tokens - summary.cache_read),
                cache_read=summary.cache_read,
                output=summary.output_tokens,
            )
        )
    spent = price_all(usages, model)
    return (None, None) if spent is None else (float(spent.input), float(spent.output))


def _render(request: Request, scenario: Scenario) -> dict[str, object]:
    return render(request, "anthropic", scenario.load_attachment)


def _task(job: tuple[str, str, int, tuple[str, ...]]) -> tuple[list[EngineRun], list[PeerRow], float]:
    kind, ref, window, counts = job
    began = time.perf_counter()
    scenario = _load(kind, ref)
    model = _model(scenario)
    scale = _scale(kind, ref, model)
    true_peer, full = _peer(scenario, kind, ref, model, window, False, scale)
    peers = [true_peer, _peer(scenario, kind, ref, model, window, True, scale)[0]]
    peers += [_peer(scenario, kind, ref, model, window, False, scale, "openai")[0]]
    peers += [
        _peer(scenario, kind, ref, model, window, less, scale, wire, "SummarizationMiddleware")[0]
        for wire, less in (("anthropic", False), ("anthropic", True), ("openai", False))
    ]
    configs = [(mode, False, count, wire) for wire in WIRES for count in counts for mode in MODES]
    configs += [("per-call", True, count, "anthropic") for count in counts]
    runs = [_guarded_engine(scenario, kind, ref, model, window, full, scale, config) for config in configs]
    return runs, peers, time.perf_counter() - began


def _guarded_engine(
    scenario: Scenario,
    kind: str,
    ref: str,
    model: str,
    window: int,
    full: list[int],
    scale: float,
    config: tuple[str, bool, str, str],
) -> EngineRun:
    """:func:`_engine` for one ``(usage, serves less, count, wire)``; a run the engine ends with an
    exception is kept as a crashed run (shown in the table, its calls left out), so one session cannot
    end the whole benchmark."""
    mode, less, count, wire = config
    try:
        return _engine(scenario, kind, ref, model, window, mode, less, full, scale, count, wire)
    except Exception as error:  # recorded in the table (crashed runs), never hidden
        return EngineRun(
            source=_name(kind, ref),
            kind=kind,
            window=window,
            mode=mode,
            serve_less=less,
            model=model,
            count=count,
            wire=wire,
            crashed=f"{type(error).__name__}: {error}",
        )


def _pct(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.1%}"


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _p95(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def _engine_table(runs: list[EngineRun]) -> str:
    head = (
        "| sessions | window | strategy | wire | usage | provider | count before send | runs | crashed runs | calls "
        "| counts /100 calls | counts /100 calls once full | folds /100 calls once full "
        "| cached share once full | $ per session (input / output) | mean use once history exceeds the window "
        "| smallest after a fold | rejections (recovered) | max recovered / session | failed turns "
        "| over by recount | recount − provider (max) | estimate p95 | estimate worst | worst after a fold "
        "| estimate p95 / worst without Opus 4.7 | folds /100 calls "
        "| summariser calls /100 calls | cut replies | engine ms/call (median) |\n"
        "| --- | ---: | --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    rows = []
    keys = sorted(
        {(r.kind, r.window, r.mode, r.serve_less, r.count, r.wire, r.strategy) for r in runs},
        key=lambda k: (
            k[0] != "real",
            k[3],
            list(STRATEGIES).index(k[6]) if k[6] in STRATEGIES else len(STRATEGIES),
            WIRES.index(k[5]),
            k[1],
            MODES.index(k[2]),
            COUNT_ORDER.index(k[4]),
        ),
    )
    for key in keys:
        kind, window, mode, less, count, wire, strategy = key
        cell = [
            r for r in runs if (r.kind, r.window, r.mode, r.serve_less, r.count, r.wire, r.strategy) == key
        ]
        calls = sum(r.calls for r in cell)
        use = [u for r in cell for u in r.use_past]
        after = [u for r in cell for u in r.after_fold]
        errors = [e for r in cell for e in r.errors]
        after_errors = [e for r in cell for e in r.errors_after_fold]
        banded = [e for r in cell if not r.model.startswith(UNBANDED) for e in r.errors]
        cut = [r.cut_replies for r in cell if r.cut_replies is not None]
        ms = [m for r in cell for m in r.per_call_ms]
        full = sum(r.calls_full for r in cell)
        rows.append(
            f"| {'real' if kind == 'real' else 'long (generated)'} | {window // 1000}k | {strategy} | {wire} "
            f"| {mode} | {'serves 85%' if less else 'true window'} | {count} | {len(cell)} "
            f"| {sum(r.crashed is not None for r in cell)} | {calls} "
            f"| {100 * sum(r.counts for r in cell) / max(1, calls):.1f} "
            f"| {100 * sum(r.counts_full for r in cell) / max(1, full):.1f} "
            f"| {100 * sum(r.folds_full for r in cell) / max(1, full):.1f} "
            f"| {_pct(sum(r.read_full for r in cell) / max(1, sum(r.input_full for r in cell)))} "
            f"| {_dollar_cell(cell)} | {_pct(_mean(use))} "
            f"| {_pct(min(after) if after else None)} "
            f"| {sum(r.rejections for r in cell)} ({sum(r.recovered for r in cell)}) "
            f"| {max(r.recovered for r in cell)} | {sum(r.failed_turns for r in cell)} "
            f"| {sum(r.over_recount for r in cell)} | {max(r.recount_gap for r in cell)} "
            f"| {_pct(_p95([abs(e) for e in errors]))} "
            f"| {_pct(min(errors) if errors else None)} | {_pct(min(after_errors) if after_errors else None)} "
            f"| {_pct(_p95([abs(e) for e in banded]))} / {_pct(min(banded) if banded else None)} "
            f"| {100 * sum(r.folds for r in cell) / max(1, calls):.1f} "
            f"| {100 * sum(r.summarizer_calls for r in cell) / max(1, calls):.1f} "
            f"| {sum(cut) if cut else '–'} | {statistics.median(ms) if ms else float('nan'):.2f} |"
        )
    return head + "\n".join(rows) + "\n"


def _dollar_cell(cell: Sequence[EngineRun] | Sequence[PeerRow]) -> str:
    """Mean dollars per session, input / output ("–" when genai-prices priced none of them)."""
    priced = [r for r in cell if r.dollars_input is not None and r.dollars_output is not None]
    if not priced:
        return "–"
    spent_in = statistics.fmean(r.dollars_input or 0.0 for r in priced)
    spent_out = statistics.fmean(r.dollars_output or 0.0 for r in priced)
    return f"{spent_in:.3f} / {spent_out:.3f}"


def _peer_table(rows: list[PeerRow]) -> str:
    head = (
        "| sessions | window | peer | wire | provider | runs | calls | rejections for size | other refusals (empty) "
        "| over by recount | mean use once history exceeds the window | smallest once full "
        "| summaries /100 calls once full | cached share once full "
        "| $ per session (input / output) | messages dropped per call "
        "| largest share of history dropped |\n"
        "| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: |\n"
    )
    out = []
    keys = sorted(
        {(r.kind, r.window, r.serve_less, r.wire, r.peer) for r in rows},
        key=lambda k: (k[0] != "real", k[2], PEERS.index(k[4]), WIRES.index(k[3]), k[1]),
    )
    for key in keys:
        kind, window, less, wire, peer = key
        cell = [r for r in rows if (r.kind, r.window, r.serve_less, r.wire, r.peer) == key]
        dropped = [d for r in cell for d in r.dropped_past]
        cached = sum(r.read_full for r in cell) / max(1, sum(r.input_full for r in cell))
        use = [u for r in cell for u in r.use_past]
        out.append(
            f"| {'real' if kind == 'real' else 'long (generated)'} | {window // 1000}k | {peer} | {wire} "
            f"| {'serves 85%' if less else 'true window'} | {len(cell)} | {sum(r.calls for r in cell)} "
            f"| {sum(r.size_rejections for r in cell)} "
            f"| {sum(r.refused + r.empty for r in cell)} ({sum(r.empty for r in cell)}) "
            f"| {sum(r.over_recount for r in cell)} | {_pct(_mean(use))} | {_pct(min(use) if use else None)} "
            f"| {100 * sum(r.folds_full for r in cell) / max(1, sum(len(r.dropped_past) for r in cell)):.1f} "
            f"| {_pct(cached)} | {_dollar_cell(cell)} "
            f"| {statistics.fmean(dropped) if dropped else 0:.1f} "
            f"| {_pct(max((r.dropped_share for r in cell), default=0.0))} |"
        )
    return head + "\n".join(out) + "\n"


def _total_table(runs: list[EngineRun], peers: list[PeerRow], count: str) -> str:
    """The issue's figures in one table, the real sessions on the true window: the engine in each
    usage mode at ``count`` (the engine's default count before sending) and each peer, on both wires."""
    head = (
        "| who | window | wire | usage | sessions | calls once full | mean use once full | smallest once full "
        "| cached share once full | $ per session (input / output) | folds /100 calls once full "
        "| counts /100 calls | estimate p95 / worst | crashed runs |\n"
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n"
    )
    out = []
    for window in WINDOWS:
        for wire in WIRES:
            for mode in MODES:
                cell = [
                    r
                    for r in runs
                    if (r.kind, r.window, r.wire, r.mode, r.serve_less, r.count)
                    == ("real", window, wire, mode, False, count)
                ]
                if not cell:
                    continue
                use = [u for r in cell for u in r.use_past]
                full = sum(r.calls_full for r in cell)
                errors = [e for r in cell for e in r.errors]
                out.append(
                    f"| engine ({cell[0].strategy}, count {count}) | {window // 1000}k | {wire} | {mode} "
                    f"| {len(cell)} | {full} | {_pct(_mean(use))} | {_pct(min(use) if use else None)} "
                    f"| {_pct(sum(r.read_full for r in cell) / max(1, sum(r.input_full for r in cell)))} "
                    f"| {_dollar_cell(cell)} | {100 * sum(r.folds_full for r in cell) / max(1, full):.1f} "
                    f"| {100 * sum(r.counts for r in cell) / max(1, sum(r.calls for r in cell)):.1f} "
                    f"| {_pct(_p95([abs(e) for e in errors]))} / {_pct(min(errors) if errors else None)} "
                    f"| {sum(r.crashed is not None for r in cell)} |"
                )
            for peer in PEERS:
                rows = [
                    r
                    for r in peers
                    if (r.kind, r.window, r.wire, r.serve_less, r.peer) == ("real", window, wire, False, peer)
                ]
                if not rows:
                    continue
                use = [u for r in rows for u in r.use_past]
                full = sum(len(r.dropped_past) for r in rows)
                out.append(
                    f"| {peer} | {window // 1000}k | {wire} | – | {len(rows)} | {full} | {_pct(_mean(use))} "
                    f"| {_pct(min(use) if use else None)} "
                    f"| {_pct(sum(r.read_full for r in rows) / max(1, sum(r.input_full for r in rows)))} "
                    f"| {_dollar_cell(rows)} | {100 * sum(r.folds_full for r in rows) / max(1, full):.1f} "
                    f"| 0.0 | – | 0 |"
                )
    return head + "\n".join(out) + "\n"


def _crashes(runs: list[EngineRun]) -> str:
    """Each crashed engine run, named (empty when none crashed)."""
    lines = [
        f"- {r.source} {r.window // 1000}k {r.wire} {r.mode} count {r.count}"
        f"{' serves 85%' if r.serve_less else ''}: {r.crashed}"
        for r in runs
        if r.crashed is not None
    ]
    return ("## Crashed engine runs\n\n" + "\n".join(lines) + "\n\n") if lines else ""


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.real_sessions")
    parser.add_argument("--long", type=int, default=4, help="generated long scenarios (of 20) to add")
    parser.add_argument("--sessions", type=int, default=None, help="only the first N real sessions")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--count",
        action="append",
        choices=COUNT_ORDER,
        help="count_before_send settings to run (repeatable; default: off and the engine's default)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"the first {QUICK_SESSIONS} real sessions, no generated ones, the engine's default count only",
    )
    args = parser.parse_args(argv)
    counts = tuple(dict.fromkeys(args.count)) if args.count else COUNTS
    if args.quick:
        args.sessions, args.long = args.sessions or QUICK_SESSIONS, 0
        counts = tuple(dict.fromkeys(args.count)) if args.count else (EngineSettings().count_before_send,)
    began = time.perf_counter()
    jobs = [(kind, ref, w, counts) for kind, ref in _sources(args.sessions, args.long) for w in WINDOWS]
    # The long scenarios first: they take longest, so the pool ends together.
    jobs.sort(key=lambda j: j[0] != "long")
    runs: list[EngineRun] = []
    peers: list[PeerRow] = []
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for done, (engine_runs, peer_rows, seconds) in enumerate(pool.map(_task, jobs), start=1):
            runs.extend(engine_runs)
            peers.extend(peer_rows)
            print(f"{done}/{len(jobs)} ({seconds:.0f}s; {time.perf_counter() - began:.0f}s)", file=sys.stderr)
    real = len({r.source for r in runs if r.kind == "real"})
    total = time.perf_counter() - began
    text = (
        "# real_sessions: real Claude Code sessions through the engine, beside LangChain's trim_messages and "
        "SummarizationMiddleware\n\n"
        f"{real} real sessions and {args.long} generated long scenarios, at 16k and 32k, each call's max_tokens "
        f"min(4096, window/8); {total:.0f}s on {args.workers} worker(s). Use = the provider's count of each "
        "request over the declared window, over the calls whose whole history no longer fits.\n\n"
        f"## In total: the real sessions on the true window, the engine (count before sending {counts[-1]}) "
        "beside LangChain's trim_messages and SummarizationMiddleware\n\n"
        + _total_table(runs, peers, counts[-1])
        + "\n"
        + _crashes(runs)
        + "## The engine (contextwindow simulate)\n\n"
        + _engine_table(runs)
        + "\n"
        "## The engine's estimate error by kind of request (true window; per-call is as cumulative, "
        "output-only as none)\n\n" + _kind_table(runs) + "\n"
        '## LangChain trim_messages(strategy="last", token_counter=count_tokens_approximately) and '
        f'SummarizationMiddleware(trigger=("tokens", {TRIGGER} × room), keep=("tokens", {KEEP} × room), '
        "its model ChatOpenAI on the local provider), same history, same provider\n\n" + _peer_table(peers)
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text, encoding="utf-8")
    print(text)
    return text


if __name__ == "__main__":
    main()
