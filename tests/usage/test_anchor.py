"""Usage anchors: record validation (maka's ``isLastRequestAnchor``,
https://github.com/apache/maka/pull/4559), anchored estimates and cold starts."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.errors import InvalidInput
from contextwindow.store.slots import MemorySlot
from contextwindow.usage.tracker import Anchor, AnchorBook, anchored_estimate, newest_anchor

ROUTE = {"model": "gpt-4o", "connection": "default"}


def anchor(**kw: Any) -> Anchor:
    base: dict[str, Any] = {**ROUTE, "input_tokens": 10_000, "output_tokens": 500, "payload_estimate": 9_000}
    return Anchor(**{**base, **kw})


VALID_RECORDS = [
    pytest.param({"inputTokens": 10}, id="input-only"),
    pytest.param({"inputTokens": 10, "outputTokens": 0}, id="output-zero"),
    pytest.param({"inputTokens": 10, "payloadChars": 4_000}, id="retired-payloadChars-decodes"),
    pytest.param(
        {"inputTokens": 10, "outputTokens": 3, "modelId": "gpt-4o", "connectionId": "c1"}, id="maka-shape"
    ),
    pytest.param(
        {"input_tokens": 10, "output_tokens": 3, "payload_estimate": 9, "version": 1}, id="own-shape"
    ),
]

INVALID_RECORDS = [
    pytest.param({"payloadChars": 4_000}, "input_tokens", id="payloadChars-alone"),
    pytest.param({"inputTokens": 0}, "inputTokens", id="input-zero"),
    pytest.param({"inputTokens": 10, "outputTokens": -1}, "outputTokens", id="output-negative"),
    pytest.param({"inputTokens": 10, "surprise": 1}, "surprise", id="unknown-key"),
    pytest.param({"inputTokens": 10, "input_tokens": 10}, "input_tokens", id="field-given-twice"),
    pytest.param({"inputTokens": 10.5}, "inputTokens", id="fractional"),
    pytest.param({"inputTokens": True}, "inputTokens", id="boolean"),
    pytest.param({"inputTokens": 10, "payloadChars": -1}, "payloadChars", id="retired-key-still-validated"),
    pytest.param({"input_tokens": 10, "version": 2}, "version", id="newer-version"),
]


class TestAnchorValidation:
    @pytest.mark.parametrize("record", VALID_RECORDS)
    def test_valid_records_decode(self, record: dict[str, Any]) -> None:
        decoded = Anchor.from_record(record, model="gpt-4o", connection="c0")
        assert decoded.input_tokens == 10

    @pytest.mark.parametrize(("record", "bad_key"), INVALID_RECORDS)
    def test_an_invalid_part_makes_the_whole_record_invalid(
        self, record: dict[str, Any], bad_key: str
    ) -> None:
        with pytest.raises(InvalidInput) as err:
            Anchor.from_record(record, model="gpt-4o", connection="c0")
        assert err.value.path == f"anchor.{bad_key}"

    def test_the_retired_payloadChars_decodes_to_half_an_anchor(self) -> None:
        decoded = Anchor.from_record({"inputTokens": 10, "payloadChars": 4_000}, model="m", connection="c")
        assert decoded.payload_estimate is None and decoded.baseline == 10

    def test_a_record_needs_a_route(self) -> None:
        with pytest.raises(InvalidInput) as err:
            Anchor.from_record({"input_tokens": 10})
        assert err.value.path == "anchor.model"

    def test_round_trips_through_its_record(self) -> None:
        a = anchor()
        assert Anchor.from_record(a.to_record()) == a

    def test_baseline_is_input_plus_output(self) -> None:
        assert anchor(output_tokens=None).baseline == 10_000
        assert anchor().baseline == 10_500


class TestAnchoredEstimate:
    def test_anchor_input_plus_the_signed_delta(self) -> None:
        grown = anchored_estimate(anchor(), **ROUTE, estimate_now=9_400)
        assert (grown.value, grown.cold, grown.delta, grown.reason) == (10_400, False, 400, None)
        shrunk = anchored_estimate(anchor(), **ROUTE, estimate_now=8_000)
        assert (shrunk.value, shrunk.delta) == (9_000, -1_000)

    def test_a_shrunk_request_is_never_below_its_own_estimate(self) -> None:
        # The estimator priced the anchored payload 10,000 where the provider counted 6,000: taking
        # 5,000 of its own tokens out would leave 1,000, a sixth of what the rest may cost.
        high = anchor(input_tokens=6_000, payload_estimate=10_000)
        shrunk = anchored_estimate(high, **ROUTE, estimate_now=5_000)
        assert (shrunk.value, shrunk.cold, shrunk.delta) == (5_000, False, -5_000)

    def test_a_shrunk_request_keeps_the_anchored_figure_when_the_estimate_errs_low(self) -> None:
        low = anchor(input_tokens=12_000, payload_estimate=10_000)
        shrunk = anchored_estimate(low, **ROUTE, estimate_now=5_000)
        assert (shrunk.value, shrunk.delta) == (7_000, -5_000)

    def test_taking_out_what_the_estimate_priced_high_leaves_no_underestimate(self) -> None:
        # A generated session at 32k: a document the estimator priced about 18,000 (the provider
        # counted 12,000) was evicted. At the anchor's ratio (0.82) the next request came out at
        # 13,410 where the provider counted 16,506; its own estimate was 16,404.
        evicted = anchor(input_tokens=26_581, payload_estimate=32_517)
        shrunk = anchored_estimate(evicted, **ROUTE, estimate_now=16_404)
        assert shrunk.value == 16_404 and not shrunk.cold

    @pytest.mark.parametrize(
        ("the_anchor", "route", "estimate_now", "reason"),
        [
            pytest.param(None, ROUTE, 500, "no anchor", id="no-anchor"),
            pytest.param(anchor(), {**ROUTE, "model": "gpt-4.1"}, 500, "model 'gpt-4o'", id="other-model"),
            pytest.param(
                anchor(), {**ROUTE, "connection": "eu"}, 500, "connection 'default'", id="other-connection"
            ),
            pytest.param(anchor(payload_estimate=None), ROUTE, 500, "half an anchor", id="half-an-anchor"),
            pytest.param(
                anchor(), ROUTE, 4_000, "wider than the whole payload", id="delta-wider-than-payload"
            ),
            pytest.param(
                anchor(input_tokens=100, payload_estimate=9_000),
                ROUTE,
                8_000,
                "negative",
                id="negative-figure",
            ),
        ],
    )
    def test_cold_start_gives_the_plain_estimate_with_the_reason(
        self, the_anchor: Anchor | None, route: dict[str, str], estimate_now: int, reason: str
    ) -> None:
        result = anchored_estimate(the_anchor, **route, estimate_now=estimate_now)
        assert result.cold and result.value == estimate_now
        assert result.reason is not None and reason in result.reason

    def test_rejects_a_negative_estimate(self) -> None:
        with pytest.raises(InvalidInput) as err:
            anchored_estimate(anchor(), **ROUTE, estimate_now=-1)
        assert err.value.path == "estimate_now"

    @given(st.integers(1, 10**7), st.integers(0, 10**7), st.integers(0, 10**7))
    def test_never_negative_and_exactly_the_anchor_when_nothing_changed(
        self, real: int, payload: int, now: int
    ) -> None:
        a = anchor(input_tokens=real, payload_estimate=payload)
        result = anchored_estimate(a, **ROUTE, estimate_now=now)
        assert result.value >= 0
        if now == payload and payload > 0:
            assert not result.cold and result.value == real


class TestNewestAnchorDecides:
    def test_a_mismatching_newest_anchor_is_a_cold_start_not_a_fallback(self) -> None:
        book = AnchorBook()
        book.record(anchor())
        book.record(anchor(model="claude-sonnet-4-5"))
        result = book.estimate(**ROUTE, estimate_now=9_000)
        assert result.cold and "claude-sonnet-4-5" in (result.reason or "")

    def test_newest_anchor_skips_rows_without_one_and_does_not_fall_back(self) -> None:
        old, new = anchor(), anchor(model="other")
        assert newest_anchor([old, None, new, None]) is new
        assert newest_anchor([None, None]) is None

    def test_the_anchor_persists_and_reopens(self) -> None:
        slot = MemorySlot()
        AnchorBook(slot).record(anchor())
        assert AnchorBook(slot).estimate(**ROUTE, estimate_now=9_100).value == 10_100

    def test_clearing_persists_and_reports_why(self) -> None:
        slot = MemorySlot()
        book = AnchorBook(slot)
        book.record(anchor())
        book.clear("overflow recovered")
        result = AnchorBook(slot).estimate(**ROUTE, estimate_now=9_100)
        assert result.cold and result.reason == "anchor cleared: overflow recovered"

    def test_an_undecodable_stored_anchor_starts_cold_and_says_why(self) -> None:
        slot = MemorySlot(
            {"version": 1, "anchor": {"input_tokens": 5, "model": "m", "connection": "c", "x": 1}}
        )
        result = AnchorBook(slot).estimate(model="m", connection="c", estimate_now=7)
        assert result.cold and "unknown anchor key 'x'" in (result.reason or "")
