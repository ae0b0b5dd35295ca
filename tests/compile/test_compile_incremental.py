"""Incremental compiles reuse the previous walk, and never change a result: byte for byte the same as
a cold compile of the same ledger state, over random append sequences and policies."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image as PILImage

from contextwindow.compile import CompiledRequest, Policy, SessionCompiler
from contextwindow.compile._walklog import WalkLog
from contextwindow.content import Image, Message, Text, ToolResult, ToolUse, message_to_dict
from contextwindow.models import ModelProfile
from contextwindow.pricing import Estimator
from contextwindow.store import Session, open_store

PROFILE = ModelProfile(
    name="test-model", provider="other", context_window=6_000, max_output_tokens=500, tokenizer="unknown"
)


def _png(n: int) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (8 + n % 50, 8), (n % 255, 0, 0)).save(buf, "PNG")
    return buf.getvalue()


# One step of a session: what is appended (a turn's worth of messages).
steps = st.one_of(
    st.tuples(st.just("prose"), st.integers(1, 400)),
    st.tuples(st.just("reply"), st.integers(1, 300)),
    st.tuples(st.just("tool"), st.integers(1, 3_000)),  # a text result, sometimes over the archive bar
    st.tuples(st.just("shot"), st.integers(0, 10_000)),  # a result carrying an image
    st.tuples(st.just("orphan"), st.integers(0, 5)),  # a call whose result never comes
    st.tuples(st.just("fold"), st.integers(1, 100)),  # a checkpoint over the oldest n% not yet folded
)

policies = st.builds(
    Policy,
    max_inline_images=st.integers(0, 4),
    image_depth_tokens=st.sampled_from([0, 300, 2_000]),
    media_hysteresis_ratio=st.sampled_from([None, 0.5]),
    recent_turns_full=st.integers(0, 3),
    archive_text_over_tokens=st.sampled_from([200, 2048]),
    inline_media_bytes=st.sampled_from([200, 20 * 1024 * 1024]),
)


def _append(session: Session, est: Estimator, step: tuple[str, int], n: int) -> None:
    kind, size = step
    batch: list[Message]
    if kind == "prose":
        batch = [Message.user(f"{n}: " + "word " * size)]
    elif kind == "reply":
        batch = [Message.assistant(f"{n}: " + "fine " * size)]
    elif kind == "tool":
        batch = [
            Message.assistant(ToolUse(id=f"t{n}", name="read", input={"n": n})),
            Message.user(ToolResult(tool_use_id=f"t{n}", content="row " * size)),
        ]
    elif kind == "shot":
        ref = session.attach(_png(size), "image/png")
        batch = [
            Message.assistant(ToolUse(id=f"t{n}", name="screenshot", input={})),
            Message.user(ToolResult(tool_use_id=f"t{n}", content=(Text(text="screen"), Image(ref=ref)))),
        ]
    elif kind == "fold":
        _fold(session, size)
        return
    else:
        batch = [Message.assistant(ToolUse(id=f"o{n}", name="lost", input={"k": size}))]
    for message in batch:
        session.append(message, block_prices=[est.raw_block(b) for b in message.content])


def _fold(session: Session, percent: int) -> None:
    """A checkpoint over the messages after the last one's range, up to ``percent`` of the rest (the
    floor moves up: what the engine's folds do)."""
    ids = [m.message.id for m in session.messages()]
    latest = session.latest("checkpoint")
    start = ids.index(latest.payload["last_id"]) + 1 if latest is not None else 0
    last = start + (len(ids) - start) * percent // 100 - 1
    if last < start:
        return
    session.record_checkpoint(
        f"summary of {last - start + 1}", first_id=str(ids[start]), last_id=str(ids[last])
    )


def _bytes(out: CompiledRequest) -> str:
    return json.dumps([message_to_dict(m) for m in out.messages], sort_keys=True)


class TestIncrementalMatchesCold:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        history=st.lists(steps, min_size=1, max_size=40),
        appends=st.lists(steps, min_size=1, max_size=8),
        policy=policies,
    )
    def test_each_incremental_compile_equals_a_cold_compile_of_the_same_ledger(
        self, history: list[tuple[str, int]], appends: list[tuple[str, int]], policy: Policy
    ) -> None:
        est = Estimator(PROFILE, preset="seed-store")
        with open_store(":memory:") as store:
            session = store.session("s")
            for n, step in enumerate(history):
                _append(session, est, step, n)
            live = SessionCompiler(session, estimator=est)
            live.compile(model=PROFILE, policy=policy, system="be brief")
            for n, step in enumerate(appends, start=len(history)):
                _append(session, est, step, n)
                incremental = live.compile(model=PROFILE, policy=policy, system="be brief")
                cold = SessionCompiler(session, estimator=est).compile(
                    model=PROFILE, policy=policy, system="be brief"
                )
                assert _bytes(incremental) == _bytes(cold)
                assert incremental == cold

    def test_an_append_reuses_the_older_units_of_the_previous_walk(self) -> None:
        before_units, before, after, _ = _walk_logs_around_one_append()
        assert after is not before
        reused = {id(u) for u in before_units} & {id(u) for u in after.units}
        # Only the units within the media depth (300 tokens) of the end were re-decided.
        assert len(reused) >= len(after.units) - 10

    def test_a_fold_reuses_the_units_above_its_new_floor(self) -> None:
        # A fold moves the floor up; the units above it are the same messages walked in the same
        # contexts, so the walk after a fold decides afresh only the unit the floor cuts through
        # (here none: the checkpoint ends on a unit boundary) and the newest one.
        est = Estimator(PROFILE, preset="seed-store")
        with open_store(":memory:") as store:
            session = store.session("s")
            for n in range(40):
                _append(session, est, ("prose" if n % 2 else "reply", 20), n)
            live = SessionCompiler(session, estimator=est)
            live.compile(model=PROFILE)
            before = live.cache.walk
            assert before is not None and before.exhausted  # everything fits: walked to the floor
            before_units = list(before.units)
            ids = [m.message.id for m in session.messages()]
            session.record_checkpoint("the first ten", first_id=str(ids[0]), last_id=str(ids[9]))
            folded = live.compile(model=PROFILE)
            after = live.cache.walk
            assert after is not None and after.units[0].start == 10  # oldest first
            reused = {id(u) for u in before_units} & {id(u) for u in after.units}
            assert len(reused) == len(after.units) - 1  # all but the newest unit
            cold = SessionCompiler(session, estimator=est).compile(model=PROFILE)
            assert _bytes(folded) == _bytes(cold) and folded == cold


def _walk_logs_around_one_append() -> tuple[list[Any], WalkLog, WalkLog, WalkLog]:
    """A 60-message session's walk log, its units then, the log after one append, and the log of a
    cold compile of the grown session."""
    est = Estimator(PROFILE, preset="seed-store")
    policy = Policy(recent_turns_full=1, image_depth_tokens=300)
    with open_store(":memory:") as store:
        session = store.session("s")
        for n in range(60):
            _append(session, est, ("prose" if n % 2 else "tool", 20), n)
        live = SessionCompiler(session, estimator=est)
        live.compile(model=PROFILE, policy=policy)
        before = live.cache.walk
        assert before is not None
        before_units = list(before.units)  # the next log may be this one, appended to
        _append(session, est, ("prose", 5), 99)
        live.compile(model=PROFILE, policy=policy)
        cold = SessionCompiler(session, estimator=est)
        cold.compile(model=PROFILE, policy=policy)
        assert live.cache.walk is not None and cold.cache.walk is not None
        return before_units, before, live.cache.walk, cold.cache.walk


class TestIncrementalAtALargeUnit:
    def test_a_unit_whose_image_no_longer_fits_is_decided_afresh_not_cut_where_the_last_walk_stopped(
        self,
    ) -> None:
        # With the depth limit off, appends leave the older walk reusable; the screenshot's unit fits
        # whole at first, and as the tail grows it fits only with its image out of line. An
        # incremental compile must then take it (and go on past it) as a cold compile does.
        est = Estimator(PROFILE, preset="seed-store")
        policy = Policy(image_depth_tokens=0, archive_stale_results=False)
        with open_store(":memory:") as store:
            session = store.session("s")
            for n in range(10):
                _append(session, est, ("prose", 120), n)
            ref = session.attach(_png(7), "image/png", token_estimate=1_600)
            for message in (
                Message.assistant(ToolUse(id="shot", name="screenshot", input={})),
                Message.user(ToolResult(tool_use_id="shot", content=(Text(text="screen"), Image(ref=ref)))),
            ):
                session.append(message, block_prices=[est.raw_block(b) for b in message.content])
            for n in range(11, 14):
                _append(session, est, ("prose", 120), n)
            live = SessionCompiler(session, estimator=est)
            first = live.compile(model=PROFILE, policy=policy)
            assert not [e for e in first.decisions.evicted if e.reason == "budget"]
            forced = 0
            for n in range(14, 40):
                _append(session, est, ("prose", 120), n)
                incremental = live.compile(model=PROFILE, policy=policy)
                cold = SessionCompiler(session, estimator=est).compile(model=PROFILE, policy=policy)
                assert _bytes(incremental) == _bytes(cold)
                assert incremental == cold
                forced += any(e.reason == "budget" for e in cold.decisions.evicted)
            assert forced  # the case under test happened

    def test_a_unit_sent_with_its_image_out_of_line_is_decided_again_when_there_is_room_for_it(
        self,
    ) -> None:
        # A large tool result newer than the screenshot leaves it no room, so its image goes out of
        # line; the next turn archives that result (it is stale now), and the screenshot fits with
        # its image again. The previous walk's decision for it was made for the room left then: an
        # incremental compile must not reuse it.
        est = Estimator(PROFILE, preset="seed-store")
        policy = Policy(image_depth_tokens=0, recent_turns_full=1, archive_text_over_tokens=200)
        with open_store(":memory:") as store:
            session = store.session("s")
            for n in range(10):
                _append(session, est, ("prose", 120), n)
            ref = session.attach(_png(7), "image/png", token_estimate=1_600)
            shot = Message.user("the screen", Image(ref=ref))
            session.append(shot, block_prices=[est.raw_block(b) for b in shot.content])
            _append(session, est, ("prose", 3), 11)
            _append(session, est, ("tool", 3_500), 12)
            live = SessionCompiler(session, estimator=est)
            first = live.compile(model=PROFILE, policy=policy)
            assert [e.reason for e in first.decisions.evicted] == ["budget"]
            _append(session, est, ("prose", 3), 13)
            incremental = live.compile(model=PROFILE, policy=policy)
            cold = SessionCompiler(session, estimator=est).compile(model=PROFILE, policy=policy)
            assert cold.decisions.evicted == ()  # the result archived, the image fits again
            assert _bytes(incremental) == _bytes(cold)
            assert incremental == cold


class TestTheWalkLogGrowsByAppending:
    def test_an_append_keeps_the_older_units_where_they_were_and_logs_what_a_cold_walk_would(self) -> None:
        # Stored oldest first, a history that only grew is logged by appending its new units: the
        # previous log's units (all but those decided again) lead the new one, in place.
        before_units, _, after, again = _walk_logs_around_one_append()
        kept = len(before_units) - 10
        assert [id(u) for u in after.units[:kept]] == [id(u) for u in before_units[:kept]]
        # Read newest first, it is the log a cold walk of the same history makes.
        assert after.count == again.count
        assert [after.context(k) for k in range(after.count + 1)] == [
            again.context(k) for k in range(again.count + 1)
        ]
        assert [after.prefix_at(k) for k in range(after.count + 1)] == [
            again.prefix_at(k) for k in range(again.count + 1)
        ]
        assert [after.unit(k).end for k in range(after.count)] == [
            again.unit(k).end for k in range(again.count)
        ]
        assert after.by_end == again.by_end and after.forced == again.forced and after.media == again.media


def test_a_history_that_only_grew_past_a_newest_unit_with_media_equals_a_cold_compile() -> None:
    """The whole history fits, so each compile takes the previous one's oldest unit again and its sums
    are cut where the walk decided afresh (the newest units) and extended in place: the media, the
    tool pairing and every figure as a cold compile has them, through screenshots, replies and
    orphan calls."""
    est = Estimator(PROFILE, preset="seed-store")
    policy = Policy(max_inline_images=4, recent_turns_full=3)
    steps = [("prose", 5), ("shot", 1), ("reply", 3), ("shot", 2), ("orphan", 1), ("prose", 4), ("shot", 3)]
    with open_store(":memory:") as store:
        session = store.session("s")
        live = SessionCompiler(session, estimator=est)
        for n, step in enumerate(steps):
            _append(session, est, step, n)
            incremental = live.compile(model=PROFILE, policy=policy, system="be brief")
            fresh = SessionCompiler(session, estimator=est)
            cold = fresh.compile(model=PROFILE, policy=policy, system="be brief")
            assert incremental == cold, step
            assert len(incremental.messages) >= n + 1  # nothing left out: every compile took it all
            mine, theirs = live.cache.tail, fresh.cache.tail
            assert mine is not None and theirs is not None
            for marks in ("decided", "inline", "thinking", "rereads", "breaks", "tokens", "wire", "first"):
                assert list(getattr(mine, marks)) == list(getattr(theirs, marks)), (step, marks)
