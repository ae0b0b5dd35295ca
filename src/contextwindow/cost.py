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

A guarded call is priced once it is answered, so :func:`price` is on every call's path, and
genai-prices works its whole price model out again each time it is asked (~0.25 ms). Where a model's
price is affine in the four counts (a rate per token of each kind and any fee per request: every
price without tiers), it is asked once for the rates, at each price it holds for the model over time,
and a call is priced from them (a few µs), to the same decimal; a tiered price is asked each time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    found = _found(genai_prices, model, provider)
    if found is None:
        return None
    now = datetime.now(tz=UTC)
    model_price = found.info.get_prices(now)
    rates = found.rates_at(model_price)
    if rates is not None:
        spent_input, spent_output = rates.apply(usage)
    else:
        calculated = found.info.calc_price(
            _counted(genai_prices, usage), found.provider, genai_request_timestamp=now
        )
        spent_input, spent_output = calculated.input_price, calculated.output_price
    return Cost(
        input=spent_input, output=spent_output, model=str(found.info.id), provider=str(found.provider.id)
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


def _counted(genai_prices: Any, usage: Usage) -> Any:
    """``usage`` as genai-prices counts it (see the module docstring)."""
    return genai_prices.Usage(
        input_tokens=usage.prompt,
        cache_read_tokens=usage.cache_read,
        cache_write_tokens=usage.cache_write,
        output_tokens=usage.output,
    )


_Pair = tuple[Decimal, Decimal]
"""Dollars of input and of output."""


@dataclass(frozen=True, slots=True)
class _Rates:
    """An affine price: what a call of no tokens costs (``base``: a fee per request, or nothing), and
    what one more token of each kind adds to the input and output dollars."""

    base: _Pair
    fresh: _Pair
    read: _Pair
    write: _Pair
    output: _Pair

    def apply(self, usage: Usage) -> _Pair:
        spent = [self.base[0], self.base[1]]
        for count, rate in (
            (usage.fresh_input, self.fresh),
            (usage.cache_read, self.read),
            (usage.cache_write, self.write),
            (usage.output, self.output),
        ):
            if count:
                spent[0] += count * rate[0]
                spent[1] += count * rate[1]
        return spent[0], spent[1]


_PROBE = Usage(fresh_input=123_457, cache_read=234_571, cache_write=34_567, output=45_679)
"""Where the rates are checked against genai-prices' own answer before they are trusted."""


@dataclass(slots=True)
class _Found:
    """A model as genai-prices matched it (in the snapshot :data:`_FOUND` keeps beside it), and the
    rates of each price it holds for the model (``None``: not affine, asked each time)."""

    info: Any
    provider: Any
    rates: list[tuple[Any, _Rates | None]] = field(default_factory=list)

    def rates_at(self, model_price: Any) -> _Rates | None:
        for known, rates in self.rates:
            if known is model_price:
                return rates
        rates = self._rates(model_price)
        self.rates.append((model_price, rates))
        return rates

    def _rates(self, model_price: Any) -> _Rates | None:
        genai_prices = _prices()
        if any(isinstance(value, genai_prices.types.TieredPrices) for value in vars(model_price).values()):
            return None  # the rate of every token depends on how many there are

        def at(usage: Usage) -> _Pair:
            priced = model_price.calc_price(_counted(genai_prices, usage))
            return priced["input_price"], priced["output_price"]

        base = at(Usage())

        def rate(**one: int) -> _Pair:
            spent = at(Usage(**one))
            return spent[0] - base[0], spent[1] - base[1]

        rates = _Rates(
            base=base,
            fresh=rate(fresh_input=1),
            read=rate(cache_read=1),
            write=rate(cache_write=1),
            output=rate(output=1),
        )
        # Trusted only where it gives genai-prices' own answer to the decimal.
        return rates if rates.apply(_PROBE) == at(_PROBE) else None


_FOUND: dict[tuple[str, str | None], tuple[Any, _Found | None]] = {}
"""``(model, provider)``: the snapshot of genai-prices' data it was matched in, and the match."""
_FOUND_MAX = 256


def _found(genai_prices: Any, model: str, provider: str | None) -> _Found | None:
    """``model`` (at ``provider``) as genai-prices matches it in its current data; ``None`` when it
    has no price for it. Remembered per snapshot of the data (an update of the prices matches again)."""
    snapshot = genai_prices.data_snapshot.get_snapshot()
    key = (model, provider)
    known = _FOUND.get(key)
    if known is not None and known[0] is snapshot:
        return known[1]
    try:
        calculated = genai_prices.calc_price(_counted(genai_prices, Usage()), model, provider_id=provider)
    except LookupError:  # genai-prices' answer for a model or provider it has no price for
        found = None
    else:
        found = _Found(info=calculated.model, provider=calculated.provider)
    if len(_FOUND) >= _FOUND_MAX:
        _FOUND.clear()
    _FOUND[key] = (snapshot, found)
    return found


@lru_cache(maxsize=1)
def _prices() -> Any:
    try:
        import genai_prices
        import genai_prices.data_snapshot
        import genai_prices.types
    except ImportError:
        raise UsageError(f"pricing calls in dollars needs genai-prices: {_EXTRA}") from None
    return genai_prices
