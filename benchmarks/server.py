"""The HTTP stack under attack and under load: the old ``http.server`` front (before) against the new one.

Both servers are the local provider, each in its own process on 127.0.0.1: *before* is the package as
it was at commit ``fe226a6`` (stdlib ``http.server``, a thread per connection), checked out with
``git archive`` into a temporary directory; *after* is this checkout (uvicorn, ``contextwindow.server``).
Every loop is bounded in count and in time. Figures:

1. each attack of the issue that motivated the new stack, the answer, and whether the server still
   serves a well-formed request afterwards;
2. memory: RSS growth after 60 one-megabyte requests with distinct session headers, and after 60
   distinct one-megabyte texts (the count memo); peak RSS under 200 concurrent one-megabyte requests;
3. requests/s with 50 concurrent conversations (an agent loop each, 2k-token history), and the
   server's CPU time per request (on a loaded machine the wall-clock figures follow the load; the
   CPU time much less);
4. ``contextwindow proxy`` overhead per request (median, p95) against talking to the upstream directly,
   without and with the guard, and each front process's own CPU time per request;
5. naive agents (``anthropic`` and ``openai`` SDKs: Messages, Chat Completions, Responses with every
   other reply streamed, and Responses sending only new input with ``previous_response_id``) resending
   their whole history for 40 turns through the guarded proxy to a local provider that enforces 16,000
   tokens while the profile says 200,000.

Prints markdown tables and writes ``benchmarks/results/server.md``. Never fails on a timing.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._paths import RESULTS, ROOT

BEFORE_COMMIT = "fe226a6"
MODEL = "claude-haiku-4-5"
MIB = 1024 * 1024
READ_TIMEOUT = 2.0  # the after server's read timeout here (default 30 s), so slow attacks end quickly


@dataclass
class Server:
    name: str
    url: str
    port: int
    process: subprocess.Popen[bytes]
    stderr_path: Path

    def rss(self) -> int:
        import psutil

        return int(psutil.Process(self.process.pid).memory_info().rss)

    def threads(self) -> int:
        import psutil

        return int(psutil.Process(self.process.pid).num_threads())

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def _before_tree() -> Iterator[Path | None]:
    """The package at ``BEFORE_COMMIT`` in a temporary directory, or ``None`` when git cannot give it."""
    tmp = Path(tempfile.mkdtemp(prefix="cw-before-"))
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", BEFORE_COMMIT, "src"], capture_output=True, check=False
        )
        if archive.returncode != 0:
            yield None
            return
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
        yield tmp / "src"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


_AFTER = """
import sys
from contextwindow.server import ServerLimits
from contextwindow.testing import serve
serve("127.0.0.1", int(sys.argv[1]), window=int(sys.argv[2]) or None, usage=sys.argv[3], default_model=sys.argv[4],
      limits=ServerLimits(read_timeout=float(sys.argv[5]), inflight_body_bytes=int(sys.argv[7]) * 1024 * 1024),
      effective_window=int(sys.argv[6]) or None)
"""


@contextmanager
def _server(
    name: str,
    src: Path | None,
    *,
    usage: str = "per-call",
    window: int = 1_000_000,
    read_timeout: float = 30.0,
    effective_window: int | None = None,
    inflight_mib: int = 256,
) -> Iterator[Server]:
    port = _free_port()
    env = os.environ.copy()
    if src is not None:  # before: the old package first on the path
        env["PYTHONPATH"] = str(src)
        command = [sys.executable, "-m", "contextwindow.testing", "--port", str(port)]
        command += ["--window", str(window), "--usage", usage, "--model", MODEL]
    else:
        command = [sys.executable, "-c", _AFTER, str(port), str(window), usage, MODEL, str(read_timeout)]
        command += [str(effective_window or 0), str(inflight_mib)]
    err = Path(tempfile.mkstemp(prefix=f"cw-{name}-", suffix=".err")[1])
    with err.open("wb") as err_file:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=err_file, env=env, cwd=tempfile.gettempdir()
        )
        try:
            assert process.stdout is not None
            process.stdout.readline()  # the banner: listening
            yield Server(name, f"http://127.0.0.1:{port}", port, process, err)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            process.stdout.close() if process.stdout else None
    err.unlink(missing_ok=True)


# -- raw HTTP ---------------------------------------------------------------------------------------


def _body(text: str = "hi", *, model: str = MODEL, **extra: object) -> bytes:
    return json.dumps(
        {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": text}], **extra}
    ).encode()


def _head(path: str, length: str | None, content_type: str | None = "application/json") -> bytes:
    lines = [f"POST {path} HTTP/1.1", "host: 127.0.0.1"]
    if content_type:
        lines.append(f"content-type: {content_type}")
    if length is not None:
        lines.append(f"content-length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _raw(port: int, data: bytes, wait: float = 5.0) -> str:
    """What the server answers ``data`` with: ``"<status>"``, ``"closed, no reply"`` or ``"no reply in Ns"``."""
    started = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=wait) as conn:
            conn.sendall(data)
            reply = b""
            while b"\r\n" not in reply:
                chunk = conn.recv(4096)
                if not chunk:
                    return "closed, no reply"
                reply += chunk
            status = reply.split(b"\r\n", 1)[0].split()[1].decode()
            return f"{status} in {time.monotonic() - started:.1f} s"
    except TimeoutError:
        return f"no reply in {wait:.0f} s"
    except (ConnectionResetError, BrokenPipeError):
        return "connection reset"


def _serves(server: Server) -> bool:
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/v1/messages", body=_body(), headers={"content-type": "application/json"})
        ok = conn.getresponse().status == 200
        conn.close()
        return ok
    except OSError:
        return False


def _post(port: int, body: bytes, headers: dict[str, str] | None = None, path: str = "/v1/messages") -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, body=body, headers={"content-type": "application/json", **(headers or {})})
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


# -- 1. attacks -------------------------------------------------------------------------------------


def _slow_clients(server: Server) -> str:
    threads_before = server.threads()
    held = []
    for _ in range(50):
        conn = socket.create_connection(("127.0.0.1", server.port))
        conn.sendall(_head("/v1/messages", "1000") + b'{"model":')
        held.append(conn)
    time.sleep(0.5)
    grown = server.threads() - threads_before
    started = time.monotonic()
    fast = _serves(server)
    took = time.monotonic() - started
    for conn in held:
        conn.close()
    return f"{'served' if fast else 'NOT served'} in {took:.2f} s; +{grown} server threads"


def _disconnects(server: Server) -> str:
    before = server.stderr().count("Traceback")
    for _ in range(10):
        conn = socket.create_connection(("127.0.0.1", server.port))
        conn.sendall(_head("/v1/messages", str(len(_body("x" * 500_000)))) + _body("x" * 500_000)[:1000])
        conn.close()
    for _ in range(5):  # and ten clients leaving while their answer is written
        conn = socket.create_connection(("127.0.0.1", server.port))
        conn.sendall(_head("/v1/messages", str(len(_body("y" * 200_000)))) + _body("y" * 200_000))
        conn.close()
    time.sleep(1.0)
    tracebacks = server.stderr().count("Traceback") - before
    return f"{tracebacks} tracebacks printed"


ATTACKS: list[tuple[str, Callable[[Server], str]]] = [
    ("Content-Length: abc", lambda s: _raw(s.port, _head("/v1/messages", "abc") + _body())),
    ("Content-Length: -1", lambda s: _raw(s.port, _head("/v1/messages", "-1") + _body(), READ_TIMEOUT + 3)),
    ("Content-Length: 10^12 (header only)", lambda s: _raw(s.port, _head("/v1/messages", str(10**12)))),
    (
        "short body (1000 claimed, 9 sent)",
        lambda s: _raw(s.port, _head("/v1/messages", "1000") + b'{"model":', READ_TIMEOUT + 3),
    ),
    (
        "JSON nested 1,000 deep",
        lambda s: _raw(s.port, _head("/v1/messages", "2005") + b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}"),
    ),
    (
        "stream_options as a string",
        lambda s: _raw(
            s.port,
            (lambda b: _head("/v1/chat/completions", str(len(b))) + b)(
                _body(model="gpt-4o", stream=True, stream_options="yes")
            ),
        ),
    ),
    (
        "stream_options as a list",
        lambda s: _raw(
            s.port,
            (lambda b: _head("/v1/chat/completions", str(len(b))) + b)(
                _body(model="gpt-4o", stream=True, stream_options=[1])
            ),
        ),
    ),
    (
        "content-type: text/plain",
        lambda s: _raw(s.port, _head("/v1/messages", str(len(_body())), "text/plain") + _body()),
    ),
    ("no content-type", lambda s: _raw(s.port, _head("/v1/messages", str(len(_body())), None) + _body())),
    ("50 slow clients, then one fast", _slow_clients),
    ("15 clients leaving mid-request", _disconnects),
]


def _attacks(before: Path | None) -> list[str]:
    results: dict[str, dict[str, str]] = {}
    for name, src in (("before", before), ("after", None)):
        if name == "before" and src is None:
            continue
        with _server(name, src, read_timeout=READ_TIMEOUT) as server:
            for attack, run in ATTACKS:
                answer = run(server)
                results.setdefault(attack, {})[name] = (
                    f"{answer}; {'still serving' if _serves(server) else 'NOT serving'}"
                )
    lines = [
        "| attack | before (http.server, fe226a6) | after (uvicorn, contextwindow.server) |",
        "| --- | --- | --- |",
    ]
    for attack, _ in ATTACKS:
        row = results[attack]
        lines.append(f"| {attack} | {row.get('before', 'not measured')} | {row['after']} |")
    return lines


# -- 2. memory --------------------------------------------------------------------------------------


def _megabyte_text(i: int) -> str:
    return f"text {i} " + " ".join(f"w{(i * 7919 + k) % 50_000}" for k in range(160_000))[: MIB - 20]


def _peak_during(server: Server, work: Callable[[], list[int]]) -> tuple[int, list[int]]:
    peak = [server.rss()]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], server.rss())
            done.wait(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = work()
    finally:
        done.set()
        watcher.join()
    return peak[0], result


def _storm(port: int, bodies: list[bytes]) -> list[int]:
    """All ``bodies`` at once, one connection each: their statuses (0: the connection failed)."""
    statuses: list[int] = []

    def one(body: bytes) -> None:
        try:
            statuses.append(_post(port, body))
        except OSError:
            statuses.append(0)

    threads = [threading.Thread(target=one, args=(b,)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    return statuses


def _memory(before: Path | None) -> list[str]:
    texts = [_megabyte_text(i) for i in range(60)]
    rows: dict[str, dict[str, str]] = {}
    for name, src in (("before", before), ("after", None)):
        if name == "before" and src is None:
            continue
        with _server(name, src, usage="cumulative") as server:
            _serves(server)
            base = server.rss()
            for i in range(60):  # distinct sessions, the same 1 MB text: what per-session state keeps
                _post(server.port, _body(texts[0]), {"x-contextwindow-session": f"s{i}"})
            after_sessions = server.rss()
            for i in range(60):  # one session, distinct 1 MB texts: what the count memo keeps
                _post(server.port, _body(texts[i]), {"x-contextwindow-session": "memo"})
            after_memo = server.rss()
            rows.setdefault("sessions", {})[name] = f"+{(after_sessions - base) / MIB:.0f} MiB"
            rows.setdefault("memo", {})[name] = f"+{(after_memo - after_sessions) / MIB:.0f} MiB"
        with _server(name, src) as server:
            _serves(server)
            base = server.rss()
            bodies = [_body(texts[i % 60]) for i in range(200)]
            started = time.monotonic()
            peak, statuses = _peak_during(server, functools.partial(_storm, server.port, bodies))
            took = time.monotonic() - started
            counts = {code: statuses.count(code) for code in sorted(set(statuses))}
            rows.setdefault("storm", {})[name] = (
                f"peak {peak / MIB:.0f} MiB (+{(peak - base) / MIB:.0f}); {took:.0f} s; statuses {counts}"
            )
    with _server("bounded", None, inflight_mib=64) as server:
        _serves(server)
        base = server.rss()
        bodies = [_body(texts[i % 60]) for i in range(200)]
        started = time.monotonic()
        peak, statuses = _peak_during(server, functools.partial(_storm, server.port, bodies))
        counts = {code: statuses.count(code) for code in sorted(set(statuses))}
        rows["bounded"] = {
            "after": f"peak {peak / MIB:.0f} MiB (+{(peak - base) / MIB:.0f}); "
            f"{time.monotonic() - started:.0f} s; statuses {counts}"
        }
    lines = [
        "| memory | before (http.server, fe226a6) | after (uvicorn, contextwindow.server) |",
        "| --- | --- | --- |",
    ]
    labels = {
        "sessions": "RSS growth, 60 × 1 MB requests, distinct session headers (cumulative usage)",
        "memo": "RSS growth, 60 distinct 1 MB texts (count memo)",
        "storm": "200 concurrent 1 MB requests (256 MiB of bodies in flight, the default)",
        "bounded": "the same, bodies in flight bounded at 64 MiB",
    }
    for key, label in labels.items():
        before_cell = rows[key].get("before", "not measured" if key != "bounded" else "(no such bound)")
        lines.append(f"| {label} | {before_cell} | {rows[key]['after']} |")
    return lines


# -- 3. throughput ----------------------------------------------------------------------------------


def _history() -> list[dict[str, object]]:
    turns: list[dict[str, object]] = []
    for k in range(20):
        turns.append({"role": "user", "content": f"step {k}: " + " ".join(f"token{j}" for j in range(60))})
        turns.append({"role": "assistant", "content": f"done step {k}, " + "ok " * 30})
    return turns


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _conversations(
    server: Server, clients: int = 50, per_client: int = 20, seconds: float = 30.0
) -> tuple[int, float, float, int, float]:
    history = _history()
    stop_at = time.monotonic() + seconds
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def agent(index: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        for turn in range(per_client):
            if time.monotonic() > stop_at:
                break
            messages = [*history, {"role": "user", "content": f"agent {index} turn {turn}"}]
            body = json.dumps({"model": MODEL, "max_tokens": 32, "messages": messages}).encode()
            started = time.monotonic()
            try:
                conn.request(
                    "POST",
                    "/v1/messages",
                    body=body,
                    headers={"content-type": "application/json", "x-contextwindow-session": f"a{index}"},
                )
                response = conn.getresponse()
                response.read()
                ok = response.status == 200
            except OSError:
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
            with lock:
                latencies.append(time.monotonic() - started)
                errors[0] += 0 if ok else 1
        conn.close()

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(clients)]
    cpu = _cpu_seconds(server.process.pid)
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    cpu_ms = (_cpu_seconds(server.process.pid) - cpu) * 1000 / max(1, len(latencies))
    return len(latencies), len(latencies) / elapsed, statistics.median(latencies) * 1000, errors[0], cpu_ms


def _throughput(before: Path | None) -> list[str]:
    lines = [
        "| 50 concurrent conversations (20 turns each, 2k-token history) | requests | requests/s | median latency (ms) | errors | server CPU per request (ms) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, src in (
        ("before (http.server, fe226a6)", before),
        ("after (uvicorn, contextwindow.server)", None),
    ):
        if src is None and name.startswith("before"):
            lines.append(f"| {name} | not measured | | | | |")
            continue
        with _server("rps", src) as server:
            _serves(server)
            n, rps, median, errors, cpu_ms = _conversations(server)
        lines.append(f"| {name} | {n} | {rps:.0f} | {median:.0f} | {errors} | {cpu_ms:.2f} |")
    return lines


# -- 4. proxy overhead ------------------------------------------------------------------------------


@contextmanager
def _proxy(upstream: str, *, guard: bool, store: Path | None = None) -> Iterator[tuple[int, int]]:
    port = _free_port()
    command = [sys.executable, "-m", "contextwindow", "proxy", "--upstream", upstream, "--port", str(port)]
    command += ["--quiet", *(["--guard", "--store", str(store)] if guard and store else ["--no-guard"])]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=tempfile.gettempdir(),
    )
    try:
        assert process.stdout is not None
        process.stdout.readline()
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout:
            process.stdout.close()


def _latencies(port: int, body: bytes, n: int = 200, seconds: float = 30.0) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out: list[float] = []
    stop_at = time.monotonic() + seconds
    for _ in range(n):
        if time.monotonic() > stop_at:
            break
        started = time.perf_counter()
        conn.request(
            "POST", "/v1/messages", body=body, headers={"content-type": "application/json", "x-api-key": "k"}
        )
        response = conn.getresponse()
        response.read()
        out.append(time.perf_counter() - started)
    conn.close()
    return out


def _proxy_overhead() -> list[str]:
    small = _body("hello")
    streamed = _body("hello", stream=True)
    large = _body(_megabyte_text(1)[: 200 * 1024])
    lines = [
        "| request | direct median (ms) | direct p95 | proxy median | proxy p95 | guarded proxy median | guarded p95 "
        "| CPU per request (ms): upstream / proxy / guarded proxy |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    with tempfile.TemporaryDirectory() as tmp, _server("upstream", None) as upstream:
        _serves(upstream)
        with (
            _proxy(upstream.url, guard=False) as plain,
            _proxy(upstream.url, guard=True, store=Path(tmp) / "proxy.sqlite") as guarded,
        ):
            targets = [(upstream.port, upstream.process.pid), plain, guarded]
            for label, body in (
                ("small JSON", small),
                ("small SSE stream", streamed),
                ("200 KB body", large),
            ):
                columns: list[float] = []
                cpu: list[float] = []
                for port, pid in targets:
                    _latencies(port, body, 10)  # warm up
                    before = _cpu_seconds(pid)  # the process in front: its own work, not the upstream's
                    times = _latencies(port, body)
                    cpu.append((_cpu_seconds(pid) - before) * 1000 / len(times))
                    columns += [statistics.median(times) * 1000, statistics.quantiles(times, n=20)[-1] * 1000]
                lines.append(
                    f"| {label} | "
                    + " | ".join(f"{x:.2f}" for x in columns)
                    + " | "
                    + " / ".join(f"{x:.2f}" for x in cpu)
                    + " |"
                )
    return lines


# -- 5. naive agents through the guarded proxy -------------------------------------------------------


def _listing(turn: int) -> str:
    return "\n".join(
        f"src/pkg_{turn}/mod_{i}.py:{i * 7}: def handler_{turn}_{i}(request, ctx): ..." for i in range(120)
    )


_AGENTS = ("anthropic SDK", "openai SDK", "openai SDK, Responses", "openai SDK, Responses chained")
"""The naive agents: Messages, Chat Completions, Responses resending everything (every other reply
streamed), and Responses sending only the new input with ``previous_response_id``."""
_DIRECT = {
    "anthropic SDK": ("/v1/messages", MODEL, "max_tokens"),
    "openai SDK": ("/v1/chat/completions", "gpt-4o", "max_tokens"),
    "openai SDK, Responses": ("/v1/responses", "gpt-4o", "max_output_tokens"),
    "openai SDK, Responses chained": ("/v1/responses", "gpt-4o", "max_output_tokens"),
}
"""For the same history sent directly: the path, the model and the output bound's field."""
_HISTORY = {sdk: "input" if "Responses" in sdk else "messages" for sdk in _AGENTS}


def _responses_call(client: Any, sdk: str, history: list[Any], previous: str | None, turn: int) -> Any:
    """One Responses call: the whole history (streamed on odd turns), or only the new input after
    ``previous``."""
    if sdk.endswith("chained"):
        chained = {"previous_response_id": previous} if previous else {}
        return client.responses.create(model="gpt-4o", max_output_tokens=256, input=[history[-1]], **chained)
    if turn % 2:
        events = list(
            client.responses.create(model="gpt-4o", max_output_tokens=256, input=history, stream=True)
        )
        return events[-1].response
    return client.responses.create(model="gpt-4o", max_output_tokens=256, input=history)


def _naive_agents(turns: int = 40, enforced: int = 16_000) -> list[str]:
    import anthropic
    import openai

    from contextwindow.models import get_profile

    lines = [
        f"Local provider enforcing {enforced:,} tokens while the profile says "
        f"{get_profile(MODEL).context_window:,} (the proxy is not told); each agent resends its whole "
        "history every turn (a ~3,000-token tool listing per turn; the chained Responses agent sends only its "
        "new input, naming `previous_response_id`).",
        "",
        "| agent | turns | errors reaching the agent | largest prompt the upstream counted | same history sent directly |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    with (
        tempfile.TemporaryDirectory() as tmp,
        _server("enforcing", None, window=0, effective_window=enforced) as upstream,
        _proxy(upstream.url, guard=True, store=Path(tmp) / "proxy.sqlite") as (port, _),
    ):
        base = f"http://127.0.0.1:{port}"
        for sdk in _AGENTS:
            history: list[Any] = []
            previous: str | None = None
            errors, largest, direct = 0, 0, "accepted"
            started = time.monotonic()
            for turn in range(turns):
                if time.monotonic() - started > 300:
                    break
                history.append({"role": "user", "content": f"turn {turn}:\n{_listing(turn)}"})
                try:
                    if sdk == "anthropic":
                        with anthropic.Anthropic(base_url=base, api_key="k", max_retries=0) as client:
                            reply = client.messages.create(model=MODEL, max_tokens=256, messages=history)  # type: ignore[arg-type]
                        text, prompt = reply.content[0].text, reply.usage.input_tokens  # type: ignore[union-attr]
                    elif sdk == "openai":
                        with openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0) as client:
                            chat = client.chat.completions.create(
                                model="gpt-4o", max_tokens=256, messages=history
                            )  # type: ignore[arg-type]
                        text = chat.choices[0].message.content or ""
                        prompt = chat.usage.prompt_tokens if chat.usage else 0
                    else:
                        with openai.OpenAI(base_url=base + "/v1", api_key="k", max_retries=0) as client:
                            response = _responses_call(client, sdk, history, previous, turn)
                        previous = response.id
                        text, prompt = (
                            response.output_text,
                            response.usage.input_tokens if response.usage else 0,
                        )
                    largest = max(largest, prompt)
                    history.append({"role": "assistant", "content": text})
                except (anthropic.APIError, openai.APIError):
                    errors += 1
                    history.append({"role": "assistant", "content": "(error)"})
            path, model, key = _DIRECT[sdk]
            status = _post(
                upstream.port,
                json.dumps({"model": model, key: 256, _HISTORY[sdk]: history}).encode(),
                path=path,
            )
            direct = f"{status} ({'refused' if status >= 400 else 'accepted'})"
            lines.append(f"| {sdk} | {turn + 1} | {errors} | {largest:,} | {direct} |")
    return lines


def main() -> None:
    sections: list[str] = [
        f"Local provider over HTTP, each server in its own process on 127.0.0.1 ({os.cpu_count()} cores, "
        "shared with the clients). Before: the package at fe226a6 (stdlib http.server). After: this "
        f"checkout (uvicorn + contextwindow.server; default limits: 32 MiB body, 256 MiB of bodies in flight, "
        f"32 requests handled at once, 30 s read timeout, {READ_TIMEOUT:g} s for the attacks).",
        "",
    ]
    with _before_tree() as before:
        if before is None:
            sections.append(f"(git could not give {BEFORE_COMMIT}: the before column is not measured)\n")
        for title, part in (
            ("Attacks", lambda: _attacks(before)),
            ("Memory", lambda: _memory(before)),
            ("Throughput", lambda: _throughput(before)),
        ):
            sections += [f"### {title}", "", *part(), ""]
    sections += [
        "### Proxy overhead (200 sequential requests each, keep-alive; the local provider upstream)",
        "",
        *_proxy_overhead(),
        "",
        "### Naive agents through the guarded proxy",
        "",
        *_naive_agents(),
        "",
    ]
    table = "\n".join(sections)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "server.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
