"""The ASGI application every contextwindow server is: routes behind one error policy and one log.

:class:`HttpApp` wraps a list of Starlette routes with what every route needs:

- ``GET /health``: ``{"status": "ok", ...}`` with the requests in flight and the body bytes held;
- refusals (:class:`~.errors.HttpError`, an unknown path or method) answered in the shape of the API
  the path belongs to, with ``connection: close`` when the body was left unread;
- a client that leaves is not an error: nothing is answered and nothing is printed but its log line;
- an unexpected exception is logged once and answered 500 in the API's shape; an expected fault (an
  upstream that cannot be reached or stops mid-answer) is one warning line, without a traceback;
- one structured access-log line per request on the ``contextwindow.access`` logger: method, path
  (without its query string), status, bytes in and out, milliseconds. Never a header or a body, so no
  key or prompt reaches a log.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, Router
from starlette.types import Message, Receive, Scope, Send

from .codec import dumps
from .errors import ErrorType, HttpError, api_of, error_body, error_bytes
from .limits import ServerLimits
from .request import ClientGone, Gate

__all__ = ["ACCESS_LOGGER", "HttpApp", "json_response"]

ACCESS_LOGGER = "contextwindow.access"
"""The logger that receives one JSON access-log line per request (no headers, no bodies)."""
_access = logging.getLogger(ACCESS_LOGGER)
_errors = logging.getLogger("contextwindow.server")
_UPSTREAM_FAULTS = frozenset({"upstream_error", "upstream_timeout"})


def json_response(status: int, body: Any, headers: Mapping[str, str] | None = None) -> Response:
    """A compact JSON response."""
    payload = dumps(body)
    return Response(payload, status_code=status, headers=dict(headers or {}), media_type="application/json")


_SAID = b"x-contextwindow-"
_SAID_NUMBERS = {"tokens_in", "tokens_sent", "upstream_ms"}
_SAID_FIELDS = {"session", "actions", *_SAID_NUMBERS}


def _said(headers: Any) -> dict[str, Any]:
    """What a guarded answer's ``x-contextwindow-*`` headers say (the proxy's,
    :data:`~contextwindow.server.guarded.SAID_PREFIX`), for the access line: ``session``,
    its ``tenant`` (the session id's prefix), ``tokens_in``, ``tokens_sent``, ``actions``,
    ``upstream_ms``."""
    out: dict[str, Any] = {}
    for key, value in headers:
        name = bytes(key).lower()
        if not name.startswith(_SAID):
            continue
        field, text = name[len(_SAID) :].decode("latin-1").replace("-", "_"), bytes(value).decode("latin-1")
        if field not in _SAID_FIELDS:
            continue
        if field in _SAID_NUMBERS:
            try:
                out[field] = float(text) if "." in text else int(text)
            except ValueError:
                out[field] = text
        elif field == "actions":
            out[field] = [] if text == "none" else text.split(",")
        else:
            out[field] = text
    session = out.get("session")
    if isinstance(session, str) and "/" in session:
        out["tenant"] = session.split("/", 1)[0]
    return out


class HttpApp:
    """``routes`` behind the health endpoint, the error shapes and the access log (module docstring).

    ``gate`` admits request bodies within ``limits``; routes call ``app.gate.admit(request)``.
    ``info`` adds fields to the health answer.
    """

    def __init__(
        self,
        routes: Sequence[BaseRoute],
        *,
        limits: ServerLimits | None = None,
        name: str = "contextwindow",
        info: Callable[[], Mapping[str, Any]] | None = None,
        on_shutdown: Sequence[Callable[[], Awaitable[None]]] = (),
    ) -> None:
        self.limits = limits or ServerLimits()
        self.on_shutdown = list(on_shutdown)
        """Run when the server stops (closing an upstream client's connections)."""
        self.name = name
        self.gate = Gate(self.limits)
        self._info = info
        self.router = Router(routes=[Route("/health", self._health, methods=["GET"]), *routes])

    async def _health(self, request: Request) -> Response:
        body: dict[str, Any] = {
            "status": "ok",
            "server": self.name,
            "active_requests": self.gate.active,
            "inflight_body_bytes": self.gate.bodies.used,
        }
        if self._info is not None:
            body.update(self._info())
        return json_response(200, body)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":  # websockets are not served
            return
        scope["app"] = self  # Starlette's routes raise HTTPException for 404/405 when an app is set
        started = time.monotonic()
        seen = {"status": 0, "in": 0, "out": 0, "started": False}
        said: dict[str, Any] = {}
        logged = _access.isEnabledFor(logging.INFO)

        async def counting_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen["in"] += len(message.get("body", b""))
            return message

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                seen["status"] = message["status"]
                seen["started"] = True
                if logged:
                    said.update(_said(message.get("headers", ())))
            elif message["type"] == "http.response.body":
                seen["out"] += len(message.get("body", b""))
            await send(message)

        path: str = scope.get("path", "")
        try:
            if sum(len(k) + len(v) for k, v in scope["headers"]) > self.limits.max_header_bytes:
                raise HttpError(
                    "invalid_request_error", "Malformed HTTP request: headers too large", close=True
                )
            await self.router(scope, counting_receive, counting_send)
        except ClientGone:
            seen["status"] = 499  # the client closed the connection first (nginx's word for it)
        except HttpError as refused:
            if refused.problem in _UPSTREAM_FAULTS:  # expected, and not the client's doing: one line
                _errors.warning("%s %s: %s", scope.get("method"), path, refused.message)
            if seen["started"]:
                # Too late for an error body: the connection is closed before the answer's end, so the
                # client sees it broken. Logged above; the server logs it no further (see .runner).
                seen["status"] = error_body("any", refused.problem, "")[0]
                raise
            await self._refuse(
                path, refused.problem, refused.message, counting_send, refused.close, refused.headers
            )
        except HTTPException as routed:
            if not seen["started"]:
                problem: ErrorType = (
                    "not_found_error" if routed.status_code == 404 else "invalid_request_error"
                )
                method = scope.get("method", "")
                await self._refuse(
                    path,
                    problem,
                    f"{routed.detail}: {method} {path}",
                    counting_send,
                    True,
                    {},
                    routed.status_code,
                )
        except Exception:
            _errors.exception("unexpected error answering %s %s", scope.get("method"), path)
            if not seen["started"]:
                await self._refuse(path, "api_error", "Internal server error", counting_send, True, {})
        finally:
            if logged:
                _access.info(self._access_line(scope, path, seen, said, started))

    def _access_line(
        self, scope: Scope, path: str, seen: dict[str, Any], said: dict[str, Any], started: float
    ) -> str:
        return json.dumps(
            {
                "server": self.name,
                "method": scope.get("method"),
                "path": path,
                "status": seen["status"],
                "bytes_in": seen["in"],
                "bytes_out": seen["out"],
                "ms": round((time.monotonic() - started) * 1000, 1),
                **said,
            },
            separators=(",", ":"),
        )

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for close in self.on_shutdown:
                    try:
                        await close()
                    except Exception:
                        _errors.exception("error while shutting down")
                await send({"type": "lifespan.shutdown.complete"})
                return

    @staticmethod
    async def _refuse(
        path: str,
        problem: ErrorType,
        message: str,
        send: Send,
        close: bool,
        headers: Mapping[str, str],
        status: int | None = None,
    ) -> None:
        shaped, payload = error_bytes(api_of(path), problem, message)
        raw = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        if close:
            raw.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": status or shaped, "headers": raw})
        await send({"type": "http.response.body", "body": payload, "more_body": False})
