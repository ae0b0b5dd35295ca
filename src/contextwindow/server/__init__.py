"""The HTTP stack shared by ``contextwindow serve`` (the local provider) and ``contextwindow proxy``.

An ASGI application (:class:`HttpApp`, on Starlette's routing) served by uvicorn, in the foreground
(:func:`run`) or from a thread (:class:`BackgroundServer`), within one set of bounds
(:class:`ServerLimits`): body size checked before reading, read and idle timeouts, bounded
concurrency and body memory, malformed requests answered 4xx in the API's own error shape.
"""

from __future__ import annotations

from .app import ACCESS_LOGGER, HttpApp, json_response
from .errors import Api, HttpError, api_of, error_body
from .limits import MIB, ServerLimits
from .request import ClientGone, Gate, parse_json
from .runner import PARSERS, BackgroundServer, bind, run

__all__ = [
    "ACCESS_LOGGER",
    "MIB",
    "PARSERS",
    "Api",
    "BackgroundServer",
    "ClientGone",
    "Gate",
    "HttpApp",
    "HttpError",
    "ServerLimits",
    "api_of",
    "bind",
    "error_body",
    "json_response",
    "parse_json",
    "run",
]
