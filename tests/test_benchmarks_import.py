"""Every benchmark module imports: a benchmark is not run by the suite, but a rename must not break it."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

_BENCHMARKS = sorted(
    p.stem for p in (Path(__file__).parent.parent / "benchmarks").glob("*.py") if p.stem != "__main__"
)


class TestBenchmarks:
    @pytest.mark.parametrize("name", _BENCHMARKS)
    def test_the_module_imports(self, name: str) -> None:
        module = importlib.import_module(f"benchmarks.{name}")
        assert module.__name__ == f"benchmarks.{name}"
