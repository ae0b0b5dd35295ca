"""OpenAI's Responses compaction: the ``context_management`` the guard sends, and what of a request
the provider needs once it holds a ``compaction`` item."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..content import Request
from ..formats.responses import COMPACTION_ITEM

__all__ = [
    "OPENAI_COMPACTION",
    "openai_context_management",
    "since_compaction",
]

OPENAI_COMPACTION = "compaction"
"""The one ``context_management`` entry type OpenAI's Responses API takes, and its output item's type."""


def openai_context_management(threshold: int) -> list[dict[str, Any]]:
    """The ``context_management`` the guard sends on the Responses wire: compact once the rendered
    input crosses ``threshold`` tokens."""
    return [{"type": OPENAI_COMPACTION, "compact_threshold": threshold}]


def _head(items: Sequence[Any]) -> int:
    """How many leading items of a Responses ``input`` are system/developer messages (the agent's
    instructions)."""
    n = 0
    for item in items:
        if not (
            isinstance(item, Mapping)
            and item.get("type", "message") == "message"
            and item.get("role") in ("system", "developer")
        ):
            break
        n += 1
    return n


def since_compaction(request: Request) -> Request:
    """``request`` from its newest ``compaction`` item on (all of it when it has none): what the
    provider needs of it (see the module docstring)."""
    marks = [i for i, m in enumerate(request.messages) if COMPACTION_ITEM in m.metadata]
    return replace(request, messages=request.messages[marks[-1] :]) if marks else request


def _is_compaction(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == OPENAI_COMPACTION
