"""``contextwindow proxy``: the providers' HTTP APIs in front of an upstream, one seam per request.

An agent in any language points its base URL here. Each API request (Anthropic Messages and
``count_tokens``, OpenAI Chat Completions and Responses) is admitted within the server's bounds, parsed
as JSON, and handed with the upstream to one :data:`Transform`: the function that decides what is sent
upstream and what comes back. :func:`passthrough` sends the body as it came; the guard's transform
(:mod:`.guarded`) compiles each request to fit the window and recovers a rejection for size. Any other
path (``/v1/models``, files, batches) is forwarded as it is.

What the proxy keeps to, whatever the transform:

- the agent's authentication headers (``x-api-key``, ``authorization``, ``anthropic-version``,
  ``openai-organization``, ...) go upstream untouched and are never stored or logged; hop-by-hop
  headers and the proxy's own ``x-contextwindow-*`` headers are not forwarded;
- the request target (path and query) goes upstream byte for byte as the agent wrote it: an escaped
  ``%2F`` or ``%2E`` is never decoded into a path segment on the way;
- the upstream's answer is streamed back as it arrives (SSE events pass through chunk by chunk), with
  its status and headers (one ``Date``: the proxy's own);
- ``/health`` adds what a transform with a ``health()`` method says of itself (the guard's: the
  conversations held in memory against their bound);
- an upstream that cannot be reached is answered 502 (504 when it timed out) in the API's shape, and so
  is one whose answer is cut short before the proxy has started relaying it; once it has, the agent's
  connection is closed before the answer's end, so the agent sees a broken answer rather than a short
  one taken for whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from .app import HttpApp
from .bodies import TEXT_BYTES, Bodies
from .codec import dumps
from .errors import HttpError
from .limits import ServerLimits
from .request import ClientGone

__all__ = [
    "SESSION_HEADER",
    "ProxyApi",
    "ProxyCall",
    "Transform",
    "Upstream",
    "UpstreamReply",
    "passthrough",
    "proxy_app",
]

SESSION_HEADER = "x-contextwindow-session"

ProxyApi: TypeAlias = Literal[
    "anthropic-messages", "anthropic-count-tokens", "openai-chat", "openai-responses"
]

_ROUTES: dict[str, ProxyApi] = {
    "/v1/messages": "anthropic-messages",
    "/v1/messages/count_tokens": "anthropic-count-tokens",
    "/v1/chat/completions": "openai-chat",
    "/v1/responses": "openai-responses",
}

_HISTORY = {path: "input" if api == "openai-responses" else "messages" for path, api in _ROUTES.items()}
"""The member of each API's body that holds the history."""

# RFC 9110 hop-by-hop headers (https://www.rfc-editor.org/rfc/rfc9110#section-7.6.1), plus those httpx
# recomputes for the body it sends.
UPSTREAM_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)
"""How long the upstream has to accept a connection, send each part of its answer, and take the body."""

_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ProxyCall:
    """One API request an agent sent through the proxy."""

    api: ProxyApi
    path: str
    """The request path with its query string, appended to the upstream's URL."""
    body: Mapping[str, Any]
    """The parsed JSON body."""
    raw: bytes = field(repr=False)
    """The body as it came, sent unchanged when a transform does not replace it."""
    headers: Mapping[str, str] = field(repr=False)
    """The headers to forward (authentication included): never stored, never logged."""
    session: str | None = None
    """The ``x-contextwindow-session`` header, when the agent names its conversation."""


class UpstreamReply:
    """The upstream's answer, not yet read: status, headers and the body as it arrives."""

    def __init__(
        self,
        status: int,
        headers: Mapping[str, str],
        chunks: AsyncIterator[bytes],
        close: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.status = status
        self.headers: Mapping[str, str] = headers
        self._chunks = chunks
        self._close = close
        self.body: bytes | None = None
        """The whole body when it was read already (:meth:`of_bytes`): answered in one piece."""

    @classmethod
    def of_response(cls, response: httpx.Response) -> UpstreamReply:
        """An httpx response opened with ``stream=True``, relayed byte for byte; a body the upstream
        stops sending is :class:`HttpError` 502 (504 on the read timeout)."""
        return cls(response.status_code, response.headers, _read_upstream(response), response.aclose)

    @classmethod
    def of_bytes(cls, status: int, headers: Mapping[str, str], body: bytes) -> UpstreamReply:
        """An answer already read (a transform read it to inspect it)."""

        async def once() -> AsyncIterator[bytes]:
            yield body

        kept = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "content-encoding")}
        reply = cls(status, kept, once())
        reply.body = body
        return reply

    def with_chunks(self, chunks: AsyncIterator[bytes]) -> UpstreamReply:
        """The same answer with its body passed through ``chunks`` (a transform reading a stream)."""
        return UpstreamReply(self.status, self.headers, chunks, self._close)

    def with_headers(self, headers: Mapping[str, str]) -> UpstreamReply:
        """The same answer with ``headers`` added to the upstream's (the proxy's own say)."""
        reply = UpstreamReply(self.status, {**self.headers, **headers}, self._chunks, self._close)
        reply.body = self.body
        return reply

    def chunks(self) -> AsyncIterator[bytes]:
        """The body as the upstream sends it (each SSE event as soon as it comes)."""
        return self._chunks

    async def read(self) -> bytes:
        """The whole body (for a transform that needs to read an error or a summary)."""
        try:
            return b"".join([chunk async for chunk in self._chunks])
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        close, self._close = self._close, None
        if close is not None:
            await close()


class Upstream:
    """The upstream provider at ``base_url``, reached through an httpx transport (its connection
    pool), without a client: no cookie jar, no redirects, no authentication flow, none of which a
    proxy of many callers may apply. Forwards the agent's headers."""

    def __init__(
        self, base_url: str, transport: httpx.AsyncBaseTransport, timeout: httpx.Timeout | None = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.transport = transport
        self._extensions = {"timeout": (timeout or UPSTREAM_TIMEOUT).as_dict()}

    async def send(
        self,
        call: ProxyCall,
        body: Mapping[str, Any] | None = None,
        *,
        method: str = "POST",
        path: str | None = None,
    ) -> UpstreamReply:
        """Send ``body`` (default: the agent's own bytes) for ``call``; raises :class:`HttpError` when
        the upstream cannot be reached."""
        content = call.raw if body is None else dumps(body)
        return await self.forward(method, path or call.path, call.headers, content)

    async def forward(
        self, method: str, path: str, headers: Mapping[str, str], content: bytes
    ) -> UpstreamReply:
        """Any request, as it is, to ``base_url + path``."""
        out = {
            k: v for k, v in headers.items() if k not in _HOP_BY_HOP and not k.startswith("x-contextwindow-")
        }
        out["accept-encoding"] = "identity"  # streamed back byte for byte, never re-encoded
        try:
            request = httpx.Request(
                method, self.base_url + path, headers=out, content=content, extensions=self._extensions
            )
            response = await self.transport.handle_async_request(request)
        except httpx.TimeoutException:
            raise HttpError("upstream_timeout", "The upstream did not answer in time") from None
        except httpx.HTTPError as failed:
            raise HttpError(
                "upstream_error", f"The upstream could not be reached ({type(failed).__name__})"
            ) from None
        return UpstreamReply.of_response(response)


async def _read_upstream(response: httpx.Response) -> AsyncIterator[bytes]:
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    except httpx.TimeoutException:
        raise HttpError(
            "upstream_timeout", "The upstream stopped sending its answer (read timeout)"
        ) from None
    except httpx.HTTPError as failed:
        raise HttpError(
            "upstream_error", f"The upstream's answer was cut short ({type(failed).__name__})"
        ) from None


Transform: TypeAlias = Callable[[ProxyCall, Upstream], Awaitable[UpstreamReply]]
"""What the proxy does with one API request: send something upstream and return its reply."""


async def passthrough(call: ProxyCall, upstream: Upstream) -> UpstreamReply:
    """Send the agent's request unchanged."""
    return await upstream.send(call)


def _relay(reply: UpstreamReply) -> Response:
    # The server writes its own Date on every answer; the upstream's would make two.
    headers = {k: v for k, v in reply.headers.items() if k.lower() not in _HOP_BY_HOP and k.lower() != "date"}
    if reply.body is not None:  # read already: one piece, without a task listening for the agent
        return Response(reply.body, status_code=reply.status, headers=headers)
    return StreamingResponse(
        reply.chunks(), status_code=reply.status, headers=headers, background=BackgroundTask(reply.aclose)
    )


def proxy_app(
    upstream_url: str,
    *,
    transform: Transform = passthrough,
    limits: ServerLimits | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    info: Mapping[str, Any] | None = None,
) -> HttpApp:
    """The proxy's ASGI application in front of ``upstream_url`` (see the module docstring);
    ``transport`` reaches the upstream (default: httpx's connection pool, closed with the server)."""
    limits = limits or ServerLimits(max_concurrency=256)
    pool = httpx.Limits(max_connections=limits.max_connections, max_keepalive_connections=64)
    # One transport serves every caller and keeps no cookie: one the upstream sets for a caller (a
    # CDN's __cf_bm, a session) is relayed to that caller only and never goes out on another's request.
    http = transport or httpx.AsyncHTTPTransport(
        limits=pool,
        # httpx writes a request's head and body apart: without TCP_NODELAY the body can wait out
        # the upstream's delayed ACK.
        socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
    )
    timeout = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=limits.queue_timeout)
    upstream = Upstream(upstream_url, http, timeout)
    details = {"upstream": upstream.base_url, **(info or {})}
    # A transform that says how it is doing (the guard's conversations held) adds it to /health.
    health: Callable[[], Mapping[str, Any]] = getattr(transform, "health", dict)
    app = HttpApp(
        [],
        limits=limits,
        name="contextwindow proxy",
        info=lambda: {**details, **health()},
        on_shutdown=[http.aclose] if transport is None else [],
    )

    # What each connection's last body parsed to: an agent resending its history has only what is new
    # parsed again.
    # A transform that bounds its memory says how many bytes of bodies may be kept beside it.
    bodies = Bodies(text_bytes=getattr(transform, "kept_body_bytes", TEXT_BYTES))

    async def api(request: Request) -> Response:
        path = request.url.path.rstrip("/")
        async with app.gate.admit(request) as raw:
            call = ProxyCall(
                api=_ROUTES[path],
                path=_with_query(request),
                body=bodies.parse(raw, app.limits, history=_HISTORY[path], where=_connection(request)),
                raw=raw,
                headers=_forwarded(request),
                session=request.headers.get(SESSION_HEADER),
            )
            reply = await _unless_gone(request, transform(call, upstream))
        return _relay(reply)

    async def other(request: Request) -> Response:
        async with app.gate.admit(request, json_body=False) as raw:
            reply = await upstream.forward(request.method, _with_query(request), _forwarded(request), raw)
        return _relay(reply)

    app.router.routes.extend(
        [
            *(Route(path, api, methods=["POST"]) for path in _ROUTES),
            Route("/{rest:path}", other, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        ]
    )
    return app


def _connection(request: Request) -> tuple[str, int] | None:
    """The agent's connection (its address and port), while it is open; ``None`` when unknown."""
    client = request.scope.get("client")
    return (str(client[0]), int(client[1])) if client else None


async def _unless_gone(request: Request, work: Awaitable[UpstreamReply]) -> UpstreamReply:
    """``work``'s reply, or :class:`~.request.ClientGone` as soon as the agent disconnects first: then
    ``work`` is cancelled, and with it the upstream call it was waiting for (its connection closed).
    Until the answer starts, nothing else listens to the connection."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
        gone.cancel()
    if not task.cancelled() and task.done():
        return task.result()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task  # cancelled where it waited: whatever it held is released
    raise ClientGone


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _with_query(request: Request) -> str:
    """The request target as the agent sent it: ``request.url.path`` is percent-decoded, so an escaped
    ``%2F..%2F`` would reach the upstream as ``/../`` and be resolved away."""
    raw_path: bytes = request.scope.get("raw_path") or request.url.path.encode()
    query: bytes = request.scope.get("query_string", b"")
    return (raw_path + (b"?" + query if query else b"")).decode("latin-1")


def _forwarded(request: Request) -> dict[str, str]:
    return {k.lower(): v for k, v in request.headers.items()}
