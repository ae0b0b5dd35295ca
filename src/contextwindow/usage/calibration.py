"""Calibration: one pricing multiplier per (model, connection), learned from the provider's real counts.

The estimator prices a request; the provider then counts it. :class:`Calibrator` moves the
multiplier toward what the provider counted, carefully (context-manager's ``reportRealInputTokens``):

- **One sample per compiled request.** :meth:`Calibrator.arm` is called once with the compiled
  request's estimate; :meth:`Calibrator.report_real_input` learns once from the first call's real
  prompt and disarms. The real figure is one call's prompt (fresh +
  cache read + cache write, ``CallUsage.prompt``), never a stream's cumulative sample, which holds
  every call of the stream so far.
- **One sample per counted round.** Within a stream, each later call's prompt less the previous
  call's is the provider's exact count of what was appended between them (the reply as re-sent, the
  round of tool results and mid-turn messages), and the engine knows its estimate of the same content:
  :meth:`Calibrator.report_round` learns from that pair, so a session that grows by rounds in one long
  stream calibrates as it grows instead of waiting for the next compile. The reply is kept in the
  sample rather than taken out by its output count: within a tool loop its thinking is counted as
  input too (see :mod:`contextwindow.pricing`), and the estimate prices it as the next request carries
  it, so both sides measure the same content. A grown request is still never compared with an older estimate: each round sample is a difference
  of two counts against a difference of two estimates in the same units (the estimate's own
  multiplier is backed out, ``report_round(multiplier=)``). A round comes at every call, so the multiplier it moves
  is written when it has moved :data:`ROUND_SAVE_MOVE` since it was last written, not at every round.
- **Band.** ``ratio = real / estimate``; ``observed = ratio × current`` backs out the multiplier
  already applied. A sample is accepted if ``ratio`` or ``observed`` is within the band, [0.6, 1.8]
  to start with; otherwise it is rejected and the multiplier stays.
- **Consistent evidence widens the band.** One wild sample says little (a request that grew, a
  provider that counted something else once), but a provider whose counts keep showing the same
  ratio outside the band is telling the truth about its units (a tokenizer that counts 2.3× or 0.43×
  what the estimator prices). A rejected sample is held; when the next sample of size is out of the
  band too and its ``observed`` is within :data:`CONSISTENT` of the held one's, the band widens to
  take both in (with that tolerance, within :data:`WIDEST`), and both are learned. A held sample
  followed by one the band accepts is dropped. A sample whose ``observed`` is beyond :data:`WIDEST`
  is no tokenizer's units but a misread (a stream's running total read as one call's prompt gave
  30×): it is rejected and not held, so no run of them widens the band. A widened band is persisted with the multiplier
  (``band: [low, high]``).
- **Update.** ``next = clamp(current + alpha × (observed − current), band)``: an EMA with alpha 0.2
  once the multiplier has evidence behind it (a stored one counts as that much), a running mean before
  (alpha ``1 / (n + 1)`` after ``n`` samples), so a short session converges within a few calls instead
  of ending where the first few EMA steps left it.
- **Sample size.** A request or round estimated under :data:`MIN_SAMPLE_TOKENS` says nothing about
  the rule (framing and rounding are most of it: a 4-token estimate against a count of 7 moved a
  multiplier to 1.15) and is ignored; one under :data:`FULL_SAMPLE_TOKENS` counts for
  ``estimate / FULL_SAMPLE_TOKENS`` of a sample (its alpha and its evidence are scaled by that weight).
  Small rounds are not pooled into one sample: their error is mostly the rule's per-block framing,
  which a pool carries just the same.
- **Setter.** :meth:`Calibrator.set` accepts only a finite ``0.25 < f < 4`` (the store's setter);
  anything else is ignored.
- **Persistence with a pricing epoch.** The record is ``{multiplier, at, pricing, band?, reset?}``. On
  load, a same-epoch record is clamped to its band (its stored ``band`` when valid, else [0.6, 1.8]); an older or unstamped one is discarded, on purpose and
  visibly, as ``{multiplier: 1, at, pricing: EPOCH, reset: {discarded_multiplier, from_epoch, at}}``,
  and the ``reset`` stays through later learning until an operator re-stamps the record
  (:meth:`Calibrator.restamp`); a newer-epoch record is left untouched on disk and not used.
- **An epoch change that changes no stored price keeps the multiplier.** A multiplier is learned
  against the prices the session's blocks were stored with; when today's rules price every stored
  block exactly as it was stored (:func:`stored_prices_unchanged`), the older multiplier still holds
  and is kept, re-stamped at today's epoch with no ``reset``. A caller that can see the session's
  messages passes that check as ``prices_unchanged`` (the engine does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..content import Block
from ..errors import StoreError
from ..pricing import MULTIPLIER_BOUNDS
from ..store import StoredMessage
from ..store.slots import MemorySlot, StateSlot

__all__ = [
    "ALPHA",
    "BAND",
    "CALIBRATION_PRICING_EPOCH",
    "CONSISTENT",
    "FULL_SAMPLE_TOKENS",
    "MIN_SAMPLE_TOKENS",
    "ROUND_SAVE_MOVE",
    "SET_BOUNDS",
    "WIDEST",
    "CalibrationReset",
    "Calibrator",
    "stored_prices_unchanged",
]

CALIBRATION_PRICING_EPOCH = 8
"""The pricing rules' epoch: a multiplier learned under other rules is discarded on load. Bump it
whenever pricing changes what a block costs (the epochs so far: ``docs/concepts.md``, "Pricing
epoch")."""

BAND = (0.6, 1.8)
"""Accepted ratio/observed range and the multiplier's clamp to start with (context-manager
``autobiographical.ts``); consistent evidence widens it (see the module docstring)."""
CONSISTENT = 0.15
"""Two out-of-band samples agree when their observed multipliers are within this share of each other."""
ALPHA = 0.2
"""EMA weight of one accepted sample (context-manager)."""
MIN_SAMPLE_TOKENS = 256
"""A sample from a request estimated under this many tokens is ignored (see the module docstring)."""

FULL_SAMPLE_TOKENS = 2_048
"""A sample from a request estimated at this many tokens or more counts in full; smaller ones count in
proportion."""

ROUND_SAVE_MOVE = 0.005
"""A multiplier learned from a round is written when it has moved this much since it was last written
(a round comes at every call; saving is best-effort, and an unwritten move costs a round's learning)."""

SET_BOUNDS = MULTIPLIER_BOUNDS
"""Open interval :meth:`Calibrator.set` accepts (context-manager ``setTokenCalibration``): the
estimator's range, its bounds left out."""
WIDEST = MULTIPLIER_BOUNDS
"""How far consistent evidence (or a multiplier set by hand) may widen the band: the range an
:class:`~contextwindow.pricing.Estimator` prices at, bounds included, so a learned multiplier is
always one the engine can price with."""


def _clamp(value: float, band: tuple[float, float] = BAND) -> float:
    return min(max(value, band[0]), band[1])


def _band_of(value: object) -> tuple[float, float]:
    """A stored ``band``: two finite numbers ``low ≤ 0.6``, ``high ≥ 1.8`` within :data:`WIDEST`, else
    the starting band."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return BAND
    low, high = (_finite_number(v) for v in value)
    if low is None or high is None or not WIDEST[0] <= low <= BAND[0] or not BAND[1] <= high <= WIDEST[1]:
        return BAND
    return (low, high)


def _finite_number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    as_float = float(value)
    return as_float if math.isfinite(as_float) else None


def _epoch_of(value: object) -> int:
    """A record's epoch: ``pricing ?? 0``; a value that is not a whole number ≥ 0 reads as unstamped."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return value


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibrationReset:
    """Why the multiplier restarted from 1: what was discarded, from which epoch, when."""

    discarded_multiplier: float
    from_epoch: int
    at: str

    def to_record(self) -> dict[str, Any]:
        return {
            "discarded_multiplier": self.discarded_multiplier,
            "from_epoch": self.from_epoch,
            "at": self.at,
        }

    @classmethod
    def from_record(cls, value: object) -> CalibrationReset | None:
        """A valid stored reset, or ``None`` (an invalid one is dropped, not fatal)."""
        if not isinstance(value, Mapping):
            return None
        m = _finite_number(value.get("discarded_multiplier"))
        epoch = value.get("from_epoch")
        at = value.get("at")
        if m is None or isinstance(epoch, bool) or not isinstance(epoch, int) or not isinstance(at, str):
            return None
        return cls(discarded_multiplier=m, from_epoch=epoch, at=at)


class Calibrator:
    """The multiplier of one (model, connection), learned from real usage and persisted in ``slot``.

    ``prices_unchanged()`` is asked once, when the stored record is from an older epoch: ``True``
    keeps its multiplier (re-stamped at once, no reset); ``False``, or no check at all, discards it
    with a ``reset`` record. ``clock`` stamps ``at``.
    Saving is best-effort: a ``StoreError`` from the slot is kept in :attr:`last_save_error`, because
    a lost calibration record costs one recalibration, while a failed turn costs the user's work.
    """

    def __init__(
        self,
        slot: StateSlot | None = None,
        *,
        model: str = "",
        connection: str = "default",
        prices_unchanged: Callable[[], bool] | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.model = model
        self.connection = connection
        self._slot: StateSlot = slot if slot is not None else MemorySlot()
        self._clock = clock
        self._armed: int | None = None
        self._held: tuple[float, float] | None = None
        """A rejected sample's ``(observed, weight)``, kept until the next one says whether it was wild."""
        self.band = BAND
        """The accepted range and the clamp; consistent evidence widens it."""
        self._evidence = 0.0
        """Samples learned so far (by weight); a loaded multiplier counts as ``1 / ALPHA``."""
        self.multiplier = 1.0
        self.reset: CalibrationReset | None = None
        self.last_save_error: StoreError | None = None
        self.last_decision: str = "none"
        self._read_only = False
        """Set when the stored record is from a newer epoch: learn in memory, never overwrite it."""
        self._saved: float | None = None
        """The multiplier as last saved or loaded (``None``: none yet)."""
        self._load(prices_unchanged)

    # -- loading -------------------------------------------------------------------------------------

    def _load(self, prices_unchanged: Callable[[], bool] | None) -> None:
        saved = self._slot.load()
        if not isinstance(saved, Mapping):
            return
        multiplier = _finite_number(saved.get("multiplier"))
        if multiplier is None:  # used only if its multiplier is finite; the next learn overwrites it
            return
        epoch = _epoch_of(saved.get("pricing"))
        if epoch == CALIBRATION_PRICING_EPOCH:
            self.band = _band_of(saved.get("band"))
            self.multiplier = _clamp(multiplier, self.band)
            self._evidence = 1 / ALPHA
            self.reset = CalibrationReset.from_record(saved.get("reset"))
            self._saved = multiplier
        elif epoch > CALIBRATION_PRICING_EPOCH:
            self.multiplier = 1.0  # written by newer rules: not ours to use, not ours to overwrite
            self._read_only = True
        elif prices_unchanged is not None and prices_unchanged():
            self.band = _band_of(saved.get("band"))
            self.multiplier = _clamp(multiplier, self.band)
            self._evidence = 1 / ALPHA
            self._save()
        else:
            self.multiplier = 1.0
            self.reset = CalibrationReset(discarded_multiplier=multiplier, from_epoch=epoch, at=self._stamp())
            self._save()

    # -- learning ------------------------------------------------------------------------------------

    def arm(self, estimate: int) -> bool:
        """Arm one sample for a compiled request whose estimate (at the current multiplier) is given.

        Returns whether a sample is armed: a non-finite or non-positive estimate arms nothing.
        """
        value = _finite_number(estimate)
        self._armed = int(value) if value is not None and value > 0 else None
        return self._armed is not None

    @property
    def armed(self) -> bool:
        return self._armed is not None

    @property
    def evidence(self) -> float:
        """The samples learned so far, by weight (a stored multiplier counts as ``1 / ALPHA``)."""
        return self._evidence

    def report_real_input(self, real: int, *, made_at: float | None = None) -> float:
        """Learn from the first call's real prompt against the armed estimate; return the multiplier.
        ``made_at``: the multiplier the estimate was made at (default: the current one). An engine
        prices at a step of the multiplier (:meth:`~contextwindow.engine.fit.WindowFit.multiplier`),
        not at the multiplier itself: backed out at the wrong one, each sample would pull the
        multiplier away from the step it was made at, and a multiplier near a half step would cycle
        between two steps.

        Ignored (no learning, still armed) when ``real`` is not a finite number > 0; ignored when no
        sample is armed. Otherwise disarms, and accepts or rejects the sample by the band.
        """
        value = _finite_number(real)
        if value is None or value <= 0 or self._armed is None:
            self.last_decision = "ignored"
            return self.multiplier
        estimate, self._armed = self._armed, None
        if estimate < MIN_SAMPLE_TOKENS:
            self.last_decision = f"ignored a sample too small to say anything (estimate {estimate})"
            return self.multiplier
        at = _finite_number(made_at) if made_at is not None else None
        return self._learn(value, estimate, at if at is not None and at > 0 else self.multiplier)

    def report_round(self, *, real: int, estimate: int, multiplier: float | None = None) -> float:
        """Learn from content appended within a stream that the provider counted: ``real`` tokens
        (the call's prompt less the previous call's) against ``estimate``, the estimate of that same
        content at ``multiplier`` (default: the current one); return the multiplier.

        Each such sample prices only what it measures, so a request that grew is never compared with
        an older estimate. The size rules, the band and the held sample are a whole request's: a
        round estimated under :data:`MIN_SAMPLE_TOKENS` is ignored (not pooled with the next: pooled
        small rounds carry the rule's per-block framing error just the same), and one under
        :data:`FULL_SAMPLE_TOKENS` counts in proportion. A figure that is not a finite number > 0, or
        a multiplier that is not, is ignored.
        """
        value, size = _finite_number(real), _finite_number(estimate)
        made_at = self.multiplier if multiplier is None else _finite_number(multiplier)
        if value is None or size is None or made_at is None or value <= 0 or size <= 0 or made_at <= 0:
            self.last_decision = "ignored"
            return self.multiplier
        if size < MIN_SAMPLE_TOKENS:
            self.last_decision = f"ignored a round too small to say anything (estimate {size:.0f})"
            return self.multiplier
        return self._learn(value, round(size), made_at, save_within=ROUND_SAVE_MOVE)

    def _learn(self, value: float, estimate: int, made_at: float, *, save_within: float = 0.0) -> float:
        """Accept or reject one sample of size: ``value`` counted against ``estimate`` made at
        ``made_at``, worth ``estimate / FULL_SAMPLE_TOKENS`` of a sample (at most one). An accepted
        sample is saved unless the multiplier is still within ``save_within`` of the one last saved."""
        weight = min(1.0, estimate / FULL_SAMPLE_TOKENS)
        current = self.multiplier
        ratio = value / estimate
        observed = ratio * made_at
        low, high = self.band
        held, self._held = self._held, None
        if not (low <= ratio <= high or low <= observed <= high):
            if not WIDEST[0] <= observed <= WIDEST[1]:
                # No tokenizer counts that differently: a misread (a running total taken for one
                # call's prompt), never evidence, however many samples agree.
                self.last_decision = (
                    f"rejected a sample beyond any band (ratio {ratio:.3f}, observed {observed:.3f})"
                )
                return current
            if held is None or abs(observed - held[0]) > CONSISTENT * min(observed, held[0]):
                self._held = (observed, weight)
                self.last_decision = (
                    f"rejected out-of-band sample (ratio {ratio:.3f}, observed {observed:.3f})"
                )
                return current
            # Two samples in a row agree outside the band: the provider's units, not a wild sample.
            self.band = (
                max(WIDEST[0], min(low, min(observed, held[0]) / (1 + CONSISTENT))),
                min(WIDEST[1], max(high, max(observed, held[0]) * (1 + CONSISTENT))),
            )
            self._step(held[0], held[1])
            self._step(observed, weight)
            self.last_decision = (
                f"accepted two consistent out-of-band samples (observed {held[0]:.3f}, {observed:.3f}): "
                f"band {self.band[0]:.3f}–{self.band[1]:.3f}, {current:.4f} → {self.multiplier:.4f}"
            )
            self._save()
            return self.multiplier
        self._step(observed, weight)
        self.last_decision = f"accepted (ratio {ratio:.3f}): {current:.4f} → {self.multiplier:.4f}"
        if self._saved is None or abs(self.multiplier - self._saved) >= save_within:
            self._save()
        return self.multiplier

    def _step(self, observed: float, weight: float) -> None:
        """Move the multiplier toward ``observed`` by ``weight`` of a sample."""
        alpha = weight * max(ALPHA, 1 / (self._evidence + 1))
        self._evidence += weight
        current = self.multiplier
        self.multiplier = _clamp(current + alpha * (observed - current), self.band)

    def set(self, factor: float) -> bool:
        """Set the multiplier by hand: accepted only when finite and 0.25 < f < 4; returns whether it was."""
        value = _finite_number(factor)
        if value is None or not SET_BOUNDS[0] < value < SET_BOUNDS[1]:
            return False
        self.multiplier = value
        # A multiplier set by hand is not a guess: it counts as evidence, and the band takes it in.
        self.band = (max(WIDEST[0], min(self.band[0], value)), min(WIDEST[1], max(self.band[1], value)))
        self._evidence = max(self._evidence, 1 / ALPHA)
        self._save()
        return True

    def restamp(self) -> None:
        """An operator's re-stamp: persist the current multiplier at the current epoch, clearing ``reset``."""
        self.reset = None
        self._read_only = False
        self._save()

    # -- persistence ---------------------------------------------------------------------------------

    def _stamp(self) -> str:
        return self._clock().isoformat()

    def record(self) -> dict[str, Any]:
        """The persisted shape: ``{multiplier, at, pricing, band?, reset?}`` (``band`` once widened)."""
        out: dict[str, Any] = {
            "multiplier": self.multiplier,
            "at": self._stamp(),
            "pricing": CALIBRATION_PRICING_EPOCH,
        }
        if self.band != BAND:
            out["band"] = list(self.band)
        if self.reset is not None:
            out["reset"] = self.reset.to_record()
        return out

    def stats(self) -> dict[str, Any]:
        """What a compile's render stats carry: ``{multiplier, pricing_epoch, reset?}``."""
        out: dict[str, Any] = {"multiplier": self.multiplier, "pricing_epoch": CALIBRATION_PRICING_EPOCH}
        if self.reset is not None:
            out["reset"] = self.reset.to_record()
        return out

    def _save(self) -> None:
        if self._read_only:
            return
        try:
            self._slot.save(self.record())
            self._saved = self.multiplier
            self.last_save_error = None
        except StoreError as err:
            self.last_save_error = err


def stored_prices_unchanged(stored: Iterable[StoredMessage], price: Callable[[Block], float]) -> bool:
    """Whether ``price`` (today's raw price of a block) gives every stored block the price it was
    stored with. A message stored without prices cannot show it, so it counts as changed."""
    for entry in stored:
        prices = entry.block_prices
        if prices is None or len(prices) != len(entry.message.content):
            return False
        blocks = entry.message.content
        if any(price(block) != stored for block, stored in zip(blocks, prices, strict=True)):
            return False
    return True
