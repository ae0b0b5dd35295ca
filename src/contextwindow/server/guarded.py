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

from ..errors import ContextOverflow, InvalidInput, OverBudget, UsageError
from ..guard import GuardCore, Reply, Send, run_sync
from ..guard._replies import (
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
from .proxy import SESSION_HEADER, ProxyCall, Upstream, UpstreamReply, passthrough

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
        self._cores: dict[tuple[str, str | None, int | None], tuple[GuardCore, asyncio.Lock]] = {}

    def _core(
        self, fmt: str, session: str | None, window: int | None = None
    ) -> tuple[GuardCore, asyncio.Lock]:
        key = (fmt, session, window)
        found = self._cores.get(key)
        if found is None:
            core = GuardCore(
                self.store,
                fmt,  # type: ignore[arg-type]
                overflow=_overflow_of(fmt),
                session=session,
                context_window=window,
                summarize=self.summarize,
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
                try:
                    data = json.loads(await reply.read())
                except ValueError:
                    raise HttpError(
                        "upstream_error", "The upstream's answer to a summary is not JSON"
                    ) from None
                return _REPLIES[fmt](data)
            return await _accepted(await upstream.send(call, step.body, path=messages_path))

        body = dict(call.body)
        if counting:
            body.setdefault("max_tokens", 1)
        core, lock = self._core(fmt, call.session, self.context_window or _asked_window(call.headers))

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
        except InvalidInput as refused:
            if refused.path == "session_id":  # the ledger's rule for a session's name
                raise HttpError(
                    "invalid_request_error", f"{SESSION_HEADER} header: {refused.reason}"
                ) from None
            raise
        except ContextOverflow as overflow:
            cause = overflow.__cause__
            if isinstance(cause, UpstreamRefused):
                return cause.reply()
            raise
        except UpstreamRefused as refused:
            return refused.reply()
        except OverBudget:
            # The system prompt, tools and newest message alone are over the window the guard knows:
            # its profile is a guess (the agent may have asked for more, a larger-context beta), the
            # upstream's answer is the truth.
            return await passthrough(call, upstream)
        result: UpstreamReply = exchange.result
        if counting or result.status >= 400:
            return result
        if "text/event-stream" in result.headers.get("content-type", ""):
            return result.with_chunks(_tap_sse(result.chunks(), fmt, exchange.finish))
        raw = await result.read()
        try:
            reply = _REPLIES[fmt](json.loads(raw))
        except ValueError:
            pass  # not JSON: relayed as it came, nothing to record
        else:
            await anyio.to_thread.run_sync(exchange.finish, reply)
        return UpstreamReply.of_bytes(result.status, result.headers, raw)


_LARGER_WINDOWS = {"context-1m-": 1_000_000}
"""Anthropic betas that widen a model's window, by the prefix of their name, and the window they ask
for (https://docs.anthropic.com/en/docs/build-with-claude/context-windows#1m-token-context-window)."""


def _asked_window(headers: Mapping[str, str]) -> int | None:
    """The window the agent asked for with an ``anthropic-beta`` header, over the model's profile: the
    profile is a guess, and what the upstream then accepts or refuses is the truth (a refusal for
    size teaches the guard the window it really serves, as for any request)."""
    betas = [b.strip() for b in headers.get("anthropic-beta", "").split(",")]
    asked = [w for prefix, w in _LARGER_WINDOWS.items() if any(b.startswith(prefix) for b in betas)]
    return max(asked, default=None)


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
    event is passed on (so the ledger holds the reply by the time the agent has read it); a stream
    with an error event in it records nothing. Recording is the ledger's blocking work: in a worker
    thread, as compiling is, so the event loop keeps serving."""
    events: AnthropicEvents | OpenAIChunks | ResponsesEvents = (
        AnthropicEvents() if fmt == "anthropic" else OpenAIChunks() if fmt == "openai" else ResponsesEvents()
    )
    pending = b""
    recorded = failed = False
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
                        parsed = json.loads(data)
                    except ValueError:
                        continue
                    failed = failed or _is_error_event(parsed)
                    events.feed(parsed)
        # A Chat Completions stream's usage chunk comes after its finish: it ends on [DONE].
        if not recorded and not failed and (ended or (fmt != "openai" and events.done)):
            recorded = True
            await anyio.to_thread.run_sync(finish, events.reply())
        yield chunk
    if not recorded and not failed and (events.done or events.usage):
        reply: Reply = events.reply()
        await anyio.to_thread.run_sync(finish, reply)


def _is_error_event(data: Any) -> bool:
    """An error the upstream sent in the stream in place of the rest of the reply: Anthropic's
    ``event: error`` (``{"type": "error", ...}``), a Chat Completions ``{"error": {...}}`` chunk,
    a Responses ``error`` or ``response.failed`` event. What came before it is not a reply: recorded,
    it would turn the agent's retry of the same request into a branch."""
    if not isinstance(data, dict):
        return False
    return data.get("type") in ("error", "response.failed") or isinstance(data.get("error"), dict)
