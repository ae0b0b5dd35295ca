"""Property-based fuzzing of every public boundary: typed errors only, refusals leave the store as it was.

Bounded in time: each boundary gets a fixed number of examples (a few seconds); the long run is
``benchmarks/fuzz.py``. See ``tests/fuzzing.py`` for the inputs and how outcomes are judged.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzing import BOUNDARIES, Boundary, outcome, seeded_store

FUZZ = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


class TestEveryBoundary:
    @pytest.mark.parametrize("boundary", BOUNDARIES, ids=[b.name for b in BOUNDARIES])
    def test_raises_only_typed_errors_and_a_refusal_changes_no_store(self, boundary: Boundary) -> None:
        store = seeded_store()

        @FUZZ
        @given(st.data())
        def check(data: st.DataObject) -> None:
            value: Any = data.draw(boundary.values)
            result, raised = outcome(boundary, value, store)
            assert result in ("accepted", "typed"), f"{boundary.name}: {result} ({raised}) on {value!r:.300}"

        check()

    @pytest.mark.parametrize(
        "boundary",
        [b for b in BOUNDARIES if b.poisoned is not None],
        ids=[b.name for b in BOUNDARIES if b.poisoned is not None],
    )
    def test_refuses_every_planted_defect(self, boundary: Boundary) -> None:
        store = seeded_store()
        assert boundary.poisoned is not None

        @FUZZ
        @given(st.data())
        def check(data: st.DataObject) -> None:
            value: Any = data.draw(boundary.poisoned)  # type: ignore[arg-type]
            result, raised = outcome(boundary, value, store)
            assert result == "typed", f"{boundary.name}: {result} ({raised}) on {value!r:.300}"

        check()
