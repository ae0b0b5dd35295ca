"""The local provider's OpenAI Responses API: what it stores, what it refuses, what it answers.

Like OpenAI's (https://platform.openai.com/docs/api-reference/responses):

- **Stored responses.** A response made with ``store`` not ``false`` is kept under its id, with the
  conversation it ends (the input items it was given, its own output); a request naming it as
  ``previous_response_id`` continues that conversation (the instructions and tools are not carried
  over: each request gives its own). An unknown id, or one made with ``store: false``, is 404
  ``previous_response_not_found``. What is kept is bounded in bytes (:class:`~.sessions.SessionStreams`),
  least recently used out, as a provider's retention would.
- **Reasoning items.** A scripted ``Thinking`` block is output as a ``reasoning`` item with an ``rs_…``
  id; with ``include: ["reasoning.encrypted_content"]`` it carries ``encrypted_content``, sealed by this
  server (an HMAC over the id and the summary). On input it refuses what OpenAI refuses: a reasoning
  item with no ``summary`` field; one that is not followed by the item it came with (its message or
  function call; for a stored response, that item with its own id) — 400 "…was provided without its
  required following item"; a stored response's item named by its id without the reasoning item it
  came with right before it — 400 "…was provided without its required 'reasoning' item"; ``encrypted_content``
  this server did not seal — 400 ``invalid_encrypted_content`` (so is a ``compaction`` item's:
  :mod:`.openai_compaction`); and one without ``encrypted_content``
  whose id it does not hold (never issued, or issued with ``store: false``) — 404 "Item with id … not
  found".
- **Answers** as a ``response`` object or, with ``stream: true``, the SSE events OpenAI sends:
  ``response.created``, ``response.in_progress``, per output item ``response.output_item.added``, its
  deltas (``response.reasoning_summary_text.delta``, ``response.output_text.delta``,
  ``response.function_call_arguments.delta``, with their ``…done`` events and the content and summary
  parts around them) and ``response.output_item.done``, then ``response.completed`` (or
  ``response.incomplete``, cut at ``max_output_tokens``) holding the whole response and its usage.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..content import Message, Thinking
from ..formats import AttachmentLoader
from ..formats import responses as responses_format
from .model import LocalReply, Rejection, _openai_error
from .sessions import SESSION_BYTES, retained_bytes
from .wire import sse, text_pieces

__all__ = ["ENCRYPTED_REASONING", "ResponsesMemory", "Stored", "response_events", "response_object"]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
"""The ``include`` value asking for reasoning items' ``encrypted_content``."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Stored:
    """A stored response: the conversation it ends and the bytes of the media in it."""

    messages: tuple[Message, ...]
    attachments: Mapping[str, bytes] = field(default_factory=dict)


class ResponsesMemory:
    """The stored responses and the seal of reasoning items, for one server. Thread-safe."""

    def __init__(self, max_bytes: int = SESSION_BYTES) -> None:
        self.max_bytes = max_bytes
        self._stored: OrderedDict[str, tuple[Stored, int]] = OrderedDict()
        self._reasoning: OrderedDict[str, None] = OrderedDict()
        self._follows: OrderedDict[str, str] = OrderedDict()
        """A stored reasoning item's id → the id of the item it came with (right after it)."""
        self._belongs: OrderedDict[str, str] = OrderedDict()
        """That item's id → the reasoning item's id."""
        self._lock = threading.Lock()
        self._bytes = 0
        self._key = secrets.token_bytes(32)

    # -- previous_response_id ------------------------------------------------------------------------

    def history(self, previous: Any) -> Stored | Rejection:
        """The conversation a ``previous_response_id`` continues, or the error OpenAI answers."""
        if not isinstance(previous, str):
            return _openai_error(
                400,
                "Invalid type for 'previous_response_id': expected a string.",
                "invalid_request_error",
                param="previous_response_id",
                code="invalid_type",
            )
        with self._lock:
            found = self._stored.get(previous)
            if found is not None:
                self._stored.move_to_end(previous)
                return found[0]
        body = _openai_error(
            404,
            f"Previous response with id '{previous}' not found.",
            "invalid_request_error",
            param="previous_response_id",
            code="previous_response_not_found",
        ).body
        return Rejection(status=404, body=body)

    def keep(self, response_id: str, stored: Stored, output: Sequence[Mapping[str, Any]] = ()) -> None:
        """Store a response (made with ``store`` not false), and which of its ``output`` items came
        with which reasoning item; the oldest go past the byte bound."""
        size = retained_bytes(response_id, stored)
        with self._lock:
            for item, after in itertools.pairwise(output):
                if item.get("type") == "reasoning" and isinstance(after.get("id"), str):
                    self._follows[item["id"]] = after["id"]
                    self._belongs[after["id"]] = item["id"]
            for pairs in (self._follows, self._belongs):
                while len(pairs) > _REASONING_IDS:
                    pairs.popitem(last=False)
            for block in stored.messages[-1].content if stored.messages else ():
                if isinstance(block, Thinking) and block.id is not None:
                    self._reasoning[block.id] = None
            while len(self._reasoning) > _REASONING_IDS:
                self._reasoning.popitem(last=False)
            if size > self.max_bytes:
                return
            self._stored[response_id] = (stored, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, dropped) = self._stored.popitem(last=False)
                self._bytes -= dropped

    # -- reasoning items -----------------------------------------------------------------------------

    def seal(self, ident: str, summary: Sequence[str]) -> str:
        """The ``encrypted_content`` of a reasoning item: its summary, and a tag only this server makes."""
        payload = json.dumps({"id": ident, "summary": list(summary)}, separators=(",", ":")).encode()
        tag = hmac.new(self._key, payload, hashlib.sha256).digest()
        return base64.b64encode(tag + payload).decode("ascii")

    def unseal(self, sealed: str) -> str | None:
        """The summary a compaction item's ``encrypted_content`` seals (:meth:`seal`), or ``None`` when
        this server did not seal it."""
        if not self._sealed(sealed):
            return None
        payload = json.loads(base64.b64decode(sealed.encode("ascii"))[32:])
        return "\n".join(payload.get("summary") or ())

    def _sealed(self, sealed: str) -> bool:
        try:
            raw = base64.b64decode(sealed.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError):
            return False
        tag, payload = raw[:32], raw[32:]
        return hmac.compare_digest(tag, hmac.new(self._key, payload, hashlib.sha256).digest())

    def check(self, data: Mapping[str, Any]) -> Rejection | None:
        """The first rule about reasoning items that ``data``'s input breaks (see the module docstring)."""
        items = data.get("input")
        if not isinstance(items, list):
            return None
        stored = data.get("store") is not False
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                continue
            own = item.get("id")
            reasoning = self._belongs.get(own) if stored and isinstance(own, str) else None
            if reasoning is not None:
                before = items[i - 1] if i > 0 else None
                if not (
                    isinstance(before, Mapping)
                    and before.get("type") == "reasoning"
                    and before.get("id") == reasoning
                ):
                    kind = item.get("type", "message")
                    return _openai_error(
                        400,
                        f"Item '{own}' of type '{kind}' was provided without its required 'reasoning' item: "
                        f"'{reasoning}'.",
                        "invalid_request_error",
                        param="input",
                    )
            if item.get("type") == "compaction":
                sealed = item.get("encrypted_content")
                if isinstance(sealed, str) and not self._sealed(sealed):
                    return _openai_error(
                        400,
                        f"The encrypted content for item {item.get('id')} could not be verified.",
                        "invalid_request_error",
                        param=f"input[{i}].encrypted_content",
                        code="invalid_encrypted_content",
                    )
                continue
            if item.get("type") != "reasoning":
                continue
            ident = item.get("id")
            if "summary" not in item:
                return _openai_error(
                    400,
                    f"Missing required parameter: 'input[{i}].summary'.",
                    "invalid_request_error",
                    param=f"input[{i}].summary",
                    code="missing_required_parameter",
                )
            following = items[i + 1] if i + 1 < len(items) else None
            paired = self._follows.get(ident) if stored and isinstance(ident, str) else None
            if not _follows(following) or (
                paired is not None and isinstance(following, Mapping) and following.get("id") != paired
            ):
                return _openai_error(
                    400,
                    f"Item '{ident}' of type 'reasoning' was provided without its required following item.",
                    "invalid_request_error",
                    param="input",
                )
            sealed = item.get("encrypted_content")
            if sealed is not None:
                if not isinstance(sealed, str) or not self._sealed(sealed):
                    return _openai_error(
                        400,
                        f"The encrypted content for item {ident} could not be verified.",
                        "invalid_request_error",
                        param="input",
                        code="invalid_encrypted_content",
                    )
            elif not isinstance(ident, str) or ident not in self._reasoning:
                text = f"Item with id '{ident}' not found."
                if not stored:
                    text += (
                        " Items are not persisted when `store` is set to false. Try again with `store` set"
                        " to true, or remove this item from your input."
                    )
                return Rejection(
                    status=404, body=_openai_error(404, text, "invalid_request_error", param="input").body
                )
        return None

    def name(self, reply: LocalReply) -> Message:
        """The reply's message with its reasoning blocks given ids and seals, as they are output."""
        content = []
        n = 0
        for block in reply.message.content:
            if isinstance(block, Thinking):
                ident = f"rs_{reply.id}_{n}"
                n += 1
                summary = [block.thinking] if block.thinking else []
                block = replace(block, id=ident, signature=self.seal(ident, summary))
            content.append(block)
        return replace(reply.message, content=tuple(content))


_REASONING_IDS = 100_000
"""How many stored reasoning ids are remembered (their items are held by the stored responses)."""


def _follows(item: Any) -> bool:
    """Whether ``item`` can be what a reasoning item came with: another output item."""
    if not isinstance(item, Mapping):
        return False
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind not in ("function_call_output", "reasoning", "item_reference")


# -- the answer -----------------------------------------------------------------------------------


def _usage(reply: LocalReply) -> dict[str, Any] | None:
    usage = reply.reported
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt,
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning},
        "total_tokens": usage.prompt + usage.output,
    }


def _output(
    message: Message, reply_id: str, *, encrypted: bool, load: AttachmentLoader
) -> list[dict[str, Any]]:
    out = []
    calls = 0
    for item in responses_format.render_items([message], load):
        kind = item.get("type", "message")
        if kind == "reasoning":
            if not encrypted:
                item.pop("encrypted_content", None)
            out.append(item)
        elif kind == "function_call":
            out.append(
                {"type": "function_call", "id": f"fc_{reply_id}_{calls}", **item, "status": "completed"}
            )
            calls += 1
        else:
            parts = [{**p, "annotations": [], "logprobs": []} for p in item["content"]]
            out.append(
                {
                    "type": "message",
                    "id": f"msg_{reply_id}_{len(out)}",
                    "role": "assistant",
                    "status": "completed",
                    "content": parts,
                }
            )
    return out


def response_object(
    reply: LocalReply, message: Message, *, request: Mapping[str, Any], load: AttachmentLoader
) -> dict[str, Any]:
    """The ``response`` object of a reply whose output is ``message`` (see :meth:`ResponsesMemory.name`)."""
    include = request.get("include") or []
    encrypted = isinstance(include, list) and ENCRYPTED_REASONING in include
    cut = reply.stop_reason == "max_tokens"
    out: dict[str, Any] = {
        "id": f"resp_{reply.id}",
        "object": "response",
        "created_at": int(time.time()),
        "model": reply.model,
        "status": "incomplete" if cut else "completed",
        "output": _output(message, reply.id, encrypted=encrypted, load=load),
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "store": request.get("store") is not False,
        "previous_response_id": request.get("previous_response_id"),
        "truncation": request.get("truncation") or "disabled",
    }
    if cut:
        out["incomplete_details"] = {"reason": "max_output_tokens"}
    usage = _usage(reply)
    if usage is not None:
        out["usage"] = usage
    return out


def response_events(response: Mapping[str, Any]) -> Iterator[bytes]:
    """The SSE stream of a ``response`` object, as OpenAI sends it (see the module docstring)."""
    sequence = iter(range(1 << 62))

    def event(kind: str, **fields: Any) -> bytes:
        return sse({"type": kind, "sequence_number": next(sequence), **fields}, kind)

    pending = {
        **{k: v for k, v in response.items() if k not in ("usage", "incomplete_details")},
        "status": "in_progress",
        "output": [],
    }
    yield event("response.created", response=pending)
    yield event("response.in_progress", response=pending)
    for index, item in enumerate(response["output"]):
        kind = item["type"]
        ident = item.get("id", "")
        if kind == "reasoning":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={"type": "reasoning", "id": ident, "summary": []},
            )
            for s, part in enumerate(item.get("summary") or []):
                where = {"item_id": ident, "output_index": index, "summary_index": s}
                yield event(
                    "response.reasoning_summary_part.added",
                    **where,
                    part={"type": "summary_text", "text": ""},
                )
                for piece in text_pieces(part["text"]):
                    yield event("response.reasoning_summary_text.delta", **where, delta=piece)
                yield event("response.reasoning_summary_text.done", **where, text=part["text"])
                yield event("response.reasoning_summary_part.done", **where, part=part)
        elif kind == "compaction":
            # The item arrives whole: the server says it is compacting, then hands it over.
            yield event(
                "response.output_item.added",
                output_index=index,
                item={"type": "compaction", "id": ident, "encrypted_content": ""},
            )
            yield event("response.compaction.compacting", item_id=ident, output_index=index)
        elif kind == "function_call":
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "arguments": "", "status": "in_progress"},
            )
            where = {"item_id": ident, "output_index": index}
            for piece in text_pieces(item["arguments"]):
                yield event("response.function_call_arguments.delta", **where, delta=piece)
            yield event("response.function_call_arguments.done", **where, arguments=item["arguments"])
        else:
            yield event(
                "response.output_item.added",
                output_index=index,
                item={**item, "content": [], "status": "in_progress"},
            )
            for c, part in enumerate(item["content"]):
                where = {"item_id": ident, "output_index": index, "content_index": c}
                yield event("response.content_part.added", **where, part={**part, "text": ""})
                for piece in text_pieces(part["text"]):
                    yield event("response.output_text.delta", **where, delta=piece, logprobs=[])
                yield event("response.output_text.done", **where, text=part["text"], logprobs=[])
                yield event("response.content_part.done", **where, part=part)
        yield event("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if response.get("status") == "incomplete" else "response.completed"
    yield event(final, response=dict(response))
