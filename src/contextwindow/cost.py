"""What a call cost in dollars: a :class:`~contextwindow.usage.tracker.Usage` priced by genai-prices.

Prices come from genai-prices (https://github.com/pydantic/genai-prices), pydantic's maintained
price data, installed with the ``cost`` extra (``pip install 'contextwindow[cost]'``; pydantic-ai
brings it too). It is imported when something is first priced, never at import. ::

    from contextwindow.cost import price

    spent = price(Usage(fresh_input=9_000, cache_read=40_000, output=800), "claude-sonnet-4-6")
    if spent is not None:
        print(f"${spent.total:.4f}")

A model genai-prices does not know prices to ``None``: a caller shows tokens only, never a made-up
figure. The four usage fields map onto genai-prices' as it counts them: its ``input_tokens`` is every
input token, cache reads and writes included (each then priced at its own rate), so it is
``Usage.prompt``; reasoning is part of ``output`` and is priced as output.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from .errors import UsageError
from .usage.tracker import Usage

__all__ = ["Cost", "available", "price", "price_all"]

_EXTRA = "pip install 'contextwindow[cost]'"


@dataclass(frozen=True, kw_only=True, slots=True)
class Cost:
    """Dollars spent on one call or a sum of calls of one model, as genai-prices priced them."""

    input: Decimal
    """Fresh input, cache reads and cache writes, each at its own rate."""
    output: Decimal
    """Generated tokens, reasoning included."""
    model: str
    """The model genai-prices matched (its own id, which may differ from the name asked for)."""
    provider: str
    """The provider whose prices were used (genai-prices' id: ``anthropic``, ``openai``, …)."""

    @property
    def total(self) -> Decimal:
        """Input plus output."""
        return self.input + self.output

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            input=self.input + other.input,
            output=self.output + other.output,
            model=self.model if self.model == other.model else "(several)",
            provider=self.provider if self.provider == other.provider else "(several)",
        )


def available() -> bool:
    """Whether genai-prices is installed (the ``cost`` extra), so :func:`price` can price anything."""
    try:
        _prices()
    except UsageError:
        return False
    return True


def price(usage: Usage, model: str, *, provider: str | None = None) -> Cost | None:
    """What ``usage`` cost on ``model`` (optionally at ``provider``'s prices), or ``None`` when
    genai-prices does not know the model. Raises :class:`~contextwindow.errors.UsageError` naming the
    ``cost`` extra when genai-prices is not installed."""
    if not isinstance(usage, Usage):
        raise UsageError(f"price() takes a contextwindow Usage, got {type(usage).__name__}")
    if not isinstance(model, str) or not model:
        raise UsageError("price() needs the model's name")
    genai_prices = _prices()
    counted = genai_prices.Usage(
        input_tokens=usage.prompt,
        cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write,
        output_tokens=usage.output,
    )
    try:
        calculated = genai_prices.calc_price(counted, model, provider_id=provider)
    except LookupError:  # genai-prices' answer for a model or provider it has no price for
        return None
    return Cost(
        input=calculated.input_price,
        output=calculated.output_price,
        model=str(calculated.model.id),
        provider=str(calculated.provider.id),
    )


def price_all(usages: Iterable[Usage], model: str, *, provider: str | None = None) -> Cost | None:
    """The sum of :func:`price` over calls of one model; ``None`` when the model is unknown.

    Each call is priced on its own, as the provider bills it (a tiered price applies per request)."""
    total: Cost | None = None
    for usage in usages:
        one = price(usage, model, provider=provider)
        if one is None:
            return None
        total = one if total is None else total + one
    if total is None:  # no calls: nothing spent, if the model is known at all
        return price(Usage(), model, provider=provider)
    return total


@lru_cache(maxsize=1)
def _prices() -> Any:
    try:
        import genai_prices
    except ImportError:
        raise UsageError(f"pricing calls in dollars needs genai-prices: {_EXTRA}") from None
    return genai_prices
