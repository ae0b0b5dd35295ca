"""``contextwindow proxy`` beside direct calls and beside LiteLLM's proxy, on the same agent.

Every server is its own process on 127.0.0.1: the upstream is the local provider (``contextwindow
serve``); *direct* talks to it, *contextwindow proxy* is the guarded proxy in front of it (its ledger
in a temporary SQLite file), *LiteLLM proxy* is ``litellm --config`` in front of it (its Anthropic
``/v1/messages`` route, the model mapped to ``anthropic/<model>`` at the local provider's URL). The
agent is the same for all three: Anthropic Messages over keep-alive HTTP, resending its whole history
on every call. Figures, each beside direct and beside LiteLLM:

1. CPU per request of the process in front of the upstream (for *direct*, the upstream's own, for
   scale) at about 10, 100 and 400 messages of history, and the median latency the agent sees;
   beside them *contextwindow pass-through* (``contextwindow proxy --no-guard``: the relaying alone).
   Every front is warmed by one call first, then the fronts take turns: each size's calls are made
   in rounds, one front after another, and a front's CPU per call is its median over the rounds.
   A front's first call of a round runs on caches the others' rounds left cold (this machine is a
   VM on a shared host: a process idle for 20 ms pays up to half again the CPU on its next call),
   as a proxy does between the calls of a lightly used deployment;
2. that CPU in parts: the guard core's and compile's within it (thread CPU in this process,
   :mod:`benchmarks.proxy_parts`), and the rest, the proxy's own;
3. requests per second with 20 and 50 concurrent conversations, against the local provider answering
   at once (every front CPU-bound on the same cores; the guarded proxy also with ``--workers 2``, and
   each path's CPU per call: the agent's, the upstream's, the front's, with the ratio to direct the
   cores allow when all are CPU-bound) and answering in one second (as a model does);
4. RSS of the process in front over 1,000 conversations (``--conversations N`` for a quicker run),
   for the guarded proxy with its default ``--cache-mb`` and with ``--cache-mb 4``, and what each
   says on ``/health`` of the conversations it holds;
5. every failed call, with what the front's log said about it.

``--profile`` prints where the guarded proxy's CPU goes by area of the code (cProfile on its event
loop and worker threads, in this process). cProfile's cost per Python call inflates code made of many
small calls (the compile walk) several times over: the thread-CPU parts of table 2 are the honest
split.

LiteLLM's proxy needs its ``proxy`` extra, installed in the benchmark's own environment, never in the
project's: ``python -m benchmarks.proxy --setup`` makes a virtual environment at ``--litellm-venv``
(default ``$CONTEXTWINDOW_BENCH_LITELLM_VENV``, else ``~/.cache/contextwindow/bench-litellm``) and
installs ``litellm[proxy]`` there from PyPI. When the extra cannot be resolved (a release whose
``litellm-proxy`` pin is not on the index), it installs ``litellm`` and the extra's requirements one
by one, without the ones the index does not have. Without that environment the LiteLLM column says
why it was not measured.

Prints markdown tables and writes ``benchmarks/results/proxy.md``. Never fails on a timing; every
loop is bounded in count and in time.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._paths import RESULTS, ROOT

MODEL = "claude-haiku-4-5"
LITELLM_KEY = "sk-bench-local-0000000000000000000000000000"
"""The key LiteLLM's proxy is started with (it refuses to start without one); loopback only."""
DEFAULT_VENV = Path(
    os.environ.get("CONTEXTWINDOW_BENCH_LITELLM_VENV", Path.home() / ".cache/contextwindow/bench-litellm")
)


@dataclass(frozen=True)
class Sizes:
    turns: int = 40
    """Measured calls per history size and front (after two warm-up calls), in :data:`ROUNDS` rounds."""
    conversations: int = 1000
    throughput_seconds: float = 30.0
    throughput_turns: int = 10


@dataclass
class Front:
    """A process the agent talks to: its port, the pid whose CPU and RSS count, the headers it needs,
    the file its output goes to."""

    name: str
    port: int
    pid: int
    headers: dict[str, str] = field(default_factory=dict)
    log: Path | None = None

    def health(self) -> dict[str, Any]:
        """Its ``/health`` answer (empty when it has none)."""
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            conn.request("GET", "/health")
            answer = conn.getresponse()
            body = answer.read()
            conn.close()
            found: dict[str, Any] = json.loads(body) if answer.status == 200 else {}
            return found
        except (OSError, ValueError):
            return {}

    def cpu_seconds(self) -> float:
        """CPU seconds of the process and its children (``--workers``), user and system."""
        import psutil

        process = psutil.Process(self.pid)
        return sum(_cpu_seconds(p) for p in [process, *process.children(recursive=True)])

    def rss(self) -> int:
        import psutil

        process = psutil.Process(self.pid)
        return sum(int(p.memory_info().rss) for p in [process, *process.children(recursive=True)])


def _cpu_seconds(process: Any) -> float:
    """A process's CPU time, every thread's, user and system: read from its CPU clock to the
    nanosecond where the system has one (``clock_getcpuclockid``, Linux), else psutil's clock ticks
    (hundredths of a second, too coarse for a few milliseconds a request over a few calls)."""
    clock = _cpu_clock(process.pid)
    if clock is not None:
        with contextlib.suppress(OSError):
            return time.clock_gettime(clock)
    times = process.cpu_times()
    return float(times.user + times.system)


def _cpu_clock(pid: int) -> int | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    found = ctypes.c_int()
    libc = ctypes.CDLL(None)
    return found.value if libc.clock_getcpuclockid(pid, ctypes.byref(found)) == 0 else None


# -- processes --------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _env() -> dict[str, str]:
    env = os.environ.copy()
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


@contextmanager
def _process(
    command: list[str], *, env: dict[str, str], ready: Callable[[], bool], wait: float, log_path: Path
) -> Iterator[int]:
    """``command`` running, its output in ``log_path`` (kept to say why a call failed)."""
    with log_path.open("w+b") as log:
        process = subprocess.Popen(command, stdout=log, stderr=log, env=env, cwd=tempfile.gettempdir())
        try:
            deadline = time.monotonic() + wait
            while not ready():
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read().decode(errors="replace")[-2000:]
                    raise RuntimeError(f"{command[0]} did not start: {tail}")
                time.sleep(0.2)
            yield process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _answers(port: int, path: str = "/health") -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", path)
        ok = conn.getresponse().status < 500
        conn.close()
        return ok
    except OSError:
        return False


@contextmanager
def _upstream(workdir: Path, delay: float = 0.0) -> Iterator[Front]:
    """The local provider; ``delay``: seconds it waits before each answer, as a model takes its time."""
    port = _free_port()
    command = [sys.executable, "-m", "contextwindow", "serve", "--port", str(port), "--model", MODEL]
    command += ["--delay", str(delay)] if delay else []
    log = workdir / f"serve-{port}.log"
    with _process(command, env=_env(), ready=lambda: _answers(port), wait=60, log_path=log) as pid:
        yield Front("direct", port, pid, log=log)


@contextmanager
def _contextwindow_proxy(
    upstream: Front, workdir: Path, *options: str, name: str = "contextwindow proxy"
) -> Iterator[Front]:
    """``contextwindow proxy`` in front of ``upstream``, its ledger a new SQLite file in ``workdir``,
    with ``options`` (``--no-guard``, ``--cache-mb N``)."""
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "contextwindow",
        "proxy",
        "--upstream",
        f"http://127.0.0.1:{upstream.port}",
    ]
    command += ["--port", str(port), "--store", str(workdir / f"proxy-{port}.sqlite"), "--quiet", *options]
    log = workdir / f"proxy-{port}.log"
    with _process(command, env=_env(), ready=lambda: _answers(port), wait=60, log_path=log) as pid:
        yield Front(name, port, pid, {"x-api-key": "k"}, log=log)


def _litellm_bin(venv: Path) -> Path | None:
    found = venv / "bin" / "litellm"
    if not found.exists():
        return None
    check = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import litellm.proxy.proxy_server, fastapi, backoff"],
        capture_output=True,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONPATH": ""},
        check=False,
    )
    return found if check.returncode == 0 else None


@contextmanager
def _litellm_proxy(upstream: Front, binary: Path, workdir: Path) -> Iterator[Front]:
    port = _free_port()
    config = workdir / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: anthropic/{MODEL}\n"
        f"      api_base: http://127.0.0.1:{upstream.port}\n"
        "      api_key: k\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"LITELLM_MASTER_KEY": LITELLM_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR"}
    command = [str(binary), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
    log = workdir / "litellm.log"
    ready = lambda: _answers(port, "/health/liveliness")  # noqa: E731
    with _process(command, env=env, ready=ready, wait=240, log_path=log) as pid:
        yield Front("LiteLLM proxy", port, pid, {"x-api-key": LITELLM_KEY}, log=log)


def setup(venv: Path) -> int:
    """Make ``venv`` and install LiteLLM's proxy in it (see the module docstring)."""
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    if subprocess.run([*pip, "litellm[proxy]"], check=False).returncode == 0:
        return 0
    print("litellm[proxy] does not resolve; installing litellm and its proxy requirements one by one")
    subprocess.run([*pip, "litellm"], check=True)
    listed = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m\n"
            "for r in m.distribution('litellm').requires or []:\n"
            "    if \"extra == 'proxy'\" in r: print(r.split(';')[0].strip())",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    for requirement in listed.stdout.split():
        name = requirement.split("==")[0]
        if subprocess.run([*pip, requirement], check=False).returncode != 0:
            subprocess.run([*pip, name], check=False)  # an exact pin the index lacks: its newest release
    return 0


# -- the agent --------------------------------------------------------------------------------------


def _user(conversation: str, i: int) -> dict[str, str]:
    words = " ".join(f"{conversation}w{i}x{j}" for j in range(60))
    return {"role": "user", "content": f"step {i} of {conversation}: {words}"}


def _history(conversation: str, messages: int) -> list[dict[str, str]]:
    turns: list[dict[str, str]] = []
    for i in range(messages - 1):
        turns.append(
            _user(conversation, i)
            if i % 2 == 0
            else {"role": "assistant", "content": f"done {i} " + "ok " * 30}
        )
    turns.append(_user(conversation, messages))
    return turns


FAILURES: list[str] = []
"""Each failed call: the front, the status (or the client's exception) and the start of the body."""
_failures_lock = threading.Lock()


class _Agent:
    """One conversation over one keep-alive connection: each call resends the whole history."""

    def __init__(self, front: Front, history: list[dict[str, str]]) -> None:
        self.front = front
        self.history = history
        self.conn = http.client.HTTPConnection("127.0.0.1", front.port, timeout=120)

    def call(self) -> tuple[bool, float]:
        body = json.dumps({"model": MODEL, "max_tokens": 32, "messages": self.history}).encode()
        started = time.perf_counter()
        try:
            self.conn.request(
                "POST",
                "/v1/messages",
                body=body,
                headers={"content-type": "application/json", **self.front.headers},
            )
            response = self.conn.getresponse()
            data = response.read()
            ok = response.status == 200
            failure = "" if ok else f"{response.status} {data[:300].decode(errors='replace')}"
        except OSError as failed:
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.front.port, timeout=120)
            ok, data, failure = False, b"", f"client: {failed!r}"
        if failure:
            with _failures_lock:
                FAILURES.append(f"{self.front.name} (history of {len(self.history)} messages): {failure}")
        took = time.perf_counter() - started
        text = json.loads(data)["content"][0]["text"] if ok else "(error)"
        self.history += [{"role": "assistant", "content": text}, _user("next", len(self.history))]
        return ok, took

    def close(self) -> None:
        self.conn.close()


# -- 1. CPU per request -----------------------------------------------------------------------------


ROUNDS = 4
"""Rounds the measured calls of each history size are split into (see :func:`_cpu_per_request`)."""


def _cpu_per_request(fronts: list[Front], messages: int, turns: int) -> dict[str, tuple[float, float, int]]:
    """Each front's CPU ms per call, median latency ms and errors over ``turns`` calls of a
    conversation of ``messages`` to start, after two warm-up calls.

    The fronts take turns: the calls are split into :data:`ROUNDS` rounds, each front making one
    round's calls in turn (each round opening on the next front), and a front's CPU per call is the
    median over its rounds, so a passing disturbance of the shared machine lands in one round of one
    front rather than in a whole cell."""
    agents = [_Agent(front, _history(f"c{messages}{front.port}", messages)) for front in fronts]
    per_round = max(1, turns // ROUNDS)
    cpu: dict[str, list[float]] = {front.name: [] for front in fronts}
    results: dict[str, list[tuple[bool, float]]] = {front.name: [] for front in fronts}
    try:
        for agent in agents:
            for _ in range(2):
                agent.call()
        for round_index in range(ROUNDS):
            for agent in agents[round_index % len(agents) :] + agents[: round_index % len(agents)]:
                before = agent.front.cpu_seconds()
                results[agent.front.name] += [agent.call() for _ in range(per_round)]
                cpu[agent.front.name].append((agent.front.cpu_seconds() - before) * 1000 / per_round)
    finally:
        for agent in agents:
            agent.close()
    return {
        name: (
            statistics.median(cpu[name]),
            statistics.median(t for _, t in results[name]) * 1000,
            sum(not ok for ok, _ in results[name]),
        )
        for name in cpu
    }


# -- 2. throughput ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Throughput:
    rps: float
    calls: int
    errors: int
    cpu_ms: dict[str, float]
    """CPU ms per call of each process on the path: the agent (this process), the upstream and the
    front (when it is not the upstream itself)."""


def _throughput(front: Front, clients: int, sizes: Sizes, upstream: Front | None = None) -> Throughput:
    """Requests/s, requests, errors and CPU per call for ``clients`` concurrent conversations (10
    messages to start); ``upstream``: the process behind ``front``, whose CPU counts too."""
    stop_at = time.monotonic() + sizes.throughput_seconds
    done: list[bool] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        agent = _Agent(front, _history(f"t{clients}x{index}p{front.port}", 10))
        try:
            for _ in range(sizes.throughput_turns):
                if time.monotonic() > stop_at:
                    break
                ok, _ = agent.call()
                with lock:
                    done.append(ok)
        finally:
            agent.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    path = {"upstream": upstream or front, **({"front": front} if upstream is not None else {})}
    cpu_before = {name: p.cpu_seconds() for name, p in path.items()}
    agent_before = time.process_time()
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    calls = max(1, len(done))
    cpu = {"agent": (time.process_time() - agent_before) * 1000 / calls}
    cpu |= {name: (p.cpu_seconds() - cpu_before[name]) * 1000 / calls for name, p in path.items()}
    return Throughput(len(done) / elapsed, len(done), done.count(False), cpu)


# -- 3. RSS -----------------------------------------------------------------------------------------


def _rss(front: Front, conversations: int) -> tuple[float, float, float, int]:
    """RSS in MiB before, half-way and after ``conversations`` conversations of three calls each
    (eight at a time), and the errors."""
    mib = 1024 * 1024
    warm = _Agent(front, _history(f"rwarm{front.port}", 4))
    for _ in range(3):  # what the first request loads (tokenizers, the ledger's schema) is not growth
        warm.call()
    warm.close()
    start = front.rss() / mib
    halfway = [start]
    errors = [0]
    lock = threading.Lock()
    next_index = [0]

    def worker() -> None:
        while True:
            with lock:
                index = next_index[0]
                next_index[0] += 1
            if index >= conversations:
                return
            agent = _Agent(front, _history(f"r{index}p{front.port}", 4))
            try:
                for _ in range(3):
                    ok, _ = agent.call()
                    if not ok:
                        with lock:
                            errors[0] += 1
            finally:
                agent.close()
            if index == conversations // 2:
                halfway[0] = front.rss() / mib

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return start, halfway[0], front.rss() / mib, errors[0]


# -- 4. where the proxy's CPU goes (cProfile) ------------------------------------------------------


_AREAS = (
    ("contextwindow/server/", "server/ (HTTP, relaying, the transform)"),
    ("contextwindow/guard/", "guard/"),
    ("contextwindow/engine/", "engine/"),
    ("contextwindow/compile/", "compile/"),
    ("contextwindow/store/", "store/ (the ledger)"),
    ("contextwindow/pricing/", "pricing/ (estimates)"),
    ("contextwindow/formats/", "formats/ (wire parsing and rendering)"),
    ("contextwindow/", "rest of contextwindow"),
    ("json/", "json (parse, serialise)"),
    ("sqlite3", "sqlite3 (the ledger's C calls)"),
)


_WAITS = ("of 'select.epoll' objects", "of '_thread.lock' objects", "'send' of '_socket.socket'")
"""Waiting, not working: for the event loop, for another thread, for the GIL on a loopback send."""


def _area(filename: str, function: str) -> str:
    where = f"{filename}:{function}"
    return next((label for needle, label in _AREAS if needle in where), "HTTP stack and the rest")


def _profile(messages_sizes: tuple[int, ...] = (10, 100, 400), turns: int = 10) -> list[str]:
    """The guarded proxy in this process, its event loop and its worker threads under cProfile:
    own time per request by area, at each history size (the upstream, in its own thread, is not
    profiled; waits are left out). In one process the threads share the GIL, so the figures are
    relative: the separate-process figures of the other tables are the absolute ones."""
    import asyncio
    import cProfile
    import pstats

    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from benchmarks.proxy_parts import PROXY_DURABILITY
    from contextwindow.server import BackgroundServer
    from contextwindow.server import guarded as guarded_module
    from contextwindow.server.proxy import proxy_app
    from contextwindow.store import open_store
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()
    real_advance = guarded_module._advance
    loop_profile: list[cProfile.Profile] = []

    def profiled_advance(coro: Any, answer: Any, error: Any, then: Any) -> Any:
        # One step of the guard core, in its worker thread (server/guarded.py's _drive).
        profile = cProfile.Profile()
        profile.enable()
        try:
            return real_advance(coro, answer, error, then)
        finally:
            profile.disable()
            with lock:
                profiles.append(profile)

    async def toggle(request: Request) -> Response:
        if request.path_params["switch"] == "on":
            loop_profile.append(cProfile.Profile())
            loop_profile[-1].enable()
        else:
            loop_profile[-1].disable()
        await asyncio.sleep(0)
        return Response(b"")

    rows: dict[int, dict[str, float]] = {}
    guarded_module._advance = profiled_advance
    try:
        with (
            tempfile.TemporaryDirectory() as tmp,
            LocalServer(LocalModel(LocalSettings(default_model=MODEL))) as up,
        ):
            transform = guarded_module.GuardTransform(
                open_store(str(Path(tmp) / "p.sqlite"), durability=PROXY_DURABILITY)
            )
            app = proxy_app(up.url, transform=transform)
            app.router.routes.insert(0, Route("/__profile/{switch}", toggle, methods=["GET"]))
            with BackgroundServer(app) as proxy:
                for messages in messages_sizes:
                    agent = _Agent(Front("profiled", proxy.port, os.getpid(), {"x-api-key": "k"}), [])
                    agent.history = _history(f"p{messages}", messages)
                    for _ in range(2):
                        agent.call()
                    profiles.clear()
                    agent.conn.request("GET", "/__profile/on")
                    agent.conn.getresponse().read()
                    for _ in range(turns):
                        agent.call()
                    agent.conn.request("GET", "/__profile/off")
                    agent.conn.getresponse().read()
                    agent.close()
                    stats = pstats.Stats(loop_profile[-1])
                    for profile in profiles:
                        stats.add(profile)
                    by_area: dict[str, float] = {}
                    for (filename, _, function), row in stats.stats.items():  # type: ignore[attr-defined]
                        if any(wait in function for wait in _WAITS):
                            continue
                        by_area[_area(filename, function)] = (
                            by_area.get(_area(filename, function), 0.0) + row[2]
                        )
                    rows[messages] = {k: v * 1000 / turns for k, v in by_area.items()}
    finally:
        guarded_module._advance = real_advance
    labels = [label for _, label in _AREAS] + ["HTTP stack and the rest"]
    lines = [
        "| own CPU per request (ms), by area | "
        + " | ".join(f"~{m} messages" for m in messages_sizes)
        + " |",
        "| --- | " + " | ".join("---:" for _ in messages_sizes) + " |",
    ]
    for label in labels:
        lines.append(
            f"| {label} | " + " | ".join(f"{rows[m].get(label, 0.0):.2f}" for m in messages_sizes) + " |"
        )
    return lines


# -- the run ----------------------------------------------------------------------------------------


def _cpu_table(
    fronts: list[Front], names: list[str], turns: int, cell: Callable[..., str]
) -> tuple[list[str], dict[int, dict[str, float]]]:
    lines = [
        "### CPU per request (the process in front), median latency",
        "",
        "| history | " + " | ".join(names) + " | contextwindow / LiteLLM CPU |",
        "| --- | " + " | ".join("---" for _ in names) + " | ---: |",
    ]
    cpus: dict[int, dict[str, float]] = {}
    for front in fronts:
        _warm(front)
    for messages in HISTORIES:
        rows: dict[str, str] = {}
        cpus[messages] = {}
        measured = _cpu_per_request(fronts, messages, turns)
        for front in fronts:
            cpu, latency, errors = measured[front.name]
            cpus[messages][front.name] = cpu
            rows[front.name] = f"{cpu:.1f} ms CPU, {latency:.1f} ms" + (
                f", {errors} errors" if errors else ""
            )
        got = cpus[messages]
        ratio = f"{got[GUARDED] / got[LITELLM]:.2f}" if LITELLM in got else "—"
        lines.append(
            f"| ~{messages} messages | " + " | ".join(cell(n, rows) for n in names) + f" | {ratio} |"
        )
    return lines, cpus


def _parts_table(cpus: dict[int, dict[str, float]], turns: int) -> list[str]:
    """The guarded proxy's CPU per request split into the guard core's, compile's within it, and
    the rest, the proxy's own: the guarded proxy serving in this process, each part's thread CPU
    (:func:`benchmarks.proxy_parts.in_situ`)."""
    from benchmarks.proxy_parts import in_situ

    lines = [
        "### The guarded proxy's CPU per request in parts (ms)",
        "",
        "The guarded proxy serving in the benchmark's process, the upstream in its own: *server* is the "
        "process's CPU less the agent thread's; *guard core* the thread CPU of its steps (matching, the "
        "ledger's reads and writes, compiling, rendering, recording the reply); *compile* "
        "`SessionCompiler.compile` within them; *pricing* `Estimator.request` within them (whole requests "
        "priced: the agent's request as written, for `x-contextwindow-tokens-in`, is most of it); the *proxy's own* is the rest: HTTP in and out (uvicorn, "
        "the upstream client), the body parsed and the compiled one serialised, routing, relaying, the hand-offs to "
        "worker threads. The separate-process CPU of the table above is beside it, and LiteLLM's.",
        "",
        "| history | server | guard core | … of which compile | … of which pricing | proxy's own "
        "| pass-through proxy (process) | LiteLLM proxy (process) | compile / server | own / LiteLLM |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for messages in HISTORIES:
        got = cpus[messages]
        parts = in_situ(messages, max(turns, 20))
        own = parts["server"] - parts["core"]
        litellm = got.get(LITELLM)
        lines.append(
            f"| ~{messages} messages | {parts['server']:.1f} | {parts['core']:.1f} | {parts['compile']:.1f} | "
            f"{parts['pricing']:.1f} | {own:.1f} | {got.get(PASSTHROUGH, float('nan')):.1f} | "
            + (f"{litellm:.1f}" if litellm else "—")
            + f" | {parts['compile'] / parts['server']:.0%} | "
            + (f"{own / litellm:.2f}" if litellm else "—")
            + " |"
        )
    return lines


def _warm(front: Front, connections: int = 1) -> None:
    """One call on each of ``connections`` connections at once, so that what a fresh process loads on
    its first request (the tokenizers' tables, a few seconds under load) is not counted as
    throughput; with several workers, several connections reach each of them."""

    def call(index: int) -> None:
        agent = _Agent(front, _history(f"warm{index}p{front.port}", 4))
        agent.call()
        agent.close()

    threads = [threading.Thread(target=call, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _throughput_table(
    fronts: list[Front],
    names: list[str],
    sizes: Sizes,
    cell: Callable[..., str],
    title: str,
    *,
    cpu_bound: bool = True,
) -> list[str]:
    lines = [
        f"### Throughput, {title} (each conversation: 10 messages to start, up to {sizes.throughput_turns} "
        f"calls, at most {sizes.throughput_seconds:g} s)",
        "",
        "| concurrent conversations | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    upstream = fronts[0]  # direct: the upstream itself
    bounds = [
        "",
        "CPU per call on the path (ms: the agent, the upstream, the front)"
        + (
            ", and the throughput the cores allow it beside direct when every process is CPU-bound on "
            "them (direct's CPU per call over the path's; the measured ratio cannot pass it by much):"
            if cpu_bound
            else ":"
        ),
        "",
        "| concurrent conversations | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for clients in (20, 50):
        rows, costs = {}, {}
        direct: Throughput | None = None
        for front in fronts:
            got = _throughput(front, clients, sizes, None if front is upstream else upstream)
            direct = got if front is upstream else direct
            relative = f" ({got.rps / direct.rps:.2f}× direct)" if front is not upstream and direct else ""
            rows[front.name] = f"{got.rps:.1f} req/s{relative}, {got.calls} calls" + (
                f", {got.errors} errors" if got.errors else ""
            )
            total = sum(got.cpu_ms.values())
            bound = (
                f", bound {sum(direct.cpu_ms.values()) / total:.2f}×"
                if cpu_bound and direct and front is not upstream
                else ""
            )
            costs[front.name] = " + ".join(f"{v:.1f}" for v in got.cpu_ms.values()) + f" = {total:.1f}{bound}"
        lines.append(f"| {clients} | " + " | ".join(cell(n, rows) for n in names) + " |")
        bounds.append(f"| {clients} | " + " | ".join(cell(n, costs) for n in names) + " |")
    return lines + bounds


def _rss_table(
    fronts: list[Front], names: list[str], conversations: int, cell: Callable[..., str]
) -> list[str]:
    lines = [
        f"### RSS over {conversations:,} conversations (three calls each, eight at a time)",
        "",
        "| | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    rows = {}
    held = {}
    for front in fronts:
        start, half, end, errors = _rss(front, conversations)
        rows[front.name] = f"{start:.0f} → {half:.0f} → {end:.0f} MiB" + (
            f", {errors} errors" if errors else ""
        )
        health = front.health()
        if "conversations" in health:
            held[front.name] = (
                f"{health['conversations']:,} held, {health['conversation_bytes'] / MIB:.1f} of "
                f"{health['conversation_capacity_bytes'] / MIB:.0f} MiB, {health['conversations_evicted']:,} evicted"
            )
    lines.append("| start → half-way → end | " + " | ".join(cell(n, rows) for n in names) + " |")
    lines.append(
        "| conversations in memory at the end (`/health`) | "
        + " | ".join(held.get(n, "") for n in names)
        + " |"
    )
    return lines


def _failures(fronts: list[Front]) -> list[str]:
    """Every failed call, and the lines of the fronts' logs that say why (no traceback is printed
    for an expected fault, so a warning line is the whole story)."""
    if not FAILURES:
        return []
    lines = ["", "### Failed calls", "", *(f"- {failure}" for failure in FAILURES[:20])]
    for front in fronts:
        if front.log is None or not front.log.exists():
            continue
        said = [
            line
            for line in front.log.read_text(errors="replace").splitlines()
            if any(word in line.lower() for word in ("error", "warning", "upstream", "traceback"))
        ]
        if said:
            lines += ["", f"{front.name} said:", "", "```", *said[-15:], "```"]
    return lines


HISTORIES = (10, 100, 400)
GUARDED = "contextwindow proxy"
PASSTHROUGH = "contextwindow pass-through"
BOUNDED = "contextwindow proxy --cache-mb 4"
WORKERS = "contextwindow proxy --workers 2"
LITELLM = "LiteLLM proxy"
MIB = 1024 * 1024
SLOW_UPSTREAM = 1.0
"""Seconds the slow upstream takes to answer: a short reply of a real model."""


def run(sizes: Sizes, venv: Path) -> str:
    binary = _litellm_bin(venv)
    not_measured = (
        None
        if binary is not None
        else f"not measured: no LiteLLM proxy environment at {venv} (run `python -m benchmarks.proxy --setup`)"
    )
    sections = [
        f"Local provider (`contextwindow serve`) as the upstream; every server its own process on 127.0.0.1 "
        f"({os.cpu_count()} cores, shared with the clients and anything else running). The agent sends "
        f"Anthropic Messages for `{MODEL}` over keep-alive HTTP, its whole history on every call. "
        f"CPU is the process in front of the upstream (for direct: the upstream itself). "
        f"*contextwindow pass-through* is `contextwindow proxy --no-guard`: the relaying alone.",
        "",
    ]
    FAILURES.clear()
    with tempfile.TemporaryDirectory() as kept, ExitStack() as stack:
        tmp = Path(kept)
        upstream = stack.enter_context(_upstream(tmp))
        guarded = stack.enter_context(_contextwindow_proxy(upstream, tmp))
        passthrough = stack.enter_context(_contextwindow_proxy(upstream, tmp, "--no-guard", name=PASSTHROUGH))
        fronts = [upstream, guarded, passthrough]
        if binary is not None:
            try:
                fronts.append(stack.enter_context(_litellm_proxy(upstream, binary, tmp)))
            except RuntimeError as failed:
                not_measured = f"not measured: LiteLLM's proxy did not start ({str(failed)[-300:]!r})"
        names = ["direct", GUARDED, PASSTHROUGH, LITELLM]

        def cell(front_name: str, rows: dict[str, str]) -> str:
            return rows.get(front_name, not_measured or "not measured")

        lines, cpus = _cpu_table(fronts, names, sizes.turns, cell)
        lines += ["", *_parts_table(cpus, sizes.turns)]
        workers = stack.enter_context(_contextwindow_proxy(upstream, tmp, "--workers", "2", name=WORKERS))
        _warm(workers, connections=8)
        tp_fronts, tp_names = [*fronts[:2], workers, *fronts[2:]], [*names[:2], WORKERS, *names[2:]]
        lines += ["", *_throughput_table(tp_fronts, tp_names, sizes, cell, "upstream answering at once")]
        bounded = stack.enter_context(_contextwindow_proxy(upstream, tmp, "--cache-mb", "4", name=BOUNDED))
        rss_fronts = [f for f in fronts if f.name != PASSTHROUGH]
        rss_fronts.insert(2, bounded)
        rss_names = ["direct", GUARDED, BOUNDED, LITELLM]
        lines += ["", *_rss_table(rss_fronts, rss_names, sizes.conversations, cell)]
        stack.close()  # the first upstream and its fronts stop before the slow one starts
        all_fronts = [*fronts, workers, bounded]
        slow = stack.enter_context(_upstream(tmp, delay=SLOW_UPSTREAM))
        slow_fronts = [slow, stack.enter_context(_contextwindow_proxy(slow, tmp))]
        slow_fronts.append(
            stack.enter_context(_contextwindow_proxy(slow, tmp, "--no-guard", name=PASSTHROUGH))
        )
        for front in slow_fronts:
            _warm(front)
        lines += [
            "",
            *_throughput_table(
                slow_fronts,
                ["direct", GUARDED, PASSTHROUGH],
                sizes,
                cell,
                f"upstream answering in {SLOW_UPSTREAM:g} s (`serve --delay {SLOW_UPSTREAM:g}`)",
                cpu_bound=False,
            ),
        ]
        lines += _failures([*all_fronts, *slow_fronts])
    return "\n".join([*sections, *lines])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.proxy", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--setup", action="store_true", help="install LiteLLM's proxy in --litellm-venv, then exit"
    )
    parser.add_argument("--litellm-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--conversations", type=int, default=Sizes.conversations)
    parser.add_argument("--quick", action="store_true", help="fewer calls and shorter throughput runs")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="only where the proxy's CPU goes, by area (cProfile, in process)",
    )
    args = parser.parse_args([] if argv is None else argv)
    if args.setup:
        raise SystemExit(setup(args.litellm_venv))
    if args.profile:
        print("\n".join(_profile()))
        return
    sizes = Sizes(conversations=args.conversations)
    if args.quick:
        sizes = Sizes(turns=20, conversations=args.conversations, throughput_seconds=10.0, throughput_turns=4)
    table = run(sizes, args.litellm_venv)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "proxy.md").write_text(table + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
