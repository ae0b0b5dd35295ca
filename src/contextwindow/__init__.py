"""contextwindow: keep an LLM agent inside its model's context window, keeping as much as fits.

The public names are re-exported here; each lives in a one-concept module (see the README's
architecture table).
"""

from __future__ import annotations

from .content import (
    AttachmentRef,
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    RedactedThinking,
    Request,
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
from .models import ModelProfile, get_profile, register

__version__ = "0.1.0"

__all__ = [
    "AttachmentRef",
    "Audio",
    "Block",
    "ContextOverflow",
    "ContextWindowError",
    "Document",
    "GeneratedImage",
    "Image",
    "InvalidInput",
    "Message",
    "ModelProfile",
    "OverBudget",
    "ProviderError",
    "RedactedThinking",
    "Request",
    "SchemaTooNew",
    "StoreBusy",
    "StoreError",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolSpec",
    "ToolUse",
    "TransientProviderError",
    "UnknownModel",
    "UsageError",
    "Video",
    "__version__",
    "get_profile",
    "register",
]
