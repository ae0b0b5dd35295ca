"""The local provider's Anthropic server-side compaction: ``compaction`` blocks written, read and checked.

As Anthropic documents it (https://platform.claude.com/docs/en/build-with-claude/compaction and the
SDK's ``BetaCompact20260112EditParam``, ``BetaCompactionBlock``, ``BetaUsage.iterations``):

- **The edit**: ``context_management.edits`` holding ``{"type": "compact_20260112"}`` under the beta
  header ``compact-2026-01-12``, with ``trigger`` (``input_tokens``, at least 50,000, default
  150,000), ``pause_after_compaction`` (a boolean, default false) and ``instructions`` (a string
  replacing the summarisation prompt, or null). What is malformed is refused before anything runs
  (:mod:`.context_management`).
- **Triggered** (:func:`compacting_answer`): once the request's input reaches the trigger, the server
  summarises the whole conversation (an extra sampling step, billed), puts a ``compaction`` block
  ``{"type": "compaction", "content": summary}`` first in the response's content and goes on to
  answer from the compacted context (the system prompt, the tools and the summary). With
  ``pause_after_compaction`` it stops there instead: the content is the block alone and
  ``stop_reason`` is ``"compaction"``.
- **Usage**: ``usage.iterations`` lists the compaction pass (``"type": "compaction"``: what it read,
  its prefix served from the prompt cache, and the summary as output) and then the reply
  (``"type": "message"``); "a compaction entry's tokens are not included in the top-level usage
  fields", which report the reply alone (all zero when the call paused).
- **Sent back** (:func:`read_compactions`): the client appends the response, block and all; the
  server drops every block before the newest ``compaction`` block and reads that block as the
  summary it holds (here: a user turn with its text, joined to the next user turn when one follows).
  A block whose ``content`` is null is a failed compaction and a no-op; an empty ``content`` is
  refused, as are fields the block does not have and a block sent without the beta header. The
  token-count endpoint applies the blocks the same way and never triggers a compaction.

The summary is the local summariser's (:mod:`.summary`), written to :data:`SUMMARY_SHARE` of what it
closes (the docs give no size; the share is ours); ``instructions`` are accepted and not followed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..compaction import ANTHROPIC_COMPACTED_SHARE, COMPACT, COMPACT_BETA
from ..content import Message, Request, Text
from ..formats import AttachmentLoader
from ..usage.tracker import Usage
from .caching import Breakpoint
from .context_management import anthropic_refusal
from .counting import tokenizer_for
from .model import LocalModel, LocalReply, Rejection
from .openai_compaction import compaction_summary

__all__ = [
    "BLOCK_FIELDS",
    "DEFAULT_TRIGGER",
    "SUMMARY_SHARE",
    "CompactionPass",
    "compacting_answer",
    "compaction_edit",
    "iteration_usage",
    "read_compactions",
]

DEFAULT_TRIGGER = 150_000
"""The ``input_tokens`` trigger of a ``compact_20260112`` edit that gives none (the docs' table)."""
SUMMARY_SHARE = ANTHROPIC_COMPACTED_SHARE
"""The local summary's target, as a share of the input it closes (ours: the docs give no size; what
``"auto"``'s cost model assumes)."""
BLOCK_FIELDS = frozenset(
    {"type", "content", "encrypted_content", "signature", "cache_control", "tool_changes"}
)
"""The fields a ``compaction`` block sent back may carry (the SDK's ``BetaCompactionBlockParam``)."""


@dataclass(frozen=True, slots=True)
class CompactionPass:
    """A compaction the server ran for one call: the block the response opens with and what the pass
    cost (its ``usage.iterations`` entry)."""

    block: Mapping[str, Any]
    usage: Usage


def compaction_edit(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``compact_20260112`` edit a request's ``context_management`` holds, or ``None``."""
    management = params.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    for edit in edits if isinstance(edits, list) else ():
        if isinstance(edit, Mapping) and edit.get("type") == COMPACT:
            return edit
    return None


def _block_refusal(block: Mapping[str, Any], path: str, betas: Sequence[str]) -> str | None:
    if COMPACT_BETA not in betas:
        return (
            f"{path}.type: compaction blocks need the beta header 'anthropic-beta: {COMPACT_BETA}' "
            "(Input tag 'compaction' found using 'type' does not match any of the expected tags)"
        )
    extra = sorted(str(k) for k in block if k not in BLOCK_FIELDS)
    if extra:
        return f"{path}.{extra[0]}: Extra inputs are not permitted"
    content = block.get("content")
    if content is not None and not isinstance(content, str):
        return f"{path}.content: Input should be a valid string"
    if content == "":
        return f"{path}.content: String should have at least 1 character"
    for key in ("encrypted_content", "signature"):
        if block.get(key) is not None and not isinstance(block[key], str):
            return f"{path}.{key}: Input should be a valid string"
    return None


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, Mapping) else None
    return content if isinstance(content, list) else []


def read_compactions(data: Mapping[str, Any], betas: Sequence[str]) -> Mapping[str, Any] | str:
    """The Messages body as the server reads its ``compaction`` blocks (see the module docstring), or
    the text of the 400 a bad one gets; ``data`` itself when it holds none."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return data
    newest: tuple[int, int] | None = None
    seen = False
    for m, message in enumerate(messages):
        for b, block in enumerate(_blocks(message)):
            if isinstance(block, Mapping) and block.get("type") == "compaction":
                problem = _block_refusal(block, f"messages.{m}.content.{b}", betas)
                if problem is not None:
                    return problem
                seen = True
                if block.get("content") is not None:
                    newest = (m, b)
    if not seen:
        return data
    kept = [dict(message) for message in messages]
    if newest is not None:
        m, b = newest
        summary = dict(kept[m]["content"][b])
        text: dict[str, Any] = {"type": "text", "text": summary["content"]}
        if summary.get("cache_control") is not None:
            text["cache_control"] = summary["cache_control"]
        rest = {**kept[m], "content": kept[m]["content"][b + 1 :]}
        kept = [{"role": "user", "content": [text]}, rest, *kept[m + 1 :]]
    for message in kept:
        if isinstance(message.get("content"), list):
            message["content"] = [
                x
                for x in message["content"]
                if not (isinstance(x, Mapping) and x.get("type") == "compaction")
            ]
    kept = [message for message in kept if message.get("content") != []]
    return {**data, "messages": _joined(kept)}


def _joined(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summary's user turn joined to a user turn that follows it (one turn, as the API reads two)."""
    if len(messages) > 1 and messages[1].get("role") == "user":
        following = messages[1]["content"]
        blocks = following if isinstance(following, list) else [{"type": "text", "text": following}]
        return [{"role": "user", "content": [*messages[0]["content"], *blocks]}, *messages[2:]]
    return messages


def _due(
    model: LocalModel, request: Request, betas: Sequence[str], load: AttachmentLoader
) -> tuple[Mapping[str, Any], int] | None:
    """The compaction edit and the input count when this call compacts: a valid edit whose trigger
    the input reaches, on a request the API takes (one it refuses, or one over the window that the
    compaction pass could not read, is answered as any call is: refused)."""
    edit = compaction_edit(request.params)
    management = request.params.get("context_management")
    if edit is None or anthropic_refusal(management, betas) is not None:
        return None
    counted = model.count_input(request, wire="anthropic", load=load)
    if isinstance(counted, Rejection):
        return None
    trigger = edit.get("trigger") or {"type": "input_tokens", "value": DEFAULT_TRIGGER}
    n = counted.input_tokens
    if n < int(trigger["value"]) or n > model.window(model.profile(request.model)):
        return None
    return edit, n


def compacting_answer(
    model: LocalModel,
    request: Request,
    *,
    max_tokens: int | None,
    load: AttachmentLoader,
    session: str,
    breakpoints: Sequence[Breakpoint],
    betas: Sequence[str],
) -> tuple[LocalReply | Rejection, CompactionPass | None]:
    """A Messages call (``request`` already :func:`read_compactions`) under its ``compact_20260112``
    edit: the reply, and the compaction that ran first (``None``: none did)."""
    due = _due(model, request, betas, load)
    if due is None:
        outcome = model.handle(
            request,
            wire="anthropic",
            max_tokens=max_tokens,
            load=load,
            session=session,
            breakpoints=breakpoints,
            betas=betas,
        )
        return outcome, None
    edit, counted = due
    profile = model.profile(request.model)
    read = model._cached(request, profile, "anthropic", breakpoints, counted, load)
    summary, written = compaction_summary(model, request, int(counted * SUMMARY_SHARE))
    compaction = CompactionPass(
        block={"type": "compaction", "content": summary},
        usage=Usage(
            fresh_input=counted - read.read - read.write,
            cache_read=read.read,
            cache_write=read.write,
            output=written,
        ),
    )
    if edit.get("pause_after_compaction"):
        return _paused(model, request, compaction), compaction
    # The reply is made from the system prompt, the tools and the summary.
    pruned = replace(request, messages=(Message(role="user", content=(Text(text=summary),)),))
    head = [p for p in breakpoints if p.at[0] != "messages"]
    outcome = model.handle(
        pruned,
        wire="anthropic",
        max_tokens=max_tokens,
        load=load,
        session=session,
        breakpoints=head,
        betas=betas,
    )
    return outcome, (None if isinstance(outcome, Rejection) else compaction)


def _paused(model: LocalModel, request: Request, compaction: CompactionPass) -> LocalReply:
    """The reply of a call that stopped after its compaction: no content but the block."""
    profile = model.profile(request.model)
    return LocalReply(
        id=f"local_cmp_{time.time_ns():x}",
        model=request.model or profile.name,
        message=Message(role="assistant", content=()),
        stop_reason="compaction",
        input_tokens=0,
        output_tokens=0,
        tokenizer=tokenizer_for(profile, model.settings.count_scale).name,
        reported=None if model.settings.usage == "none" else Usage(),
        before=Usage(),
    )


def iteration_usage(kind: str, usage: Usage) -> dict[str, Any]:
    """One ``usage.iterations`` entry (``BetaCompactionIterationUsage`` / ``BetaMessageIterationUsage``)."""
    return {
        "type": kind,
        "input_tokens": usage.fresh_input,
        "cache_creation_input_tokens": usage.cache_write,
        "cache_read_input_tokens": usage.cache_read,
        "output_tokens": usage.output,
    }
