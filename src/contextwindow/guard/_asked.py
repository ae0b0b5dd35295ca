"""The price of the agent's request as written, paid once per message.

The guard estimates every request as the agent wrote it when something shows that figure (the proxy's
``x-contextwindow-tokens-in`` header, a log line, a span). A history that only grows repeats every
earlier message, so pricing all of it on each call costs time in proportion to the history. Each
message's price is kept by its chain hash (which names the message and everything before it, so the
same hash is the same message at the same place) for the estimator that priced it; a call prices only
the messages it has not seen. The sum is :meth:`Estimator.request`'s, figure for figure: the head
(system, tools, the request's framing), each message with its framing, less what the API strips.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..content import Request
from ..pricing import Estimator

__all__ = ["AskedPrices"]

CAPACITY = 20_000
"""How many messages' prices one conversation keeps before it starts again (a guard in a long-lived
process holds a bounded amount)."""


class AskedPrices:
    """Per conversation: each message's price by its chain hash, for one estimator at a time."""

    def __init__(self) -> None:
        self._estimator: Estimator | None = None
        self._prices: dict[str, int] = {}

    def request(self, estimator: Estimator, request: Request, hashes: Sequence[str]) -> int:
        """``estimator.request(request)``, pricing only the messages whose hash is new; ``hashes``
        are the messages' chain hashes, in order (a shorter list prices the rest whole)."""
        if estimator is not self._estimator or len(self._prices) > CAPACITY:
            self._estimator, self._prices = estimator, {}
        prices = self._prices
        messages = request.messages
        total = estimator.request(dataclasses.replace(request, messages=()))
        for i, message in enumerate(messages):
            key = hashes[i] if i < len(hashes) else None
            price = prices.get(key) if key is not None else None
            if price is None:
                price = estimator.message(message)
                if key is not None:
                    prices[key] = price
            total += price
        return total - estimator.uncharged(messages)
