"""The memo of per-message work that lets the next compile of a session skip what it has done.

A :class:`CompileCache` keeps, across compiles of one session, each message's base and renders, the
positions of ids, the head's prices and the last tail walk (:mod:`._walklog`). It never changes a
result: the tests compare cached and uncached compiles byte for byte.
"""

from __future__ import annotations

from typing import Any

from ..models import ModelProfile
from ._render import Base, Pricer, Rendered
from ._tail import TailSums
from ._walklog import WalkLog
from .pairing import ShapeMemo
from .state import PricedMessage

__all__ = ["CompileCache", "make_estimator"]

_MAX_RENDERS = 200_000
"""Renders kept before the memo is cleared: bounds memory at one render per message and decision set."""


class CompileCache:
    """Memo of per-message work across compiles of one session. Never changes a result.

    Entries are keyed by message id (and position), so an append-only ledger keeps them valid; a
    change of estimator (other than its multiplier) or policy clears them. Bases and renders keep
    their blocks' raw prices, so a step of the calibration multiplier only calibrates them again
    (:func:`._render.recalibrated`), and the last walk's figures are summed again.
    """

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._estimator: tuple[ModelProfile, float, Pricer] | None = None
        self.bases: dict[tuple[Any, int], tuple[PricedMessage, Base]] = {}
        self.renders: dict[tuple[Any, ...], Rendered] = {}
        self.plain: dict[tuple[Any, int], tuple[int, Rendered]] = {}
        """Renders without archives or evictions by (id, position), beside the cap each was made
        under: one no cap cut serves every cap it is within (:func:`._render.same_at`)."""
        self.positions: dict[tuple[str, int], int] = {}
        self.head: dict[tuple[Any, ...], int] = {}
        self.walk: WalkLog | None = None
        self.tail: TailSums | None = None
        """The last assembly's tail with its running sums (:mod:`._tail`)."""
        self.shapes: ShapeMemo = {}
        """Each rendered message's :class:`~.pairing.Shape`, for tool pairing's check of the request."""

    def estimator(self, profile: ModelProfile, multiplier: float) -> Pricer:
        """The estimator for ``profile`` at ``multiplier``, kept while neither changes what it prices.

        A profile that differs only in its window or output cap prices every block the same, so the
        same estimator is kept and the per-message memo survives a change of window.
        """
        if (
            self._estimator is not None
            and _pricing_key(self._estimator[0]) == _pricing_key(profile)
            and self._estimator[1] == multiplier
        ):
            return self._estimator[2]
        est = make_estimator(profile, multiplier)
        self._estimator = (profile, multiplier, est)
        return est

    def pricing(self, est: Pricer) -> Any:
        """What of ``est`` the raw prices depend on: the profile's pricing for the estimator this cache
        made (whatever its multiplier), else ``est`` itself."""
        if self._estimator is not None and self._estimator[2] is est:
            return ("estimator", _pricing_key(self._estimator[0]))
        return est

    def bind(self, key: tuple[Any, ...]) -> None:
        """Keep the memo for compiles under ``key`` (raw pricing, policy, session); clear it when the
        key changes. A step of the multiplier keeps it: bases, renders and the last walk are
        calibrated again where they are read (:func:`._render.recalibrated`,
        :func:`.walk.recalibrated_log`)."""
        if (
            self._key is None
            or len(self._key) != len(key)
            or any(a is not b and a != b for a, b in zip(self._key, key, strict=True))
        ):
            self.bases.clear()
            self.renders.clear()
            self.plain.clear()
            self.positions.clear()
            self.head.clear()
            self.shapes.clear()
            self.walk = None
            self.tail = None
            self._key = key
        if len(self.renders) > _MAX_RENDERS:
            self.renders.clear()
        if len(self.shapes) > _MAX_RENDERS:
            self.shapes.clear()


def _pricing_key(profile: ModelProfile) -> tuple[Any, ...]:
    """What of a profile the estimator's prices depend on (not the window, not the output cap)."""
    return (profile.name, profile.provider, profile.tokenizer, profile.image_rule, profile.source)


def make_estimator(profile: ModelProfile, multiplier: float) -> Pricer:
    """The library's estimator for ``profile`` at ``multiplier`` (imported on first use)."""
    from ..pricing import Estimator

    return Estimator(profile, multiplier)
