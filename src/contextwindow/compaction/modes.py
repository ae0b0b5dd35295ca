"""Who makes a long conversation fit (:data:`CompactionMode`), and the share of the room the
provider's own compaction starts from."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "COMPACTION_MODES",
    "ESTIMATE_MARGIN",
    "PROVIDER_TRIGGER",
    "CompactionMode",
]

CompactionMode = Literal["local", "provider", "auto"]
"""Who makes a long conversation fit: the engine, the provider's own editing, or the cheaper."""


COMPACTION_MODES: tuple[CompactionMode, ...] = ("local", "provider", "auto")
"""Every :data:`CompactionMode`."""


PROVIDER_TRIGGER = 0.8
"""``"provider"`` asks the provider to clear tool results from this share of the room for input."""


ESTIMATE_MARGIN = 0.95
"""What the provider's edits leave must fit in this share of the room: the guard's estimate, not the
provider's count, decides before sending."""
