"""The guard's own CPU per call, flat in the history; compile against ``trim_messages``; bounded RSS.

Four measurements in one run:

1. **Guard CPU per call** with both official SDK clients (``anthropic``, ``openai``) against the local
   provider over HTTP, at a window large enough that nothing folds, so what is measured is the guard
   alone: the CPU time of the agent's thread in the guarded ``create`` less the CPU time inside the
   SDK's own call (request building, HTTP, parsing). Conversations of ~10, ~100, ~400 and ~2,000
   messages are primed, then each call appends one user message and records the reply; one more row
   of ~100 messages sends a coding agent's tools with every call (:data:`TOOLS`: 20 definitions,
   ~32 KB of JSON, a new list of new dicts each call, as a framework builds them), and one of ~100
   messages whose guard keeps its ledger in a SQLite file it opens itself, as ``guard(client)``
   does when given no store (every other row keeps it in memory, ``store=":memory:"``). Calls are
   interleaved round-robin over every (SDK, size, variant): variant A is the guard as it is
   (incremental compile); variant B drops compile's per-session memo before each call, so every call
   compiles the whole history cold (what each call cost when the walk was not reused).
2. **Compile against LangChain's ``trim_messages``** on the 10,000-message session with 1,000 images
   of :mod:`benchmarks.compile` (cold: open + compile; incremental: one append, then compile).
3. **A call that folds** against an ordinary one, on 16k and 64k windows with the guard's own
   summaries (:func:`measure_folds`): what a fold adds, in ordinary calls.
4. **RSS of a process running many guarded conversations** (10 turns each) with the guard's memory
   bound (``GuardOptions.cache_mb``): RSS after each tenth of them, in a fresh process.

Run: ``PYTHONPATH=src python -m benchmarks.guard_cost [--quick]``. Prints markdown and writes
``benchmarks/results/guard_cost.md``. Never fails on a timing.

``--rss N`` prints the RSS rows alone for ``N`` conversations (``benchmarks/results/guard_rss.md``);
``--folds N`` the fold rows alone, ``N`` calls per conversation.

``--compaction MODE`` guards every conversation with ``compaction=MODE`` (``provider`` or ``auto``:
each call then also prices the request and the provider's edits of it; the default, ``local``, is
what the tables say otherwise), in both trees with ``--against``.

``--against SRC`` measures this tree's guard beside another tree's (``SRC``, a ``src`` directory,
e.g. an older checkout's, or a git revision, exported for the run), A/B interleaved in one run:
each tree's guard runs in a process of its own (variant A only), and the two take turns, one round
of calls over every (SDK, size) at a time, each round opening on the next (SDK, size), so the
dearer first call after the other tree's turn (cold caches) is shared by every cell rather than
charged to one; then each tree's compile on the 10,000-message session, alternating, three times
each. It prints the two side by side with their ratios, and writes
``benchmarks/results/guard_cost_ab.md``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from benchmarks._paths import RESULTS, ROOT
from benchmarks.compile import ab_rows, compile_against, source_tree, tree_env

SIZES = (10, 100, 400, 2_000)
TOOLS_AT = 100
"""The history of the row whose every call sends :data:`TOOLS`."""
LEDGER_AT = 100
"""The history of the row whose guard keeps its ledger in a SQLite file."""


class Case(NamedTuple):
    """One row: the history, whether every call sends :data:`TOOLS`, and the guard's ledger: ``memory``
    (``store=":memory:"``, every other row) or ``sqlite`` (a SQLite file, opened by the guard at the
    durability it opens its own ledger with, as ``guard(client)`` keeps it when given no store)."""

    size: int
    tools: bool = False
    ledger: str = "memory"


CASES: tuple[Case, ...] = (
    *(Case(size) for size in SIZES),
    Case(TOOLS_AT, tools=True),
    Case(LEDGER_AT, ledger="sqlite"),
)
CLAUDE = "claude-haiku-4-5"
GPT = "gpt-4o"
SYSTEM = "You are terse."
MAX_TOKENS = 512
_COMPACTION = "GUARD_COST_COMPACTION"
"""The environment variable carrying ``--compaction`` (to the ``--against`` children too)."""


def _compaction() -> dict[str, str]:
    mode = os.environ.get(_COMPACTION, "local")
    return {} if mode == "local" else {"compaction": mode}


def _tools(kind: str) -> list[dict[str, Any]]:
    """A coding agent's tools in ``kind``'s wire shape, made anew (a framework builds them per call)."""
    out = []
    for i in range(20):
        properties = {
            f"arg{j}": {
                "type": "string",
                "description": f"Argument {j} of tool {i}: a path, a pattern or a command.",
            }
            for j in range(8)
        }
        schema = {"type": "object", "properties": properties, "required": ["arg0"]}
        description = f"Tool {i} does one thing to the repository and reports what it found. " * 8
        if kind == "anthropic":
            out.append({"name": f"tool_{i}", "description": description, "input_schema": schema})
        else:
            function = {"name": f"tool_{i}", "description": description, "parameters": schema}
            out.append({"type": "function", "function": function})
    return out


TOOLS = _tools("anthropic")
"""The tools of the row that sends them (this is the Anthropic shape; the OpenAI one is alike)."""


def _label(case: Case) -> str:
    extra = f", {len(TOOLS)} tools ({len(json.dumps(TOOLS)) // 1000} KB)" if case.tools else ""
    if case.ledger == "sqlite":
        extra += ", SQLite file ledger (the default store)"
    return f"~{case.size}{extra}"


_LEDGERS: list[tempfile.TemporaryDirectory[str]] = []
"""The directories of the SQLite ledgers, removed when the process ends."""


def _store(ledger: str) -> str:
    """The ``store`` a conversation's guard gets: in memory, or a new SQLite file."""
    if ledger == "memory":
        return ":memory:"
    folder = tempfile.TemporaryDirectory(prefix="cw-guard-cost-")
    _LEDGERS.append(folder)
    return str(Path(folder.name) / "guard.sqlite")


def _text(i: int) -> str:
    return f"Message {i}: the build step {i} failed on module m{i % 37}; please check the logs and retry."


class _Conversation:
    """One guarded agent: its client, its whole history, and the CPU inside the SDK's own call."""

    def __init__(
        self,
        kind: str,
        size: int,
        url: str,
        full: bool,
        *,
        primed: bool = True,
        tools: bool = False,
        ledger: str = "memory",
        **options: Any,
    ) -> None:
        import contextwindow

        self.kind, self.size, self.full, self.tools, self.ledger = kind, size, full, tools, ledger
        self.sdk_cpu = 0.0
        raw = self._raw_client(kind, url)
        options = {"summarizer": False, **options}
        self.client = contextwindow.guard(raw, store=_store(ledger), **options, **_compaction())
        tag = f"{kind}-{size}-{'T' if tools else ''}{'S' if ledger == 'sqlite' else ''}{'B' if full else 'A'}"
        self.history: list[dict[str, Any]] = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"[{tag}] " + _text(i)}
            for i in range(size - 1 if primed else 0)
        ]
        self.turn = 0

    @classmethod
    def of(cls, case: Case, kind: str, url: str, full: bool) -> _Conversation:
        """The conversation of one row (``case``) for one SDK."""
        return cls(kind, case.size, url, full, tools=case.tools, ledger=case.ledger)

    @property
    def case(self) -> Case:
        return Case(self.size, self.tools, self.ledger)

    def _raw_client(self, kind: str, url: str) -> Any:
        """The official SDK's client on ``url``, its create counting the CPU inside it in ``sdk_cpu``."""
        import anthropic
        import openai

        if kind == "anthropic":
            raw: Any = anthropic.Anthropic(api_key="local", base_url=url, max_retries=0)
            resource = raw.messages
        else:
            raw = openai.OpenAI(api_key="local", base_url=url + "/v1", max_retries=0)
            resource = raw.chat.completions
        inner = resource.create

        def create(**kwargs: Any) -> Any:
            cpu = time.thread_time()
            try:
                return inner(**kwargs)
            finally:
                self.sdk_cpu += time.thread_time() - cpu

        resource.create = create
        return raw

    def _next_user(self) -> str:
        return _text(10_000 + self.turn)

    def call(self) -> float:
        """One call: the guard's own CPU time (seconds)."""
        self.history.append({"role": "user", "content": self._next_user()})
        self.turn += 1
        if self.full:
            _FULL[0] = True
        self.sdk_cpu = 0.0
        extra = {"tools": _tools(self.kind)} if self.tools else {}
        cpu = time.thread_time()
        try:
            if self.kind == "anthropic":
                response = self.client.messages.create(
                    model=CLAUDE, max_tokens=MAX_TOKENS, system=SYSTEM, messages=self.history, **extra
                )
                text = response.content[0].text
            else:
                response = self.client.chat.completions.create(
                    model=GPT,
                    max_tokens=MAX_TOKENS,
                    messages=[{"role": "system", "content": SYSTEM}, *self.history],
                    **extra,
                )
                text = response.choices[0].message.content
        finally:
            _FULL[0] = False
        own = time.thread_time() - cpu - self.sdk_cpu
        self.history.append({"role": "assistant", "content": text})
        return own


_FULL = [False]

FOLD_WINDOWS = (16_000, 64_000)
"""The windows of the folding conversations (:func:`measure_folds`)."""


class _Folding(_Conversation):
    """A guarded agent on a small window with the guard's own summaries (the same local provider):
    each call appends a ~400-token message, so the history outgrows the window and the guard folds.
    ``sdk_cpu`` counts the agent's call and the summary call alike (the same raw client)."""

    def __init__(self, kind: str, window: int, url: str) -> None:
        super().__init__(kind, window, url, False, primed=False, summarizer=None, context_window=window)

    def _next_user(self) -> str:
        return " ".join(_text(20 * self.turn + j) for j in range(20))

    def folded(self) -> bool:
        from contextwindow.engine.events import Compacted

        exchange = self.client.last_exchange
        return exchange is not None and any(isinstance(e, Compacted) for e in exchange.events)


def measure_folds(calls: int) -> dict[tuple[str, int], tuple[list[float], list[float]]]:
    """Guard CPU per call of conversations that fold, by (SDK, window): (ordinary calls, calls that
    folded), interleaved round-robin; the first fifth of the calls (the window filling) is left out
    of the ordinary ones."""
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    out: dict[tuple[str, int], tuple[list[float], list[float]]] = {}
    with LocalServer(LocalModel(LocalSettings())) as server:
        conversations = [
            _Folding(kind, window, server.url) for window in FOLD_WINDOWS for kind in ("anthropic", "openai")
        ]
        for i in range(calls):
            for conversation in conversations:
                own = conversation.call()
                ordinary, folds = out.setdefault((conversation.kind, conversation.size), ([], []))
                if conversation.folded():
                    folds.append(own)
                elif i >= calls // 5:
                    ordinary.append(own)
    return out


def _cold_compiles() -> None:
    """Variant B: compile's per-session memo dropped before each compile of a call marked full."""
    from contextwindow.compile import CompileCache, SessionCompiler

    compile_once = SessionCompiler.compile

    def compile_cold(self: SessionCompiler, **kwargs: Any) -> Any:
        if _FULL[0]:
            self.cache = CompileCache()
        return compile_once(self, **kwargs)

    SessionCompiler.compile = compile_cold  # type: ignore[method-assign]


def measure_calls(calls: int) -> dict[tuple[str, Case, bool], list[float]]:
    """Guard CPU per call, by (SDK, case, full), interleaved round-robin."""
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    _cold_compiles()
    samples: dict[tuple[str, Case, bool], list[float]] = {}
    with LocalServer(LocalModel(LocalSettings())) as server:
        conversations = [
            _Conversation.of(case, kind, server.url, full)
            for case in CASES
            for kind in ("anthropic", "openai")
            for full in (False, True)
        ]
        for conversation in conversations:  # prime: the first call appends the whole history
            conversation.call()
            conversation.call()
        for _ in range(calls):
            for conversation in conversations:
                key = (conversation.kind, conversation.case, conversation.full)
                samples.setdefault(key, []).append(conversation.call())
    return samples


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


_RSS_CHILD = r"""
import json, sys, time
import psutil, anthropic
import contextwindow
from contextwindow.testing import LocalModel, LocalServer, LocalSettings
count, store = int(sys.argv[1]), sys.argv[3]
cache_mb = None if sys.argv[2] == "none" else float(sys.argv[2])
proc = psutil.Process()
rows = []
with LocalServer(LocalModel(LocalSettings())) as server:
    raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
    client = contextwindow.guard(raw, store=store, summarizer=False, cache_mb=cache_mb)
    rows.append((0, proc.memory_info().rss))
    for c in range(count):
        history = []
        for turn in range(10):
            history.append({"role": "user", "content": f"conversation {c} turn {turn}: " + "why did the build fail? " * 40})
            reply = client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=history)
            history.append({"role": "assistant", "content": reply.content[0].text})
        if (c + 1) % max(1, count // 10) == 0:
            rows.append((c + 1, proc.memory_info().rss))
print(json.dumps(rows))
"""


def measure_rss(count: int, cache_mb: float | None) -> list[tuple[int, int]]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent.parent / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _RSS_CHILD,
                str(count),
                "none" if cache_mb is None else str(cache_mb),
                str(Path(tmp) / "ledger.db"),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return []
    return [tuple(row) for row in json.loads(done.stdout.strip().splitlines()[-1])]


def measure_compile() -> dict[str, float]:
    """:func:`benchmarks.compile.measure_speed` in a fresh process, as :func:`compile_against` runs it
    and as a program opening a session does. Measured in this process, after the guarded
    conversations, a cold compile's median was ~250 ms against ~140 ms in a process of its own (not
    the collector walking what they hold: a million extra live objects leave it as it is)."""
    from benchmarks.compile import _COMPILE_CHILD, build

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.db"
        build(path, messages=10_000, images=1_000)
        done = subprocess.run(
            [sys.executable, "-c", _COMPILE_CHILD, str(path)],
            env=tree_env(ROOT / "src"),
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
        return figures


def _child() -> None:
    """One tree's guard (variant A) for :func:`measure_against`: primes, says ``ready``, then runs one
    round of calls per line read and prints its samples as JSON."""
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    with LocalServer(LocalModel(LocalSettings())) as server:
        conversations = [
            _Conversation.of(case, kind, server.url, False)
            for case in CASES
            for kind in ("anthropic", "openai")
        ]
        for conversation in conversations:
            conversation.call()
            conversation.call()
        print("ready", flush=True)
        for turn, _ in enumerate(sys.stdin):
            # Each round opens on the next conversation: the round's first call runs on caches the
            # other tree's round (and everything else on the machine) just went through, and costs
            # about a millisecond more; charged to one (SDK, size) every round, it was that cell's.
            start = turn % len(conversations)
            ordered = [*conversations[start:], *conversations[:start]]
            print(json.dumps({_key(c.kind, c.case): c.call() for c in ordered}), flush=True)


def _key(kind: str, case: Case) -> str:
    return f"{kind}/{case.size}{'+tools' if case.tools else ''}{'+sqlite' if case.ledger == 'sqlite' else ''}"


def measure_against(other: Path, calls: int) -> dict[str, dict[str, list[float]]]:
    """Guard CPU per call of this tree and of ``other`` (a ``src`` directory), by ``"sdk/size"``: one
    process per tree, taking turns round by round (the first to go alternates)."""
    trees = {"this": ROOT / "src", "other": other}
    procs = {
        label: subprocess.Popen(
            [sys.executable, "-c", "from benchmarks.guard_cost import _child; _child()"],
            env=tree_env(src),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for label, src in trees.items()
    }
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    try:
        for proc in procs.values():
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        for i in range(calls):
            for label in ("this", "other") if i % 2 == 0 else ("other", "this"):
                proc = procs[label]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write("round\n")
                proc.stdin.flush()
                for key, value in json.loads(proc.stdout.readline()).items():
                    samples[label].setdefault(key, []).append(value)
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)
    return samples


def _main_against(other: Path, quick: bool) -> None:
    calls = 15 if quick else 60
    samples = measure_against(other, calls)
    lines = [
        "# Guard cost, A/B",
        "",
        f"Guard CPU per call (ms), median / p95 over {calls} calls each; this tree against `{other}`, "
        "one process each, taking turns round by round in one run. Local provider, nothing folds; "
        f"`compaction={os.environ.get(_COMPACTION, 'local')!r}`.",
        "",
        "| SDK | history | other median | other p95 | this median | this p95 | other / this | goal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for case in CASES:
        for kind in ("anthropic", "openai"):
            key = _key(kind, case)
            a, b = samples["this"][key], samples["other"][key]
            ma, mb = statistics.median(a) * 1000, statistics.median(b) * 1000
            lines.append(
                f"| {kind} | {_label(case)} | {mb:.2f} | {_p95(b) * 1000:.2f} | {ma:.2f} | {_p95(a) * 1000:.2f} "
                f"| {mb / ma:.1f}× | ≤ 2 / ≤ 5 |"
            )
    speed = compile_against(other, rounds=2 if quick else 3)
    lines += [
        "",
        "Compile, 10,000-message SQLite session with 1,000 images (`benchmarks/compile.py`), a fresh "
        "process per tree and round, alternating; medians over the rounds (ms), and LangChain "
        "`trim_messages` on the same history in the same processes:",
        "",
        *ab_rows(speed),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "guard_cost_ab.md").write_text(text)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    quick = "--quick" in args
    if "--compaction" in args:
        os.environ[_COMPACTION] = args[args.index("--compaction") + 1]
    if "--against" in args:
        with source_tree(args[args.index("--against") + 1]) as other:
            _main_against(other, quick)
        return
    if "--rss" in args:
        _main_rss(int(args[args.index("--rss") + 1]))
        return
    if "--folds" in args:
        text = "\n".join(
            ["# Guard cost of a fold", "", *_fold_table(measure_folds(int(args[args.index("--folds") + 1])))]
        )
        print(text)
        return
    calls = 15 if quick else 60
    conversations = 200 if quick else 1_000
    samples = measure_calls(calls)
    lines = [
        "# Guard cost",
        "",
        f"Guard CPU per call (ms), median / p95 over {calls} calls each, interleaved; local provider, "
        "window large enough that nothing folds; "
        f"`compaction={os.environ.get(_COMPACTION, 'local')!r}`. A: the guard; B: every call compiles cold.",
        "",
        "| SDK | history | A median | A p95 | B median | B p95 | B / A | goal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for case in CASES:
        for kind in ("anthropic", "openai"):
            a, b = samples[(kind, case, False)], samples[(kind, case, True)]
            ma, mb = statistics.median(a) * 1000, statistics.median(b) * 1000
            lines.append(
                f"| {kind} | {_label(case)} | {ma:.2f} | {_p95(a) * 1000:.2f} | {mb:.2f} | {_p95(b) * 1000:.2f} "
                f"| {mb / ma:.1f}× | ≤ 2 / ≤ 5 |"
            )
    lines += ["", *_fold_table(measure_folds(150 if quick else 300))]
    speed = measure_compile()
    lines += [
        "",
        "Compile, 10,000-message SQLite session with 1,000 images (benchmarks/compile.py's), against "
        "LangChain `trim_messages` on the same history in memory:",
        "",
        "| case | contextwindow (ms) | trim_messages (ms) | ratio | goal |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| cold (open + compile) | {speed['cold']:.1f} | {speed['lc_full']:.1f} | "
        f"{speed['lc_full'] / speed['cold']:.1f}× | ≤ 150 ms |",
        f"| incremental (one append) | {speed['incremental']:.2f} | {speed['lc_incremental']:.1f} | "
        f"{speed['lc_incremental'] / speed['incremental']:.1f}× | ≥ 10× |",
    ]
    lines += ["", *_rss_table(conversations)]
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "guard_cost.md").write_text(text)


def _fold_table(samples: dict[tuple[str, int], tuple[list[float], list[float]]]) -> list[str]:
    """The rows of :func:`measure_folds`: a call that folds against an ordinary one, and what the fold
    adds in ordinary calls (a fold is one more call, the summary's, and the compile it changes: about
    one call's work)."""
    lines = [
        "A call that folds (the guard's own summary through the same local provider, SDK CPU of both "
        "calls left out) against an ordinary call of the same conversation, ~400-token messages, "
        "guard CPU per call (ms), medians:",
        "",
        "| SDK | window | calls counted | folds | ordinary | folding | what a fold adds, in ordinary calls | goal |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for window in FOLD_WINDOWS:
        for kind in ("anthropic", "openai"):
            ordinary, folds = samples[(kind, window)]
            if not ordinary or not folds:
                lines.append(
                    f"| {kind} | {window:,} | {len(ordinary) + len(folds)} | {len(folds)} | – | – | – | ≈ 1 |"
                )
                continue
            mo, mf = statistics.median(ordinary) * 1000, statistics.median(folds) * 1000
            lines.append(
                f"| {kind} | {window:,} | {len(ordinary) + len(folds)} | {len(folds)} | {mo:.2f} | {mf:.2f} "
                f"| {(mf - mo) / mo:.1f} | ≈ 1 |"
            )
    return lines


def _rss_table(conversations: int) -> list[str]:
    """The RSS rows: ``conversations`` guarded conversations, the guard's memory bound and unbounded."""
    rows = {mb: measure_rss(conversations, mb) for mb in (16.0, None)}
    mib = 1024 * 1024
    lines = [
        f"RSS (MB) of one process running {conversations} guarded conversations of 10 turns "
        "(anthropic SDK, SQLite ledger), with the guard's memory bound at 16 MB and unbounded "
        "(`cache_mb=None`):",
        "",
        "| conversations | bound 16 MB | unbounded |",
        "| ---: | ---: | ---: |",
    ]
    bounded, unbounded = rows[16.0], rows[None]
    for i, (count, rss) in enumerate(bounded):
        other = unbounded[i][1] / mib if i < len(unbounded) else float("nan")
        lines.append(f"| {count} | {rss / mib:.0f} | {other:.0f} |")
    return lines


def _main_rss(conversations: int) -> None:
    """``--rss N``: the bounded-state rows alone, for ``N`` conversations."""
    text = "\n".join(["# Guard state, bounded", "", *_rss_table(conversations)]) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "guard_rss.md").write_text(text)


if __name__ == "__main__":
    main()
