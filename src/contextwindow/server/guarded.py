"""The guard as the proxy's transform: each request fitted to the window before it goes upstream.

:class:`GuardTransform` keeps one :class:`~contextwindow.guard.GuardCore` per wire format and
``x-contextwindow-session`` name (none: the guard recognises the conversation by its prefix), all on
one store. The core's own work (compiling, the ledger's writes) runs in a worker thread so the
event loop keeps serving. For each Anthropic Messages, Chat Completions or Responses request the core
compiles what to send (a Responses request naming ``previous_response_id`` goes out as written while
the upstream's history fits, see :mod:`contextwindow.guard._chained`); its calls are made upstream
with the agent's own headers:

- the agent's call: the compiled body, streamed back to the agent as the upstream sends it, while the
  reply is read as it passes (SSE events, or the JSON body) and recorded when it ends;
- a rejection for size (the upstream's status and body, read by the overflow classifier) is handed to
  the core, which compacts and sends again once: the agent sees only the answer to the retry;
- a summariser's call: the same endpoint, not streamed, on the agent's credentials;
- ``count_tokens``: the count of the request the guard would send.

A rejection the guard cannot recover, and every other refusal of the upstream, reaches the agent as
the upstream sent it (its status and its API's error body). Requests the core cannot fit (no
messages, a model without a profile) go through unchanged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio.from_thread
import anyio.to_thread

from ..errors import ContextOverflow, OverBudget, UsageError
from ..guard import GuardCore, GuardOptions, Reply, Send, run_sync
from ..guard.replies import (
    AnthropicEvents,
    OpenAIChunks,
    ResponsesEvents,
    anthropic_reply,
    openai_reply,
    responses_reply,
)
from ..providers.overflow import classify
from ..store import Store
from .errors import HttpError
from .proxy import ProxyCall, Upstream, UpstreamReply, passthrough

__all__ = ["GuardTransform", "UpstreamRefused"]

_COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"})
"""What Anthropic's ``count_tokens`` accepts of a Messages body."""


class UpstreamRefused(Exception):
    """The upstream answered an error: its status, headers and body, kept to be relayed as they are."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.headers = dict(headers)
        self.body = body

    def reply(self) -> UpstreamReply:
        return UpstreamReply.of_bytes(self.status, self.headers, self.body)


def _overflow_of(provider: str) -> Any:
    def read(exc: BaseException) -> ContextOverflow | None:
        if not isinstance(exc, UpstreamRefused):
            return None
        try:
            body: Any = json.loads(exc.body)
        except ValueError:
            body = exc.body.decode("utf-8", errors="replace")
        return classify(exc.status, body, provider=provider, headers=exc.headers)

    return read


class GuardTransform:
    """The proxy's transform with the guard (see the module docstring)."""

    def __init__(self, store: Store, *, context_window: int | None = None, summarize: bool = True) -> None:
        self.store = store
        self.context_window = context_window
        self.summarize = summarize
        self._cores: dict[tuple[str, str | None], tuple[GuardCore, asyncio.Lock]] = {}

    def _core(self, fmt: str, session: str | None) -> tuple[GuardCore, asyncio.Lock]:
        key = (fmt, session)
        found = self._cores.get(key)
        if found is None:
            core = GuardCore(
                self.store,
                fmt,  # type: ignore[arg-type]
                overflow=_overflow_of(fmt),
                options=GuardOptions(
                    session=session,
                    context_window=self.context_window,
                    summarizer=None if self.summarize else False,
                ),
            )
            found = self._cores[key] = (core, asyncio.Lock())
        return found

    async def __call__(self, call: ProxyCall, upstream: Upstream) -> UpstreamReply:
        fmt = _FORMATS[call.api]
        counting = call.api == "anthropic-count-tokens"
        messages_path = call.path.replace("/messages/count_tokens", "/messages", 1)
        count_path = messages_path.replace("/messages", "/messages/count_tokens", 1)

        async def perform(step: Send) -> Any:
            if step.purpose == "count":
                body = {k: v for k, v in step.body.items() if k in _COUNT_FIELDS}
                return await upstream.send(call, body, path=count_path)
            if step.purpose == "summary":
                reply = await _accepted(
                    await upstream.send(call, {**step.body, "stream": False}, path=messages_path)
                )
                data = json.loads(await reply.read())
                return _REPLIES[fmt](data)
            return await _accepted(await upstream.send(call, step.body, path=messages_path))

        body = dict(call.body)
        if counting:
            body.setdefault("max_tokens", 1)
        core, lock = self._core(fmt, call.session)

        def fit() -> Any:
            # Compiling and the ledger's writes are blocking work: the core runs in a worker thread,
            # and each call it asks for is made on the event loop (the upstream's client lives there).
            return run_sync(
                core.request(body, count=counting), lambda step: anyio.from_thread.run(perform, step)
            )

        try:
            async with lock:  # a core runs one agent loop: one of its requests at a time
                exchange = await anyio.to_thread.run_sync(fit)
        except UsageError:
            return await passthrough(call, upstream)  # nothing the guard can fit: as the agent wrote it
        except ContextOverflow as overflow:
            cause = overflow.__cause__
            if isinstance(cause, UpstreamRefused):
                return cause.reply()
            raise
        except UpstreamRefused as refused:
            return refused.reply()
        except OverBudget as over:  # the system prompt, tools and newest message alone do not fit
            raise HttpError("invalid_request_error", str(over)) from None
        result: UpstreamReply = exchange.result
        if counting or result.status >= 400:
            return result
        if "text/event-stream" in result.headers.get("content-type", ""):
            return result.with_chunks(_tap_sse(result.chunks(), fmt, exchange.finish))
        raw = await result.read()
        try:
            data = json.loads(raw)
            exchange.finish(_REPLIES[fmt](data))
        except ValueError:
            pass  # not JSON: relayed as it came, nothing to record
        return UpstreamReply.of_bytes(result.status, result.headers, raw)


_FORMATS = {
    "anthropic-messages": "anthropic",
    "anthropic-count-tokens": "anthropic",
    "openai-chat": "openai",
    "openai-responses": "openai-responses",
}
"""The guard's wire format for each API the proxy serves."""
_REPLIES: dict[str, Callable[[Any], Reply]] = {
    "anthropic": anthropic_reply,
    "openai": openai_reply,
    "openai-responses": responses_reply,
}


async def _accepted(reply: UpstreamReply) -> UpstreamReply:
    """``reply`` when it is a success; else :class:`UpstreamRefused` with its body read."""
    if reply.status < 400:
        return reply
    body = await reply.read()
    await reply.aclose()
    raise UpstreamRefused(reply.status, reply.headers, body)


async def _tap_sse(chunks: AsyncIterator[bytes], fmt: str, finish: Any) -> AsyncIterator[bytes]:
    """``chunks`` unchanged, while their SSE events feed the reply, recorded before the stream's last
    event is passed on (so the ledger holds the reply by the time the agent has read it)."""
    events: AnthropicEvents | OpenAIChunks | ResponsesEvents = (
        AnthropicEvents() if fmt == "anthropic" else OpenAIChunks() if fmt == "openai" else ResponsesEvents()
    )
    pending = b""
    recorded = False
    async for chunk in chunks:
        pending += chunk
        *complete, pending = pending.replace(b"\r\n", b"\n").split(b"\n\n")
        ended = False
        for event in complete:
            for line in event.split(b"\n"):
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    ended = True
                elif data:
                    try:
                        events.feed(json.loads(data))
                    except ValueError:
                        continue
        # A Chat Completions stream's usage chunk comes after its finish: it ends on [DONE].
        if not recorded and (ended or (fmt != "openai" and events.done)):
            recorded = True
            finish(events.reply())
        yield chunk
    if not recorded and (events.done or events.usage):
        reply: Reply = events.reply()
        finish(reply)
