"""The bounds every contextwindow HTTP server keeps, whatever a client sends.

A client can claim any body size, send slowly, open many connections or nest JSON without end; the
server's memory and threads must not follow it. :class:`ServerLimits` holds every bound in one value so
``serve``, ``proxy`` and the tests agree on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidInput

__all__ = ["MIB", "ServerLimits"]

MIB = 1024 * 1024
"""Bytes in a mebibyte: the unit the limits are written in."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerLimits:
    """How much a server accepts, for how long, and how many at once.

    Peak memory is bounded by ``inflight_body_bytes`` (bodies being read or handled) times the cost of
    parsing a body (about three to four times its size), plus ``max_connections`` small buffers.
    """

    max_body_bytes: int = 32 * MIB
    """A body over this is answered 413 before it is read: by its ``Content-Length`` when it has one,
    else as soon as the chunks received pass it. Anthropic's own limit is 32 MB
    (https://docs.anthropic.com/en/api/overview#request-size-limits)."""
    inflight_body_bytes: int = 256 * MIB
    """The sum of the bodies held at once. A request reserves its ``Content-Length`` (a chunked one,
    ``max_body_bytes``) before reading; one that cannot within ``queue_timeout`` is answered overloaded."""
    max_concurrency: int = 32
    """Requests handled at once (their bodies read); the others wait, at most ``queue_timeout``."""
    queue_timeout: float = 30.0
    """Seconds a request waits for a slot or for body budget before the server answers overloaded."""
    max_connections: int = 1024
    """Open connections; one more is answered 503 and closed."""
    read_timeout: float = 30.0
    """Seconds a client has to send a request's head, and then its body once the server reads it;
    past either, 408 and close."""
    idle_timeout: float = 30.0
    """Seconds a keep-alive connection may sit idle between requests before it is closed. Longer than
    the clients' own pools keep an idle connection (httpx, under both official SDKs: 5 s): a server
    that closes first races the client's next request on that connection, which then fails with a
    read error (one in a thousand calls at 200 conversations, when this was 5 s)."""
    max_json_depth: int = 64
    """Nesting deeper than this (objects and arrays) is refused before the body is parsed."""
    max_header_bytes: int = 64 * 1024
    """The request line and headers together; more is malformed HTTP (400)."""
    inline_body_bytes: int = 64 * 1024
    """A request whose body is at most this is answered on the event loop; a larger one in a worker
    thread. Handing work to a thread and back costs more than parsing and counting a small body, and
    a large one would hold every other connection up while it is counted. 0: always a thread."""

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "inflight_body_bytes",
            "max_concurrency",
            "max_connections",
            "max_json_depth",
            "max_header_bytes",
        ):
            if getattr(self, name) <= 0:
                raise InvalidInput("must be > 0", path=name)
        if self.inline_body_bytes < 0:
            raise InvalidInput("must be ≥ 0", path="inline_body_bytes")
        for name in ("queue_timeout", "read_timeout", "idle_timeout"):
            if not getattr(self, name) > 0:
                raise InvalidInput("must be > 0", path=name)
        if self.inflight_body_bytes < self.max_body_bytes:
            raise InvalidInput(
                "must be ≥ max_body_bytes (one largest body must fit)", path="inflight_body_bytes"
            )
