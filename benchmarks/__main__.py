"""Run every benchmark module's ``main()`` in turn: ``python -m benchmarks``.

Modules are found by listing ``benchmarks/*.py``; private modules (``_name.py``) and fitting scripts
(``fit_*.py``) are skipped. Benchmarks print their tables and write ``benchmarks/results/<name>.md``;
they never fail on a timing.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

__all__ = ["discover", "main"]


def discover() -> list[str]:
    """The benchmark module names, in file-name order."""
    here = Path(__file__).parent
    return [
        p.stem
        for p in sorted(here.glob("*.py"))
        if not p.stem.startswith("_") and not p.stem.startswith("fit_")
    ]


def main() -> int:
    for name in discover():
        module = importlib.import_module(f"benchmarks.{name}")
        run = getattr(module, "main", None)
        if run is None:
            print(f"benchmarks.{name}: no main(), skipped", file=sys.stderr)
            continue
        print(f"\n## benchmarks.{name}\n", flush=True)
        run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
