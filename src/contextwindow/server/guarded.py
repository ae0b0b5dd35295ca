"""The guard as the proxy's transform: each request fitted to the window before it goes upstream.

:class:`GuardTransform` keeps one :class:`~contextwindow.guard.GuardCore` and one lock per
conversation (:mod:`.conversations`), all on one store, each conversation within the tenant of the
caller's credential (:mod:`.tenants`): a conversation's requests go one at a time, other
conversations' meanwhile. A core's own work (compiling, the ledger's reads and writes) runs in a
worker thread and each call it asks for is awaited on the event loop, so a call waiting on the
upstream holds no thread and is cancelled when the agent leaves. For each Anthropic Messages, Chat
Completions or Responses request the core compiles what to send (a Responses request naming ``previous_response_id`` goes out as written while
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

import contextlib
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

import anyio.to_thread

from ..compaction import CompactionMode, merged_headers, on_the_wire
from ..engine.events import (
    AttachmentsEvicted,
    Compacted,
    MaxTokensLowered,
    OverflowRecovered,
    RequestSent,
    StreamRestarted,
    ToolResultsArchived,
    WindowLearned,
)
from ..errors import ContextOverflow, InvalidInput, OverBudget, ProviderError, UsageError
from ..guard import Exchange, GuardCore, GuardOptions, Reply, Send
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
from .bodies import TEXT_BYTES
from .codec import dumps
from .conversations import BYTES_PER_BODY_BYTE, DEFAULT_CACHE_MB, Conversation, Conversations, route
from .errors import HttpError
from .limits import MIB
from .proxy import SESSION_HEADER, ProxyCall, Upstream, UpstreamReply, passthrough
from .tenants import Tenants

__all__ = ["GuardTransform", "UpstreamRefused"]

_COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"})
"""What Anthropic's ``count_tokens`` accepts of a Messages body."""
MAX_RESPONSE_IDS = 100_000
"""Response ids remembered, each with the conversation it continues (a few hundred bytes each)."""

T = TypeVar("T")
R = TypeVar("R")


class UpstreamRefused(Exception):
    """The upstream answered an error: its status, headers and body, kept to be relayed as they are."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        super().__init__(f"upstream answered {status}")
        self.status = status
        self.headers = dict(headers)
        self.body = body

    def reply(self) -> UpstreamReply:
        return UpstreamReply.of_bytes(self.status, self.headers, self.body)


async def _send(upstream: Upstream, call: ProxyCall, body: Mapping[str, Any], path: str) -> UpstreamReply:
    """``body`` upstream as the SDKs send it (:func:`~contextwindow.compaction.on_the_wire`): a
    provider body's ``extra_body`` in the JSON, its ``extra_headers`` beside the agent's (its betas
    joining the agent's ``anthropic-beta``)."""
    if "extra_body" not in body and "extra_headers" not in body:
        return await upstream.send(call, body, path=path)
    json_body, headers = on_the_wire(body)
    content = dumps(json_body)
    return await upstream.forward("POST", path, merged_headers(call.headers, headers), content)


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
    """The proxy's transform with the guard (see the module docstring).

    ``tenants`` says whose each request is (default: by its API key, with a secret of this
    process's); ``cache_bytes`` bounds the conversations held in memory (:mod:`.conversations`).
    """

    def __init__(
        self,
        store: Store,
        *,
        context_window: int | None = None,
        summarize: bool = True,
        tenants: Tenants | None = None,
        cache_bytes: int = DEFAULT_CACHE_MB * MIB,
        compaction: CompactionMode = "local",
    ) -> None:
        self.store = store
        self.compaction: CompactionMode = compaction
        """Who makes a long conversation fit (:mod:`contextwindow.compaction`): the provider's own
        compaction goes upstream as its JSON fields and headers (:func:`_send`)."""
        self.context_window = context_window
        self.summarize = summarize
        self.tenants = tenants or Tenants(secrets.token_bytes(32))
        self.conversations = Conversations(cache_bytes)
        self.kept_body_bytes = min(TEXT_BYTES, cache_bytes // (2 * BYTES_PER_BODY_BYTE))
        """Bytes of the agents' last bodies the proxy keeps to parse the next ones (:mod:`.bodies`):
        with what they parse to, about half the conversations' own bound at most."""
        self._responses: OrderedDict[tuple[str, str], str] = OrderedDict()
        """(tenant, response id) -> the key of the conversation whose reply it was."""

    def health(self) -> dict[str, int]:
        """What ``/health`` says of the conversations held in memory: how many, their estimated
        weight against the bound (``--cache-mb``), and how many were dropped to keep it."""
        held = self.conversations
        return {
            "conversations": len(held),
            "conversation_bytes": held.bytes,
            "conversation_capacity_bytes": held.capacity,
            "conversations_evicted": held.evicted,
        }

    def _core(self, fmt: str, session: str | None, tenant: str, window: int | None) -> GuardCore:
        core = GuardCore(
            self.store,
            fmt,  # type: ignore[arg-type]
            overflow=_overflow_of(fmt),
            options=GuardOptions(
                session=session,
                context_window=window,
                summarizer=None if self.summarize else False,
                compaction=self.compaction,
            ),
            tenant=tenant,
        )
        core.measure = True  # the access line and the headers say the agent's request's tokens
        # The proxy's bodies are parsed from bytes and never edited: its histories are remembered as
        # they are (a body repeating one shares its items, :mod:`.bodies`).
        core.history.copies = False
        return core

    def _route(self, fmt: str, tenant: str, call: ProxyCall) -> str | None:
        """The conversation key of ``call``; ``None`` for a response this tenant never got here."""
        previous = call.body.get("previous_response_id") if fmt == "openai-responses" else None
        if not isinstance(previous, str):
            return route(fmt, call.body, call.session)
        key = self._responses.get((tenant, previous))
        if key is not None:
            self._responses.move_to_end((tenant, previous))
        return key

    def _learn(self, tenant: str, key: str, reply: Reply) -> None:
        """Remember which conversation a response belongs to, for its ``previous_response_id``."""
        response_id = reply.extra.get("response_id")
        if isinstance(response_id, str):
            self._responses[(tenant, response_id)] = key
            self._responses.move_to_end((tenant, response_id))
            while len(self._responses) > MAX_RESPONSE_IDS:
                self._responses.popitem(last=False)

    async def __call__(self, call: ProxyCall, upstream: Upstream) -> UpstreamReply:
        fmt = _FORMATS[call.api]
        tenant = self.tenants.of(call.headers)
        key = self._route(fmt, tenant, call)
        if key is None:
            # A response this tenant never got through this proxy (another worker, before a restart,
            # or another tenant's): as written, on the caller's own key, with no history of ours.
            return await passthrough(call, upstream)
        if call.session is not None:
            _check_session_name(self.store, tenant, call.session)
        # A larger window the agent asked for (a beta header) is another core: fitted to that window.
        window = self.context_window or _asked_window(call.headers)
        held = key if window is None else f"{key}@{window}"
        conversation = self.conversations.take(
            (tenant, held), lambda: self._core(fmt, call.session, tenant, window)
        )
        hold = _Hold(self.conversations, conversation, len(call.raw))
        try:
            # One request of a conversation at a time, from its match to its reply recorded; the
            # requests of other conversations never wait for it.
            await conversation.lock.acquire()
            hold.locked = True
            reply, recording = await self._fit(call, upstream, conversation.core, fmt, tenant, key, hold)
        except BaseException:
            hold.release()
            raise
        if not recording:
            hold.release()
        return reply

    async def _fit(
        self,
        call: ProxyCall,
        upstream: Upstream,
        core: GuardCore,
        fmt: str,
        tenant: str,
        key: str,
        hold: _Hold,
    ) -> tuple[UpstreamReply, bool]:
        """The reply to relay, and whether it is a stream still to be recorded as it passes (then
        ``hold`` is released when it ends)."""
        counting = call.api == "anthropic-count-tokens"
        messages_path = call.path.replace("/messages/count_tokens", "/messages", 1)
        count_path = messages_path.replace("/messages", "/messages/count_tokens", 1)

        upstream_ms = [0.0]

        async def perform(step: Send) -> Any:
            if step.purpose == "request":
                started = time.monotonic()
                try:
                    return await _whole(
                        await _accepted(await _send(upstream, call, step.body, messages_path))
                    )
                finally:
                    upstream_ms[0] += (time.monotonic() - started) * 1000
            if step.purpose == "count":
                body = {k: v for k, v in step.body.items() if k in _COUNT_FIELDS}
                return await upstream.send(call, body, path=count_path)
            if step.purpose == "summary":
                # A summary's failure is the summariser's, never the agent's: a refusal for size is
                # the upstream's ContextOverflow (the fold halves and asks again), any other a
                # ProviderError (the fold cuts with a note).
                try:
                    reply = await _accepted(
                        await upstream.send(call, {**step.body, "stream": False}, path=messages_path)
                    )
                    return _REPLIES[fmt](json.loads(await reply.read()))
                except UpstreamRefused as refused:
                    raise core.overflow(refused) or _summary_refused(refused) from None
                except ValueError:
                    raise ProviderError("the upstream's answer to a summary is not JSON") from None
            return await _accepted(await upstream.send(call, step.body, path=messages_path))

        def recorded(exchange: Exchange) -> tuple[Exchange, dict[str, str], Reply | Exception | None]:
            # In the worker thread, right after the core's last step (one hand-off, not two): what
            # the proxy says of the call, then the reply recorded when it came whole and is JSON. A
            # failure to record is the proxy's, raised below, never taken for the core's.
            headers = said(exchange, upstream_ms[0])
            result = exchange.result
            if counting or result.status >= 400 or result.body is None:
                return exchange, headers, None
            try:
                data = json.loads(result.body)
            except ValueError:
                return exchange, headers, None  # not JSON: relayed as it came, nothing to record
            try:
                reply = _REPLIES[fmt](data)
                exchange.finish(reply)
            except Exception as failed:
                return exchange, headers, failed
            return exchange, headers, reply

        body = dict(call.body)
        if counting:
            body.setdefault("max_tokens", 1)
        try:
            exchange, headers, reply = await _drive(core.request(body, count=counting), perform, recorded)
        except UsageError:
            return await passthrough(call, upstream), False  # nothing to fit: as the agent wrote it
        except InvalidInput as refused:
            if refused.path == "session_id":  # the ledger's rule for a session's name
                raise HttpError(
                    "invalid_request_error", f"{SESSION_HEADER} header: {refused.reason}"
                ) from None
            raise
        except ContextOverflow as overflow:
            cause = overflow.__cause__
            if isinstance(cause, UpstreamRefused):
                return cause.reply(), False
            raise
        except UpstreamRefused as refused:
            return refused.reply(), False
        except OverBudget:
            # The system prompt, tools and newest message alone are over the window the guard knows:
            # its profile is a guess (the agent may have asked for more, a larger-context beta), the
            # upstream's answer is the truth.
            return await passthrough(call, upstream), False
        result: UpstreamReply = exchange.result.with_headers(headers)
        if counting or result.status >= 400:
            return result, False
        if isinstance(reply, Exception):
            raise reply
        if result.body is not None:  # read whole by ``perform``, recorded by ``recorded``
            if reply is not None:
                self._learn(tenant, key, reply)
            return result, False

        async def record(reply: Reply) -> None:
            await anyio.to_thread.run_sync(exchange.finish, reply)
            self._learn(tenant, key, reply)

        return _held_stream(result, _tap_sse(result.chunks(), fmt, record), hold), True


_ACTIONS: tuple[tuple[type, str], ...] = (
    (Compacted, "folded"),
    (ToolResultsArchived, "archived"),
    (AttachmentsEvicted, "evicted"),
    (StreamRestarted, "restarted"),
    (WindowLearned, "window_learned"),
    (OverflowRecovered, "retried"),
    (MaxTokensLowered, "max_tokens_lowered"),
)

SAID_PREFIX = "x-contextwindow-"
"""What the proxy did for a guarded call, as response headers: ``x-contextwindow-session`` (the ledger
session, ``TENANT/…``), ``-tokens-in`` (the agent's request as written, estimated), ``-tokens-sent``
(the request sent: estimated, or the provider's count), ``-actions`` (what was done: ``folded``,
``archived``, ``evicted``, ``restarted``, ``window_learned``, ``retried``, ``max_tokens_lowered``, or
``none``) and ``-upstream-ms`` (the upstream's time on the requests sent); the access line repeats them."""


def said(exchange: Exchange, upstream_ms: float) -> dict[str, str]:
    """The response headers saying what the guard did for ``exchange`` (:data:`SAID_PREFIX`)."""
    out = {f"{SAID_PREFIX}session": exchange.session_id}
    if exchange.asked_tokens is not None:
        out[f"{SAID_PREFIX}tokens-in"] = str(exchange.asked_tokens)
    sent = [e for e in exchange.events if isinstance(e, RequestSent)]
    if sent:
        out[f"{SAID_PREFIX}tokens-sent"] = str(sent[-1].estimated_tokens)
    done = [word for kind, word in _ACTIONS if any(isinstance(e, kind) for e in exchange.events)]
    out[f"{SAID_PREFIX}actions"] = ",".join(done) or "none"
    out[f"{SAID_PREFIX}upstream-ms"] = f"{upstream_ms:.1f}"
    return out


def _check_session_name(store: Store, tenant: str, name: str) -> None:
    """A 400 naming the header when the ledger refuses the session id ``name`` makes."""
    try:
        store.session(f"{tenant}/{name}")
    except InvalidInput:
        raise HttpError(
            "invalid_request_error",
            f"{SESSION_HEADER} header: must be printable, without control characters, and short enough "
            f"for a session id ({tenant}/NAME) of at most 256 characters",
        ) from None


class _Hold:
    """A request's claim on its conversation: the lock once taken, and its place in the cache;
    :meth:`release` gives both back, once."""

    def __init__(self, conversations: Conversations, conversation: Conversation, body_bytes: int) -> None:
        self.conversations = conversations
        self.conversation = conversation
        self.body_bytes = body_bytes
        self.locked = False
        self._released = False

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        if self.locked:
            self.conversation.lock.release()
        self.conversations.give_back(self.conversation, body_bytes=self.body_bytes)


def _held_stream(result: UpstreamReply, chunks: AsyncIterator[bytes], hold: _Hold) -> UpstreamReply:
    """``result`` relayed through ``chunks``, its conversation released when the stream ends, fails
    or is closed (the agent left)."""

    async def relayed() -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            hold.release()

    async def close() -> None:
        hold.release()
        await result.aclose()

    return UpstreamReply(result.status, result.headers, relayed(), close)


async def _drive(
    coro: Coroutine[Any, Any, T], perform: Callable[[Send], Awaitable[Any]], then: Callable[[T], R]
) -> R:
    """Step the core's coroutine to its end, and ``then`` on what it returned: its own work
    (compiling, the ledger's reads and writes) in a worker thread, ``then`` in the same hand-off as
    the last step, each call it asks for awaited on the event loop, where the upstream's client
    lives. A thread is held only while the core computes, never while a call waits, so a slow
    upstream takes no thread from other conversations. Cancelled (the agent left), the core is
    closed where it waits and the call's task is cancelled with it."""
    answer: Any = None
    error: BaseException | None = None
    try:
        while True:
            done, value = await anyio.to_thread.run_sync(_advance, coro, answer, error, then)
            if done:
                return value  # type: ignore[no-any-return]
            try:
                answer, error = await perform(value), None
            except Exception as exc:  # the call's failure goes back into the core to decide on
                answer, error = None, exc
    except BaseException:
        with contextlib.suppress(ValueError):  # still running in its thread: closed when collected
            coro.close()
        raise


def _advance(
    coro: Coroutine[Any, Any, Any], answer: Any, error: BaseException | None, then: Callable[[Any], Any]
) -> tuple[bool, Any]:
    """One step of the core: ``(True, then(result))`` when it returned, ``(False, step)`` when it
    asks for a call (StopIteration must not cross a thread's future)."""
    try:
        step = coro.throw(error) if error is not None else coro.send(answer)
    except StopIteration as finished:
        return True, then(finished.value)
    if not isinstance(step, Send):  # pragma: no cover - the core awaits nothing else
        coro.close()
        raise RuntimeError(f"the guard core awaited {step!r}, not a call")
    return False, step


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


def _summary_refused(refused: UpstreamRefused) -> ProviderError:
    """The upstream's refusal of a summary request as the summariser takes it: the fold cuts."""
    return ProviderError(
        f"the upstream refused a summary: {refused.status}", status=refused.status, body=refused.body
    )


async def _whole(reply: UpstreamReply) -> UpstreamReply:
    """``reply`` read whole unless it is a stream (relayed, and read, as its events come)."""
    if "text/event-stream" in reply.headers.get("content-type", ""):
        return reply
    return UpstreamReply.of_bytes(reply.status, reply.headers, await reply.read())


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
            await finish(events.reply())
        yield chunk
    if not recorded and not failed and (events.done or events.usage):
        reply: Reply = events.reply()
        await finish(reply)


def _is_error_event(data: Any) -> bool:
    """An error the upstream sent in the stream in place of the rest of the reply: Anthropic's
    ``event: error`` (``{"type": "error", ...}``), a Chat Completions ``{"error": {...}}`` chunk,
    a Responses ``error`` or ``response.failed`` event. What came before it is not a reply: recorded,
    it would turn the agent's retry of the same request into a branch."""
    if not isinstance(data, dict):
        return False
    return data.get("type") in ("error", "response.failed") or isinstance(data.get("error"), dict)
