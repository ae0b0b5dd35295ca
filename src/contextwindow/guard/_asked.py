"""The price of the agent's request as written, paid once per message.

The guard estimates every request as the agent wrote it when something shows that figure (the proxy's
``x-contextwindow-tokens-in`` header, a log line, a span). A history that only grows repeats every
earlier message, so pricing all of it on each call costs time in proportion to the history. Each
message's price is kept by its chain hash (which names the message and everything before it, so the
same hash is the same message at the same place) before the calibration multiplier, so a call prices
only the messages it has not seen, and a recalibration rounds the kept prices again rather than pricing
the whole history anew. The sum is :meth:`Estimator.request`'s, figure for figure: the head
(system, tools, the request's framing), each message with its framing, less what the API strips.

Before a call is matched to its conversation there are no chain hashes to key by: the provider's own
editing (``compaction="provider"``/``"auto"``) prices the agent's request and the edits it would
make of it, two to four whole requests a call. :class:`MessagePrices` keys the same prices by the
message objects themselves, which the guard's history reader hands back unchanged for what it read
before (and an edit leaves unchanged for what it does not touch).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import compress, count
from operator import ne

from ..content import Message, Request
from ..pricing import Estimator

__all__ = ["AskedPrices", "MessagePrices"]

CAPACITY = 20_000
"""How many messages' prices one conversation keeps before it starts again (a guard in a long-lived
process holds a bounded amount)."""


class AskedPrices:
    """Per conversation: each message's blocks priced before the multiplier, by its chain hash, and
    its price at the multiplier of the last call. A step of the calibration multiplier prices no
    block again: it rounds the kept raw prices at the new multiplier.

    The last request's running sums are kept too (its messages' prices, and the prices of their
    thinking, which the API strips from earlier turns), so a request that begins with the last one's
    messages, by their chain hashes, adds up only what follows them."""

    def __init__(self) -> None:
        self._estimator: Estimator | None = None
        self._multiplier = 1.0
        self._raw: dict[str, tuple[float, ...]] = {}
        self._prices: dict[str, int] = {}
        """Each message's price at :attr:`_multiplier`."""
        self._hashes: list[str] = []
        """The last request's chain hashes, which the sums below are of."""
        self._sums: list[int] = [0]
        """``_sums[i]``: the price of the last request's first ``i`` messages at :attr:`_multiplier`."""
        self._thinking: list[int] = [0]
        """``_thinking[i]``: the price of the thinking blocks among them."""

    def _bind(self, estimator: Estimator) -> None:
        known = self._estimator
        if (
            known is None
            or len(self._raw) > CAPACITY
            or not (known is estimator or known.prices_like(estimator))
        ):
            self._raw, self._prices = {}, {}
            self._forget_sums()
        elif estimator.multiplier != self._multiplier:
            self._prices = {}
            self._forget_sums()
        self._estimator, self._multiplier = estimator, estimator.multiplier

    def _forget_sums(self) -> None:
        self._hashes, self._sums, self._thinking = [], [0], [0]

    def request(self, estimator: Estimator, request: Request, hashes: Sequence[str]) -> int:
        """``estimator.request(request)``, pricing only the blocks of the messages whose hash is new;
        ``hashes`` are the messages' chain hashes, in order (a shorter list prices the rest whole)."""
        self._bind(estimator)
        messages = request.messages
        keys = hashes if len(hashes) <= len(messages) else hashes[: len(messages)]
        last, sums, thinking = self._hashes, self._sums, self._thinking
        n = min(len(keys), len(last))
        # The leading run of the last request's messages (at C speed: the first hash that differs).
        kept = next(compress(count(), map(ne, keys[:n], last[:n])), n)
        del last[kept:], sums[kept + 1 :], thinking[kept + 1 :]
        for i in range(kept, len(keys)):
            price, stripped = self._priced(estimator, messages[i], keys[i])
            last.append(keys[i])
            sums.append(sums[-1] + price)
            thinking.append(thinking[-1] + stripped)
        total, thought = sums[-1], thinking
        if len(keys) < len(messages):  # messages without a hash: priced whole, not kept
            thought = list(thinking)
            for message in messages[len(keys) :]:
                price, stripped = self._priced(estimator, message, None)
                total += price
                thought.append(thought[-1] + stripped)
        head = estimator.request(dataclasses.replace(request, messages=()))
        return head + total - thought[estimator.stripped_before(messages)]

    def _priced(self, estimator: Estimator, message: Message, key: str | None) -> tuple[int, int]:
        """``message``'s price and its thinking's, its raw prices kept by ``key`` (when it has one)."""
        raw = self._raw.get(key) if key is not None else None
        if raw is None:
            raw = estimator.raw_message(message)
            if key is not None:
                self._raw[key] = raw
        price = self._prices.get(key) if key is not None else None
        if price is None:
            price = estimator.calibrated(raw)
            if key is not None:
                self._prices[key] = price
        return price, estimator.thinking_price(message, raw)


class MessagePrices:
    """:meth:`Estimator.request`, each message's blocks priced once while it is the same object, and
    its price kept at the multiplier of the latest request.

    Each entry holds its message, so an object's id is never another's while it is kept. Bounded by
    the requests priced: past twice the latest request's messages (and a few), what it does not hold
    is dropped."""

    def __init__(self) -> None:
        self._estimator: Estimator | None = None
        self._raw: dict[int, _Priced] = {}

    def request(self, estimator: Estimator, request: Request) -> int:
        """``estimator.request(request)``, pricing only the blocks of messages not priced before."""
        known = self._estimator
        if known is None or not (known is estimator or known.prices_like(estimator)):
            self._raw = {}
        elif known.multiplier != estimator.multiplier:
            # Another multiplier: the raw prices hold, the prices are rounded again.
            self._raw = {k: _priced(estimator, p[0], p[1]) for k, p in list(self._raw.items())}
        self._estimator = estimator
        memo, messages = self._raw, request.messages
        stripped = estimator.stripped_before(messages)
        total = estimator.request(dataclasses.replace(request, messages=()))
        for i, message in enumerate(messages):
            hit = memo.get(id(message))
            if hit is None or hit[0] is not message:
                hit = memo[id(message)] = _priced(estimator, message, estimator.raw_message(message))
            total += hit[3] if i < stripped else hit[2]
        if len(memo) > 2 * len(messages) + 64:
            self._raw = {id(m): memo[id(m)] for m in messages}
        return total


_Priced = tuple[Message, tuple[float, ...], int, int]
"""A message, its blocks' raw prices, its price, and its price in an earlier turn (thinking stripped)."""


def _priced(estimator: Estimator, message: Message, raw: tuple[float, ...]) -> _Priced:
    price = estimator.calibrated(raw)
    return (message, raw, price, price - estimator.thinking_price(message, raw))
