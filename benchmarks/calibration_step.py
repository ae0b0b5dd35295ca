"""What a step of the calibration multiplier costs the next compile.

While a conversation's calibrator converges (its first calls, then rarely), the multiplier the guard
compiles at moves between calls. Compile's memo keeps its prices raw and calibrates them again at the
new multiplier; before, a step cleared the memo and the compile was cold. Three variants of the same
session (text and tool rounds, :func:`benchmarks.compile.build`), interleaved call by call; each call
appends one message and compiles:

- **steady**: the multiplier never moves;
- **step**: the multiplier alternates 1.00 / 1.02 (a 2 % step each call), the memo calibrated again;
- **step, memo dropped**: the same steps with compile's memo dropped before each compile (what every
  step cost before raw prices were kept).

Run: ``PYTHONPATH=src python -m benchmarks.calibration_step [--quick]``. Prints markdown and writes
``benchmarks/results/calibration_step.md``. Never fails on a timing.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._paths import RESULTS
from benchmarks.compile import MODEL, PROSE, build
from contextwindow.compile import CompileCache, Policy, SessionCompiler
from contextwindow.content import Message
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
from contextwindow.store import open_store

SIZES = (400, 2_000)
VARIANTS = ("steady", "step", "step, memo dropped")


def measure(calls: int) -> dict[tuple[int, str], list[float]]:
    """CPU seconds per compile after one append, by (size, variant), interleaved."""
    profile = get_profile(MODEL)
    policy = Policy()
    est = Estimator(MODEL)
    samples: dict[tuple[int, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for size in SIZES:
            for variant in VARIANTS:
                path = Path(tmp) / f"{size}-{len(runs)}.db"
                build(path, messages=size, images=0)
                store = open_store(path)
                session = store.session("bench")
                compiler = SessionCompiler(session)
                compiler.compile(model=profile, policy=policy)
                runs.append((size, variant, store, session, compiler))
        for call in range(calls):
            multiplier = 1.02 if call % 2 == 0 else 1.0
            for size, variant, _, session, compiler in runs:
                message = Message.user(PROSE)
                session.append(message, block_prices=[est.raw_block(b) for b in message.content])
                if variant == "step, memo dropped":
                    compiler.cache = CompileCache()
                cpu = time.process_time()
                compiler.compile(
                    model=profile, policy=policy, multiplier=1.0 if variant == "steady" else multiplier
                )
                samples.setdefault((size, variant), []).append(time.process_time() - cpu)
        for _, _, store, _, _ in runs:
            store.close()
    return samples


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    calls = 16 if "--quick" in args else 60
    samples = measure(calls)
    lines = [
        "# A step of the calibration multiplier",
        "",
        f"CPU per compile after one append (ms), median / p95 over {calls} calls each, interleaved; "
        f"{MODEL}, default policy, a text and tool-round SQLite session.",
        "",
        "| history | steady | step (memo calibrated again) | step, memo dropped | dropped / step |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for size in SIZES:
        cells = []
        medians = []
        for variant in VARIANTS:
            values = samples[(size, variant)]
            medians.append(statistics.median(values))
            cells.append(f"{medians[-1] * 1000:.2f} / {_p95(values) * 1000:.2f}")
        lines.append(f"| ~{size} | {' | '.join(cells)} | {medians[2] / medians[1]:.1f}× |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "calibration_step.md").write_text(text)


if __name__ == "__main__":
    main()
