"""Serving an :class:`~.app.HttpApp` with uvicorn, in the foreground or from a background thread.

uvicorn's HTTP/1.1 protocol is kept (on ``httptools`` when it is installed, as the ``server`` extra
installs it, else on ``h11``), with these changes made by subclassing it:

- malformed HTTP (a bad or negative ``Content-Length``, a broken request line, headers over the
  limit) is answered 400 in the merged API error shape rather than as plain text;
- a client has ``read_timeout`` seconds to send a request's head, from the connection's start or the
  end of the previous response (uvicorn alone waits for ever on a slow head); then 408 and close;
- past ``max_connections`` open connections a new one is answered 503 and closed;
- on ``httptools``, the request line and headers are bounded by ``max_header_bytes`` as they arrive
  (``h11`` bounds them itself: its ``max_incomplete_event_size``).

The body's own deadline and size are the application's (:mod:`.request`). ``httptools`` parses a
request several times faster than ``h11``; both answer every malformed request the same way. The
event loop is uvloop where it is installed (:data:`~.codec.LOOP`), in the foreground and in a thread.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import threading
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from .app import HttpApp
from .codec import LOOP, new_event_loop
from .errors import HttpError, raw_error_response

__all__ = ["GC_THRESHOLD", "PARSERS", "BackgroundServer", "bind", "run", "tune_gc"]


class _ProtocolLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """uvicorn's protocol logs every malformed request as a warning; a client's bad bytes are not the
    server's problem, so they go to debug (the 400 already told the client)."""

    @property
    def level(self) -> int:
        return int(self.logger.level)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.logger.debug(msg, *args, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        # An HttpError raised once the answer has started was logged by the application in one line;
        # uvicorn's "Exception in ASGI application" with its traceback would only repeat it.
        level = logging.DEBUG if isinstance(kwargs.get("exc_info"), HttpError) else logging.ERROR
        self.logger.log(level, msg, *args, **kwargs)


_log = _ProtocolLog(logging.getLogger("contextwindow.server"), {})


class _Bounds:
    """The bounds above, over either of uvicorn's HTTP/1.1 protocols (the class they are mixed into).

    ``app_limits`` is set on a subclass per server."""

    app_limits: Any = None  # the ServerLimits of the server this protocol class was made for
    # What the uvicorn protocol this is mixed into provides.
    connections: set[Any]
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.logger = _log
        self._head_timer: asyncio.TimerHandle | None = None
        self._cycle_at_arm: object = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        if len(self.connections) > self.app_limits.max_connections:
            transport.write(raw_error_response("overloaded_error", "Too many connections"))
            transport.close()
            return
        self._arm_head_timer(self.app_limits.read_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        if not self.transport.is_closing():
            self._arm_head_timer(self.app_limits.idle_timeout + self.app_limits.read_timeout)

    def send_400_response(self, msg: str) -> None:
        self._cancel_head_timer()
        self.transport.write(
            raw_error_response(
                "invalid_request_error", "Malformed HTTP request (request line, a header or Content-Length)"
            )
        )
        self.transport.close()

    def _arm_head_timer(self, delay: float) -> None:
        self._cancel_head_timer()
        self._cycle_at_arm = self.cycle
        self._head_timer = self.loop.call_later(delay, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.cycle is not self._cycle_at_arm or self.transport.is_closing():
            return  # a request head arrived since: its body has the application's deadline
        self.transport.write(
            raw_error_response(
                "request_timeout", f"The request was not received within {self.app_limits.read_timeout:g} s"
            )
        )
        self.transport.close()


class _H11(_Bounds, H11Protocol):  # type: ignore[misc]
    """The bounds on uvicorn's ``h11`` protocol."""


_PARSERS: dict[str, type[_Bounds]] = {"h11": _H11}
"""uvicorn's HTTP/1.1 protocols available here, with the bounds, by parser; the first is the default."""

try:
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - depends on the installed extras
    pass
else:

    class _HttpTools(_Bounds, HttpToolsProtocol):  # type: ignore[misc]
        """The bounds on uvicorn's ``httptools`` protocol, which does not bound a request's head
        itself: its bytes are counted as the parser reports them."""

        _head_bytes = 0

        def on_message_begin(self) -> None:
            self._head_bytes = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count_head(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count_head(len(name) + len(value))
            super().on_header(name, value)

        def _count_head(self, n: int) -> None:
            self._head_bytes += n
            if self._head_bytes > self.app_limits.max_header_bytes:
                # Raised inside the parser's callback: the parser stops, and uvicorn answers 400.
                raise httptools.HttpParserError("the request head is over the limit")

    _PARSERS = {"httptools": _HttpTools, **_PARSERS}

PARSERS = tuple(_PARSERS)
"""The HTTP/1.1 parsers a server can use here, the default first: ``httptools`` when it is
installed, and ``h11``."""


def _config(
    app: HttpApp, *, log_level: str = "warning", configure_logging: bool = True, http: str | None = None
) -> uvicorn.Config:
    base = _PARSERS[http or PARSERS[0]]
    protocol = type("_BoundedProtocol", (base,), {"app_limits": app.limits})
    return uvicorn.Config(
        app,
        http=protocol,
        loop=LOOP,  # uvloop where installed (.codec)
        lifespan="on",
        ws="none",
        interface="asgi3",
        access_log=False,  # the application writes its own structured access log
        log_level=log_level,
        # In a thread inside a host (tests, benchmarks) the host's logging is left as it is.
        log_config=uvicorn.config.LOGGING_CONFIG if configure_logging else None,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=max(1, round(app.limits.idle_timeout)),
        h11_max_incomplete_event_size=app.limits.max_header_bytes,
        limit_concurrency=None,  # connections are bounded by the protocol, requests by the gate
        backlog=2048,
        server_header=False,
        date_header=True,
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), so the port is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and
    # without it a response written as head then body waits out the client's 40 ms delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.setblocking(False)
    except BaseException:
        sock.close()  # a taken port or a bad host must not leave the socket to the garbage collector
        raise
    return sock


GC_THRESHOLD = 10_000
"""Net container allocations between two young-generation collections in a server process (Python's
default is 700): a request's parsed body and its compiled copy are thousands of short-lived containers,
freed by reference counting, yet at 700 they set off several collections per request, and those
promote enough to bring on full ones (at ~400 messages, 1.2–1.9 ms of CPU per request went to the
collector; 0.03 ms at 10,000). Cycles are still collected, only in larger batches."""


def tune_gc() -> None:
    """For a process that serves (:func:`run`): the young generation collected every
    :data:`GC_THRESHOLD` net allocations, and what is alive once the app is built (modules, profiles,
    tokenizers) frozen out of every later collection (:func:`gc.freeze`)."""
    _, middle, old = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_THRESHOLD, middle, old)


def run(app: HttpApp, sock: socket.socket, *, log_level: str = "warning", http: str | None = None) -> None:
    """Serve ``app`` on ``sock`` in this thread until interrupted (Ctrl-C or SIGTERM); ``http`` is
    one of :data:`PARSERS` (default: the first). The process's collector is tuned for serving
    (:func:`tune_gc`): this thread's process is the server's."""
    server = uvicorn.Server(_config(app, log_level=log_level, http=http))
    tune_gc()
    server.run(sockets=[sock])


class BackgroundServer:
    """``app`` served from a daemon thread on ``host:port`` (port 0 picks a free one).

    ``start()`` returns once the server accepts connections; ``stop()`` ends it and closes the socket.
    ``http`` is one of :data:`PARSERS` (default: the first).
    """

    def __init__(
        self, app: HttpApp, *, host: str = "127.0.0.1", port: int = 0, http: str | None = None
    ) -> None:
        self.app = app
        self._sock = bind(host, port)
        address = self._sock.getsockname()
        self.host = str(address[0])
        self.port = int(address[1])
        self._server = uvicorn.Server(_config(app, configure_logging=False, http=http))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> BackgroundServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._serve, name=f"contextwindow-http:{self.port}", daemon=True
            )
            self._thread.start()
            while not self._server.started and self._thread.is_alive():
                threading.Event().wait(0.005)
        return self

    def _serve(self) -> None:
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            runner.run(self._server.serve(sockets=[self._sock]))

    def stop(self) -> None:
        if self._thread is not None:
            self._server.should_exit = True
            self._thread.join()
            self._thread = None
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
