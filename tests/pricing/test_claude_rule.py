"""The Claude rule: tool calls priced as their parameters, punctuation, and accuracy on real sessions.

The figures are ``benchmarks/pricing_accuracy.py --claude``'s, on the half of the real Claude Code
sessions the fit (``benchmarks/fit_claude_rule.py``) never read.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from _shared import CLAUDE_SESSIONS, require
from contextwindow.content import Message, ToolUse
from contextwindow.pricing import Estimator
from contextwindow.pricing._seed_store import js_json
from contextwindow.pricing._text import structure_for


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class TestToolCalls:
    def test_a_claude_call_costs_its_parameters_with_string_values_as_they_are(self) -> None:
        est = Estimator("claude-sonnet-4-5")
        value = 'print("a")\n\tif x:\n\t\treturn "b"\n'  # JSON would escape every quote and break
        use = ToolUse(id="t", name="Write", input={"content": value, "lines": [1, 2]})
        s = structure_for("claude")
        assert s.tool_param is not None
        expected = (
            est.raw_text("Write")
            + s.tool_use
            + 2 * s.tool_param
            + est.raw_text("content")
            + est.raw_text(value)
            + est.raw_text("lines")
            + est.raw_text(js_json([1, 2]))
        )
        assert est.raw_block(use) == pytest.approx(expected)

    def test_each_parameter_adds_its_framing(self) -> None:
        est = Estimator("claude-opus-4-7")
        one = ToolUse(id="t", name="Grep", input={"pattern": "def main"})
        five = ToolUse(
            id="t", name="Grep", input={"pattern": "def main", "path": "/src", "-n": True, "-A": 3, "-B": 3}
        )
        assert est.raw_block(five) - est.raw_block(one) > 4 * (structure_for("claude-2026").tool_param or 0)

    def test_openai_still_prices_the_json_of_the_input(self) -> None:
        est = Estimator("gpt-4o")
        use = ToolUse(id="t", name="read", input={"path": "a.py", "n": 2})
        assert structure_for("o200k").tool_param is None
        assert (
            est.raw_block(use) == est.raw_text(js_json({"path": "a.py", "n": 2})) + est.raw_text("read") + 8
        )


class TestPunctuation:
    def test_claude_prices_punctuation_above_the_vocabulary_ratio(self) -> None:
        # the same letters, once with punctuation between them: Claude merges punctuation less than
        # o200k, so punctuation raises a Claude price more than an o200k rule price
        def raised(model: str) -> float:
            est = Estimator(model, exact=False)
            return est.raw_text("alpha.beta(gamma);delta, " * 20) / est.raw_text(
                "alpha beta gamma delta " * 20
            )

        assert raised("claude-sonnet-4-5") > 1.1 * raised("gpt-4o")

    def test_text_that_is_not_ascii_keeps_the_whole_content_ratio(self) -> None:
        # the sessions hold almost no such text: the punctuation fit's lower ratio does not reach it
        from contextwindow.pricing._tables import table

        words = "Привет мир как дела сегодня " * 30
        ratio = Estimator("claude-sonnet-4-5").raw_text(words) / Estimator("gpt-4o", exact=False).raw_text(
            words
        )
        data = table("coefficients")
        other, plain = data["claude_other_ratio"]["claude"], data["claude_ratio"]["claude"]
        assert other > plain
        assert plain + 0.8 * (other - plain) < ratio <= other  # the spaces are ASCII


class TestRealSessions:
    """Anthropic's own counts on the held-out half of the real sessions."""

    def _held(self) -> list[Any]:
        require(CLAUDE_SESSIONS, "the shared Claude Code session corpus")
        from benchmarks import _claude_sessions as sessions
        from benchmarks import fit_claude_rule

        return sessions.rounds("holdout", held_out_every=fit_claude_rule.HELD_OUT_EVERY)

    def test_an_assistant_message_is_priced_near_its_output_count(self) -> None:
        from benchmarks import fit_claude_rule

        found = [r for r in self._held() if fit_claude_rule.real_output(r)]
        assert len(found) >= 50
        errors = []
        for r in found:
            est = Estimator(r.model)
            framing = est.message(Message(role="assistant", content=()))
            price = est.message(r.messages[0]) - framing
            errors.append(abs(price - r.output) / r.output)
        # main 4072772 (compact JSON, one figure per call): p50 18.0%, p90 33.9%
        assert statistics.median(errors) <= 0.05
        assert _pct(errors, 0.90) <= 0.15

    def test_appended_rounds_the_log_explains_are_priced_near_the_real_delta(self) -> None:
        from benchmarks import _claude_sessions as sessions

        found = [r for r in self._held() if r.delta >= 500 and sessions.explained(r)]
        assert len(found) >= 100
        errors = [abs(Estimator(r.model).messages(r.messages) - r.delta) / r.delta for r in found]
        # main 4072772: p50 4.7%, p90 20.5%; this rule: 4.1%, 17.3%
        assert statistics.median(errors) <= 0.045
        assert _pct(errors, 0.90) <= 0.19
