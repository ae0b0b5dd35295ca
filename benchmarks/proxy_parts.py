"""The guarded proxy's CPU per request in parts: what is the guard core's, what is compile's, and
what is the proxy's own.

``benchmarks/proxy.py`` measures the whole process in front of the upstream. Here the guard core the
proxy drives (:class:`~contextwindow.server.guarded.GuardTransform`'s ``GuardCore`` on a SQLite
ledger) is run in this process, one thread, on the same agent (Anthropic Messages, the whole
history resent, ~10/~100/~400 messages, two messages more each call), with no HTTP at all; each
part is timed with ``time.thread_time`` (CPU, not wall clock) and the median per call is printed:

- *JSON of the agent's body*: ``json.loads`` of the body as it comes (what the proxy parses);
- *guard core, request*: matching the conversation in the ledger, appending what the call adds,
  compiling and rendering the body to send;
- *of which compile*: ``SessionCompiler.compile`` (the compile walk, the archives and watermark it
  records), measured inside the step above;
- *JSON of the compiled body*: what goes upstream, written as the proxy writes it
  (:func:`contextwindow.server.codec.dumps`);
- *guard core, reply*: recording the reply in the ledger.

The proxy's own CPU is then the process's CPU per request (``benchmarks/proxy.py``) less the guard
core's; ``benchmarks/proxy.py`` prints that table, using :func:`core_parts`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MODEL = "claude-haiku-4-5"
PARTS = (
    ("json_in", "JSON of the agent's body (parse)"),
    ("request", "guard core, request (match, append, compile, render)"),
    ("compile", "… of which compile (SessionCompiler.compile)"),
    ("json_out", "JSON of the compiled body (serialise)"),
    ("reply", "guard core, reply (recorded in the ledger)"),
)


@dataclass
class _Clock:
    """Thread CPU spent inside one wrapped function, not counting its re-entries twice."""

    spent: float = 0.0
    depth: int = 0


@contextmanager
def _timed(owner: Any, name: str, clock: _Clock) -> Iterator[None]:
    real: Callable[..., Any] | None = getattr(owner, name, None)
    if real is None:  # renamed since: reported as not measured
        yield
        return

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        clock.depth += 1
        started = time.thread_time()
        try:
            return real(*args, **kwargs)
        finally:
            clock.depth -= 1
            if clock.depth == 0:
                clock.spent += time.thread_time() - started

    setattr(owner, name, wrapper)
    try:
        yield
    finally:
        setattr(owner, name, real)


def _user(conversation: str, i: int) -> dict[str, str]:
    words = " ".join(f"{conversation}w{i}x{j}" for j in range(60))
    return {"role": "user", "content": f"step {i} of {conversation}: {words}"}


def _history(conversation: str, messages: int) -> list[dict[str, str]]:
    """The same history as ``benchmarks/proxy.py``'s agent."""
    turns = [
        _user(conversation, i) if i % 2 == 0 else {"role": "assistant", "content": f"done {i} " + "ok " * 30}
        for i in range(messages - 1)
    ]
    return [*turns, _user(conversation, messages)]


PROXY_DURABILITY = "normal"
"""The ledger's durability as ``contextwindow proxy`` opens it by default (``--durability``)."""


def _as_is(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Answered:
    """What the core is handed back as the upstream's answer: a success (its body is not read)."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()


def core_parts(messages: int, calls: int) -> dict[str, float]:
    """Median thread-CPU ms per call of each part (:data:`PARTS`) after two warm-up calls."""
    from contextwindow.compile import SessionCompiler
    from contextwindow.guard.replies import anthropic_reply
    from contextwindow.server import guarded
    from contextwindow.server.codec import dumps
    from contextwindow.store import open_store

    rows: list[dict[str, float]] = []
    clock = _Clock()
    with tempfile.TemporaryDirectory() as tmp, _timed(SessionCompiler, "compile", clock):
        store = open_store(str(Path(tmp) / "parts.sqlite"), durability=PROXY_DURABILITY)
        core = guarded.GuardTransform(store)._core("anthropic", None, "tbench", None)
        history = _history(f"parts{messages}", messages)
        for call in range(calls + 2):
            raw = json.dumps({"model": MODEL, "max_tokens": 32, "messages": history}).encode()
            clock.spent = 0.0
            t0 = time.thread_time()
            body = json.loads(raw)
            t1 = time.thread_time()
            request = core.request(body)
            _, step = guarded._advance(request, None, None, _as_is)
            t2 = time.thread_time()
            sent = dumps(step.body)  # as the proxy writes it
            t3 = time.thread_time()
            _, exchange = guarded._advance(request, _Answered(), None, _as_is)
            text = f"answer {call}"
            reply = anthropic_reply(
                {
                    "id": f"msg_{call}",
                    "type": "message",
                    "role": "assistant",
                    "model": MODEL,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": len(sent) // 4, "output_tokens": 4},
                }
            )
            t4 = time.thread_time()
            exchange.finish(reply)
            t5 = time.thread_time()
            if call >= 2:
                rows.append(
                    {
                        "json_in": t1 - t0,
                        "request": t2 - t1,
                        "compile": clock.spent,
                        "json_out": t3 - t2,
                        "reply": t5 - t4,
                    }
                )
            history = [*history, {"role": "assistant", "content": text}, _user("next", len(history))]
        store.close()
    return {key: statistics.median(row[key] for row in rows) * 1000 for key, _ in PARTS}


def in_situ(messages: int, calls: int) -> dict[str, float]:
    """The guarded proxy serving in this process (the upstream in its own): CPU ms per call of the
    whole server (this process less the agent's thread), of the guard core's steps, and within them
    of compile and of ``Estimator.request`` (whole requests priced: the agent's request as written,
    for ``x-contextwindow-tokens-in``, is most of it), thread CPU inside each, averaged over
    ``calls`` after two warm-up calls."""
    from benchmarks.proxy import Front, _Agent, _upstream
    from contextwindow.compile import SessionCompiler
    from contextwindow.guard import _core
    from contextwindow.pricing import Estimator
    from contextwindow.server import BackgroundServer, guarded
    from contextwindow.server.proxy import proxy_app
    from contextwindow.store import open_store

    # One clock for the core's steps and the reply's recording: the proxy records a reply read whole
    # in the same worker-thread step as the core's last one, a streamed one on its own.
    core, compiling, pricing = _Clock(), _Clock(), _Clock()
    with (
        tempfile.TemporaryDirectory() as tmp,
        _upstream(Path(tmp)) as upstream,
        _timed(guarded, "_advance", core),
        _timed(_core.Exchange, "finish", core),
        _timed(SessionCompiler, "compile", compiling),
        _timed(Estimator, "request", pricing),
    ):
        transform = guarded.GuardTransform(
            open_store(str(Path(tmp) / "in-situ.sqlite"), durability=PROXY_DURABILITY)
        )
        app = proxy_app(f"http://127.0.0.1:{upstream.port}", transform=transform)
        with BackgroundServer(app) as proxy:
            agent = _Agent(
                Front("in situ", proxy.port, 0, {"x-api-key": "k"}), _history(f"situ{messages}", messages)
            )
            for _ in range(2):
                agent.call()
            for clock in (core, compiling, pricing):
                clock.spent = 0.0
            process, own = time.process_time(), time.thread_time()
            for _ in range(calls):
                agent.call()
            agent_cpu = time.thread_time() - own
            server = time.process_time() - process - agent_cpu
            agent.close()
        transform.store.close()
    per_call = 1000 / calls
    return {
        "server": server * per_call,
        "core": core.spent * per_call,
        "compile": compiling.spent * per_call,
        "pricing": pricing.spent * per_call,
    }


def table(sizes: tuple[int, ...] = (10, 100, 400), calls: int = 20) -> list[str]:
    measured = {m: core_parts(m, calls) for m in sizes}
    lines = [
        "| thread CPU per call (ms, median) | " + " | ".join(f"~{m} messages" for m in sizes) + " |",
        "| --- | " + " | ".join("---:" for _ in sizes) + " |",
    ]
    for key, label in PARTS:
        lines.append(f"| {label} | " + " | ".join(f"{measured[m][key]:.2f}" for m in sizes) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.proxy_parts", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="10 calls per size (else 20)")
    args = parser.parse_args([] if argv is None else argv)
    print("\n".join(table(calls=10 if args.quick else 20)))


if __name__ == "__main__":
    main(sys.argv[1:])
