"""Usage: what the provider counted, per call, and what contextwindow learns from it.

:mod:`.tracker` normalises provider usage and turns a stream's samples into each call's own usage;
:mod:`.anchor` keeps the last accepted request's real count and estimates from it; :mod:`.calibration`
learns one pricing multiplier per (model, connection).
"""

from __future__ import annotations

from .anchor import Anchor, AnchorBook, AnchoredEstimate, anchored_estimate, newest_anchor
from .calibration import CALIBRATION_PRICING_EPOCH, Calibrator
from .tracker import USAGE_MODES, CallUsage, Usage, UsageMode, UsageTracker

__all__ = [
    "CALIBRATION_PRICING_EPOCH",
    "USAGE_MODES",
    "Anchor",
    "AnchorBook",
    "AnchoredEstimate",
    "Calibrator",
    "CallUsage",
    "Usage",
    "UsageMode",
    "UsageTracker",
    "anchored_estimate",
    "newest_anchor",
]
