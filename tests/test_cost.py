"""Cost in dollars: a Usage priced by genai-prices, None for a model it does not know."""

from __future__ import annotations

from decimal import Decimal

import pytest

from contextwindow import cost
from contextwindow.errors import UsageError
from contextwindow.usage.tracker import Usage

pytest.importorskip("genai_prices")


class TestPrice:
    def test_prices_fresh_input_cache_reads_writes_and_output_each_at_its_rate(self) -> None:
        # Claude Sonnet 4.6: $3 / M input, $0.30 / M cache read, $3.75 / M cache write, $15 / M output
        # (https://platform.claude.com/docs/en/about-claude/pricing).
        usage = Usage(fresh_input=700_000, cache_read=200_000, cache_write=100_000, output=10_000)
        spent = cost.price(usage, "claude-sonnet-4-6")
        assert spent is not None
        assert spent.input == Decimal("2.1") + Decimal("0.06") + Decimal("0.375")
        assert spent.output == Decimal("0.15")
        assert spent.total == Decimal("2.685")
        assert spent.provider == "anthropic"

    def test_a_cache_read_costs_less_than_the_same_tokens_fresh(self) -> None:
        fresh = cost.price(Usage(fresh_input=100_000), "claude-sonnet-4-6")
        cached = cost.price(Usage(cache_read=100_000), "claude-sonnet-4-6")
        assert fresh is not None and cached is not None
        assert cached.total * 10 == fresh.total

    def test_an_unknown_model_is_none_not_a_guess(self) -> None:
        assert cost.price(Usage(fresh_input=1000, output=10), "no-such-model-anywhere") is None
        assert cost.price_all([Usage(fresh_input=1000)], "no-such-model-anywhere") is None

    def test_a_session_is_the_sum_of_its_calls(self) -> None:
        calls = [Usage(fresh_input=1_000, output=100), Usage(cache_read=1_000, fresh_input=50, output=20)]
        each = [cost.price(u, "gpt-4o") for u in calls]
        assert all(c is not None for c in each)
        total = cost.price_all(calls, "gpt-4o")
        assert total is not None
        assert total.total == sum((c.total for c in each if c is not None), Decimal(0))
        assert total.total > 0

    def test_no_calls_cost_nothing(self) -> None:
        nothing = cost.price_all([], "gpt-4o")
        assert nothing is not None and nothing.total == 0

    def test_a_wrong_argument_is_a_usage_error(self) -> None:
        with pytest.raises(UsageError):
            cost.price({"fresh_input": 3}, "gpt-4o")  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            cost.price(Usage(), "")


class TestWithoutGenaiPrices:
    def test_pricing_names_the_extra_when_genai_prices_is_missing(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import sys

        cost._prices.cache_clear()
        monkeypatch.setitem(sys.modules, "genai_prices", None)
        try:
            assert not cost.available()
            with pytest.raises(UsageError, match=r"contextwindow\[cost\]"):
                cost.price(Usage(fresh_input=1), "gpt-4o")
        finally:
            cost._prices.cache_clear()

    def test_importing_contextwindow_does_not_import_genai_prices(self) -> None:
        import subprocess
        import sys

        code = "import sys, contextwindow, contextwindow.cost; print('genai_prices' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "False"
