"""Providers: the :class:`Provider` protocol, the Anthropic and OpenAI adapters and the overflow
classifier. The local provider lives in :mod:`contextwindow.testing`.

The SDK adapters import their SDK lazily, so ``contextwindow.providers`` imports without either
installed; :class:`AnthropicProvider` needs ``contextwindow[anthropic]``, :class:`OpenAIProvider`
``contextwindow[openai]``.
"""

from __future__ import annotations

from .anthropic import AnthropicProvider, map_anthropic_error
from .base import (
    Completion,
    Provider,
    ProviderEvent,
    Stop,
    StopReason,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    UsageSample,
    complete,
    normalise_stop_reason,
    output_limit_hit,
)
from .openai import OpenAIProvider, map_openai_error
from .overflow import (
    OutputCapError,
    classify,
    output_cap_error,
)

__all__ = [
    "AnthropicProvider",
    "Completion",
    "OpenAIProvider",
    "OutputCapError",
    "Provider",
    "ProviderEvent",
    "Stop",
    "StopReason",
    "TextDelta",
    "ThinkingDelta",
    "ToolCall",
    "UsageSample",
    "classify",
    "complete",
    "map_anthropic_error",
    "map_openai_error",
    "normalise_stop_reason",
    "output_cap_error",
    "output_limit_hit",
]
