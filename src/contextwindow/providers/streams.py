"""Where a stream begins: when a request continues the previous one, and when it starts anew.

A provider layer that reports usage as a *running total* (membrane's ``usage`` event;
the local provider's ``cumulative`` setting) keeps one total
per stream: the calls of one tool loop, each request the previous one with the model's reply and
the tool results appended. Whoever turns such samples into per-call figures must agree with the
layer on where a stream begins, or a per-call figure comes out as the sum of several calls (erring
high, and restarting needlessly) or as a difference of unrelated calls (erring low).

:func:`continues_stream` is that agreement, decided from the requests alone so both sides reach it
independently: a request continues a stream exactly when it is the previous request (same system,
tools and messages) followed by the previous reply, which asked for tools, followed by a user message
carrying the results of every one of those tool uses (mid-turn messages may follow it). Anything else
— a new user turn, a recompiled request, a fold, a summariser's request — starts a new stream.
Messages are compared by identity first, so the in-process check costs a pointer comparison per
message.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..content import Message, Request, ToolResult, ToolUse

__all__ = ["continues_stream"]


def _same(a: object, b: object) -> bool:
    return a is b or a == b


def _same_prefix(prefix: Sequence[Message], messages: Sequence[Message]) -> bool:
    if len(messages) < len(prefix):
        return False
    return all(_same(a, b) for a, b in zip(prefix, messages, strict=False))


def continues_stream(previous: Request | None, reply: Message | None, request: Request) -> bool:
    """Whether ``request`` continues the stream of ``previous`` (answered by ``reply``); see the module."""
    if previous is None or reply is None:
        return False
    uses = {b.id for b in reply.content if isinstance(b, ToolUse)}
    n = len(previous.messages)
    if not uses or len(request.messages) < n + 2:
        return False
    if not (_same(previous.system, request.system) and _same(previous.tools, request.tools)):
        return False
    if not _same(reply, request.messages[n]) or not _same_prefix(previous.messages, request.messages):
        return False
    answers = request.messages[n + 1]
    answered = {b.tool_use_id for b in answers.content if isinstance(b, ToolResult)}
    return answers.role == "user" and uses <= answered
