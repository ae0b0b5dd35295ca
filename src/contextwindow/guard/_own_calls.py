"""The guard's own tool calls: re-reads it answers itself, out of the agent's sight.

When the request names an archived result or an evicted attachment, the guard offers the model
:data:`~contextwindow.compile.reread.READ_ARCHIVED`; the agent never offered that tool and cannot
answer it, so its calls are the guard's business:

- a reply that only re-reads is answered at once and the model asked again, within the same agent
  call: a round of the engine's own (:meth:`~contextwindow.engine.Engine.add_round`); the agent gets
  the first reply that is its business;
- a reply that mixes re-reads with the agent's own tool calls reaches the agent without the re-reads
  (the SDK's own response type, :func:`without_calls`), so the agent runs its tools as asked; when
  its results come back, the guard puts its own answers beside them in the same user message, in
  tool-use order (:func:`with_answers`), so every tool use of the reply is answered in the request
  sent next.

Both are kept in the ledger as they happened, each call's usage included. The messages name the
tool-use ids that are the guard's in their metadata (:data:`OWN_CALLS`), and the conversation's chain
(:mod:`._match`) leaves those blocks out, so the agent's history, which never held them, still
matches the stored session.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..content import Block, Message, ToolResult, ToolUse

__all__ = ["OWN_CALLS", "is_own", "marked", "own_ids", "with_answers", "without_calls"]

OWN_CALLS = "guard_own_calls"
"""The metadata key of a stored message naming the tool-use ids the guard answered itself: on an
assistant message those tool uses, on a user message the results that answer them."""


def own_ids(message: Message) -> frozenset[str]:
    """The tool-use ids ``message``'s metadata names as the guard's own (empty for the agent's)."""
    ids = message.metadata.get(OWN_CALLS)
    return frozenset(ids) if isinstance(ids, list | tuple) else frozenset()


def is_own(block: Block, ids: frozenset[str]) -> bool:
    """Whether ``block`` is one of the guard's calls (``ids``) or its answer."""
    if isinstance(block, ToolUse):
        return block.id in ids
    if isinstance(block, ToolResult):
        return block.tool_use_id in ids
    return False


def marked(message: Message, ids: Iterable[str]) -> Message:
    """``message`` with ``ids`` named as the guard's own (in the order given)."""
    ordered = list(dict.fromkeys(ids))
    if not ordered:
        return message
    return replace(message, metadata={**message.metadata, OWN_CALLS: ordered})


def with_answers(reply: Message, answers: Sequence[ToolResult], results: Message) -> Message:
    """The agent's ``results`` message with the guard's ``answers`` to its own calls in ``reply``
    beside them: every tool result in the order of ``reply``'s tool uses, then the rest of the
    agent's content as it wrote it; marked so the chain leaves the answers out."""
    by_id: dict[str, ToolResult] = {a.tool_use_id: a for a in answers}
    by_id.update({b.tool_use_id: b for b in results.content if isinstance(b, ToolResult)})
    order = [b.id for b in reply.content if isinstance(b, ToolUse) and b.id in by_id]
    ordered: list[Block] = [by_id.pop(i) for i in order]
    ordered += [b for b in results.content if isinstance(b, ToolResult) and b.tool_use_id in by_id]
    ordered += [b for b in results.content if not isinstance(b, ToolResult)]
    return marked(replace(results, content=tuple(ordered)), (a.tool_use_id for a in answers))


def without_calls(result: Any, ids: frozenset[str]) -> Any:
    """An SDK response (Anthropic ``Message``, OpenAI ``ChatCompletion`` or ``Response``) without the
    tool calls ``ids``: a copy of the SDK's own type; anything else is returned as it is."""
    copy = getattr(result, "model_copy", None)
    if not ids or not callable(copy):
        return result
    if getattr(result, "object", None) == "chat.completion":
        choices = []
        for choice in result.choices:
            calls = getattr(choice.message, "tool_calls", None)
            if calls:
                kept = [c for c in calls if c.id not in ids]
                message = choice.message.model_copy(update={"tool_calls": kept or None})
                choice = choice.model_copy(update={"message": message})
            choices.append(choice)
        return copy(update={"choices": choices})
    if getattr(result, "object", None) == "response":
        output = [
            item
            for item in result.output
            if not (getattr(item, "type", None) == "function_call" and getattr(item, "call_id", None) in ids)
        ]
        return copy(update={"output": output})
    content = getattr(result, "content", None)
    if isinstance(content, list):
        return copy(update={"content": [b for b in content if getattr(b, "id", None) not in ids]})
    return result
