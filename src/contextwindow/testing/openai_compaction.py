"""The local provider's OpenAI Responses compaction: ``compaction`` items written, read and checked.

As OpenAI documents it (https://developers.openai.com/api/docs/guides/compaction and the API
reference of ``POST /responses/compact``):

- **Server-side compaction** (:func:`compacting_call`): a ``responses.create`` with
  ``context_management=[{"type": "compaction", "compact_threshold": N}]`` whose rendered input
  reaches N tokens is compacted first: the server reads the whole input, writes an opaque
  ``compaction`` item (``{"type": "compaction", "id": "cmp_…", "encrypted_content": …}``), and the
  reply is made from the instructions, the tools and that item alone; the output starts with the
  item. An entry without ``compact_threshold`` compacts nothing here (OpenAI's default threshold is not
  documented). The usage reports both passes: the compaction pass (the whole input, its prefix read
  from the prompt cache, and the item's tokens as output) and the reply's (OpenAI documents no split;
  the sum errs high).
- **Standalone** (:func:`compact_response`): ``POST /responses/compact`` takes ``model`` (required),
  ``input`` and/or ``previous_response_id``, ``instructions`` and the prompt-cache and service-tier
  options, and nothing else (an unknown parameter is refused, 400 ``unknown_parameter``, as OpenAI
  refuses one); it answers ``{"object": "response.compaction", "output": [the input's user
  messages…, one compaction item], "usage"}``. An input over the window is refused
  (``context_length_exceeded``): the compaction pass must read it.
- **On input**, a compaction item stands for the summary it seals (:func:`expanded`): the model reads
  it and it is counted and billed as that summary. The items *before* it are **not** dropped: OpenAI
  reads and bills them (a live probe, pydantic/pydantic-ai#7224), and it is the client's to drop
  them (the docs' latency tip; the guard does). An ``encrypted_content`` this server did not seal is
  refused (400 ``invalid_encrypted_content``, :meth:`~.responses.ResponsesMemory.check`).

The item's summary is the local summariser's (:mod:`.summary`), written to
:data:`~contextwindow.compaction.OPENAI_COMPACTED_SHARE` of the threshold (of the input's count, for
the standalone endpoint), at least :data:`~.summary.DEFAULT_TARGET_TOKENS`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..compaction import OPENAI_COMPACTED_SHARE, OPENAI_COMPACTION
from ..content import Message, Request, Text, ToolResult
from ..formats import AttachmentLoader
from ..formats import responses as responses_format
from ..formats.responses import COMPACTION_ITEM
from ..usage.tracker import Usage
from .counting import tokenizer_for
from .model import LocalModel, LocalReply, Rejection, _openai_error
from .summary import DEFAULT_SECTIONS, DEFAULT_TARGET_TOKENS, SummaryAsk, write_summary

__all__ = ["COMPACT_FIELDS", "compact_response", "compacting_call", "compaction_threshold", "expanded"]

COMPACT_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "previous_response_id",
        "prompt_cache_key",
        "prompt_cache_retention",
        "prompt_cache_options",
        "service_tier",
        "image",
    }
)
"""The parameters ``POST /responses/compact`` takes (the API reference; the SDK's ``responses.compact``)."""


def compaction_threshold(data: Mapping[str, Any]) -> int | None:
    """The ``compact_threshold`` of a create request's compaction entry (already validated), or ``None``."""
    for entry in data.get("context_management") or ():
        if isinstance(entry, Mapping) and entry.get("type") == OPENAI_COMPACTION:
            threshold = entry.get("compact_threshold")
            return threshold if isinstance(threshold, int) else None
    return None


def expanded(request: Request, unseal: Any) -> Request:
    """``request`` with each compaction item read as the summary it seals (``unseal``: the sealed
    text → its summary, or ``None`` for one this server did not seal, then left as it is)."""
    messages = []
    for message in request.messages:
        if COMPACTION_ITEM in message.metadata:
            sealed = "".join(b.text for b in message.content if isinstance(b, Text))
            summary = unseal(sealed)
            if summary is not None:
                message = replace(message, content=(Text(text=summary),))
        messages.append(message)
    return replace(request, messages=tuple(messages))


def compaction_summary(model: LocalModel, request: Request, target: int) -> tuple[str, int]:
    """A provider compaction's summary of all of ``request``'s messages (of about ``target`` tokens),
    and its output tokens: OpenAI's and Anthropic's (:mod:`.anthropic_compaction`) as the local
    provider writes them."""
    tok = tokenizer_for(model.profile(request.model), model.settings.count_scale)
    ask = SummaryAsk(max(DEFAULT_TARGET_TOKENS, target), DEFAULT_SECTIONS)
    # The summariser summarises every message but the last user one: one that asks for it.
    asking = replace(
        request, messages=(*request.messages, Message(role="user", content=(Text(text="Compact."),)))
    )
    text = write_summary(asking, ask, tok.count)
    return text, tok.count(text)


def _item(memory: Any, reply_id: str, summary: str) -> tuple[dict[str, Any], Message]:
    """The compaction item sealing ``summary``, and the message it is read as."""
    ident = f"cmp_{reply_id}"
    sealed = memory.seal(ident, [summary])
    item = {"type": OPENAI_COMPACTION, "id": ident, "encrypted_content": sealed}
    message = Message(role="user", content=(Text(text=summary),), metadata={COMPACTION_ITEM: {"id": ident}})
    return item, message


def compacting_call(
    model: LocalModel,
    memory: Any,
    request: Request,
    *,
    threshold: int | None,
    load: AttachmentLoader,
    session: str,
) -> tuple[LocalReply | Rejection, dict[str, Any] | None, Request]:
    """A ``responses.create`` call (``request`` already :func:`expanded`) with server-side
    compaction at ``threshold``: the reply, the compaction item it output first (``None``: not
    compacted) and the context the reply was made from."""
    counted = model.count(request, load, wire="openai").input_tokens
    window = model.window(model.profile(request.model))
    if threshold is None or counted < threshold or counted > window:
        # Under the threshold; or over the window, which the call refuses as it refuses any.
        outcome = model.handle(
            request, wire="openai", max_tokens=request.max_tokens, load=load, session=session
        )
        return outcome, None, request
    profile = model.profile(request.model)
    read = model._cached(request, profile, "openai", (), counted, load)
    summary, written = compaction_summary(model, request, int(threshold * OPENAI_COMPACTED_SHARE))
    # The reply is made from the instructions, the tools and the summary the item seals.
    pruned = replace(request, messages=(Message(role="user", content=(Text(text=summary),)),))
    outcome = model.handle(pruned, wire="openai", max_tokens=request.max_tokens, load=load, session=session)
    if isinstance(outcome, Rejection):
        return outcome, None, pruned
    item, message = _item(memory, outcome.id, summary)
    pruned = replace(request, messages=(message,))
    compaction = Usage(
        fresh_input=counted - read.read - read.write,
        cache_read=read.read,
        cache_write=read.write,
        output=written,
    )
    reported = None if outcome.reported is None else outcome.reported + compaction
    return replace(outcome, reported=reported), item, pruned


def _usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.prompt,
        "input_tokens_details": {"cached_tokens": usage.cache_read},
        "output_tokens": usage.output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt + usage.output,
    }


def _user_items(request: Request, load: AttachmentLoader) -> list[dict[str, Any]]:
    """The input's user messages (not tool results, not compaction items), as output items."""
    users = [
        m
        for m in request.messages
        if m.role == "user"
        and COMPACTION_ITEM not in m.metadata
        and "wire_role" not in m.metadata
        and not all(isinstance(b, ToolResult) for b in m.content)
    ]
    return [{"type": "message", **item} for item in responses_format.render_items(users, load)]


def compact_response(
    model: LocalModel, memory: Any, data: Mapping[str, Any], request: Request, load: AttachmentLoader
) -> Rejection | dict[str, Any]:
    """``POST /responses/compact``'s answer to ``data`` (``request``: its input, the conversation a
    ``previous_response_id`` continues before it, already :func:`expanded`), or its refusal."""
    unknown = sorted(k for k in data if k not in COMPACT_FIELDS)
    if unknown:
        return _openai_error(
            400,
            f"Unknown parameter: '{unknown[0]}'.",
            "invalid_request_error",
            code="unknown_parameter",
            param=unknown[0],
        )
    if not data.get("model"):
        return _openai_error(
            400,
            "Missing required parameter: 'model'.",
            "invalid_request_error",
            code="missing_required_parameter",
            param="model",
        )
    if not request.messages:
        return _openai_error(
            400,
            "Missing required parameter: 'input' (or 'previous_response_id').",
            "invalid_request_error",
            code="missing_required_parameter",
            param="input",
        )
    counted = model.count(request, load, wire="openai").input_tokens
    window = model.window(model.profile(request.model))
    if counted > window:
        return _openai_error(
            400,
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{counted} tokens ({counted} in the messages, 0 in the completion). "
            "Please reduce the length of the messages or completion.",
            "invalid_request_error",
            code="context_length_exceeded",
            param="input",
        )
    read = model._cached(request, model.profile(request.model), "openai", (), counted, load)
    summary, written = compaction_summary(model, request, int(counted * OPENAI_COMPACTED_SHARE))
    stamp = f"{time.time_ns():x}"
    item, _ = _item(memory, stamp, summary)
    usage = Usage(
        fresh_input=counted - read.read - read.write,
        cache_read=read.read,
        cache_write=read.write,
        output=written,
    )
    return {
        "id": f"resp_cmp_{stamp}",
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*_user_items(request, load), item],
        "usage": _usage(usage),
    }
