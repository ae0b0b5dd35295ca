"""Pricing speed: MB/s of exact counting and of the rule on each kind, and pricing's share of a call.

Run from the repo root::

    PYTHONPATH=src TIKTOKEN_CACHE_DIR=/work/shared/tokenizers python -m benchmarks.pricing_speed

Each kind's held-out text (about 1 MB, in chunks of 300–6,000 characters as blocks arrive) is
priced whole by each counter; the median of 5 runs is reported, the counters taking turns within
each run so that load on the shared machine hits them alike. Counters: the default for ``gpt-4o``
(exact: tiktoken ``o200k_base``), the rule (``exact=False``), the Claude rule, DeepSeek's exact
``tokenizer.json``, LangChain's ``count_tokens_approximately``, ``chars/4``.

Per agent call: every block is priced once, when it is admitted, so a call pays for what was
appended since the previous one. On the real Claude Code sessions (``_claude_sessions``: each
appended round is what one call added), the time to price each round exactly (o200k) and by the
rule, against the real wall time of the call that followed it (the log's timestamps: from the last
entry before the call to the call's first reply entry).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from benchmarks import _claude_sessions as sessions
from benchmarks import _corpus, _languages
from benchmarks._paths import TOKENIZERS
from contextwindow.pricing import Estimator

RESULTS = Path(__file__).resolve().parent / "results" / "pricing_speed.md"
KINDS = ("prose", "code", "numbered-code", "json", "markdown", "chinese", "russian", "mixed")


def _mbps_interleaved(
    counters: dict[str, Callable[[str], float]], texts: list[str], size: int, runs: int = 5
) -> dict[str, float]:
    """MB/s per counter, median of ``runs``; the counters take turns within each run."""
    times: dict[str, list[float]] = {name: [] for name in counters}
    for _ in range(runs):
        for name, fn in counters.items():
            start = time.perf_counter()
            for t in texts:
                fn(t)
            times[name].append(time.perf_counter() - start)
    return {name: size / statistics.median(ts) / 1e6 for name, ts in times.items()}


def _counters() -> dict[str, Callable[[str], float]]:
    counters: dict[str, Callable[[str], float]] = {
        "exact o200k (default gpt-4o)": Estimator("gpt-4o").raw_text,
        "rule o200k (exact=False)": Estimator("gpt-4o", exact=False).raw_text,
        "rule claude": Estimator("claude-sonnet-4-5").raw_text,
    }
    if (TOKENIZERS / "deepseek" / "tokenizer.json").is_file():
        deepseek = Estimator("deepseek-chat")
        if deepseek.exact:
            counters["exact deepseek tokenizer.json"] = deepseek.raw_text
    try:
        from langchain_core.messages import HumanMessage
        from langchain_core.messages.utils import count_tokens_approximately

        counters["langchain approx"] = lambda t: count_tokens_approximately([HumanMessage(content=t)])
    except ImportError:
        pass
    counters["chars/4"] = lambda t: len(t) / 4
    return counters


def speed_table() -> str:
    chunks = _corpus.chunks("holdout", per_kind=400)
    languages = _languages.chunks("holdout", per_language=40)
    counters = _counters()
    lines = [
        "## Pricing speed (MB/s of UTF-8, median of 5)",
        "",
        "| kind | MB | " + " | ".join(counters) + " |",
        "|---" * (len(counters) + 2) + "|",
    ]
    groups: list[tuple[str, list[str]]] = [(k, [c.text for c in chunks if c.kind == k]) for k in KINDS]
    groups.append((f"{len(_languages.LANGUAGES)} languages (held-out)", [c.text for c in languages]))
    for kind, texts in groups:
        size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
        speeds = _mbps_interleaved(counters, texts, size)
        cells = " | ".join(f"{v:,.1f}" for v in speeds.values())
        lines.append(f"| {kind} | {size / 1e6:.2f} | {cells} |")
    return "\n".join(lines) + "\n"


def _call_seconds() -> dict[tuple[str, int], float]:
    """(file, line of the call's first reply entry) -> seconds from the entry before it."""
    out: dict[tuple[str, int], float] = {}
    for path in sorted(sessions.ROOT.rglob("*.jsonl")):
        previous: datetime | None = None
        seen: set[str] = set()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            try:
                entry = json.loads(line)
                stamp = datetime.fromisoformat(entry["timestamp"].replace("Z", "+00:00"))
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            message = entry.get("message") if entry.get("type") == "assistant" else None
            if isinstance(message, dict) and message.get("id") and message["id"] not in seen:
                seen.add(message["id"])
                if previous is not None:
                    out[(str(path.relative_to(sessions.ROOT)), number)] = (stamp - previous).total_seconds()
            previous = stamp
    return out


def call_table() -> str:
    rounds = [r for r in sessions.rounds("fit") + sessions.rounds("holdout")]
    seconds = _call_seconds()
    estimators = {
        "exact o200k (gpt-4o default)": Estimator("gpt-4o"),
        "rule (claude)": Estimator("claude-sonnet-4-5"),
    }
    lines = [
        "### Pricing's share of an agent call (real Claude Code sessions)",
        "",
        f"{len(rounds)} appended rounds (what one call adds); each priced once, as at admission, with"
        " `Estimator.messages`; wall time of the call that followed, from the log's timestamps.",
        "",
        "| pricer | median ms / call | p95 ms / call | max ms / call | share of the call's wall time (median / p95) |",
        "|---|---|---|---|---|",
    ]
    for name, est in estimators.items():
        costs, shares = [], []
        for r in rounds:
            start = time.perf_counter()
            est.messages(r.messages)
            spent = time.perf_counter() - start
            costs.append(spent * 1000)
            wall = seconds.get((str(r.source), r.lines[1]))
            if wall and wall > 0:
                shares.append(spent / wall)
        ordered = sorted(costs)
        share_cell = (
            f"{statistics.median(shares):.4%} / {sorted(shares)[int(0.95 * len(shares))]:.4%} ({len(shares)} calls)"
            if shares
            else "–"
        )
        lines.append(
            f"| {name} | {statistics.median(costs):.2f} | {ordered[int(0.95 * len(ordered))]:.2f} | "
            f"{ordered[-1]:.2f} | {share_cell} |"
        )
    if seconds:
        walls = sorted(seconds.values())
        lines += [
            "",
            f"Real call wall time: median {statistics.median(walls):.1f} s over {len(walls)} calls.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    table = speed_table() + "\n" + call_table()
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
