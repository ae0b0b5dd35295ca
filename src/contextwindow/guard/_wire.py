"""The guard's two ends of a wire format: read the agent's request, write the request to send.

The guard changes only what it must. From the agent's request it takes the history (parsed to
canonical messages, to be kept in the ledger and compiled) and leaves everything else as the agent
wrote it: the system prompt, the tool definitions (server tools and ``cache_control`` markers
included), sampling parameters, ``stream``. The request it sends is that, with the compiled history
in place of the agent's, a re-read tool added when compile left a placeholder the model may ask
about, and, for Anthropic, a cache breakpoint on the last block (the history before it is the same
from call to call, so the provider's prompt cache keeps working).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from operator import is_
from typing import Any, Literal, Protocol, TypeAlias

from ..content import Message, Request, ToolSpec, media_refs
from ..formats import AttachmentLoader, ParsedRequest
from ..formats import anthropic as anthropic_format
from ..formats import openai as openai_format
from ..formats import responses as responses_format

__all__ = ["FORMATS", "GuardFormat", "WireAdapter", "WireMemo"]

GuardFormat: TypeAlias = Literal["anthropic", "openai", "openai-responses"]

_ANTHROPIC_BREAKPOINTS = 4
"""Anthropic allows at most four ``cache_control`` breakpoints per request
(https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching)."""


class WireMemo:
    """Each message's wire items from the previous render of one conversation, by the message object:
    a message compile hands back unchanged (the same object, as its memo keeps them) is not
    rendered again. Messages with media are rendered each time (their bytes are not kept). Bounded
    by one request: what a render did not use is dropped.

    The history mostly goes out as it went last time with a few messages after it, so the items of
    the leading run of messages the previous render had, in the same places, are one slice of its
    items (up to its first message with media); only the rest are looked up one by one."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[Message, list[dict[str, Any]]]] = {}
        self._messages: list[Message] = []
        self._flat: list[dict[str, Any]] = []
        self._ends: list[int] = [0]
        """``_ends[i]``: the items of ``_messages[:i]``; only up to the first message with media."""

    def render(
        self, messages: Sequence[Message], one: Callable[[Message], list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """``messages`` as wire items, ``one`` rendering a message the previous render did not have."""
        keep = self._leading(messages)
        out = self._flat[: self._ends[keep]]
        ends = self._ends[: keep + 1]
        items = self._items
        new = items if keep else {}
        media = False  # a message with media seen: the leading run for the next render ends there
        for message in messages[keep:]:
            hit = items.get(id(message))
            if hit is not None and hit[0] is message:
                wire = hit[1]
            else:
                wire = one(message)
                if media_refs(message.content):
                    media = True
                    out.extend(wire)
                    continue
            new[id(message)] = (message, wire)
            out.extend(wire)
            if not media:
                ends.append(len(out))
        self._messages = list(messages)
        self._flat = out if len(ends) == len(messages) + 1 else out[: ends[-1]]
        self._ends = ends
        if len(new) > 2 * len(messages) + 16:  # a long history went out shorter: drop what it left
            kept = {id(m) for m in messages}
            new = {k: v for k, v in new.items() if k in kept}
        self._items = new
        return list(out)

    def _leading(self, messages: Sequence[Message]) -> int:
        """How many leading messages are the previous render's, in the same places, before its
        first message with media."""
        old = self._messages
        keep = min(len(old), len(messages), len(self._ends) - 1)
        while keep and messages[keep - 1] is not old[keep - 1]:
            keep -= 1  # the newest messages are new objects
        if keep and not all(map(is_, messages[:keep], old[:keep])):
            # One among them is another object (a fold, a cut, an archive): the run ends there.
            keep = next(
                i for i, (mine, theirs) in enumerate(zip(messages, old, strict=False)) if mine is not theirs
            )
        return keep


class WireAdapter(Protocol):
    """One wire format as the guard reads and writes it."""

    name: GuardFormat

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest: ...

    def render(
        self,
        body: Mapping[str, Any],
        messages: Sequence[Message],
        load: AttachmentLoader,
        *,
        extra_tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        memo: WireMemo | None = None,
    ) -> dict[str, Any]:
        """The agent's ``body`` with ``messages`` as its history (and ``extra_tools`` offered);
        ``memo``: the conversation's, so a message rendered before is not rendered again."""
        ...

    def summary(self, request: Request, *, model: str) -> dict[str, Any]:
        """A summariser's request as a body for this format (never streamed)."""
        ...


def _count_breakpoints(items: Any) -> int:
    """The cache breakpoints the agent set on its system blocks or tools: a ``cache_control`` on an
    item itself (where the API reads one; a tool's schema may name a property so)."""
    if not isinstance(items, list):
        return 0
    return sum(1 for item in items if isinstance(item, dict) and "cache_control" in item)


class _Anthropic:
    name: GuardFormat = "anthropic"

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        return anthropic_format.parse_request(body)

    def render(
        self,
        body: Mapping[str, Any],
        messages: Sequence[Message],
        load: AttachmentLoader,
        *,
        extra_tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        memo: WireMemo | None = None,
    ) -> dict[str, Any]:
        out = dict(body)
        if memo is None:
            rendered = anthropic_format.render_messages(list(messages), load)
        else:
            rendered = memo.render(messages, lambda m: anthropic_format.render_messages([m], load))
        if extra_tools:
            out["tools"] = [*(body.get("tools") or []), *(_anthropic_tool(t) for t in extra_tools)]
        used = _count_breakpoints(out.get("system")) + _count_breakpoints(out.get("tools"))
        if rendered and used < _ANTHROPIC_BREAKPOINTS:
            content = list(rendered[-1]["content"])  # a copy: the memo's items are shared
            if content:
                content[-1] = {**content[-1], "cache_control": {"type": "ephemeral"}}
                rendered[-1] = {**rendered[-1], "content": content}
        out["messages"] = rendered
        if max_tokens is not None:
            out["max_tokens"] = max_tokens
        return out

    def summary(self, request: Request, *, model: str) -> dict[str, Any]:
        body = anthropic_format.render_request(request, _no_media)
        body["model"] = model
        return body


def _anthropic_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": dict(tool.input_schema)}


class _OpenAI:
    name: GuardFormat = "openai"

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        return openai_format.parse_request(body)

    def render(
        self,
        body: Mapping[str, Any],
        messages: Sequence[Message],
        load: AttachmentLoader,
        *,
        extra_tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        memo: WireMemo | None = None,
    ) -> dict[str, Any]:
        out = dict(body)
        wire = list(body.get("messages") or [])
        # The leading system/developer messages are the agent's system prompt: kept verbatim.
        head = []
        for raw in wire:
            if isinstance(raw, Mapping) and raw.get("role") in ("system", "developer"):
                head.append(raw)
            else:
                break
        if memo is None:
            rendered = openai_format.render_messages(list(messages), load)
        else:
            rendered = memo.render(messages, lambda m: openai_format.render_messages([m], load))
        out["messages"] = [*head, *rendered]
        if extra_tools:
            out["tools"] = [*(body.get("tools") or []), *(_openai_tool(t) for t in extra_tools)]
        if max_tokens is not None:
            key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
            out[key] = max_tokens
        return out

    def summary(self, request: Request, *, model: str) -> dict[str, Any]:
        body = openai_format.render_request(request, _no_media)
        body["model"] = model
        return body


def _openai_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.input_schema),
        },
    }


class _Responses:
    name: GuardFormat = "openai-responses"

    def parse(self, body: Mapping[str, Any]) -> ParsedRequest:
        return responses_format.parse_request(body)

    def render(
        self,
        body: Mapping[str, Any],
        messages: Sequence[Message],
        load: AttachmentLoader,
        *,
        extra_tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        memo: WireMemo | None = None,
    ) -> dict[str, Any]:
        out = dict(body)
        raw = body.get("input")
        head = []
        # Leading system/developer items are the agent's system prompt: kept verbatim (as instructions).
        for item in raw if isinstance(raw, list) else []:
            if (
                isinstance(item, Mapping)
                and item.get("type", "message") == "message"
                and item.get("role")
                in (
                    "system",
                    "developer",
                )
            ):
                head.append(item)
            else:
                break
        items = responses_format.render_items(list(messages), load)
        if body.get("store") is False:
            # The provider keeps nothing: a reasoning item without its encrypted content cannot be
            # resolved by its id, and would be refused.
            items = [i for i in items if i.get("type") != "reasoning" or "encrypted_content" in i]
        out["input"] = [*head, *items]
        if extra_tools:
            out["tools"] = [
                *(body.get("tools") or []),
                *(
                    {
                        "type": "function",
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.input_schema),
                    }
                    for t in extra_tools
                ),
            ]
        if max_tokens is not None:
            out["max_output_tokens"] = max_tokens
        return out

    def summary(self, request: Request, *, model: str) -> dict[str, Any]:
        body = responses_format.render_request(request, _no_media)
        body["model"] = model
        return body


def _no_media(ref: Any) -> bytes:  # the summariser's transcript names media, it never carries them
    raise AssertionError(f"a summary request renders no media ({ref!r})")


FORMATS: dict[GuardFormat, WireAdapter] = {
    "anthropic": _Anthropic(),
    "openai": _OpenAI(),
    "openai-responses": _Responses(),
}
