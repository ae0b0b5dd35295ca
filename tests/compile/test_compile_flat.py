"""A compile after an append decides afresh only what is new: the units it walks do not grow with the
history, with or without media in it, and the request stays byte for byte a cold compile's."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compile_incremental import _append, _bytes, steps

from contextwindow.compile import CompiledRequest, Policy, SessionCompiler
from contextwindow.compile import walk as walk_module
from contextwindow.errors import OverBudget
from contextwindow.models import ModelProfile
from contextwindow.pricing import Estimator
from contextwindow.store import open_store

LARGE = ModelProfile(
    name="test-model", provider="other", context_window=400_000, max_output_tokens=500, tokenizer="unknown"
)


def _units_decided_after_an_append(history: int, monkeypatch: pytest.MonkeyPatch, *, shots: bool) -> int:
    """How many units the compile after one append decides afresh, on a session of ``history`` steps
    that all fit (the guard's case: a large window, no folding)."""
    est = Estimator(LARGE, preset="seed-store")
    with open_store(":memory:") as store:
        session = store.session("s")
        for n in range(history):
            kind = "shot" if shots and n % 25 == 0 else ("prose" if n % 2 else "reply")
            _append(session, est, (kind, 10), n)
        live = SessionCompiler(session, estimator=est)
        live.compile(model=LARGE, policy=Policy())
        _append(session, est, ("reply", 5), history)
        _append(session, est, ("prose", 5), history + 1)
        decided = 0
        take_next = walk_module._take_next

        def counted(*args: object) -> bool:
            nonlocal decided
            decided += 1
            return take_next(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(walk_module, "_take_next", counted)
        live.compile(model=LARGE, policy=Policy())
        monkeypatch.setattr(walk_module, "_take_next", take_next)
        return decided


def _equals_a_cold_compile(
    live: SessionCompiler,
    est: Estimator | None,
    *,
    model: ModelProfile,
    policy: Policy,
    multiplier: float = 1.0,
) -> None:
    """``live``'s next compile is a cold compile's of the same session, byte for byte (or the same
    ``OverBudget``, by its makeup)."""

    def compiled(compiler: SessionCompiler) -> CompiledRequest:
        return compiler.compile(model=model, policy=policy, system="be brief", multiplier=multiplier)

    try:
        incremental = compiled(live)
    except OverBudget as exc:
        with pytest.raises(OverBudget) as cold_exc:
            compiled(SessionCompiler(live.session, estimator=est))
        assert cold_exc.value.makeup == exc.makeup
        return
    cold = compiled(SessionCompiler(live.session, estimator=est))
    assert _bytes(incremental) == _bytes(cold)
    assert incremental == cold


class TestAnAppendWalksOnlyWhatIsNew:
    def test_a_text_history_ten_times_longer_decides_no_more_units(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        short = _units_decided_after_an_append(40, monkeypatch, shots=False)
        long = _units_decided_after_an_append(400, monkeypatch, shots=False)
        assert long == short <= 6

    def test_with_media_shallower_than_the_depth_limit_only_the_media_units_are_decided_again(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # Every unit with an image reads the depth, which grows with each append: those are
        # decided again, the text between them is not.
        long = _units_decided_after_an_append(400, monkeypatch, shots=True)
        assert long <= 6 + 400 // 25


class TestIncrementalMatchesColdInALargeWindow:
    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        history=st.lists(steps, min_size=1, max_size=40),
        appends=st.lists(st.lists(steps, min_size=1, max_size=3), min_size=1, max_size=6),
        depth=st.sampled_from([0, 3_000, 30_000]),
        images=st.integers(0, 8),
    )
    def test_each_incremental_compile_equals_a_cold_compile(
        self, history: list[tuple[str, int]], appends: list[list[tuple[str, int]]], depth: int, images: int
    ) -> None:
        policy = Policy(image_depth_tokens=depth, max_inline_images=images)
        est = Estimator(LARGE, preset="seed-store")
        with open_store(":memory:") as store:
            session = store.session("s")
            for n, step in enumerate(history):
                _append(session, est, step, n)
            live = SessionCompiler(session, estimator=est)
            live.compile(model=LARGE, policy=policy, system="be brief")
            n = len(history)
            for batch in appends:
                for step in batch:
                    _append(session, est, step, n)
                    n += 1
                incremental = live.compile(model=LARGE, policy=policy, system="be brief")
                cold = SessionCompiler(session, estimator=est).compile(
                    model=LARGE, policy=policy, system="be brief"
                )
                assert _bytes(incremental) == _bytes(cold)
                assert incremental == cold


class TestIncrementalMatchesColdAcrossMultiplierSteps:
    """A step of the calibration multiplier calibrates the memo's prices again (it is not dropped):
    each compile still equals a cold one at the same multiplier, with the caller's estimator or the
    ones compile makes per multiplier."""

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        history=st.lists(steps, min_size=1, max_size=30),
        appends=st.lists(
            st.tuples(st.lists(steps, max_size=2), st.sampled_from([0.5, 0.98, 1.0, 1.02, 1.37, 3.0])),
            min_size=1,
            max_size=6,
        ),
        depth=st.sampled_from([0, 3_000]),
        images=st.integers(0, 4),
        own=st.booleans(),
        window=st.sampled_from([400_000, 6_000]),
    )
    def test_each_compile_after_a_step_equals_a_cold_compile(
        self,
        history: list[tuple[str, int]],
        appends: list[tuple[list[tuple[str, int]], float]],
        depth: int,
        images: int,
        own: bool,
        window: int,
    ) -> None:
        policy = Policy(image_depth_tokens=depth, max_inline_images=images)
        profile = LARGE.with_(context_window=window)
        est = Estimator(profile, preset="seed-store")
        with open_store(":memory:") as store:
            session = store.session("s")
            for n, step in enumerate(history):
                _append(session, est, step, n)
            live = SessionCompiler(session, estimator=est if own else None)
            live.compile(model=profile, policy=policy, system="be brief")
            n = len(history)
            for batch, multiplier in appends:
                for step in batch:
                    _append(session, est, step, n)
                    n += 1
                _equals_a_cold_compile(
                    live, est if own else None, model=profile, policy=policy, multiplier=multiplier
                )


class TestIncrementalMatchesColdAcrossWindowChanges:
    """The window compile fits to moves from call to call (the guard's fit margin as calibration
    learns), and with it the per-message cap (half the budget): the memo and the last walk are kept
    where no message is over either cap, and each compile still equals a cold one at its window."""

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        history=st.lists(steps, min_size=1, max_size=30),
        appends=st.lists(
            st.tuples(st.lists(steps, max_size=2), st.sampled_from([400_000, 399_000, 7_000, 4_000, 2_500])),
            min_size=1,
            max_size=6,
        ),
        depth=st.sampled_from([0, 3_000]),
        own=st.booleans(),
    )
    def test_each_compile_after_the_window_moved_equals_a_cold_compile(
        self,
        history: list[tuple[str, int]],
        appends: list[tuple[list[tuple[str, int]], int]],
        depth: int,
        own: bool,
    ) -> None:
        policy = Policy(image_depth_tokens=depth)
        est = Estimator(LARGE, preset="seed-store")
        with open_store(":memory:") as store:
            session = store.session("s")
            for n, step in enumerate(history):
                _append(session, est, step, n)
            live = SessionCompiler(session, estimator=est if own else None)
            live.compile(model=LARGE, policy=policy, system="be brief")
            n = len(history)
            for batch, window in appends:
                for step in batch:
                    _append(session, est, step, n)
                    n += 1
                profile = LARGE.with_(context_window=window)
                _equals_a_cold_compile(live, est if own else None, model=profile, policy=policy)

    @pytest.mark.parametrize("windows", [(400_000, 2_500), (2_500, 400_000), (4_000, 2_500, 400_000)])
    def test_a_message_one_cap_cuts_and_another_does_not_is_rendered_at_each(
        self, windows: tuple[int, ...]
    ) -> None:
        est = Estimator(LARGE, preset="seed-store")
        with open_store(":memory:") as store:
            session = store.session("s")
            _append(session, est, ("prose", 5), 0)
            _append(session, est, ("reply", 1_200), 1)  # 1,500 units: over a 1,000 cap, under the others
            live = SessionCompiler(session, estimator=est)
            for n, window in enumerate(windows):
                _append(session, est, ("prose", 5), 2 + n)
                profile = LARGE.with_(context_window=window)
                incremental = live.compile(model=profile, policy=Policy())
                cold = SessionCompiler(session, estimator=est).compile(model=profile, policy=Policy())
                assert _bytes(incremental) == _bytes(cold)

    def test_a_window_that_moves_a_little_keeps_the_last_walk(self, monkeypatch: pytest.MonkeyPatch) -> None:
        est = Estimator(LARGE, preset="seed-store")
        with open_store(":memory:") as store:
            session = store.session("s")
            for n in range(200):
                _append(session, est, ("prose" if n % 2 else "reply", 10), n)
            live = SessionCompiler(session, estimator=est)
            live.compile(model=LARGE, policy=Policy())
            _append(session, est, ("prose", 5), 200)
            decided = 0
            take_next = walk_module._take_next

            def counted(*args: object) -> bool:
                nonlocal decided
                decided += 1
                return take_next(*args)  # type: ignore[arg-type]

            monkeypatch.setattr(walk_module, "_take_next", counted)
            live.compile(model=LARGE.with_(context_window=396_000), policy=Policy())
        assert decided <= 6
