"""``contextwindow proxy`` scaled out: 4 workers on one PostgreSQL store, 200 conversations at once.

An upstream that takes a fixed time to answer (the local provider with ``delay``, in its own
process, bounded by nothing but its connections) is called by 200 agent loops at once, each
resending its whole history for ``TURNS`` turns, spread over 4 tenants (API keys): once directly,
once through ``contextwindow proxy --workers 4`` on one PostgreSQL store (``$CONTEXTWINDOW_TEST_POSTGRES_URL``;
``make bench`` starts one as root, ``. .ci/postgres.sh && start_postgres``; without it, one SQLite
file, said in the table). Figures: calls per second, each call's latency (p50, p99) and the latency
the proxy adds to the direct call's at the same percentile; then the ledger read back: one session
per conversation (the warm-up calls left out), under its tenant, holding its history exactly once and in order (nothing lost,
duplicated or crossed into another conversation).

Prints a markdown table and writes ``benchmarks/results/proxy_scale.md``. Never fails on a timing.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks._paths import RESULTS, ROOT

CONVERSATIONS = 200
TURNS = 5
WORKERS = 4
TENANTS = 4
DELAY = 0.25
"""Seconds the upstream takes for every call."""
MODEL = "claude-haiku-4-5"

_UPSTREAM = """
import sys
from contextwindow.server import ServerLimits, bind, run
from contextwindow.server.local import local_app
from contextwindow.testing import LocalModel, LocalSettings
sock = bind("127.0.0.1", 0)
print(sock.getsockname()[1], flush=True)
limits = ServerLimits(max_concurrency=2048, max_connections=4096)
run(local_app(LocalModel(LocalSettings(delay_seconds=float(sys.argv[1]), window=200_000)), limits), sock)
"""


@contextmanager
def _process(args: list[str], env: dict[str, str]) -> Iterator[str]:
    """A server process; yields the first line it prints (its port, or its 'on http://…' line)."""
    process = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT
    )
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@contextmanager
def _store() -> Iterator[tuple[str, str]]:
    """A fresh ledger: a new PostgreSQL database when one is available, else a SQLite file."""
    url = os.environ.get("CONTEXTWINDOW_TEST_POSTGRES_URL")
    if not url:
        with tempfile.TemporaryDirectory() as tmp:
            yield (
                str(Path(tmp) / "proxy.sqlite"),
                "one SQLite file (no PostgreSQL: $CONTEXTWINDOW_TEST_POSTGRES_URL unset)",
            )
        return
    import psycopg

    name = f"cw_scale_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base, _, query = url.partition("?")
    try:
        yield base.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else ""), "PostgreSQL"
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _key(n: int) -> str:
    return f"sk-bench-tenant-{n % TENANTS}"


async def _agents(url: str) -> tuple[float, list[float], int, dict[int, list[dict[str, str]]]]:
    """Every conversation at once: seconds in all, each call's seconds, failures, the histories."""
    latencies: list[float] = []
    failures = 0
    histories: dict[int, list[dict[str, str]]] = {}
    limits = httpx.Limits(max_connections=CONVERSATIONS + 16, max_keepalive_connections=CONVERSATIONS + 16)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def conversation(n: int) -> None:
            nonlocal failures
            history = histories[n] = []
            for turn in range(TURNS):
                history.append(
                    {"role": "user", "content": f"conversation {n} turn {turn}: " + "context " * 60}
                )
                body = {"model": MODEL, "max_tokens": 64, "messages": history}
                started = time.monotonic()
                answered = await client.post("/v1/messages", json=body, headers={"x-api-key": _key(n)})
                latencies.append(time.monotonic() - started)
                if answered.status_code != 200:
                    failures += 1
                    history.pop()
                    return
                history.append({"role": "assistant", "content": answered.json()["content"][0]["text"]})

        async def warm_up(n: int) -> None:
            body = {
                "model": MODEL,
                "max_tokens": 8,
                "messages": [{"role": "user", "content": f"warm-up {n}"}],
            }
            await client.post("/v1/messages", json=body, headers={"x-api-key": "sk-bench-warm-up"})

        # Each process's first-use loading (tokenizers, profiles) is not what is measured.
        await asyncio.gather(*(warm_up(n) for n in range(4 * WORKERS)))
        started = time.monotonic()
        await asyncio.gather(*(conversation(n) for n in range(CONVERSATIONS)))
        return time.monotonic() - started, latencies, failures, histories


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def _audit(store: str, secret: str, histories: dict[int, list[dict[str, str]]]) -> dict[str, int]:
    """The ledger against what each agent holds: sessions missing, lost, duplicated or crossed."""
    from contextwindow.content import Text
    from contextwindow.server.tenants import Tenants
    from contextwindow.store import open_store

    tenants = Tenants(secret.encode())
    counts = {"sessions": 0, "missing": 0, "lost": 0, "duplicated": 0, "crossed": 0, "extra sessions": 0}
    with open_store(store) as ledger:
        sessions = ledger.sessions()
        by_first: dict[str, list[tuple[str, list[str]]]] = {}
        for sid in sessions:
            texts = [
                "".join(b.text for b in m.message.content if isinstance(b, Text))
                for m in ledger.session(sid).messages()
            ]
            by_first.setdefault(texts[0] if texts else "", []).append((sid, texts))
            counts["sessions"] += not (texts and texts[0].startswith("warm-up"))
        for n, history in histories.items():
            found = by_first.pop(history[0]["content"], [])
            if not found:
                counts["missing"] += 1
                continue
            counts["extra sessions"] += len(found) - 1
            sid, texts = found[0]
            wanted = [h["content"] for h in history]
            if not sid.startswith(tenants.of({"x-api-key": _key(n)}) + "/"):
                counts["crossed"] += 1
            if any(not t.startswith(f"conversation {n} ") for t in texts if t.startswith("conversation ")):
                counts["crossed"] += 1
            if len(texts) > len(wanted) or len(set(texts)) < len(texts):
                counts["duplicated"] += 1
            elif texts != wanted:
                counts["lost"] += 1
        counts["extra sessions"] += sum(len(v) for k, v in by_first.items() if not k.startswith("warm-up"))
    return counts


def main() -> None:
    py = sys.executable
    secret = secrets.token_hex(32)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "CONTEXTWINDOW_TENANT_SECRET": secret}
    with _store() as (store, kind), _process([py, "-c", _UPSTREAM, str(DELAY)], env) as port:
        upstream = f"http://127.0.0.1:{port}"
        direct_seconds, direct, direct_failures, _ = asyncio.run(_agents(upstream))
        proxy_args = [py, "-m", "contextwindow", "proxy", "--upstream", upstream, "--store", store]
        proxy_args += ["--workers", str(WORKERS), "--port", "0", "--quiet", "--max-concurrency", "1024"]
        with _process(proxy_args, env) as line:
            url = line.split(" on ", 1)[1].split()[0]
            time.sleep(1.0)  # every worker up
            proxy_seconds, proxied, proxy_failures, histories = asyncio.run(_agents(url))
        audit = _audit(store, secret, histories)
    calls = CONVERSATIONS * TURNS
    lines = [
        f"{CONVERSATIONS} conversations at once, {TURNS} turns each ({calls} calls), {TENANTS} tenants; "
        f"an upstream answering in {DELAY:g} s; `contextwindow proxy --workers {WORKERS}` on {kind}; "
        f"{os.cpu_count()} cores shared by the clients, the upstream, the proxy and the store.",
        "",
        "| | calls/s | p50 s | p99 s | failed |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| direct | {calls / direct_seconds:.1f} | {_pct(direct, 0.5):.3f} | {_pct(direct, 0.99):.3f} | {direct_failures} |",
        f"| proxy | {calls / proxy_seconds:.1f} | {_pct(proxied, 0.5):.3f} | {_pct(proxied, 0.99):.3f} | {proxy_failures} |",
        f"| added by the proxy | {calls / proxy_seconds / (calls / direct_seconds):.2f}× | "
        f"{_pct(proxied, 0.5) - _pct(direct, 0.5):+.3f} | {_pct(proxied, 0.99) - _pct(direct, 0.99):+.3f} | |",
        "",
        "| ledger | sessions | missing | lost | duplicated | crossed | extra sessions |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| read back | {audit['sessions']} | {audit['missing']} | {audit['lost']} | {audit['duplicated']} | "
        f"{audit['crossed']} | {audit['extra sessions']} |",
    ]
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "proxy_scale.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
