"""Throughput of the local provider's HTTP server on 20k-token requests (target: 200 requests/s).

The server runs in its own process (``python -m contextwindow.testing``); a bounded loop on
loopback: ``THREADS`` client threads, each with one keep-alive ``http.client``
connection, post Anthropic Messages requests of about 20,000 tokens (o200k_base) for ``SECONDS``
seconds. Two workloads, measured in the same run:

- ``agent loop``: every request resends the same 20k-token history plus a fresh short turn — what an
  agent's tool loop sends; the server's per-string count memo makes the repeated prefix cheap;
- ``unique``: every request is 20k tokens of text never seen before — the cold cost of counting.

Peer: a bare ``tiktoken`` encode of the same 20k-token text, single-threaded, as the floor of the
cold cost. Prints a markdown table and writes ``benchmarks/results/local_provider.md``.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

THREADS = 4
SECONDS = 5.0
TARGET_TOKENS = 20_000
MODEL = "claude-haiku-4-5"


def _words(seed: int) -> list[str]:
    rng = random.Random(seed)
    vocab = Path(__file__).read_text().split() + [f"w{i}" for i in range(2000)]
    return [rng.choice(vocab) for _ in range(16_000)]


def _history(seed: int) -> str:
    from contextwindow.models import get_profile
    from contextwindow.testing import tokenizer_for

    count = tokenizer_for(get_profile(MODEL)).count
    words = _words(seed)
    text = " ".join(words)
    while count(text) > TARGET_TOKENS:
        words = words[: int(len(words) * 0.97)]
        text = " ".join(words)
    return text


def _run(url: str, make_body: Callable[[int, int], bytes]) -> tuple[int, list[float], float]:
    host, port = url.removeprefix("http://").split(":")
    latencies: list[list[float]] = [[] for _ in range(THREADS)]
    stop_at = time.perf_counter() + SECONDS
    errors = [0]

    def worker(index: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        i = 0
        while time.perf_counter() < stop_at:
            body = make_body(index, i)
            start = time.perf_counter()
            conn.request("POST", "/v1/messages", body=body, headers={"content-type": "application/json"})
            response = conn.getresponse()
            response.read()
            latencies[index].append(time.perf_counter() - start)
            if response.status != 200:
                errors[0] += 1
            i += 1
        conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    flat = [x for per in latencies for x in per]
    return len(flat), flat, elapsed if not errors[0] else float("nan")


def main() -> None:
    from contextwindow.models import get_profile
    from contextwindow.testing import tokenizer_for

    tok = tokenizer_for(get_profile(MODEL))
    history = _history(1)
    history_tokens = tok.count(history)
    uniques = [_history(100 + k) for k in range(8)]

    def loop_body(thread: int, i: int) -> bytes:
        return json.dumps(
            {
                "model": MODEL,
                "max_tokens": 64,
                "messages": [
                    {"role": "user", "content": history},
                    {"role": "assistant", "content": "noted"},
                    {"role": "user", "content": f"turn {thread}-{i}: what next?"},
                ],
            }
        ).encode()

    def unique_body(thread: int, i: int) -> bytes:
        base = uniques[(thread * 7 + i) % len(uniques)]
        return json.dumps(
            {
                "model": MODEL,
                "max_tokens": 64,
                "messages": [{"role": "user", "content": f"{thread}.{i} {base}"}],
            }
        ).encode()

    rows = []
    # The server runs in its own process (as ``contextwindow serve`` does), so the client threads'
    # JSON encoding does not share its interpreter lock.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "contextwindow.testing",
        "--port",
        str(port),
        "--window",
        "200000",
    ]
    command += ["--model", MODEL]
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy()
    )
    try:
        assert server.stdout is not None
        server.stdout.readline()  # the banner: listening
        url = f"http://127.0.0.1:{port}"
        for name, make in (("agent loop (shared 20k prefix)", loop_body), ("unique 20k text", unique_body)):
            n, latencies, elapsed = _run(url, make)
            rows.append((name, n, n / elapsed, statistics.median(latencies) * 1000))
    finally:
        server.terminate()
        server.wait(timeout=10)
    import tiktoken

    enc = tiktoken.get_encoding("o200k_base")
    times = []
    for text in uniques:
        start = time.perf_counter()
        enc.encode_ordinary(text)
        times.append(time.perf_counter() - start)
    bare = statistics.median(times)
    lines = [
        f"Local provider HTTP server (own process, {os.cpu_count()} cores shared with the clients), {history_tokens:,}-token requests, {THREADS} client threads, "
        f"{SECONDS:.0f} s each, loopback, tokenizer {tok.name}. Target: 200 requests/s.",
        "",
        "| workload | requests | requests/s | median latency (ms) | vs target |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, n, rps, median in rows:
        lines.append(f"| {name} | {n} | {rps:.0f} | {median:.1f} | {rps / 200:.2f}× |")
    lines.append(
        f"| peer: bare tiktoken encode of 20k tokens (1 thread) | — | {1 / bare:.0f} | {bare * 1000:.1f} | {1 / bare / 200:.2f}× |"
    )
    table = "\n".join(lines)
    print(table)
    out = Path(__file__).parent / "results" / "local_provider.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table + "\n")


if __name__ == "__main__":
    main()
