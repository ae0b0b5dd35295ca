"""Compile speed and memory on a 10,000-message SQLite session, against LangChain's ``trim_messages``.

The session: prose, code and JSON tool results, and 1,000 screenshots of about 300 KB each (a real
PNG header with random bytes after it: the store sniffs the dimensions, the size is what the byte
budget reads). Measured in one run:

- cold compile: open the store, read the session, compile (claude-sonnet-4-5, default policy);
- incremental compile: append one message, compile again with the same ``SessionCompiler``;
- LangChain ``trim_messages(strategy="last", token_counter=count_tokens_approximately)`` over the
  same history (converted once, outside the timing), full and after one append (it has no
  incremental path);
- peak RSS of a compile + render whose inline media budget is 20 MB, in a fresh process, over
  sessions of 100 and 2,000 images, against the empty process (imports done).

Run: ``PYTHONPATH=src python -m benchmarks.compile`` from the repo root. Not a test; never fails.
``--against REV`` (a git revision, or a ``src`` directory) runs this tree's cold and incremental
compile beside that tree's on one session, alternating fresh processes, and prints the two side by
side (``--quick``: three rounds, not five); it writes ``benchmarks/results/compile_ab.md``.
"""

from __future__ import annotations

import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from PIL import Image as PILImage

from contextwindow.compile import Policy, SessionCompiler
from contextwindow.content import Image, Message, Text, ToolResult, ToolUse
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
from contextwindow.store import open_store

ROOT = Path(__file__).resolve().parents[1]

MODEL = "claude-sonnet-4-5"
RESULTS = Path(__file__).parent / "results" / "compile.md"
PROSE = "The deployment failed because the migration ran before the schema lock was released. "
CODE = (
    "def handler(event):\n    rows = [r for r in event['rows'] if r.get('ok')]\n    return {'n': len(rows)}\n"
)


def _png_header() -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (1280, 800), (30, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


def build(path: Path, *, messages: int, images: int, image_bytes: int = 300_000) -> None:
    """A session of ``messages`` messages, ``images`` of them tool results carrying a screenshot."""
    header = _png_header()
    est = Estimator(MODEL)
    every = max(1, messages // max(1, images)) if images else 0
    with open_store(path, durability="normal") as store:
        session = store.session("bench")
        n = 0
        shots = 0
        while n < messages:
            turn = n // 4
            if images and shots < images and n % every == 0 and n + 2 < messages:
                ref = session.attach(header + os.urandom(image_bytes - len(header)), "image/png")
                batch = [
                    Message.assistant(ToolUse(id=f"t{n}", name="screenshot", input={"turn": turn})),
                    Message.user(
                        ToolResult(tool_use_id=f"t{n}", content=(Text(text="screen"), Image(ref=ref)))
                    ),
                ]
                shots += 1
            else:
                kind = n % 4
                if kind == 0:
                    batch = [Message.user(PROSE * (1 + turn % 5))]
                elif kind == 1:
                    batch = [Message.assistant(f"Here is the fix:\n```python\n{CODE * (1 + turn % 3)}```")]
                elif kind == 2:
                    batch = [
                        Message.assistant(
                            ToolUse(id=f"t{n}", name="query", input={"sql": "select 1", "n": n})
                        )
                    ]
                else:
                    rows = [{"id": i, "name": f"row-{i}", "ok": i % 3 == 0} for i in range(5 + turn % 20)]
                    batch = [Message.user(ToolResult(tool_use_id=f"t{n - 1}", content=json.dumps(rows)))]
            for message in batch:
                session.append(message, block_prices=[est.raw_block(b) for b in message.content])
            n += len(batch)


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def measure_speed(path: Path) -> dict[str, float]:
    profile = get_profile(MODEL)
    policy = Policy()
    cold: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        with open_store(path) as store:
            compiler = SessionCompiler(store.session("bench"))
            out = compiler.compile(model=profile, policy=policy, system="You are a coding agent.")
        cold.append(time.perf_counter() - t0)
    incremental: list[float] = []
    sizes = []
    with open_store(path, durability="normal") as store:
        session = store.session("bench")
        compiler = SessionCompiler(session)
        compiler.compile(model=profile, policy=policy, system="You are a coding agent.")
        est = Estimator(profile)
        for i in range(20):
            message = Message.user(f"next step {i}: " + PROSE)
            session.append(message, block_prices=[est.raw_block(b) for b in message.content])
            t0 = time.perf_counter()
            out = compiler.compile(model=profile, policy=policy, system="You are a coding agent.")
            incremental.append(time.perf_counter() - t0)
            sizes.append(len(out.messages))
        history = [s.message for s in session.messages()]
    lc_full, lc_incr = measure_langchain(history, out.budget)
    return {
        "cold": _median_ms(cold),
        "incremental": _median_ms(incremental),
        "lc_full": lc_full,
        "lc_incremental": lc_incr,
        "messages_sent": statistics.median(sizes),
        "estimate": out.estimated_tokens,
    }


def _to_langchain(messages: list[Message]) -> list[object]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    out: list[object] = []
    for m in messages:
        texts = [b.text for b in m.content if isinstance(b, Text)]
        if m.role == "assistant":
            calls = [
                {"id": b.id, "name": b.name, "args": dict(b.input)}
                for b in m.content
                if isinstance(b, ToolUse)
            ]
            out.append(AIMessage(content="\n".join(texts), tool_calls=calls))
            continue
        results = [b for b in m.content if isinstance(b, ToolResult)]
        for r in results:
            if isinstance(r.content, str):
                content: object = r.content
            else:
                content = [
                    {"type": "text", "text": b.text}
                    if isinstance(b, Text)
                    else {"type": "image_url", "image_url": {"url": f"attachment://{b.ref.id}"}}  # type: ignore[union-attr]
                    for b in r.content
                ]
            out.append(ToolMessage(content=content, tool_call_id=r.tool_use_id))
        if texts:
            out.append(HumanMessage(content="\n".join(texts)))
    return out


def measure_langchain(history: list[Message], budget: int) -> tuple[float, float]:
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.messages.utils import count_tokens_approximately, trim_messages

    lc = [SystemMessage(content="You are a coding agent."), *_to_langchain(history)]

    def trim(msgs: list[object]) -> None:
        trim_messages(
            msgs,  # type: ignore[arg-type]
            max_tokens=budget,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on="human",
            include_system=True,
        )

    full: list[float] = []
    for _ in range(5):
        t0 = time.perf_counter()
        trim(lc)
        full.append(time.perf_counter() - t0)
    incr: list[float] = []
    for i in range(10):
        lc.append(HumanMessage(content=f"next step {i}: " + PROSE))
        t0 = time.perf_counter()
        trim(lc)
        incr.append(time.perf_counter() - t0)
    return _median_ms(full), _median_ms(incr)


_RSS_CHILD = r"""
import json, sys, resource
import psutil
from contextwindow.compile import Policy, SessionCompiler
from contextwindow.formats import render
from contextwindow.models import get_profile
from contextwindow.store import open_store

ROOT = Path(__file__).resolve().parents[1]
proc = psutil.Process()
empty = proc.memory_info().rss
path = sys.argv[1]
with open_store(path) as store:
    session = store.session("bench")
    policy = Policy(inline_media_bytes=20 * 1024 * 1024, max_inline_images=0, image_depth_tokens=0, recent_turns_full=10**6)
    out = SessionCompiler(session).compile(model=get_profile("claude-sonnet-4-5").with_(context_window=10_000_000, max_output_tokens=32_000), policy=policy)
    allowed = {r.id for r in out.inline_attachments}
    def load(ref):
        assert ref.id in allowed
        return session.read_attachment(ref)
    body = render(out.to_request(model="m"), "anthropic", load)
    payload = json.dumps(body)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"empty": empty, "peak": peak, "inline": len(allowed), "evicted": len(out.decisions.evicted), "payload": len(payload)}))
"""


def measure_rss(path: Path) -> dict[str, int]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parent.parent / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    done = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, str(path)], capture_output=True, text=True, env=env, check=True
    )
    data: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


_COMPILE_CHILD = (
    "import json, sys; from pathlib import Path; from benchmarks.compile import measure_speed; "
    "print(json.dumps(measure_speed(Path(sys.argv[1]))))"
)
_BUILD_CHILD = (
    "import sys; from pathlib import Path; from benchmarks.compile import build; "
    "build(Path(sys.argv[1]), messages=10_000, images=1_000)"
)


def tree_env(src: Path) -> dict[str, str]:
    """The environment of a child process that imports ``contextwindow`` from ``src`` (this tree's
    benchmarks beside it)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT)])}


@contextmanager
def source_tree(spec: str) -> Iterator[Path]:
    """The ``src`` directory ``spec`` names: a directory as it is, else a git revision of this
    repository exported (``git archive``) to a temporary directory for the duration."""
    if Path(spec).is_dir():
        yield Path(spec).resolve()
        return
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", spec, "src"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        yield Path(tmp) / "src"


def compile_against(other: Path, rounds: int = 3) -> dict[str, dict[str, list[float]]]:
    """:func:`measure_speed` of this tree and of ``other`` (a ``src`` directory) on one 10,000-message
    session with 1,000 images, in a fresh process each, alternating (the first to go alternates).
    Each tree builds the session in its own store (the same one, written at that tree's schema: an older
    library opens a newer store read-only)."""
    trees = {"this": ROOT / "src", "other": other}
    out: dict[str, dict[str, list[float]]] = {label: {} for label in trees}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {label: Path(tmp) / f"big-{label}.db" for label in trees}
        for label, path in paths.items():
            subprocess.run(
                [sys.executable, "-c", _BUILD_CHILD, str(path)],
                env=tree_env(trees[label]),
                cwd=ROOT,
                check=True,
            )
        for i in range(rounds):
            for label in ("this", "other") if i % 2 == 0 else ("other", "this"):
                done = subprocess.run(
                    [sys.executable, "-c", _COMPILE_CHILD, str(paths[label])],
                    env=tree_env(trees[label]),
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                )
                for key, value in json.loads(done.stdout.strip().splitlines()[-1]).items():
                    out[label].setdefault(key, []).append(value)
    return out


def ab_rows(speed: dict[str, dict[str, list[float]]]) -> list[str]:
    """The A/B table of :func:`compile_against`'s figures: cold and incremental, medians (ms), the
    ratio of the two trees and ``trim_messages``' against this tree's."""
    lines = [
        "| case | other | this | other / this | trim_messages / this | goal |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for case, peer, goal in (("cold", "lc_full", "≤ 150 ms"), ("incremental", "lc_incremental", "≥ 10×")):
        mine, theirs = statistics.median(speed["this"][case]), statistics.median(speed["other"][case])
        lc = statistics.median(speed["this"][peer] + speed["other"][peer])
        lines.append(
            f"| {case} | {theirs:.2f} | {mine:.2f} | {theirs / mine:.2f}× | {lc / mine:.1f}× | {goal} |"
        )
    return lines


def main_against(spec: str, rounds: int) -> None:
    """This tree's compile beside ``spec``'s (a revision or a ``src`` directory), in one run."""
    with source_tree(spec) as other:
        speed = compile_against(other, rounds)
    lines = [
        "# Compile, A/B",
        "",
        f"10,000-message SQLite session with 1,000 images, {MODEL}; this tree against `{spec}`, a fresh "
        f"process per tree and round, alternating; medians over {rounds} rounds (ms). LangChain "
        "`trim_messages` on the same history in the same processes.",
        "",
    ]
    lines += ab_rows(speed)
    table = "\n".join(lines) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    (RESULTS.parent / "compile_ab.md").write_text(table)
    print(table)


def main() -> None:
    args = sys.argv[1:]
    if "--against" in args:
        main_against(args[args.index("--against") + 1], rounds=3 if "--quick" in args else 5)
        return
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.db"
        t0 = time.perf_counter()
        build(big, messages=10_000, images=1_000)
        built = time.perf_counter() - t0
        speed = measure_speed(big)
        big.unlink()
        rss = {}
        for images in (100, 2_000):
            path = Path(tmp) / f"rss{images}.db"
            build(path, messages=max(400, images * 2 + 2), images=images)
            rss[images] = measure_rss(path)
            path.unlink()
    mb = 1024 * 1024
    lines = [
        "# Compile benchmark",
        "",
        f"10,000-message SQLite session (1,000 images of ~300 KB), {MODEL}, default policy; built in {built:.1f} s.",
        f"Median messages sent: {speed['messages_sent']:.0f}; estimate {speed['estimate']} tokens.",
        "",
        "| case | contextwindow (ms) | LangChain trim_messages (ms) | ratio | target |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| cold (open + read + compile) | {speed['cold']:.1f} | {speed['lc_full']:.1f} | {speed['lc_full'] / speed['cold']:.1f}× | ≤ 300 ms |",
        f"| incremental (after one append) | {speed['incremental']:.2f} | {speed['lc_incremental']:.1f} | {speed['lc_incremental'] / speed['incremental']:.0f}× | ≤ 10 ms, ≥ 10× |",
        "",
        "LangChain's column is `trim_messages` alone on messages already in memory (no store read).",
        "",
        "| images in session | inline | not inline | empty process (MB) | peak (MB) | peak − empty (MB) | target |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for images, data in rss.items():
        lines.append(
            f"| {images:,} | {data['inline']} | {data['evicted']} | {data['empty'] / mb:.0f} | {data['peak'] / mb:.0f} | "
            f"{(data['peak'] - data['empty']) / mb:.0f} | ≤ 20 + 64 |"
        )
    table = "\n".join(lines) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
