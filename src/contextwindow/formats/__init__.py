"""Wire formats ⇄ canonical content: the Anthropic Messages and OpenAI Chat Completions APIs.

:func:`parse_any` reads either format, detected from the content (a request object or a bare message
list); :func:`render` writes a canonical request in the format asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

from ..content import Request, ToolSpec
from ..errors import InvalidInput
from . import anthropic, openai
from ._wire import AttachmentLoader, ParsedRequest, loader_from

__all__ = [
    "AttachmentLoader",
    "ParsedRequest",
    "ToolDefinition",
    "WireFormat",
    "detect_format",
    "loader_from",
    "parse_any",
    "render",
    "tool_specs",
]

WireFormat: TypeAlias = Literal["anthropic", "openai"]
"""The wire formats :func:`parse_any` reads and :func:`render` writes."""
ToolDefinition: TypeAlias = ToolSpec | Mapping[str, Any]
"""A tool as a :class:`~contextwindow.content.ToolSpec` or as an Anthropic or OpenAI wire dict."""

_OPENAI_ROLES = frozenset({"system", "developer", "tool"})
_OPENAI_PARTS = frozenset({"image_url", "input_audio", "file", "refusal"})
_ANTHROPIC_PARTS = frozenset(
    {"image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking"}
)


def detect_format(data: Mapping[str, Any] | Sequence[Any]) -> WireFormat:
    """Which wire format a request object or a bare message list is written in.

    OpenAI shows itself by ``system``/``developer``/``tool`` roles, ``tool_calls``, its part types or
    ``function`` tools; Anthropic by a top-level ``system``, its block types or ``input_schema`` tools.
    Plain text only reads the same in both and is taken as Anthropic.
    """
    if isinstance(data, Mapping):
        if "system" in data:
            return "anthropic"
        tools = data.get("tools") or []
        if isinstance(tools, list) and any(isinstance(t, dict) and "function" in t for t in tools):
            return "openai"
        if isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools):
            return "anthropic"
        messages = data.get("messages")
    else:
        messages = data
    if not isinstance(messages, list):
        raise InvalidInput("expected a request with a messages list, or a list of messages", path="messages")
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if (isinstance(role, str) and role in _OPENAI_ROLES) or "tool_calls" in message:
            return "openai"
        content = message.get("content")
        if isinstance(content, list):
            # Only string kinds: a malformed part is the parser's to report, with its path.
            kinds = {p.get("type") for p in content if isinstance(p, dict) and isinstance(p.get("type"), str)}
            if kinds & _OPENAI_PARTS:
                return "openai"
            if kinds & _ANTHROPIC_PARTS:
                return "anthropic"
    return "anthropic"


def parse_any(data: Mapping[str, Any] | Sequence[Any]) -> ParsedRequest:
    """A request object or a bare message list in either wire format, as canonical content."""
    if detect_format(data) == "anthropic":
        if isinstance(data, Mapping):
            return anthropic.parse_request(data)
        return anthropic.parse_wire_messages(data)
    if isinstance(data, Mapping):
        return openai.parse_request(data)
    return openai.parse_wire_messages(data)


def render(request: Request, fmt: WireFormat, load: AttachmentLoader) -> dict[str, Any]:
    """A canonical request as a request body in ``fmt``."""
    if fmt == "anthropic":
        return anthropic.render_request(request, load)
    if fmt == "openai":
        return openai.render_request(request, load)
    raise InvalidInput(f"unknown wire format {fmt!r}", path="format")


def tool_specs(tools: Sequence[ToolDefinition]) -> tuple[ToolSpec, ...]:
    """Tools as :class:`~contextwindow.content.ToolSpec`: a spec as it is; an OpenAI Chat
    (``{"type": "function", "function": {...}}``), OpenAI Responses (``{"type": "function", "name":
    ...}``) or Anthropic (``{"name": ..., "input_schema": ...}``) tool dict read as its format says."""
    out: list[ToolSpec] = []
    for i, tool in enumerate(tools):
        path = f"tools[{i}]"
        if isinstance(tool, ToolSpec):
            out.append(tool)
        elif not isinstance(tool, Mapping):
            raise InvalidInput(f"must be a ToolSpec or a tool dict, got {type(tool).__name__}", path=path)
        elif "function" in tool:
            out.append(openai._parse_tool(dict(tool), path))
        elif tool.get("type") == "function":
            function = {k: v for k, v in tool.items() if k in ("name", "description", "parameters")}
            out.append(openai._parse_tool({"type": "function", "function": function}, path))
        else:
            out.append(anthropic._parse_tool(dict(tool), path))
    return tuple(out)
