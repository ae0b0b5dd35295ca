"""contextwindow: keep an LLM agent inside its model's context window, keeping as much as fits.

The public names are re-exported here; each lives in a one-concept module (see the README's
architecture table).
"""

from __future__ import annotations

from .compile import CompiledRequest, CompileState, Policy, compile_session
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
from .engine.compiler import EngineCompiler
from .engine.loop import Engine, EngineSettings
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
from .formats import ParsedRequest, detect_format, parse_any, render
from .guard import guard
from .models import ModelProfile, get_profile, register
from .pricing import Estimator, count_tokens, image_tokens
from .providers import (
    AnthropicProvider,
    Completion,
    LocalProvider,
    LocalServer,
    LocalSettings,
    OpenAIProvider,
    Provider,
    ProviderEvent,
    complete,
)
from .replay.importers import load_any
from .replay.report import CallRecord, summarize
from .replay.scenario import Scenario, ScenarioBuilder, ScenarioError
from .replay.scenario_file import dump_scenario, load_scenario
from .store import Budgets, Entry, Problem, Session, Store, StoredMessage, open_store
from .store.slots import MemorySlot, StateSlot
from .usage.calibration import CALIBRATION_PRICING_EPOCH, Calibrator
from .usage.tracker import (
    Anchor,
    AnchorBook,
    AnchoredEstimate,
    CallUsage,
    Usage,
    UsageTracker,
    anchored_estimate,
)

__version__ = "0.1.0"

__all__ = [
    "CALIBRATION_PRICING_EPOCH",
    "Anchor",
    "AnchorBook",
    "AnchoredEstimate",
    "AnthropicProvider",
    "AttachmentRef",
    "Audio",
    "Block",
    "Budgets",
    "Calibrator",
    "CallRecord",
    "CallUsage",
    "CompileState",
    "CompiledRequest",
    "Completion",
    "ContextOverflow",
    "ContextWindowError",
    "Document",
    "Engine",
    "EngineCompiler",
    "EngineSettings",
    "Entry",
    "Estimator",
    "GeneratedImage",
    "Image",
    "InvalidInput",
    "LocalProvider",
    "LocalServer",
    "LocalSettings",
    "MemorySlot",
    "Message",
    "ModelProfile",
    "OpenAIProvider",
    "OverBudget",
    "ParsedRequest",
    "Policy",
    "Problem",
    "Provider",
    "ProviderError",
    "ProviderEvent",
    "RedactedThinking",
    "Request",
    "Scenario",
    "ScenarioBuilder",
    "ScenarioError",
    "SchemaTooNew",
    "Session",
    "StateSlot",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoredMessage",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolSpec",
    "ToolUse",
    "TransientProviderError",
    "UnknownModel",
    "Usage",
    "UsageError",
    "UsageTracker",
    "Video",
    "__version__",
    "anchored_estimate",
    "compile_session",
    "complete",
    "count_tokens",
    "detect_format",
    "dump_scenario",
    "get_profile",
    "guard",
    "image_tokens",
    "load_any",
    "load_scenario",
    "open_store",
    "parse_any",
    "register",
    "render",
    "summarize",
]
