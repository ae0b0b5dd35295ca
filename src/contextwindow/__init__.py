"""contextwindow: keep an LLM agent inside its model's context window, keeping as much as fits.

The names here are the ones an agent author touches:

- values: the content blocks (:class:`Text`, :class:`Image`, ... and their union :data:`Block`),
  :class:`Message`, :class:`ToolSpec`, :class:`AttachmentRef`;
- the error tree, rooted at :class:`ContextWindowError` (drawn in :mod:`contextwindow.errors`);
- pricing: :func:`count_tokens`, :class:`Estimator`; models: :class:`ModelProfile`,
  :func:`get_profile`, :func:`register`;
- the ledger: :func:`open_store`, :class:`Store`, :class:`Session`;
- compile: :class:`Policy`, :class:`CompiledRequest`;
- the turn engine: :class:`Engine`, :class:`EngineSettings`, :class:`Summarizer`,
  :class:`ToolOutcome` (the events an engine yields are in :mod:`contextwindow.engine`);
- providers: :class:`Provider`, :class:`AnthropicProvider`, :class:`OpenAIProvider`;
- wire formats: :func:`parse_any`, :func:`render`.

Everything else lives in its layer's package, each with its own ``__all__`` (the README's
architecture table lists them): :mod:`contextwindow.usage`, :mod:`contextwindow.store`,
:mod:`contextwindow.compile`, :mod:`contextwindow.engine`, :mod:`contextwindow.providers`,
:mod:`contextwindow.formats`, :mod:`contextwindow.pricing`, :mod:`contextwindow.replay` and
:mod:`contextwindow.testing` (the local provider).

Importing the package is cheap: the values, errors and models load with it; every other name loads
its layer on first use (PEP 562 ``__getattr__``), so ``import contextwindow`` starts no HTTP server
code, no SDK, no image library and no local provider.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from .content import (
    AttachmentRef,
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolSpec,
    ToolUse,
    Video,
)
from .errors import (
    ContextOverflow,
    ContextWindowError,
    InvalidInput,
    OverBudget,
    ProviderError,
    SchemaTooNew,
    StoreBusy,
    StoreError,
    TransientProviderError,
    UnknownModel,
    UsageError,
)
from .guard import GuardOptions, guard
from .models import ModelProfile, get_profile, register

if TYPE_CHECKING:  # loaded on first use below; imported here so type checkers and IDEs see them
    from .compile import CompiledRequest, Policy
    from .engine import Engine, EngineSettings, Summarizer, ToolOutcome
    from .formats import parse_any, render
    from .pricing import Estimator, count_tokens
    from .providers import AnthropicProvider, OpenAIProvider, Provider
    from .store import Session, Store, open_store

__version__ = "0.1.0"

# A library's loggers are silent until the application configures logging (the ``contextwindow.*``
# loggers: ``contextwindow.engine`` a line per call, ``contextwindow.guard``, ``contextwindow.server``).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "AnthropicProvider",
    "AttachmentRef",
    "Audio",
    "Block",
    "CompiledRequest",
    "ContextOverflow",
    "ContextWindowError",
    "Document",
    "Engine",
    "EngineSettings",
    "Estimator",
    "GeneratedImage",
    "GuardOptions",
    "Image",
    "InvalidInput",
    "Message",
    "ModelProfile",
    "OpenAIProvider",
    "OverBudget",
    "Policy",
    "Provider",
    "ProviderError",
    "RedactedThinking",
    "SchemaTooNew",
    "Session",
    "Store",
    "StoreBusy",
    "StoreError",
    "Summarizer",
    "Text",
    "Thinking",
    "ToolOutcome",
    "ToolResult",
    "ToolSpec",
    "ToolUse",
    "TransientProviderError",
    "UnknownModel",
    "UsageError",
    "Video",
    "count_tokens",
    "get_profile",
    "guard",
    "open_store",
    "parse_any",
    "register",
    "render",
]

# Name -> the package that defines it, imported on first access. A name that is also the name of a
# subpackage (a function ``guard`` in ``contextwindow.guard``) must be imported eagerly above instead:
# importing the subpackage would otherwise replace the attribute with the module.
_LAZY = {
    "CompiledRequest": "contextwindow.compile",
    "Policy": "contextwindow.compile",
    "Engine": "contextwindow.engine",
    "EngineSettings": "contextwindow.engine",
    "Summarizer": "contextwindow.engine",
    "ToolOutcome": "contextwindow.engine",
    "parse_any": "contextwindow.formats",
    "render": "contextwindow.formats",
    "Estimator": "contextwindow.pricing",
    "count_tokens": "contextwindow.pricing",
    "AnthropicProvider": "contextwindow.providers",
    "OpenAIProvider": "contextwindow.providers",
    "Provider": "contextwindow.providers",
    "Session": "contextwindow.store",
    "Store": "contextwindow.store",
    "open_store": "contextwindow.store",
}


def __getattr__(name: str) -> Any:
    """Load a public name's layer the first time the name is asked for (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    """The loaded names and the public names not loaded yet."""
    return sorted(set(globals()) | set(__all__))
