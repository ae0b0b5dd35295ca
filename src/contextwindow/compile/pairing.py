"""Tool pairing: a tool use and its result are never split (context-manager's ``enforceToolPairing``).

Two places keep pairs whole. Selection takes a *unit* at a time — a message with tool results and the
earlier messages holding their calls (:func:`unit_start`) — so a cut never falls inside a pair. Then
:func:`enforce_tool_pairing` repairs what the stored history itself got wrong, in the order of
https://github.com/anima-research/context-manager:

* Rule B: a call whose result is not in the next message has it moved up from within 6 messages, or
  gets the stub :data:`STUB` (a trailing call gets a stub user message); the results open the next
  message in the order the calls were made (the APIs want a call's results right after it, before
  any other content), and a message the move left empty is dropped;
* Rule A: a result whose call is not in the message right before it, or a duplicate, is dropped; a
  message left empty is dropped when it leads the request, else it says ``[tool call omitted]``.
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import NamedTuple

from ..content import Block, Message, RedactedThinking, Text, Thinking, ToolResult, ToolUse

__all__ = [
    "LOOKAHEAD",
    "OMITTED_CALL",
    "STUB",
    "Shape",
    "ShapeMemo",
    "enforce_tool_pairing",
    "result_ids",
    "shape_of",
    "unit_start",
    "use_ids",
]

STUB = "[tool result unavailable — omitted during context compression]"
"""The stub result for a call whose result is gone (Rule B)."""
OMITTED_CALL = "[tool call omitted]"
"""What a message says when every block in it was an orphan result (Rule A)."""
LOOKAHEAD = 6
"""How far ahead a missing result is looked for before it is stubbed (Rule B)."""


def use_ids(message: Message) -> tuple[str, ...]:
    """The tool-call ids a message makes."""
    return tuple(b.id for b in message.content if isinstance(b, ToolUse))


def result_ids(message: Message) -> tuple[str, ...]:
    """The tool-call ids a message answers."""
    return tuple(b.tool_use_id for b in message.content if isinstance(b, ToolResult))


def unit_start(messages: Sequence[Message], end: int, floor: int = 0) -> int:
    """The first index of the unit ending at ``end``: back to the earliest message (each step within
    :data:`LOOKAHEAD`, never before ``floor``) holding a call that a result in the unit answers."""
    start = end
    while True:
        wanted: set[str] = set()
        for i in range(start, end + 1):
            wanted.update(result_ids(messages[i]))
        for i in range(start, end + 1):
            wanted.difference_update(use_ids(messages[i]))
        if not wanted:
            return start
        found = None
        for index in range(start - 1, max(floor, start - LOOKAHEAD) - 1, -1):
            if wanted.intersection(use_ids(messages[index])):
                found = index
                break
        if found is None:
            return start
        start = found


class Shape(NamedTuple):
    """What pairing reads of one message: the calls it makes, the calls it answers, whether its own
    form is sendable (results first, no empty content or text), and whether it holds thinking."""

    calls: tuple[str, ...]
    answers: tuple[str, ...]
    sendable: bool
    thinking: bool


ShapeMemo = MutableMapping[int, tuple[Message, Shape]]
"""Shapes by ``id(message)``, the message kept beside its shape (a compile's memo, per session)."""


def shape_of(message: Message, memo: ShapeMemo | None = None) -> Shape:
    """The :class:`Shape` of ``message``, kept in ``memo`` (a message is immutable)."""
    if memo is not None:
        hit = memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
    content = message.content
    calls = tuple(b.id for b in content if isinstance(b, ToolUse))
    answers = tuple(b.tool_use_id for b in content if isinstance(b, ToolResult))
    sendable = bool(content) and not any(isinstance(b, Text) and not b.text for b in content)
    if answers and not all(isinstance(b, ToolResult) for b in content[: len(answers)]):
        sendable = False  # results first, in call order
    thinking = any(isinstance(b, Thinking | RedactedThinking) for b in content)
    shape = Shape(calls, answers, sendable, thinking)
    if memo is not None:
        memo[id(message)] = (message, shape)
    return shape


def _already_paired(messages: Sequence[Message], memo: ShapeMemo | None = None) -> bool:
    """One pass: every call answered in the next message, every result answering the previous one."""
    previous: tuple[str, ...] = ()
    for message in messages:
        calls, answers, sendable, _ = shape_of(message, memo)
        if not sendable:
            return False  # the APIs refuse empty content and empty text blocks
        if previous and (message.role != "user" or answers != previous):
            return False
        if answers and not previous:
            return False
        previous = calls
    return not previous


def _results_in(message: Message) -> dict[str, ToolResult]:
    return {b.tool_use_id: b for b in message.content if isinstance(b, ToolResult)}


def enforce_tool_pairing(
    messages: Sequence[Message], *, memo: ShapeMemo | None = None
) -> tuple[list[Message], list[str], list[str]]:
    """``(messages, stubbed call ids, dropped result ids)`` with every call answered right after it.

    Messages that need no repair are returned as the very same objects, so a stable history keeps a
    stable (cacheable) request. ``memo`` keeps each message's :class:`Shape` across calls.
    """
    if _already_paired(messages, memo):
        return list(messages), [], []
    out = list(messages)
    stubbed = _answer_every_call(out)
    result, dropped = _drop_orphan_results(out)
    return result, stubbed, dropped


def _answer_every_call(out: list[Message]) -> list[str]:
    """Rule B, in place: every call is answered in the next message; returns the stubbed call ids."""
    stubbed: list[str] = []
    i = 0
    while i < len(out):
        calls = use_ids(out[i])
        if not calls:
            i += 1
            continue
        nxt = out[i + 1] if i + 1 < len(out) else None
        have = _results_in(nxt) if nxt is not None and nxt.role == "user" else {}
        ordered: list[Block] = []
        for call in calls:
            found = have.get(call)
            if found is None:
                found = _move_up(out, call, after=i + 1)
            if found is None:
                found = ToolResult(tool_use_id=call, content=STUB, is_error=True)
                stubbed.append(call)
            ordered.append(found)
        if nxt is not None and nxt.role == "user":
            answered = set(calls)
            others = tuple(
                b for b in nxt.content if not (isinstance(b, ToolResult) and b.tool_use_id in answered)
            )
            content = (*ordered, *others)
            if len(content) != len(nxt.content) or any(
                a is not b for a, b in zip(content, nxt.content, strict=True)
            ):
                out[i + 1] = _with_content(nxt, content)
        else:
            out.insert(i + 1, Message(role="user", content=tuple(ordered)))
        i += 1
    return stubbed


def _move_up(out: list[Message], call: str, *, after: int) -> ToolResult | None:
    """The result of ``call`` taken out of one of the :data:`LOOKAHEAD` messages past ``after``."""
    for j in range(after + 1, min(len(out), after + 1 + LOOKAHEAD)):
        hit = _results_in(out[j]).get(call)
        if hit is not None:
            out[j] = _with_content(out[j], tuple(b for b in out[j].content if b is not hit))
            return hit
    return None


def _drop_orphan_results(out: list[Message]) -> tuple[list[Message], list[str]]:
    """Rule A: a result answers a call in the message right before it, once; returns the messages
    kept and the dropped result ids."""
    dropped: list[str] = []
    result: list[Message] = []
    previous_calls: set[str] = set()
    for message in out:
        if result_ids(message):
            keep = _answers(message, previous_calls, dropped)
            if keep is not None:
                if not keep:
                    if not result:
                        previous_calls = set()
                        continue  # a leading orphan-only message is dropped (a request never opens on one)
                    keep = [Text(text=OMITTED_CALL)]
                message = _with_content(message, tuple(keep))
        if any(isinstance(b, Text) and not b.text for b in message.content):
            message = _with_content(
                message, tuple(b for b in message.content if not (isinstance(b, Text) and not b.text))
            )
        if not message.content:
            continue  # emptied by a move (Rule B), or empty as stored: the APIs refuse empty content
        result.append(message)
        previous_calls = set(use_ids(message))
    return result, dropped


def _answers(message: Message, previous_calls: set[str], dropped: list[str]) -> list[Block] | None:
    """The message's blocks without results that answer no call of ``previous_calls`` or repeat one
    (their ids added to ``dropped``); ``None`` when it keeps them all."""
    seen: set[str] = set()
    keep: list[Block] = []
    changed = False
    for block in message.content:
        if isinstance(block, ToolResult):
            if block.tool_use_id not in previous_calls or block.tool_use_id in seen:
                dropped.append(block.tool_use_id)
                changed = True
                continue
            seen.add(block.tool_use_id)
        keep.append(block)
    return keep if changed else None


def _with_content(message: Message, content: tuple[Block, ...]) -> Message:
    return Message(
        role=message.role,
        content=content,
        id=message.id,
        created_at=message.created_at,
        metadata=message.metadata,
    )
