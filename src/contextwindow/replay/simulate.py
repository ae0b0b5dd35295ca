"""Run a scenario through the turn engine against the local provider and record every request.

This is what ``contextwindow simulate`` and ``contextwindow demo`` run: the real
:class:`~contextwindow.engine.loop.Engine` with its default compiler and a summariser, a ledger (memory,
SQLite or PostgreSQL), and the local provider enforcing a hard window with a real tokenizer. Each
request the provider receives becomes a :class:`~contextwindow.replay.report.CallRecord`: the engine's
estimate and its makeup by segment, the provider's own count, whether it was refused, and what the
engine did just before it (restarted, compacted, evicted, archived). ``record`` writes each request
exactly as sent, one JSON object a line, beside the provider's count of it (``provider_input_tokens``),
the engine's own estimate (``estimated_tokens``) and whether that estimate was the provider's count
made before sending (``counted``: ``count=`` sets ``EngineSettings.count_before_send``; the summary's
``counts`` is how many counts the provider answered, ``counts_per_100_calls`` against its calls).

The replay stays on its script: a recorded reply longer than the call's ``max_tokens`` is cut there as
a provider cuts it, which ends the turn early; the replay then asks the model to continue
(:data:`CONTINUE_AFTER_CUT`) and the rest of the turn's script answers in order. The summary's
``cut_replies`` says how many replies were cut.

The makeup splits the engine's own estimate of each request by segment, in the proportions of the
makeup of the compile it came from (``CompiledRequest.makeup``) with the rounds appended since priced
by the estimator; the output reserve is the call's ``max_tokens``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, Any

from ..compile import SEGMENTS, CompiledRequest, Policy
from ..content import Audio, Block, Document, GeneratedImage, Image, Message, Request, ToolResult, Video
from ..engine.compiler import EngineCompiler
from ..engine.events import (
    AttachmentsEvicted,
    Compacted,
    Event,
    StreamRestarted,
    ToolResultsArchived,
    TurnEnded,
    UsageReported,
)
from ..engine.folding.summarizer import Summarizer
from ..engine.loop import Engine, EngineSettings
from ..engine.precount import CountMode
from ..errors import ContextOverflow, InvalidInput
from ..formats import AttachmentLoader, WireFormat, render
from ..models import ModelProfile, get_profile
from ..pricing import Estimator
from ..providers import output_limit_hit
from ..store import Session, open_store
from ..testing import SUMMARY_MARKER, LocalModel, LocalProvider, LocalSettings
from ..testing.caching import Breakpoint, CacheUse
from ..testing.counting import tokenizer_for
from ..testing.model import LocalReply, Rejection
from ..usage.tracker import UsageMode
from .report import CallRecord, EventKind, summarize
from .scenario import Scenario
from .timeline import TimelineCall, read_timeline

__all__ = ["RecordingModel", "SimulationResult", "simulate", "simulate_sync"]

CONTINUE_AFTER_CUT = "Your last reply was cut at the output limit. Continue from where it stopped."
"""What the replay sends when a scripted reply was cut at ``max_tokens`` and its turn has more script."""


@dataclass
class SimulationResult:
    """What a run produced: one record per request the provider received, and the run's summary."""

    records: list[CallRecord]
    summary: dict[str, Any]
    failed_turns: int = 0
    profile: ModelProfile | None = None
    events: list[Event] = field(default_factory=list)
    turn_overhead: list[tuple[float, int]] = field(default_factory=list)
    """Per turn: the engine's own time in seconds (the provider's stream, the tools and the summariser
    left out) and the provider calls it made, for an overhead-per-call figure."""
    cache: list[CacheUse] = field(default_factory=list)
    """Per request the provider received (as :attr:`records`): what it read from and wrote to the
    local provider's prompt cache (all zero without ``prompt_cache``, and for a refused request)."""
    outputs: list[int] = field(default_factory=list)
    """Per request the provider received (as :attr:`records`): its output tokens (0 when refused)."""
    summarizer_cache: list[tuple[int, int, CacheUse]] = field(default_factory=list)
    """Per summariser call: its input and output tokens and its cache use (what a fold's summary cost)."""

    timeline: list[TimelineCall] = field(default_factory=list)
    """The session's calls as its ledger recorded them (with ``simulate(timeline=True)``): what the
    session page (:mod:`~contextwindow.replay.session_page`) draws."""


class RecordingModel(LocalModel):
    """The local model, keeping what its agent session received: each request, the provider's count of
    it, and whether it was refused (the summariser's session is not recorded)."""

    def __init__(self, settings: LocalSettings, script: Sequence[Message]) -> None:
        super().__init__(settings, script=script)
        self.calls: list[tuple[Request, WireFormat, int, bool, AttachmentLoader | None]] = []
        self.cache_use: list[CacheUse] = []
        self.outputs: list[int] = []
        self.summarizer_calls: list[tuple[int, int, CacheUse]] = []

    @property
    def sent(self) -> list[int]:
        """The provider's count of each accepted request, in order."""
        return [counted for _, _, counted, rejected, _ in self.calls if not rejected]

    @property
    def rejected(self) -> int:
        """How many requests the provider refused."""
        return sum(1 for call in self.calls if call[3])

    def handle(
        self,
        request: Request,
        *,
        wire: WireFormat,
        max_tokens: int | None,
        load: AttachmentLoader | None = None,
        session: str = "default",
        breakpoints: Sequence[Breakpoint] | None = None,
        betas: Sequence[str] | None = None,
    ) -> LocalReply | Rejection:
        outcome = super().handle(
            request,
            wire=wire,
            max_tokens=max_tokens,
            load=load,
            session=session,
            breakpoints=breakpoints,
            betas=betas,
        )
        if session != "default" and isinstance(outcome, LocalReply):
            self.summarizer_calls.append((outcome.input_tokens, outcome.output_tokens, outcome.cache))
        if session == "default":
            self.cache_use.append(outcome.cache if isinstance(outcome, LocalReply) else CacheUse())
            self.outputs.append(outcome.output_tokens if isinstance(outcome, LocalReply) else 0)
            if isinstance(outcome, LocalReply):
                self.calls.append((request, wire, outcome.input_tokens, False, load))
            else:
                counted = self.count(request, load).input_tokens
                self.calls.append((request, wire, counted, True, load))
        return outcome


@dataclass
class _RecordingCompiler:
    """The engine's compiler, remembering its recent compiles: each request sent is one of them, or
    one of them with rounds appended (:meth:`source`)."""

    inner: EngineCompiler
    recent: deque[CompiledRequest] = field(default_factory=lambda: deque(maxlen=8))

    @property
    def last(self) -> CompiledRequest | None:
        return self.recent[-1] if self.recent else None

    def __call__(self, *args: Any, **kwargs: Any) -> CompiledRequest:
        compiled = self.inner(*args, **kwargs)
        self.recent.append(compiled)
        return compiled

    def source(self, request: Request) -> CompiledRequest | None:
        """The newest compile ``request`` starts with (its messages a prefix of the request's)."""
        for compiled in reversed(self.recent):
            n = len(compiled.messages)
            if n <= len(request.messages) and all(
                a is b or a == b for a, b in zip(compiled.messages, request.messages[:n], strict=True)
            ):
                return compiled
        return None


def _segment(block: Block) -> str:
    """The makeup segment of a block appended to a compiled request (a round: results, messages)."""
    if isinstance(block, ToolResult):
        return "tool_results"
    if isinstance(block, Image | GeneratedImage):
        return "images"
    if isinstance(block, Document | Audio | Video):
        return "other_media"
    return "text"


def _makeup(
    request: Request, source: CompiledRequest | None, estimator: Estimator, estimated: int, reserve: int
) -> dict[str, int]:
    """The engine's estimate split by segment: the makeup of the compile the request came from, plus
    the rounds appended to it since, scaled to the estimate the engine sent it with."""
    raw = dict.fromkeys(SEGMENTS, 0)
    appended: Sequence[Message] = request.messages
    if source is not None:
        raw.update(source.makeup)
        appended = request.messages[len(source.messages) :]
    raw["output_reserve"] = 0
    for message in appended:
        for block in message.content:
            raw[_segment(block)] += estimator.block(block)
    total = sum(raw.values())
    scale = estimated / total if total else 0.0
    makeup = {segment: round(tokens * scale) for segment, tokens in raw.items()}
    largest = max(makeup, key=lambda s: makeup[s])
    makeup[largest] += estimated - sum(makeup.values())  # rounding lands on the largest segment
    makeup[largest] = max(0, makeup[largest])
    makeup["output_reserve"] = reserve
    return makeup


async def simulate(
    scenario: Scenario,
    *,
    model: str | ModelProfile,
    window: int | None = None,
    reserve: int | None = None,
    usage: UsageMode = "per-call",
    provider_window: int | None = None,
    store: str | None = None,
    session_id: str = "simulation",
    record: IO[str] | None = None,
    progress: Callable[[int], None] | None = None,
    settings: EngineSettings | None = None,
    policy: Policy | None = None,
    count_scale: float = 1.0,
    count: CountMode | None = None,
    prompt_cache: bool = False,
    wire: WireFormat | None = None,
    timeline: bool = False,
) -> SimulationResult:
    """Run ``scenario`` through the engine against the local provider; see the module docstring.

    ``window`` is the declared window (default: the model's); ``provider_window`` makes the provider
    reject above that many tokens while the window stays declared (a provider silently serving less).
    ``reserve`` is each call's ``max_tokens`` (default ``min(4096, window // 8)``). ``count_scale`` is
    the provider's count scale (:mod:`contextwindow.testing.counting`): for a real session, the
    ratio its own recorded usage shows between the real provider's counts and the local tokenizer's.
    ``count`` is when the engine has the provider count a request before sending it
    (``EngineSettings.count_before_send``; ``None``: the setting's default, or ``settings``' own).
    ``prompt_cache`` turns on the local provider's prompt cache (``LocalSettings.prompt_cache``), so
    usage reports what a cache would serve. ``wire`` is the API the engine speaks to the provider
    (default: the profile's provider's, ``openai`` for an OpenAI model, else ``anthropic``). With
    ``timeline``, the result holds the session's calls as
    its ledger recorded them (:attr:`SimulationResult.timeline`).
    """
    base = get_profile(model)
    declared = window or base.context_window
    if declared <= 0:
        raise InvalidInput("must be > 0", path="window")
    reserve = reserve if reserve is not None else min(4_096, declared // 8)
    if not 0 < reserve < declared:
        raise InvalidInput(f"must be between 1 and the window ({declared})", path="reserve")
    if provider_window is not None and not 0 < provider_window <= declared:
        raise InvalidInput(f"must be between 1 and the window ({declared})", path="provider_window")
    profile = base.with_(
        context_window=declared, max_output_tokens=min(base.max_output_tokens, max(reserve, declared // 2))
    )
    local = RecordingModel(
        LocalSettings(
            window=declared,
            effective_window=provider_window,
            usage=usage,
            default_model=base.name,
            count_scale=count_scale,
            prompt_cache=prompt_cache,
        ),
        scenario.scripted_replies(),
    )
    speaks: WireFormat = wire or ("openai" if profile.provider == "openai" else "anthropic")
    opened = open_store(store)
    try:
        session = opened.session(session_id)
        _attach_all(scenario, session)
        compiler = _RecordingCompiler(
            EngineCompiler(
                policy or Policy(output_reserve=reserve), system=scenario.system, tools=scenario.tools
            )
        )
        provider = LocalProvider(local, wire=speaks)
        chosen = settings or EngineSettings(
            usage_mode=usage,
            max_tokens=reserve,
            max_stream_input_tokens=None,
        )
        if count is not None:
            chosen = replace(chosen, count_before_send=count)
        engine = Engine(
            session,
            provider,
            profile,
            compiler=compiler,
            tool_runner=scenario.tool_runner(),
            summarizer=Summarizer(
                LocalProvider(local, session="summarizer", wire=speaks),
                profile,
                instruction_suffix=f"{SUMMARY_MARKER}]]",
                load=session.read_attachment,
            ),
            settings=chosen,
        )
        result = await _run(
            scenario, engine, local, compiler, profile, reserve, record, progress, count_scale
        )
        result.summary["counts"] = provider.counts
        result.cache = list(local.cache_use)
        result.outputs = list(local.outputs)
        result.summarizer_cache = list(local.summarizer_calls)
        calls = len(local.calls)
        result.summary["counts_per_100_calls"] = round(100 * provider.counts / calls, 1) if calls else None
        if timeline:
            result.timeline = read_timeline(session, model=profile.name)
        return result
    finally:
        opened.close()


def simulate_sync(scenario: Scenario, **kwargs: Any) -> SimulationResult:
    """:func:`simulate` for callers without an event loop."""
    return asyncio.run(simulate(scenario, **kwargs))


def _attach_all(scenario: Scenario, session: Session) -> None:
    for ref in scenario.attachment_refs():
        session.attach(scenario.load_attachment(ref), ref.media_type)


async def _run(
    scenario: Scenario,
    engine: Engine,
    local: RecordingModel,
    compiler: _RecordingCompiler,
    profile: ModelProfile,
    reserve: int,
    record: IO[str] | None,
    progress: Callable[[int], None] | None,
    count_scale: float,
) -> SimulationResult:
    estimator = Estimator(profile)
    records: list[CallRecord] = []
    events: list[Event] = []
    pending: set[EventKind] = set()
    evicted_before: set[str] = set()
    archived_before: set[str] = set()
    failed = 0
    overhead: list[tuple[float, int]] = []
    cut = 0
    window_known = profile.context_window

    def drain() -> None:
        """Record the requests the provider received since the last drain, with this turn's estimate."""
        records.extend(
            _drain(
                local,
                records,
                compiler,
                estimator,
                estimate,
                counted,
                reserve,
                window_known,
                pending,
                number,
                record,
            )
        )

    for number, turn in enumerate(scenario.turns):
        injections = list(turn.injections)
        later = sum(len(t.replies) for t in scenario.turns[number + 1 :])
        calls_done = 0
        estimate = 0
        counted = False
        message = turn.user
        while True:
            stop_reason: str | None = None
            try:
                async for event in engine.run_turn(message):
                    events.append(event)
                    if event.type == "request_sent":
                        estimate = event.estimated_tokens
                        counted = event.counted
                        window_known = event.window or profile.context_window
                        last = compiler.last
                        if last is not None:
                            evicted = {e.attachment_id for e in last.decisions.evicted}
                            if evicted - evicted_before:
                                pending.add("evicted")
                            evicted_before = evicted
                            archived = {a.tool_use_id for a in last.decisions.archived}
                            if archived - archived_before:  # new archives are recorded, then in force
                                pending.add("archived")
                            archived_before = archived
                    elif isinstance(event, StreamRestarted):
                        pending.add("restarted")
                    elif isinstance(event, Compacted):
                        pending.add("compacted")
                    elif isinstance(event, AttachmentsEvicted):
                        pending.add("evicted")
                    elif isinstance(event, ToolResultsArchived):
                        pending.add("archived")
                    elif isinstance(event, TurnEnded):
                        stop_reason = event.stop_reason
                    drain()
                    if isinstance(event, UsageReported):
                        calls_done += 1
                        for injection in [i for i in injections if i.round == calls_done]:
                            engine.inject(injection.message)
                        if progress is not None:
                            progress(len(records))
            except ContextOverflow:
                failed += 1
                drain()
                local.discard_script(later)
                stop_reason = None
            overhead.append((engine.stats.engine_seconds, engine.stats.calls))
            if not output_limit_hit(stop_reason):
                break
            # A scripted reply longer than the call's max_tokens was cut there, as a provider cuts it
            # (text cut, a tool call that did not fit dropped): the turn ended early. An agent asks the
            # model to go on; the replay does, so the rest of the turn's script is answered in order.
            cut += 1
            if local.pending <= later:
                break
            message = Message.user(CONTINUE_AFTER_CUT)
    summary = summarize(records, tokenizer=tokenizer_for(profile, count_scale).name)
    summary["cut_replies"] = cut
    learned = engine.window
    summary["window_learned"] = learned if learned is not None and learned != profile.context_window else None
    summary["failed_turns"] = failed
    summary["model"] = profile.name
    summary["window"] = profile.context_window
    return SimulationResult(
        records=records,
        summary=summary,
        failed_turns=failed,
        profile=profile,
        events=events,
        turn_overhead=overhead,
    )


def _drain(
    local: RecordingModel,
    records: list[CallRecord],
    compiler: _RecordingCompiler,
    estimator: Estimator,
    estimate: int,
    estimate_counted: bool,
    reserve: int,
    window: int,
    pending: set[EventKind],
    turn: int,
    record: IO[str] | None,
) -> list[CallRecord]:
    """Records for the requests the provider received since the last drain, each against ``window``,
    the window as known when it was sent (it steps down where a rejection taught a smaller one)."""
    out: list[CallRecord] = []
    while len(records) + len(out) < len(local.calls):
        index = len(records) + len(out)
        request, wire, counted, rejected, load = local.calls[index]
        out.append(
            CallRecord(
                call=index,
                makeup=_makeup(request, compiler.source(request), estimator, estimate, reserve),
                estimated_tokens=estimate,
                provider_input_tokens=counted,
                window=window,
                rejected=rejected,
                events=tuple(
                    kind for kind in ("restarted", "compacted", "evicted", "archived") if kind in pending
                ),
                turn=turn,
                counted=estimate_counted,
            )
        )
        pending.clear()
        if record is not None and load is not None:
            line = {
                "call": index,
                "format": wire,
                "request": render(request, wire, load),
                "provider_input_tokens": counted,
                "estimated_tokens": estimate,
                "counted": estimate_counted,
                "rejected": rejected,
            }
            record.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    return out
