"""Compile: budget, caps, pairing, media budget, stale archive, determinism.

Known-answer vectors from anima-research/context-manager (https://github.com/anima-research/context-manager:
caps, pairing, live images), withastro/flue (https://github.com/withastro/flue/issues/531: the byte
budget) and apache/maka (https://github.com/apache/maka/pull/4486: the stale archive).
"""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from contextwindow.compile import (
    STUB,
    ArchiveRecord,
    Checkpoint,
    CompileCache,
    CompileState,
    MediaWatermark,
    Policy,
    PricedMessage,
    artifact_id,
    compile,
    partition_refs,
    truncate_content,
)
from contextwindow.compile.assemble import OPENING
from contextwindow.compile.truncate import OMITTED_RESULT, safe_slice, text_only_estimate
from contextwindow.content import AttachmentRef, Image, Message, Text, ToolResult, ToolUse
from contextwindow.errors import InvalidInput, OverBudget
from contextwindow.models import ModelProfile
from contextwindow.pricing import Estimator

PROSE = "The quick brown fox jumps over the lazy dog. "  # ASCII prose: the 2.9 rate under seed-store


def profile(window: int, output: int = 100) -> ModelProfile:
    return ModelProfile(
        name="test-model",
        provider="other",
        context_window=window,
        max_output_tokens=output,
        tokenizer="unknown",
    )


def seed_est(p: ModelProfile, m: float = 1.0) -> Estimator:
    return Estimator(p, m, preset="seed-store")


def ref(n: int, size: int = 300_000) -> AttachmentRef:
    sha = hashlib.sha256(str(n).encode()).hexdigest()
    return AttachmentRef(id=f"att_{sha[:32]}", sha256=sha, media_type="image/png", size_bytes=size)


def state(*messages: Message, **kw: object) -> CompileState:
    return CompileState(messages=tuple(PricedMessage(message=m) for m in messages), **kw)  # type: ignore[arg-type]


def run(st_: CompileState, p: ModelProfile, policy: Policy | None = None, **kw: object):  # type: ignore[no-untyped-def]
    return compile(st_, p, policy or Policy(), estimator=seed_est(p, st_.multiplier), **kw)  # type: ignore[arg-type]


def pattern(result, count: int) -> str:  # type: ignore[no-untyped-def]
    """'I' for an image inline, '.' for one replaced, over images 1..count (by message id m{n})."""
    inline = {m.id for m in result.messages if any(isinstance(b, Image) for b in m.content)}
    return "".join("I" if f"m{n}" in inline else "." for n in range(1, count + 1))


class TestTruncateContent:
    def test_keeps_exactly_40041_characters_at_a_10000_token_cap(self) -> None:
        text = ("x" * 39 + " ") * 2000
        [cut] = truncate_content((Text(text=text),), 10_000)
        assert isinstance(cut, Text)
        assert len(cut.text) == 40_041
        assert cut.text.endswith("\n\n[truncated — original was 20000 tokens]")

    def test_returns_the_same_object_when_under_the_cap(self) -> None:
        blocks = (Text(text="short"),)
        assert truncate_content(blocks, 10) is blocks
        assert truncate_content(blocks, 0) is blocks

    def test_drops_later_text_and_keeps_tool_results(self) -> None:
        blocks = (
            Text(text="a" * 100),
            Text(text="b" * 10),
            ToolResult(tool_use_id="t1", content="c" * 50),
            Image(ref=ref(1)),
        )
        out = truncate_content(blocks, 10)
        assert [type(b).__name__ for b in out] == ["Text", "ToolResult", "Image"]
        assert out[0].text.startswith("a" * 40)  # type: ignore[union-attr]
        assert out[1].content == OMITTED_RESULT  # type: ignore[union-attr]

    def test_cuts_a_long_string_tool_result_with_the_marker(self) -> None:
        out = truncate_content((ToolResult(tool_use_id="t", content="z" * 1000),), 10)
        assert out[0].content == "z" * 40 + "\n\n[truncated — original was 250 tokens]"  # type: ignore[union-attr]

    def test_cuts_the_text_of_a_tool_result_of_blocks_and_keeps_its_media(self) -> None:
        # The Anthropic wire's list form: context-manager counted it as 0 and sent it whole.
        result = ToolResult(
            tool_use_id="t", content=(Text(text="a" * 10), Image(ref=ref(1)), Text(text="z" * 1000))
        )
        assert text_only_estimate((result,)) == 3 + 250
        [out] = truncate_content((result,), 10)
        assert isinstance(out, ToolResult) and out.tool_use_id == "t"
        assert out.content == (
            Text(text="a" * 10),
            Image(ref=ref(1)),
            Text(text="z" * 30 + "\n\n[truncated — original was 250 tokens]"),
        )

    def test_a_tool_result_of_blocks_past_the_cap_keeps_its_media_and_says_its_text_was_omitted(self) -> None:
        late = ToolResult(tool_use_id="t2", content=(Image(ref=ref(2)), Text(text="b" * 10)))
        out = truncate_content((Text(text="a" * 100), late), 10)
        assert out[1] == ToolResult(tool_use_id="t2", content=(Text(text=OMITTED_RESULT), Image(ref=ref(2))))

    def test_a_tool_result_of_blocks_within_the_cap_is_kept_as_it_is(self) -> None:
        result = ToolResult(tool_use_id="t", content=(Text(text="a" * 10), Image(ref=ref(1))))
        out = truncate_content((Text(text="b" * 100), result, Text(text="c" * 100)), 30)
        assert out[1] is result and out[2] == Text(text="c" * 10 + "\n\n[truncated — original was 25 tokens]")

    def test_never_splits_a_surrogate_pair(self) -> None:
        assert safe_slice("ab😀cd", 3) == "ab"
        assert safe_slice("ab😀cd", 4) == "ab😀"
        assert safe_slice("a\udcffbc", 2) == "a\udcff"  # a lone surrogate is one unit, never an error
        [cut] = truncate_content((Text(text="😀" * 10),), 1)
        assert cut.text.startswith("😀😀\n\n")  # type: ignore[union-attr]

    @given(st.text(max_size=300), st.integers(min_value=1, max_value=40))
    def test_the_cut_text_never_exceeds_the_cap_plus_the_marker(self, text: str, cap: int) -> None:
        out = truncate_content((Text(text=text),), cap)
        kept = out[0].text if out else ""  # type: ignore[union-attr]
        body = kept.split("\n\n[truncated")[0] if "[truncated —" in kept else kept
        assert len(body.encode("utf-16-le")) // 2 <= max(cap * 4, len(text.encode("utf-16-le")) // 2)
        assert body == text[: len(body)]


class TestCappedMessages:
    def test_a_capped_message_is_priced_as_it_renders(self) -> None:
        p = profile(200_000, 1000)
        long = Message.user(PROSE * 2000, id="big")
        out = run(state(long), p, Policy(max_message_tokens=10_000))
        [sent] = out.messages
        rendered_price = seed_est(p).message(sent)
        assert out.makeup["text"] == rendered_price
        [t] = out.decisions.truncated
        assert t.message_id == "big"
        assert t.rendered_tokens == rendered_price < t.original_tokens

    def test_the_stored_price_is_used_only_for_the_stored_block_itself(self) -> None:
        p = profile(200_000, 1000)
        m = Message.user("hello", id="m")
        priced = CompileState(messages=(PricedMessage(message=m, block_prices=(777.0,)),))
        assert run(priced, p).makeup["text"] == 777  # the stored block: its stored price
        copy = Message.user("hello", id="m")  # an equal copy with no stored price is priced fresh
        assert run(state(copy), p).makeup["text"] == seed_est(p).message(copy)


class TestTail:
    def test_keeps_the_newest_within_the_budget_in_chronological_order(self) -> None:
        p = profile(1080, 1000)
        messages = [Message.user("y" * 72, id=f"msg-{n:02d}") for n in range(1, 11)]
        out = run(state(*messages), p, Policy(output_reserve=1000))
        ids = [m.id for m in out.messages]
        assert ids == ["msg-08", "msg-09", "msg-10"]
        assert out.decisions.omitted[0] == "msg-01"
        assert out.estimated_tokens == 75

    def test_raises_over_budget_with_the_makeup_when_the_head_alone_does_not_fit(self) -> None:
        p = profile(1100, 1000)
        with pytest.raises(OverBudget) as info:
            run(
                state(Message.user("hi", id="a")),
                p,
                Policy(output_reserve=1000),
            ) if False else run(
                CompileState(messages=(), system=(Text(text="s" * 2900),)), p, Policy(output_reserve=1000)
            )
        assert info.value.makeup["system"] == 1000
        assert info.value.makeup["output_reserve"] == 1000
        assert info.value.budget == 100

    def test_raises_rather_than_dropping_the_newest_message(self) -> None:
        p = profile(1100, 1000)
        with pytest.raises(OverBudget, match="newest"):
            run(state(Message.user("q" * 2900, id="a")), p, Policy(output_reserve=1000, max_message_tokens=0))

    def test_a_checkpoint_summary_stands_for_the_folded_history(self) -> None:
        p = profile(10_000, 1000)
        messages = [Message.user(f"m{n}", id=f"m{n}") for n in range(6)]
        chk = Checkpoint(summary="## Goal\nx", first_id="m0", last_id="m3", id="chk1")
        out = run(state(*messages, checkpoint=chk), p)
        assert [m.id for m in out.messages] == ["chk1", "m4", "m5"]
        assert out.decisions.folded == ("m0", "m3")
        assert out.makeup["summaries"] > 0
        assert out.decisions.omitted == ()

    def test_a_summary_is_priced_by_the_summarisers_count_when_the_rule_prices_it_lower(self) -> None:
        p = profile(10_000, 1000)
        messages = [Message.user(f"m{n}", id=f"m{n}") for n in range(6)]
        text = "## Goal\nfix the parser in src/parse.py"
        plain = run(state(*messages, checkpoint=Checkpoint(summary=text, first_id="m0", last_id="m3")), p)
        rule = seed_est(p).text(text)
        counted = Checkpoint(summary=text, first_id="m0", last_id="m3", summary_tokens=rule + 50)
        out = run(state(*messages, checkpoint=counted), p)
        assert out.makeup["summaries"] == plain.makeup["summaries"] + 50
        assert out.local_estimate == plain.local_estimate + 50

    def test_a_summarisers_count_under_the_rule_leaves_the_rules_price(self) -> None:
        p = profile(10_000, 1000)
        messages = [Message.user(f"m{n}", id=f"m{n}") for n in range(6)]
        text = "## Goal\nfix the parser in src/parse.py"
        plain = run(state(*messages, checkpoint=Checkpoint(summary=text, first_id="m0", last_id="m3")), p)
        low = Checkpoint(summary=text, first_id="m0", last_id="m3", summary_tokens=1)
        assert run(state(*messages, checkpoint=low), p).makeup["summaries"] == plain.makeup["summaries"]

    def test_an_unknown_checkpoint_range_is_refused(self) -> None:
        chk = Checkpoint(summary="s", first_id="x", last_id="nope")
        with pytest.raises(InvalidInput, match="checkpoint"):
            run(state(Message.user("a", id="a"), checkpoint=chk), profile(10_000))


def tool_round(n: int, result: str | tuple = "ok") -> list[Message]:  # type: ignore[type-arg]
    return [
        Message.assistant(ToolUse(id=f"t{n}", name="read", input={"n": n}), id=f"a{n}"),
        Message.user(ToolResult(tool_use_id=f"t{n}", content=result), id=f"r{n}"),  # type: ignore[arg-type]
    ]


class TestToolPairing:
    def test_a_use_whose_result_is_missing_gets_the_stub(self) -> None:
        msgs = [
            Message.user("go", id="u"),
            Message.assistant(ToolUse(id="t1", name="x"), id="a"),
            Message.user("next", id="n"),
        ]
        out = run(state(*msgs), profile(10_000))
        assert out.decisions.stubbed == ("t1",)
        result = out.messages[2].content[0]
        assert isinstance(result, ToolResult) and result.content == STUB

    def test_an_orphan_result_is_dropped(self) -> None:
        msgs = [
            Message.user("go", id="u"),
            Message.user(ToolResult(tool_use_id="ghost", content="x"), Text(text="hi"), id="o"),
        ]
        out = run(state(*msgs), profile(10_000))
        assert out.decisions.dropped_results == ("ghost",)
        assert all(not isinstance(b, ToolResult) for m in out.messages for b in m.content)

    def test_a_result_up_to_six_messages_ahead_is_moved_up(self) -> None:
        msgs = [
            Message.user("go", id="u"),
            Message.assistant(ToolUse(id="t1", name="x"), id="a"),
            Message.user("interjection", id="i"),
            Message.user(ToolResult(tool_use_id="t1", content="late"), id="r"),
        ]
        out = run(state(*msgs), profile(10_000))
        assert out.decisions.stubbed == ()
        first_result = out.messages[2].content[0]
        assert isinstance(first_result, ToolResult) and first_result.content == "late"

    def test_results_kept_in_separate_messages_come_out_in_call_order_with_no_empty_message(self) -> None:
        msgs = [
            Message.user("read a and b", id="u"),
            Message.assistant(ToolUse(id="c1", name="r"), ToolUse(id="c2", name="r"), id="a"),
            Message.user(ToolResult(tool_use_id="c1", content="A"), id="r1"),
            Message.user(ToolResult(tool_use_id="c2", content="B"), id="r2"),
            Message.assistant("done", id="d"),
        ]
        out = run(state(*msgs), profile(10_000))
        assert [m.role for m in out.messages] == ["user", "assistant", "user", "assistant"]
        assert [b.tool_use_id for b in out.messages[2].content if isinstance(b, ToolResult)] == ["c1", "c2"]
        assert all(m.content for m in out.messages)

    def test_results_out_of_call_order_are_put_in_call_order_ahead_of_other_content(self) -> None:
        msgs = [
            Message.user("go", id="u"),
            Message.assistant(ToolUse(id="c1", name="r"), ToolUse(id="c2", name="r"), id="a"),
            Message.user(
                Text(text="note"),
                ToolResult(tool_use_id="c2", content="B"),
                ToolResult(tool_use_id="c1", content="A"),
                id="r",
            ),
        ]
        out = run(state(*msgs), profile(10_000))
        kinds = [b.tool_use_id if isinstance(b, ToolResult) else b.type for b in out.messages[2].content]
        assert kinds == ["c1", "c2", "text"]

    def test_empty_text_blocks_and_empty_messages_are_not_sent(self) -> None:
        msgs = [
            Message.user("go", id="u"),
            Message.assistant(Text(text=""), ToolUse(id="c1", name="r"), id="a"),
            Message.user(ToolResult(tool_use_id="c1", content="A"), id="r"),
            Message.assistant(Text(text=""), id="e"),
            Message.user("next", id="n"),
        ]
        out = run(state(*msgs), profile(10_000))
        assert all(m.content for m in out.messages)
        assert not any(isinstance(b, Text) and not b.text for m in out.messages for b in m.content)

    def test_the_request_opens_with_a_user_message_wherever_the_cut_falls(self) -> None:
        msgs = [Message.user("start", id="u0")]
        for n in range(30):
            msgs += [
                Message.assistant(f"reply {n} " + "w " * 60, id=f"a{n}"),
                Message.user(f"ask {n}", id=f"u{n + 1}"),
            ]
        for window in range(1_100, 2_000, 13):
            out = run(state(*msgs), profile(window, 1000), Policy(output_reserve=1000))
            assert out.messages[0].role == "user"
            opened = out.messages[0].id is None  # the short opening stands in for what was left out
            assert len(out.messages) - opened + len(out.decisions.omitted) == len(msgs)

    def test_a_tool_loop_cut_keeps_every_round_that_fits_behind_a_short_opening(self) -> None:
        # The loop's one user message is its opener; every later unit opens on the assistant. The cut
        # keeps as many rounds as the budget holds (the opening priced with them), not only the newest.
        msgs = [Message.user("start", id="u0")]
        for n in range(20):
            msgs += tool_round(n, PROSE * 4)
        for window in range(1_300, 1_800, 50):
            out = run(state(*msgs), profile(window, 1000), Policy(output_reserve=1000))
            assert out.messages[0].role == "user" and out.messages[0].id is None
            assert out.messages[0].content == (Text(text=OPENING),)
            assert len(out.messages) - 1 > 2, window  # more than the newest round
            assert out.decisions.omitted == tuple(m.id for m in msgs[: len(msgs) - len(out.messages) + 1])
            assert out.estimated_tokens <= window - 1000
            wider = run(state(*msgs), profile(window + 50, 1000), Policy(output_reserve=1000))
            assert len(wider.messages) >= len(out.messages)

    def test_a_history_that_opens_with_the_assistant_gets_a_user_message_first(self) -> None:
        out = run(
            state(Message.assistant("Hello! How can I help?", id="a"), Message.user("hi", id="u")),
            profile(10_000),
        )
        assert out.messages[0].role == "user" and out.messages[1].id == "a"

    def test_the_cut_never_splits_a_pair_or_starts_on_an_orphan_result(self) -> None:
        msgs = [Message.user("start", id="u0")]
        for n in range(20):
            msgs += tool_round(n, "r" * 100)
        for window in range(1_100, 1_400, 7):
            out = run(state(*msgs), profile(window, 1000), Policy(output_reserve=1000))
            first = out.messages[0]
            assert not any(isinstance(b, ToolResult) for b in first.content)
            assert out.decisions.stubbed == () and out.decisions.dropped_results == ()

    def test_the_repairs_are_priced_in_the_unit_they_repair(self) -> None:
        # t2's result is not in history: the newest unit goes out with a stub, and the older message is
        # cut to the room the stub leaves (not left out, and not cut as if the stub were free).
        msgs = [
            Message.user(PROSE * 400, id="m0"),
            Message.assistant(ToolUse(id="t1", name="x"), ToolUse(id="t2", name="x"), id="a1"),
            Message.user(ToolResult(tool_use_id="t1", content=PROSE * 40), id="r1"),
        ]
        out = run(state(*msgs), profile(3000, 1000), Policy(output_reserve=1000))
        assert out.decisions.stubbed == ("t2",)
        assert [t.message_id for t in out.decisions.truncated] == ["m0"]
        assert out.messages[0].id == "m0"
        assert out.local_estimate <= out.budget


def image_session(count: int) -> list[Message]:
    return [Message.user(f"shot {n}", Image(ref=ref(n, 100)), id=f"m{n}") for n in range(1, count + 1)]


class TestMediaBudget:
    def test_the_two_newest_images_stay_with_a_cap_of_two(self) -> None:
        out = run(state(*image_session(4)), profile(100_000), Policy(max_inline_images=2))
        assert pattern(out, 4) == "..II"
        assert [e.reason for e in out.decisions.evicted] == ["count", "count"]
        placeholder = out.messages[0].content[1]
        assert isinstance(placeholder, Text) and ref(1, 100).id in placeholder.text

    def test_depth_drops_the_oldest_image_but_keeps_its_text(self) -> None:
        out = run(
            state(*image_session(3)), profile(100_000), Policy(image_depth_tokens=3500, max_inline_images=0)
        )
        assert pattern(out, 3) == ".II"
        assert out.messages[0].content[0] == Text(text="shot 1")

    def test_the_policy_disabled_keeps_every_image(self) -> None:
        out = run(
            state(*image_session(8)), profile(100_000), Policy(max_inline_images=0, image_depth_tokens=0)
        )
        assert pattern(out, 8) == "I" * 8

    def test_the_byte_budget_is_decided_from_stored_sizes(self) -> None:
        policy = Policy(max_inline_images=0, inline_media_bytes=2 * 136 + 100)  # 100 raw bytes → 136 base64
        out = run(state(*image_session(5)), profile(100_000), policy)
        assert pattern(out, 5) == "...II"
        assert {e.reason for e in out.decisions.evicted} == {"bytes"}

    def test_a_stripped_image_is_priced_as_its_placeholder(self) -> None:
        p = profile(100_000)
        out = run(state(*image_session(3)), p, Policy(max_inline_images=1))
        assert out.makeup["images"] == 1600
        est = seed_est(p)
        texts = sum(est.blocks([b for b in m.content if isinstance(b, Text)]) for m in out.messages)
        assert out.makeup["text"] + out.makeup["manifest"] == texts

    def test_the_manifest_lists_what_is_not_inline(self) -> None:
        out = run(state(*image_session(4)), profile(100_000), Policy(max_inline_images=2))
        manifest = out.messages[-1].content[-1]
        assert isinstance(manifest, Text) and manifest.text.startswith("<attachments>")
        assert ref(1, 100).id in manifest.text and ref(2, 100).id in manifest.text
        assert out.makeup["manifest"] == seed_est(profile(100_000)).block(manifest)
        assert [r.id for r in out.inline_attachments] == [ref(3, 100).id, ref(4, 100).id]

    @pytest.mark.parametrize(
        ("count", "expected"),
        [(4, "IIII"), (5, "...II"), (6, "...III"), (7, "...IIII"), (8, "......II")],
        ids=["4", "5", "6", "7", "8"],
    )
    def test_hysteresis_follows_the_seed_sequence(self, count: int, expected: str) -> None:
        policy = Policy(max_inline_images=4, media_hysteresis_ratio=0.5, image_depth_tokens=0)
        watermark = None
        result = None
        for n in range(1, count + 1):  # the watermark persists between compiles, as the ledger keeps it
            result = run(state(*image_session(n), watermark=watermark), profile(100_000), policy)
            watermark = result.decisions.watermark
        assert pattern(result, count) == expected

    def test_hysteresis_on_the_byte_cap_behaves_the_same(self) -> None:
        policy = Policy(
            max_inline_images=0, inline_media_bytes=4 * 136, media_hysteresis_ratio=0.5, image_depth_tokens=0
        )
        watermark = None
        seen = []
        for n in range(1, 9):
            result = run(state(*image_session(n), watermark=watermark), profile(100_000), policy)
            watermark = result.decisions.watermark
            seen.append(pattern(result, n))
        assert seen[3:] == ["IIII", "...II", "...III", "...IIII", "......II"]

    def test_without_hysteresis_the_window_slides_one_image_at_a_time(self) -> None:
        policy = Policy(max_inline_images=4, image_depth_tokens=0)
        assert pattern(run(state(*image_session(5)), profile(100_000), policy), 5) == ".IIII"
        assert pattern(run(state(*image_session(6)), profile(100_000), policy), 6) == "..IIII"

    def test_evicted_bytes_are_never_read(self) -> None:
        from contextwindow.formats import render

        out = run(state(*image_session(10)), profile(100_000), Policy(max_inline_images=3))
        allowed = {r.id for r in out.inline_attachments}
        loaded: list[str] = []

        def loader(r: AttachmentRef) -> bytes:
            assert r.id in allowed, f"read evicted attachment {r.id}"
            loaded.append(r.id)
            return b"\x89PNG" + b"\0" * 96

        for fmt in ("anthropic", "openai"):
            render(out.to_request(), fmt, loader)  # type: ignore[arg-type]
        assert set(loaded) == allowed and len(allowed) == 3

    @given(
        st.lists(st.integers(min_value=0, max_value=5_000_000), max_size=40),
        st.integers(0, 10),
        st.integers(0, 30_000_000),
    )
    def test_the_partition_is_a_pure_function_of_refs_and_constants(
        self, sizes: list[int], cap: int, budget: int
    ) -> None:
        refs = [ref(i, s) for i, s in enumerate(sizes)]
        first = partition_refs(refs, byte_budget=budget, count_cap=cap)
        assert first == partition_refs(list(refs), byte_budget=budget, count_cap=cap)
        inline, evicted = first
        assert len(inline) + len(evicted) == len(refs)
        assert sum(4 * math.ceil(r.size_bytes / 3) for r in inline) <= budget
        assert not cap or len(inline) <= cap


class TestNoCliffAtALargeUnit:
    """A unit that does not fit with its media inline is taken with them out of line, oldest first,
    as far as it needs, and the tail goes on past it instead of stopping there."""

    def test_a_message_whose_image_does_not_fit_is_kept_with_a_placeholder_and_the_tail_goes_on(
        self,
    ) -> None:
        prose = [Message.user(PROSE * 4, id=f"p{n}") for n in range(5)]  # ~63 tokens each
        shot = Message.user("the screen", Image(ref=ref(1, 100)), id="shot")  # 1,600 with the image
        messages = [*prose[:3], shot, *prose[3:]]
        out = run(state(*messages), profile(1_100, 100), Policy(output_reserve=100))
        assert [m.id for m in out.messages] == ["p0", "p1", "p2", "shot", "p3", "p4"]
        assert out.decisions.omitted == ()
        assert [(e.message_id, e.reason) for e in out.decisions.evicted] == [("shot", "budget")]
        assert not any(isinstance(b, Image) for m in out.messages for b in m.content)
        assert out.estimated_tokens <= out.budget

    def test_the_newest_message_goes_with_its_image_out_of_line_rather_than_not_at_all(self) -> None:
        out = run(
            state(Message.user("the screen", Image(ref=ref(1, 100)), id="shot")),
            profile(1_100, 100),
            Policy(output_reserve=100),
        )
        assert [e.reason for e in out.decisions.evicted] == ["budget"]
        assert out.messages[-1].id == "shot"

    def test_only_as_many_go_out_of_line_as_the_unit_needs_the_oldest_first(self) -> None:
        two = Message.user("before", Image(ref=ref(1, 100)), "after", Image(ref=ref(2, 100)), id="two")
        out = run(state(two), profile(2_100, 100), Policy(output_reserve=100))
        [kept] = [b for b in out.messages[-1].content if isinstance(b, Image)]
        assert kept.ref == ref(2, 100)
        assert [(e.attachment_id, e.reason) for e in out.decisions.evicted] == [(ref(1, 100).id, "budget")]

    def test_a_message_of_two_thousand_images_keeps_the_newest_that_fit(self) -> None:
        blocks = [Image(ref=ref(n, 100)) for n in range(2_000)]  # 1,600 tokens each
        message = Message(role="user", content=(Text(text="shots"), *blocks), id="many")
        out = run(state(message), profile(20_100, 100), Policy(output_reserve=100, max_inline_images=0))
        kept = [b.ref for b in out.messages[-1].content if isinstance(b, Image)]
        assert kept == [ref(n, 100) for n in range(2_000 - len(kept), 2_000)]
        assert kept  # the newest fit beside the placeholders of the rest
        assert out.estimated_tokens <= out.budget

    def test_a_unit_that_fits_keeps_its_media_inline(self) -> None:
        shot = Message.user("the screen", Image(ref=ref(1, 100)), id="shot")
        out = run(state(Message.user(PROSE, id="p"), shot), profile(2_100, 100), Policy(output_reserve=100))
        assert out.decisions.evicted == ()
        assert any(isinstance(b, Image) for b in out.messages[-1].content)


class TestCutToFill:
    """A unit that does not fit the room left, where the tail so far fills less than
    ``policy.cut_to_fill_below`` of the budget, is cut to the room left rather than left out."""

    def history(self) -> list[Message]:
        prose = [Message.user(PROSE * 4, id=f"p{n}") for n in range(5)]  # ~63 tokens each
        big = Message.user(PROSE * 100, id="big")  # ~1,550 tokens: larger than the whole budget
        return [*prose[:3], big, *prose[3:]]

    def test_a_large_message_just_past_a_short_tail_is_cut_to_the_room_left(self) -> None:
        policy = Policy(output_reserve=100, max_message_tokens=0)
        out = run(state(*self.history()), profile(1_100, 100), policy)
        assert [m.id for m in out.messages] == ["big", "p3", "p4"]
        assert out.decisions.omitted == ("p0", "p1", "p2")
        [cut] = out.decisions.truncated
        assert cut.message_id == "big" and cut.rendered_tokens < cut.original_tokens
        assert 0.9 * out.budget <= out.estimated_tokens <= out.budget

    def test_with_the_rule_off_the_large_message_is_left_out_with_everything_older(self) -> None:
        policy = Policy(output_reserve=100, max_message_tokens=0, cut_to_fill_below=0)
        out = run(state(*self.history()), profile(1_100, 100), policy)
        assert [m.id for m in out.messages] == ["p3", "p4"]
        assert out.estimated_tokens < 0.2 * out.budget

    def test_a_tail_already_past_the_share_leaves_the_large_message_out(self) -> None:
        recent = [Message.user(PROSE * 4, id=f"r{n}") for n in range(10)]  # ~630 of a 1,000 budget
        policy = Policy(output_reserve=100, max_message_tokens=0)
        out = run(state(*self.history()[:4], *recent), profile(1_100, 100), policy)
        assert [m.id for m in out.messages] == [f"r{n}" for n in range(10)]
        assert out.decisions.truncated == ()

    def test_an_incremental_compile_cuts_as_a_cold_one_does(self) -> None:
        msgs = [Message.user("start", id="u0")]
        for n in range(16):
            msgs += tool_round(n, PROSE * (50 if n in (1, 9) else 2))  # two results over the cap
        policy = Policy(output_reserve=100, recent_turns_full=1)
        cache = CompileCache()
        p = profile(1_100, 100)
        cuts = 0
        for k in range(3, len(msgs)):
            s = state(*msgs[:k])
            warm = run(s, p, policy, cache=cache)
            assert warm == run(s, p, policy)
            cuts += warm != run(s, p, policy.with_(cut_to_fill_below=0))
        assert cuts >= 3  # the walk cut on the way, the same large result at more than one length

    def test_the_share_must_be_in_zero_to_one(self) -> None:
        with pytest.raises(InvalidInput, match="cut_to_fill_below"):
            Policy(cut_to_fill_below=1.0)


class TestTransportWall:
    def test_an_oversized_request_raises_with_the_figures(self) -> None:
        policy = Policy(max_inline_images=0, image_depth_tokens=0, transport_max_bytes=600)
        with pytest.raises(OverBudget, match="transport wall"):
            run(state(*image_session(3)), profile(100_000), policy)

    def test_with_the_opt_in_media_are_shed_oldest_first_nested_included(self) -> None:
        msgs = [
            Message.user("look", id="u"),
            *[m for n in range(1, 4) for m in tool_round(n, (Text(text="shot"), Image(ref=ref(n, 300))))],
        ]
        policy = Policy(
            max_inline_images=0,
            image_depth_tokens=0,
            transport_max_bytes=1500,
            shed_media_over_wall=True,
            recent_turns_full=5,
        )
        out = run(state(*msgs), profile(100_000), policy)
        assert out.request_bytes <= 1500
        shed = [e.attachment_id for e in out.decisions.evicted if e.reason == "wall"]
        assert shed == [ref(1, 300).id, ref(2, 300).id]
        assert ref(3, 300).id in {r.id for r in out.inline_attachments}


class TestStaleArchive:
    def turns(self, result: str | tuple, turns_after: int) -> list[Message]:  # type: ignore[type-arg]
        msgs = [Message.user("task", id="u0"), *tool_round(1, result)]
        for n in range(turns_after):
            msgs += [Message.user(f"turn {n}", id=f"u{n + 1}"), Message.assistant("ok", id=f"x{n + 1}")]
        return msgs

    def test_an_older_result_with_media_becomes_a_placeholder(self) -> None:
        out = run(
            state(*self.turns((Text(text="ok"), Image(ref=ref(7, 10))), 2), session_id="s1"), profile(100_000)
        )
        [record] = out.decisions.new_archives
        result = out.messages[2].content[0]
        assert isinstance(result, ToolResult) and result.tool_use_id == "t1"
        assert record.artifact_id in str(result.content) and ref(7, 10).id in str(result.content)
        assert ref(7, 10).id not in {r.id for r in out.inline_attachments}

    def test_as_needed_a_stale_result_that_fits_stays_whole(self) -> None:
        policy = Policy(archive_as_needed=True)
        out = run(state(*self.turns("j" * 6_000, 2)), profile(100_000), policy)
        assert out.decisions.new_archives == ()
        assert run(state(*self.turns("j" * 6_000, 2)), profile(100_000)).decisions.new_archives

    def test_as_needed_a_stale_result_is_archived_where_the_walk_needs_the_room(self) -> None:
        # ~2,600 tokens of result, a 2,000 budget: whole it does not fit, archived it does.
        policy = Policy(archive_as_needed=True, output_reserve=100, max_message_tokens=0, cut_to_fill_below=0)
        out = run(state(*self.turns("j" * 6_000, 2)), profile(2_100, 100), policy)
        [record] = out.decisions.new_archives
        assert [m.id for m in out.messages][:3] == ["u0", "a1", "r1"]
        assert record.artifact_id in str(out.messages[2].content[0].content)  # type: ignore[union-attr]
        assert out.decisions.omitted == ()

    def test_recent_turns_are_protected(self) -> None:
        out = run(state(*self.turns((Text(text="ok"), Image(ref=ref(7, 10))), 1)), profile(100_000))
        assert out.decisions.new_archives == ()

    @pytest.mark.parametrize(
        ("chars", "archived"),
        [(2300, False), (int(2.3 * 2048), False), (int(2.3 * 2048) + 3, True)],
        ids=["1000-tokens", "at-2048", "over-2048"],
    )
    def test_a_text_only_result_needs_to_be_over_the_threshold(self, chars: int, archived: bool) -> None:
        out = run(state(*self.turns("j" * chars, 2)), profile(100_000))
        assert bool(out.decisions.new_archives) is archived

    def test_the_record_and_artifact_id_have_the_seed_shape(self) -> None:
        out = run(state(*self.turns((Image(ref=ref(7, 10)),), 2), session_id="s1"), profile(100_000))
        [record] = out.decisions.new_archives
        payload = record.to_payload()
        assert set(payload) >= {
            "artifact_id",
            "tool_use_id",
            "tool_name",
            "body_sha256",
            "original_estimated_tokens",
            "original_bytes",
            "reason",
            "rewrite_version",
        }
        body = json.dumps(
            {
                "sessionId": "s1",
                "runtimeEventId": "message-2",  # the result's place in the session, not its ledger id
                "toolCallId": "t1",
                "toolName": "read",
                "bodySha256": record.body_sha256,
                "rewriteVersion": 1,
            },
            separators=(",", ":"),
        )
        assert record.artifact_id == "tool-result-archive-" + hashlib.sha256(body.encode()).hexdigest()[:32]
        assert record.message_id == "r1"
        assert record.artifact_id == artifact_id(
            session_id="s1",
            event="message-2",
            tool_use_id="t1",
            tool_name="read",
            body_sha256=record.body_sha256,
        )

    def test_a_recorded_archive_wins_and_compiles_the_same_bytes(self) -> None:
        msgs = self.turns((Image(ref=ref(7, 10)),), 2)
        live = run(state(*msgs, session_id="s1"), profile(100_000))
        again = run(state(*msgs, session_id="s1", archives=live.decisions.new_archives), profile(100_000))
        assert again.messages == live.messages and again.decisions.new_archives == ()
        rival = ArchiveRecord(
            **{**live.decisions.new_archives[0].__dict__}
            if False
            else dict(
                artifact_id="tool-result-archive-rival",
                message_id="r1",
                tool_use_id="t1",
                tool_name="read",
                body_sha256="x",
                original_estimated_tokens=5,
                original_bytes=5,
            )
        )
        shown = run(state(*msgs, session_id="s1", archives=(rival,)), profile(100_000))
        assert "tool-result-archive-rival" in str(shown.messages[2].content[0].content)  # type: ignore[union-attr]


class TestDeterminism:
    def test_a_cache_never_changes_the_result(self) -> None:
        msgs = [Message.user("start", id="u0")]
        for n in range(30):
            msgs += tool_round(n, (Text(text="r" * 300), Image(ref=ref(n, 1000))))
        policy = Policy(max_inline_images=3, recent_turns_full=1)
        cache = CompileCache()
        p = profile(8000, 1000)
        for k in range(5, len(msgs)):
            s = state(*msgs[:k])
            assert run(s, p, policy, cache=cache) == run(s, p, policy)

    def test_consecutive_compiles_keep_the_previous_request_as_a_prefix(self) -> None:
        p = profile(1_000_000, 1000)
        msgs = [Message.user("start", id="u0")]
        previous = None
        cache = CompileCache()
        for n in range(25):
            msgs += tool_round(n, "result " * 20)
            out = run(state(*msgs), p, Policy(recent_turns_full=100), cache=cache)
            assert out.decisions.evicted == () and out.decisions.omitted == ()
            if previous is not None:
                assert out.messages[: len(previous.messages)] == previous.messages
            previous = out

    def test_calibration_applies_per_top_level_block(self) -> None:
        msgs = [Message.user(*["a"] * 83, id="m")]
        assert run(state(*msgs, multiplier=1.75), profile(100_000)).makeup["text"] == 166
        assert run(state(*msgs, multiplier=1.0), profile(100_000)).makeup["text"] == 83

    def test_a_bad_multiplier_is_invalid_input(self) -> None:
        with pytest.raises(InvalidInput, match="multiplier"):
            run(state(Message.user("a", id="a"), multiplier=float("nan")), profile(1000))

    def test_a_watermark_naming_an_unknown_message_is_ignored(self) -> None:
        out = run(state(*image_session(2), watermark=MediaWatermark(message_id="gone")), profile(100_000))
        assert pattern(out, 2) == "II"

    @settings(max_examples=40, deadline=None)
    @given(
        st.lists(st.sampled_from(["text", "image", "tool", "orphan"]), min_size=1, max_size=25),
        st.integers(1500, 20_000),
    )
    # Orphan-only messages render as OMITTED_CALL, priced above the stored result the walk fitted:
    # these drew a request 12 and 14 tokens over a 500-token budget before compile re-checked the
    # tail as emitted.
    @example(["text"] * 6 + ["tool", "text", "orphan", "orphan"], 1500)
    @example(["text", "text", "orphan", "text", "image", "tool", "tool", "orphan", "orphan"], 1500)
    def test_compiles_are_reproducible_and_paired_for_any_history(
        self, kinds: list[str], window: int
    ) -> None:
        msgs: list[Message] = []
        for i, kind in enumerate(kinds):
            if kind == "text":
                msgs.append(Message.user(PROSE * (i % 7 + 1), id=f"m{i}"))
            elif kind == "image":
                msgs.append(Message.user("see", Image(ref=ref(i, 5000)), id=f"m{i}"))
            elif kind == "tool":
                msgs += [
                    Message.assistant(ToolUse(id=f"t{i}", name="x"), id=f"a{i}"),
                    Message.user(ToolResult(tool_use_id=f"t{i}", content="x" * (i * 50)), id=f"r{i}"),
                ]
            else:
                msgs.append(Message.user(ToolResult(tool_use_id=f"gone{i}", content="?"), id=f"o{i}"))
        p = profile(window, 1000)
        try:
            first = run(state(*msgs), p, Policy(output_reserve=1000, max_inline_images=2))
        except OverBudget as err:
            assert err.makeup["output_reserve"] == 1000
            return
        assert first == run(state(*msgs), p, Policy(output_reserve=1000, max_inline_images=2))
        assert first.local_estimate <= math.floor(first.budget * 1.02)
        calls: set[str] = set()
        for message in first.messages:
            for block in message.content:
                if isinstance(block, ToolResult):
                    assert block.tool_use_id in calls
            calls = {b.id for b in message.content if isinstance(b, ToolUse)}
        assert sum(v for k, v in first.makeup.items() if k != "output_reserve") == first.local_estimate
