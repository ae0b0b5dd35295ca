"""How long ``import contextwindow`` takes, against ``import httpx`` measured in the same run.

The claim under test: importing the package costs no more than importing httpx (which the SDKs bring
in anyway), because the top level loads only the values, errors and models and every other layer on
first use. Each run is a fresh interpreter timing its own import with ``time.perf_counter`` (startup
excluded); the subjects are interleaved run by run so that load on the machine hits them alike, and
the median is reported with its ratio to httpx.

Subjects:

- ``peer: import httpx``: the reference.
- ``import contextwindow``: this tree.
- ``import contextwindow (before)``: another source tree, with ``--before SRC`` (for example a
  worktree of an older commit: ``git worktree add /tmp/before <commit>``, then ``--before
  /tmp/before/src``).
- ``… + first use of Engine, open_store, count_tokens``: what a program that runs the engine pays in
  all, for context; not part of the claim.

For each contextwindow subject one extra run under ``python -X importtime`` lists the modules with
the largest own import time, and a scan of ``sys.modules`` lists which of the modules that ``import
contextwindow`` must not load were loaded.

Run: ``python -m benchmarks.import_time [--runs N] [--before SRC] [--top N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["HEAVY", "Subject", "main"]

RESULTS = Path(__file__).parent / "results" / "import_time.md"
SRC = Path(__file__).resolve().parents[1] / "src"

HEAVY = (
    "http.server",
    "socketserver",
    "anthropic",
    "openai",
    "matplotlib",
    "PIL",
    "contextwindow.testing",
    "contextwindow.replay",
    "langchain",
    "langchain_core",
    "langgraph",
    "pydantic_ai",
    "agents",
    "litellm",
    "contextwindow.integrations",
)
"""Modules ``import contextwindow`` must not load: servers, SDKs, agent frameworks, plotting, imaging,
the local provider, the framework adapters and the replay tooling load on first use of the layer
that needs them (``tests/test_public_api.py``
checks this list)."""

_PROBE = """
import json, sys, time
t = time.perf_counter()
{statement}
seconds = time.perf_counter() - t
heavy = sorted(h for h in {heavy!r} if h in sys.modules)
print(json.dumps({{"seconds": seconds, "modules": len(sys.modules), "heavy": heavy}}))
"""


@dataclass(frozen=True, kw_only=True)
class Subject:
    """One thing to import: a label, the statement, and the source tree it is imported from."""

    label: str
    statement: str
    src: Path | None = None
    """Put first on ``PYTHONPATH``; ``None`` for a peer installed in the environment."""

    def env(self) -> dict[str, str]:
        """The child's environment: this one, with ``PYTHONPATH`` pointing at the subject's tree."""
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if self.src is not None:
            env["PYTHONPATH"] = str(self.src)
        return env

    def run(self) -> dict[str, object]:
        """One fresh interpreter importing the subject: seconds, modules loaded, heavy ones loaded."""
        code = _PROBE.format(statement=self.statement, heavy=HEAVY)
        out = subprocess.run(
            [sys.executable, "-c", code], env=self.env(), capture_output=True, text=True, check=True
        )
        result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
        return result

    def heaviest(self, top: int) -> list[tuple[str, int]]:
        """The ``top`` modules with the largest own import time (µs), from ``-X importtime``."""
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", self.statement],
            env=self.env(),
            capture_output=True,
            text=True,
            check=True,
        )
        rows: list[tuple[str, int]] = []
        for line in out.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            own, _, name = line.removeprefix("import time:").split("|")
            rows.append((name.strip(), int(own)))
        return sorted(rows, key=lambda row: -row[1])[:top]


def _subjects(before: Path | None) -> list[Subject]:
    subjects = [
        Subject(label="peer: import httpx", statement="import httpx"),
        Subject(label="import contextwindow", statement="import contextwindow", src=SRC),
    ]
    if before is not None:
        subjects.append(
            Subject(label="import contextwindow (before)", statement="import contextwindow", src=before)
        )
    subjects.append(
        Subject(
            label="… + first use of Engine, open_store, count_tokens",
            statement="import contextwindow\ncontextwindow.Engine, contextwindow.open_store, contextwindow.count_tokens",
            src=SRC,
        )
    )
    return subjects


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="interleaved runs per subject (median reported)")
    parser.add_argument("--before", type=Path, help="another source tree to compare (its src/ folder)")
    parser.add_argument("--top", type=int, default=8, help="how many of the heaviest modules to list")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    subjects = _subjects(args.before)
    runs: dict[str, list[dict[str, object]]] = {s.label: [] for s in subjects}
    for _ in range(args.runs):
        for subject in subjects:  # interleaved: each round runs every subject once
            runs[subject.label].append(subject.run())

    def median_ms(label: str) -> float:
        return statistics.median(float(str(r["seconds"])) for r in runs[label]) * 1000

    peer = median_ms(subjects[0].label)
    lines = [
        f"Median of {args.runs} interleaved runs, each a fresh interpreter timing its own import "
        f"(startup excluded); Python {sys.version.split()[0]}.",
        "",
        "| subject | import (ms) | × httpx | modules loaded | heavy modules loaded |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for subject in subjects:
        last = runs[subject.label][-1]
        heavy = last["heavy"]
        assert isinstance(heavy, list)
        ms = median_ms(subject.label)
        lines.append(
            f"| {subject.label} | {ms:.1f} | {ms / peer:.2f} | {last['modules']} | {', '.join(heavy) or 'none'} |"
        )
    for subject in subjects:
        if subject.src is None or "first use" in subject.label:
            continue
        lines += [
            "",
            f"Heaviest modules of `{subject.label}` (own import time, one `-X importtime` run):",
            "",
        ]
        lines += [f"- `{name}`: {us / 1000:.1f} ms" for name, us in subject.heaviest(args.top)]
    table = "\n".join(lines)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(f"# import_time\n\n{table}\n")
    print(table)
    return table


if __name__ == "__main__":
    main()
