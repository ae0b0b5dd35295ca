"""The Gemini API's request body (``models/{model}:generateContent`` / ``:countTokens``) ⇄ canonical.

Gemini's shape (https://ai.google.dev/api/generate-content): ``contents`` is a list of
``{"role": "user" | "model", "parts": [...]}``; a part is ``text``, ``inlineData`` (``mimeType``
and base64 ``data``), ``functionCall`` (``name``, ``args``, optional ``id``) or ``functionResponse``
(``name``, ``response`` object, optional ``id``); ``systemInstruction`` is a content of text parts
and ``tools`` a list of ``{"functionDeclarations": [{"name", "description", "parameters"}]}``.

Both directions go through the Anthropic Messages shape, which carries the same content
(:mod:`.anthropic` validates and measures media once): a function call is a tool use, a function
response a tool result matched by ``id`` when given, else to the latest call of the same name.
What Gemini has and the canonical form does not (``fileData`` URIs, thought parts) is refused or
left out, never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..content import Request
from ..errors import InvalidInput
from . import anthropic
from ._wire import AttachmentLoader, ParsedRequest

__all__ = ["parse_request", "render_request"]


def parse_request(data: Mapping[str, Any], *, model: str | None = None) -> ParsedRequest:
    """A Gemini request body as canonical content; ``model`` is the one the URL names.

    A ``countTokens`` body that wraps a whole request in ``generateContentRequest`` is read too.
    """
    if not isinstance(data, Mapping):
        raise InvalidInput("expected a request object", path="request")
    if isinstance(data.get("generateContentRequest"), Mapping):
        inner = data["generateContentRequest"]
        model = model or _model_name(inner.get("model"))
        data = inner
    body: dict[str, Any] = {"messages": _messages(data.get("contents"))}
    if model:
        body["model"] = _model_name(model)
    system = data.get("systemInstruction")
    if system is not None:
        texts = [p.get("text") for p in _parts(system, "systemInstruction") if isinstance(p.get("text"), str)]
        body["system"] = [{"type": "text", "text": t} for t in texts if t]
    tools = _tools(data.get("tools"))
    if tools:
        body["tools"] = tools
    parsed = anthropic.parse_request(body)
    return ParsedRequest(request=parsed.request, attachments=parsed.attachments, format="gemini")


def render_request(request: Request, load: AttachmentLoader) -> dict[str, Any]:
    """A canonical request as a Gemini request body (``contents``, ``systemInstruction``, ``tools``)."""
    wire = anthropic.render_request(request, load)
    names: dict[str, str] = {}
    contents: list[dict[str, Any]] = []
    for message in wire["messages"]:
        parts = [p for b in message["content"] if (p := _render_part(b, names)) is not None]
        if parts:
            contents.append({"role": "model" if message["role"] == "assistant" else "user", "parts": parts})
    out: dict[str, Any] = {"contents": contents}
    if wire.get("system"):
        out["systemInstruction"] = {"parts": [{"text": b["text"]} for b in wire["system"]]}
    if wire.get("tools"):
        out["tools"] = [
            {
                "functionDeclarations": [
                    {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]}
                    for t in wire["tools"]
                ]
            }
        ]
    return out


def _model_name(value: Any) -> str:
    return str(value or "").removeprefix("models/")


def _parts(content: Any, path: str) -> list[dict[str, Any]]:
    if not isinstance(content, Mapping):
        raise InvalidInput("expected a content object with parts", path=path)
    parts = content.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, Mapping) for p in parts):
        raise InvalidInput("expected a list of part objects", path=f"{path}.parts")
    return [dict(p) for p in parts]


def _messages(contents: Any) -> list[dict[str, Any]]:
    if not isinstance(contents, list) or not contents:
        raise InvalidInput("contents must be a non-empty list", path="contents")
    pending: dict[str, list[str]] = {}  # function name -> ids of its calls not yet answered
    out: list[dict[str, Any]] = []
    for i, content in enumerate(contents):
        path = f"contents[{i}]"
        role = content.get("role", "user") if isinstance(content, Mapping) else None
        if role not in ("user", "model"):
            raise InvalidInput("role must be 'user' or 'model'", path=f"{path}.role")
        blocks = [_block(p, f"{path}.parts[{j}]", pending, i) for j, p in enumerate(_parts(content, path))]
        out.append({"role": "assistant" if role == "model" else "user", "content": blocks})
    return out


def _block(part: dict[str, Any], path: str, pending: dict[str, list[str]], turn: int) -> dict[str, Any]:
    if isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if isinstance(part.get("inlineData"), Mapping):
        inline = part["inlineData"]
        media_type, data = inline.get("mimeType"), inline.get("data")
        if not isinstance(media_type, str) or not isinstance(data, str):
            raise InvalidInput("inlineData needs mimeType and data", path=f"{path}.inlineData")
        kind = "document" if media_type == "application/pdf" else "image"
        return {"type": kind, "source": {"type": "base64", "media_type": media_type, "data": data}}
    if isinstance(part.get("functionCall"), Mapping):
        call = part["functionCall"]
        name = call.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInput("functionCall needs a name", path=f"{path}.functionCall.name")
        call_id = str(call.get("id") or f"call_{turn}_{len(pending.get(name, []))}_{name}")
        pending.setdefault(name, []).append(call_id)
        args = call.get("args") or {}
        if not isinstance(args, Mapping):
            raise InvalidInput("functionCall.args must be an object", path=f"{path}.functionCall.args")
        return {"type": "tool_use", "id": call_id, "name": name, "input": dict(args)}
    if isinstance(part.get("functionResponse"), Mapping):
        answer = part["functionResponse"]
        answered = answer.get("name")
        waiting = pending.get(str(answered), [])
        response_id = answer.get("id") or (waiting[-1] if waiting else None)
        if not response_id:
            raise InvalidInput(
                f"functionResponse for {answered!r} follows no functionCall of that name",
                path=f"{path}.functionResponse",
            )
        if response_id in waiting:
            waiting.remove(response_id)
        response = answer.get("response")
        if isinstance(response, Mapping) and len(response) == 1 and isinstance(_only(response), str):
            text = _only(response)  # {"output": "..."}, as the SDK wraps a plain result
        else:
            text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
        return {"type": "tool_result", "tool_use_id": str(response_id), "content": text}
    kinds = ", ".join(sorted(part)) or "nothing"
    raise InvalidInput(
        f"unsupported part ({kinds}): expected text, inlineData, functionCall or functionResponse", path=path
    )


def _only(mapping: Mapping[str, Any]) -> Any:
    return next(iter(mapping.values()))


def _tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidInput("tools must be a list", path="tools")
    out: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        declarations = tool.get("functionDeclarations") if isinstance(tool, Mapping) else None
        for j, fn in enumerate(declarations or []):
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise InvalidInput(
                    "a function declaration needs a name", path=f"tools[{i}].functionDeclarations[{j}]"
                )
            schema = fn.get("parameters") or fn.get("parametersJsonSchema") or {"type": "object"}
            out.append(
                {"name": fn["name"], "description": str(fn.get("description") or ""), "input_schema": schema}
            )
    return out


def _render_part(block: dict[str, Any], names: dict[str, str]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"text": block["text"]}
    if kind in ("image", "document"):
        source = block["source"]
        return {"inlineData": {"mimeType": source["media_type"], "data": source["data"]}}
    if kind == "tool_use":
        names[block["id"]] = block["name"]
        return {"functionCall": {"id": block["id"], "name": block["name"], "args": block["input"]}}
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, list):
            content = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        response = {"error" if block.get("is_error") else "output": content or ""}
        name = names.get(block["tool_use_id"], "")
        return {"functionResponse": {"id": block["tool_use_id"], "name": name, "response": response}}
    return None  # thinking: Gemini's thought parts are the model's own, not sent back as text
