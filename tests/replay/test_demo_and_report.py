"""The bundled demo scenario and the run report."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from contextwindow.content import Document, Image, Text, ToolResult
from contextwindow.errors import InvalidInput
from contextwindow.replay.demo import DEMO_WINDOW, build_demo, stdlib_sources
from contextwindow.replay.report import CallRecord, percentile, summarize, write_report
from contextwindow.replay.scenario_file import dumps_scenario


@pytest.fixture(scope="module")
def demo() -> object:
    return build_demo(0)


class TestDemoScenario:
    def test_is_long_enough_to_overflow_a_small_window_many_times(self, demo: object) -> None:
        from contextwindow.replay.scenario import Scenario

        assert isinstance(demo, Scenario)
        assert 150 <= demo.calls <= 250
        assert demo.window == DEMO_WINDOW
        text = sum(
            len(b.content)
            for m in demo.messages()
            for b in m.content
            if isinstance(b, ToolResult) and isinstance(b.content, str)
        )
        assert text / 4 > 3 * DEMO_WINDOW  # several windows' worth of text alone, before any image

    def test_reads_real_standard_library_sources(self, demo: object) -> None:
        from contextwindow.replay.scenario import Scenario

        assert isinstance(demo, Scenario)
        first = stdlib_sources()[0]
        shown = "\n".join(str(r.content) for r in demo.tool_results().values())
        assert first.read_text(encoding="utf-8").splitlines()[0] in shown

    def test_has_screenshots_photos_a_pdf_chinese_and_json(self, demo: object) -> None:
        from contextwindow.replay.scenario import Scenario

        assert isinstance(demo, Scenario)
        refs = demo.attachment_refs()
        assert sum(r.media_type == "image/png" and (r.width, r.height) == (1280, 800) for r in refs) >= 20
        assert any(r.media_type == "image/jpeg" for r in refs)
        assert sum(len(t.injections) for t in demo.turns) >= 3
        assert any(isinstance(b, Document) for t in demo.turns for b in t.user.content)
        assert any(
            re.search(r"[\u4e00-\u9fff]", b.text)
            for t in demo.turns
            for b in t.user.content
            if isinstance(b, Text)
        )
        assert any(str(r.content).startswith("{") for r in demo.tool_results().values())
        assert all(
            isinstance(b, Image) for t in demo.turns for i in t.injections for b in i.message.content[1:]
        )

    def test_same_seed_same_scenario_other_seed_other_scenario(self, demo: object) -> None:
        from contextwindow.replay.scenario import Scenario

        assert isinstance(demo, Scenario)

        def digest(seed: int) -> str:  # small images keep this quick; the script is the same
            return hashlib.sha256(dumps_scenario(build_demo(seed, image_scale=0.05)).encode()).hexdigest()

        assert digest(0) == digest(0)
        assert digest(0) != digest(1)


def record(
    call: int, provider: int | None, estimate: int, *, rejected: bool = False, events: tuple[str, ...] = ()
) -> CallRecord:
    return CallRecord(
        call=call,
        makeup={"system": 100, "text": estimate - 100, "output_reserve": 1000},
        estimated_tokens=estimate,
        provider_input_tokens=provider,
        window=10_000,
        rejected=rejected,
        events=events,  # type: ignore[arg-type]
    )


class TestCallRecordSegments:
    def test_the_manifest_is_a_segment_of_the_makeup(self) -> None:
        call = CallRecord(
            call=0,
            makeup={"system": 100, "text": 800, "manifest": 40, "output_reserve": 1000},
            estimated_tokens=940,
            provider_input_tokens=950,
            window=10_000,
        )
        assert call.to_dict()["makeup"]["manifest"] == 40


# A hand-made run: call 2 is rejected then recovered by call 3; call 4 is unreported.
TABLE = [
    record(0, 2_000, 2_200),
    record(1, 5_000, 4_500, events=("restarted", "evicted")),
    record(2, 11_000, 9_000, rejected=True),
    record(3, 4_000, 4_000, events=("compacted", "archived")),
    record(4, None, 4_100),
]


class TestSummary:
    def test_summary_of_a_hand_made_table(self) -> None:
        s = summarize(TABLE, tokenizer="o200k_base")
        assert s["calls"] == 5 and s["rejections"] == 1 and s["recovered"] == 1
        assert (s["restarts"], s["compactions"], s["evictions"], s["archived"]) == (1, 1, 1, 1)
        # accepted and counted: 0.2, 0.5, 0.4 → mean 0.3667; p5 = 0.2 + 0.1 × (0.4 − 0.2)
        assert s["window_use_mean"] == pytest.approx(0.3667)
        assert s["window_use_p5"] == pytest.approx(0.22)
        # errors: 0.1, 0.1, 2000/11000, 0 → p95 = 0.1 + 0.85 × (0.1818 − 0.1)
        assert s["estimate_error_p95"] == pytest.approx(0.1 + 0.85 * (2000 / 11000 - 0.1), abs=1e-4)
        assert s["tokenizer"] == "o200k_base"
        json.dumps(s)

    def test_a_rejection_followed_by_another_is_not_recovered(self) -> None:
        s = summarize([record(0, 11_000, 9_000, rejected=True), record(1, 10_500, 9_000, rejected=True)])
        assert (s["rejections"], s["recovered"]) == (2, 0)

    def test_nothing_counted_gives_none_not_nan(self) -> None:
        s = summarize([record(0, None, 100)])
        assert s["window_use_mean"] is None and s["window_use_p5"] is None and s["estimate_error_p95"] is None
        assert summarize([])["calls"] == 0

    @pytest.mark.parametrize(
        ("values", "q", "expected"),
        [
            ([1.0], 0.95, 1.0),
            ([1.0, 2.0], 0.5, 1.5),
            ([3.0, 1.0, 2.0], 0.0, 1.0),
            ([3.0, 1.0, 2.0], 1.0, 3.0),
            ([], 0.5, None),
        ],
        ids=["single", "midpoint", "min", "max", "empty"],
    )
    def test_percentile(self, values: list[float], q: float, expected: float | None) -> None:
        assert percentile(values, q) == expected

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"estimated_tokens": -1}, "calls[0].estimated_tokens"),
            ({"window": 0}, "calls[0].window"),
            ({"provider_input_tokens": -5}, "calls[0].provider_input_tokens"),
            ({"makeup": {"pictures": 3}}, "calls[0].makeup.pictures"),
            ({"events": ("exploded",)}, "calls[0].events[0]"),
        ],
        ids=["negative-estimate", "zero-window", "negative-count", "unknown-segment", "unknown-event"],
    )
    def test_bad_records_are_refused_naming_the_field(self, kwargs: dict[str, object], field: str) -> None:
        base: dict[str, object] = {
            "call": 0,
            "makeup": {},
            "estimated_tokens": 1,
            "provider_input_tokens": 1,
            "window": 10,
        }
        with pytest.raises(InvalidInput) as caught:
            CallRecord(**{**base, **kwargs})  # type: ignore[arg-type]
        assert caught.value.path == field


class TestReport:
    def test_writes_chart_page_and_calls(self, tmp_path: Path) -> None:
        out = tmp_path / "contextwindow-report"
        page = write_report(TABLE, summarize(TABLE), out, title="t <run>")
        png = (out / "makeup.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 10_000
        text = page.read_text()
        assert 'src="makeup.png"' in text and "t &lt;run&gt;" in text
        assert text.count("<tr") == 5 + len(summarize(TABLE)) + 1
        assert json.loads((out / "calls.json").read_text())[2]["rejected"] is True

    def test_refuses_an_empty_run(self, tmp_path: Path) -> None:
        with pytest.raises(InvalidInput):
            write_report([], {}, tmp_path)
