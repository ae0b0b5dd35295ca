"""The providers' own compaction as a strategy: what to send, what it leaves, and which costs less.

``compaction="local" | "provider" | "auto"`` (:class:`~contextwindow.guard.GuardOptions`) chooses who
makes a long conversation fit:

- ``"local"``: the engine folds (summary checkpoints, evictions), as it always has;
- ``"provider"``: the request goes out as the agent wrote it, with the provider's own context editing
  attached, when what that editing leaves fits the window (:func:`provider_plan`); when it cannot bring
  the request under the window the engine folds locally instead, so a history already over the window
  never deadlocks;
- ``"auto"``: whichever of the two costs less in dollars for this call (:func:`cheaper`), the prompt
  cache's reads and writes priced by :mod:`contextwindow.cost`.

The wire semantics are the providers' own, as documented:

- Anthropic context editing (https://platform.claude.com/docs/en/build-with-claude/context-editing):
  beta header ``context-management-2025-06-27``; ``context_management.edits`` of
  ``clear_tool_uses_20250919`` (trigger ``input_tokens`` or ``tool_uses``, default 100,000 input
  tokens; ``keep`` the newest 3 tool uses; ``clear_at_least``; ``exclude_tools``;
  ``clear_tool_inputs``) and ``clear_thinking_20251015`` (``keep`` the newest ``thinking_turns``,
  default 1, or ``"all"``). Edits apply server-side before the prompt reaches the model; the client
  keeps its full history; the response reports ``context_management.applied_edits`` with
  ``cleared_input_tokens`` and ``cleared_tool_uses`` / ``cleared_thinking_turns``. A cleared tool
  result invalidates the prompt cache from where it was.
- Anthropic server-side compaction (https://platform.claude.com/docs/en/build-with-claude/compaction):
  beta header ``compact-2026-01-12``, edit ``compact_20260112`` with an ``input_tokens`` trigger of at
  least 50,000 (default 150,000); once the input reaches it the server summarises the conversation,
  the response opens with a ``compaction`` block, and a request carrying the block back is read from
  it on. ``"provider"`` sends it (trigger: :data:`PROVIDER_TRIGGER` of the room) when clearing cannot
  make the request fit and what is there can still be read whole, never below a 50k trigger
  (:func:`compaction_trigger`); from a body that holds a block on (:func:`holds_compaction`) the guard
  sends the conversation as written with the edit attached (its canonical content has no compaction
  block: the conversation is the provider's). ``"auto"`` chooses it where it is priced
  cheapest (:func:`auto_choice`: the compaction pass billed as input and output).
- OpenAI Responses compaction (https://developers.openai.com/api/docs/guides/compaction):
  ``context_management=[{"type": "compaction", "compact_threshold": N}]`` on ``responses.create``: once
  the rendered input crosses N the server compacts it, the output starts with an opaque
  ``compaction`` item (``encrypted_content``) and inference goes on from the pruned context; or
  ``POST /responses/compact``, whose output is the input's user messages and one compaction item.
  The agent appends the output to its input as usual. The docs let the client drop the items before
  the newest compaction item, and it must: OpenAI does not ignore them, it reads and bills them
  (a live probe, pydantic/pydantic-ai#7224). The guard drops them (keeping the leading
  system/developer items, the agent's instructions) and sends :func:`openai_context_management`.
- Chat Completions has no provider compaction: ``"provider"`` there folds locally, and says so once
  on the ``contextwindow.guard`` logger (``"auto"`` folds locally without a word).

:func:`apply_anthropic_edits` is the one implementation of what Anthropic's edits leave: the guard
uses it to know, before sending, whether the provider's edits make the request fit; the local
provider (:mod:`contextwindow.testing.context_management`) uses it to serve them.
"""

from __future__ import annotations

from .anthropic import (
    ANTHROPIC_CONTEXT_BETA,
    CLEAR_THINKING,
    CLEAR_TOOL_USES,
    CLEARED_TOOL_RESULT,
    COMPACT,
    COMPACT_BETA,
    COMPACTION_MINIMUM_TRIGGER,
    AppliedEdit,
    ProviderPlan,
    anthropic_compaction_management,
    anthropic_context_management,
    apply_anthropic_edits,
    compaction_in,
    compaction_trigger,
    holds_compaction,
    provider_plan,
)
from .cost_model import (
    ANTHROPIC_COMPACTED_SHARE,
    OPENAI_COMPACTED_SHARE,
    SUMMARY_TOKENS,
    Choice,
    auto_choice,
    cheaper,
    cheapest,
    openai_choice,
    per_call_dollars,
)
from .modes import (
    COMPACTION_MODES,
    ESTIMATE_MARGIN,
    PROVIDER_TRIGGER,
    CompactionMode,
)
from .openai import (
    OPENAI_COMPACTION,
    openai_context_management,
    since_compaction,
)
from .strategy import (
    guarded_body,
)
from .wire import (
    merged_betas,
    merged_headers,
    on_the_wire,
    with_extras,
)

__all__ = [
    "ANTHROPIC_COMPACTED_SHARE",
    "ANTHROPIC_CONTEXT_BETA",
    "CLEARED_TOOL_RESULT",
    "CLEAR_THINKING",
    "CLEAR_TOOL_USES",
    "COMPACT",
    "COMPACTION_MINIMUM_TRIGGER",
    "COMPACTION_MODES",
    "COMPACT_BETA",
    "ESTIMATE_MARGIN",
    "OPENAI_COMPACTED_SHARE",
    "OPENAI_COMPACTION",
    "PROVIDER_TRIGGER",
    "SUMMARY_TOKENS",
    "AppliedEdit",
    "Choice",
    "CompactionMode",
    "ProviderPlan",
    "anthropic_compaction_management",
    "anthropic_context_management",
    "apply_anthropic_edits",
    "auto_choice",
    "cheaper",
    "cheapest",
    "compaction_in",
    "compaction_trigger",
    "guarded_body",
    "holds_compaction",
    "merged_betas",
    "merged_headers",
    "on_the_wire",
    "openai_choice",
    "openai_context_management",
    "per_call_dollars",
    "provider_plan",
    "since_compaction",
    "with_extras",
]
