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


class TestRatesOnce:
    """A price without tiers is asked of genai-prices once per model and price, then worked out
    from its rates (:mod:`contextwindow.cost`): always genai-prices' own answer, to the decimal."""

    def test_every_price_genai_prices_holds_is_its_own_answer(self) -> None:
        import genai_prices
        import genai_prices.data_snapshot

        usages = [
            Usage(fresh_input=1_234, cache_read=56_789, cache_write=2_345, output=678),
            # Over every tier's start (200k and 272k input): a tiered price is asked each time.
            Usage(fresh_input=310_000, cache_read=1_000, output=9_000),
            Usage(),
        ]
        priced = 0
        for provider in genai_prices.data_snapshot.get_snapshot().providers:
            for model in provider.models:
                for usage in usages:
                    ours = cost.price(usage, model.id, provider=provider.id)
                    counted = genai_prices.Usage(
                        input_tokens=usage.prompt,
                        cache_read_tokens=usage.cache_read,
                        cache_write_tokens=usage.cache_write,
                        output_tokens=usage.output,
                    )
                    try:
                        theirs = genai_prices.calc_price(counted, model.id, provider_id=provider.id)
                    except LookupError:
                        assert ours is None
                        continue
                    assert ours is not None, (provider.id, model.id)
                    assert (ours.input, ours.output) == (theirs.input_price, theirs.output_price), (
                        provider.id,
                        model.id,
                        usage,
                    )
                    assert (ours.model, ours.provider) == (str(theirs.model.id), str(theirs.provider.id))
                    priced += 1
        assert priced > 1_000

    def test_an_untiered_price_is_not_asked_again(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import genai_prices
        import genai_prices.types

        usage = Usage(fresh_input=9_000, cache_read=40_000, cache_write=1_000, output=800)
        first = cost.price(usage, "gpt-4o")

        def asked(*_: object, **__: object) -> None:
            raise AssertionError("genai-prices asked again")

        monkeypatch.setattr(genai_prices, "calc_price", asked)
        monkeypatch.setattr(genai_prices.types.ModelPrice, "calc_price", asked)
        again = cost.price(
            Usage(fresh_input=9_001, cache_read=40_000, cache_write=1_000, output=800), "gpt-4o"
        )
        assert first is not None and again is not None
        assert again.input - first.input == Decimal("2.5") / 1_000_000  # $2.50 / M input

    def test_a_price_update_is_priced_at_the_new_price(self) -> None:
        import copy

        import genai_prices.data_snapshot

        usage = Usage(fresh_input=1_000_000)
        before = cost.price(usage, "gpt-4o", provider="openai")
        snapshot = genai_prices.data_snapshot.get_snapshot()
        providers = copy.deepcopy(snapshot.providers)
        [model] = [m for p in providers if p.id == "openai" for m in p.models if m.id == "gpt-4o"]
        prices = model.prices if not isinstance(model.prices, list) else model.prices[-1].prices
        object.__setattr__(prices, "input_mtok", Decimal("7"))
        genai_prices.data_snapshot.set_custom_snapshot(
            genai_prices.data_snapshot.DataSnapshot(providers=providers, from_auto_update=True)
        )
        try:
            after = cost.price(usage, "gpt-4o", provider="openai")
        finally:
            genai_prices.data_snapshot.set_custom_snapshot(None)
        assert before is not None and after is not None
        assert (before.input, after.input) == (Decimal("2.5"), Decimal("7"))
        assert cost.price(usage, "gpt-4o", provider="openai") == before


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
