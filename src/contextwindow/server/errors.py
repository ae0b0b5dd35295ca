"""Errors answered in the shape of the API the client called.

A client built on an official SDK reads ``error.message`` and the status, so every refusal of the
server itself (too large, too slow, malformed, overloaded) is sent in that API's own error body:

- Anthropic Messages: ``{"type": "error", "error": {"type": KIND, "message": ...}}``
  (https://docs.anthropic.com/en/api/errors);
- OpenAI: ``{"error": {"message": ..., "type": ..., "param": null, "code": ...}}``
  (https://platform.openai.com/docs/guides/error-codes);
- Gemini: ``{"error": {"code": STATUS, "message": ..., "status": "INVALID_ARGUMENT" | ...}}``
  (https://ai.google.dev/gemini-api/docs/troubleshooting#error-codes).

Where the API is not known (malformed HTTP before a path was read), both shapes are merged into one
body that either SDK reads: ``{"type": "error", "error": {"type", "message", "param", "code"}}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from .codec import dumps

__all__ = [
    "Api",
    "ErrorType",
    "HttpError",
    "api_of",
    "error_body",
    "error_bytes",
    "raw_error_response",
]

Api: TypeAlias = Literal["anthropic", "openai", "gemini", "any"]
"""Whose error shape a path gets: ``any`` is the merged shape."""

ErrorType: TypeAlias = Literal[
    "invalid_request_error",
    "not_found_error",
    "request_too_large",
    "unsupported_media_type",
    "request_timeout",
    "overloaded_error",
    "api_error",
    "upstream_error",
    "upstream_timeout",
]

# problem -> (Anthropic status, Anthropic type, OpenAI status, OpenAI type, OpenAI code)
_PROBLEMS: dict[str, tuple[int, str, int, str, str | None]] = {
    "invalid_request_error": (400, "invalid_request_error", 400, "invalid_request_error", None),
    "not_found_error": (404, "not_found_error", 404, "invalid_request_error", "not_found"),
    "request_too_large": (413, "request_too_large", 413, "invalid_request_error", "request_too_large"),
    "unsupported_media_type": (
        415,
        "invalid_request_error",
        415,
        "invalid_request_error",
        "unsupported_media_type",
    ),
    "request_timeout": (408, "invalid_request_error", 408, "invalid_request_error", "request_timeout"),
    "overloaded_error": (529, "overloaded_error", 503, "server_error", "overloaded"),
    "api_error": (500, "api_error", 500, "server_error", None),
    "upstream_error": (502, "api_error", 502, "server_error", "upstream_error"),
    "upstream_timeout": (504, "api_error", 504, "server_error", "upstream_timeout"),
}


# problem -> (Gemini status, Gemini status name): Gemini has no 413 or 529; it answers 400 and 503
_GEMINI: dict[str, tuple[int, str]] = {
    "invalid_request_error": (400, "INVALID_ARGUMENT"),
    "not_found_error": (404, "NOT_FOUND"),
    "request_too_large": (400, "INVALID_ARGUMENT"),
    "unsupported_media_type": (400, "INVALID_ARGUMENT"),
    "request_timeout": (504, "DEADLINE_EXCEEDED"),
    "overloaded_error": (503, "UNAVAILABLE"),
    "api_error": (500, "INTERNAL"),
    "upstream_error": (502, "UNAVAILABLE"),
    "upstream_timeout": (504, "DEADLINE_EXCEEDED"),
}


def api_of(path: str) -> Api:
    """The API a request path belongs to (``/v1/models`` is both: the merged shape)."""
    if path.startswith("/v1beta/") or ":countTokens" in path or ":generateContent" in path:
        return "gemini"
    if "/messages" in path:
        return "anthropic"
    if path.rstrip("/").endswith("/chat/completions") or "/responses" in path:
        return "openai"
    return "any"


def error_body(api: Api, problem: ErrorType, message: str) -> tuple[int, dict[str, Any]]:
    """The status and body of ``problem`` in ``api``'s shape."""
    a_status, a_type, o_status, o_type, o_code = _PROBLEMS[problem]
    if api == "gemini":
        g_status, g_name = _GEMINI[problem]
        return g_status, {"error": {"code": g_status, "message": message, "status": g_name}}
    if api == "anthropic":
        return a_status, {"type": "error", "error": {"type": a_type, "message": message}}
    if api == "openai":
        return o_status, {"error": {"message": message, "type": o_type, "param": None, "code": o_code}}
    merged = {"type": a_type, "message": message, "param": None, "code": o_code}
    return a_status if a_status < 500 else o_status, {"type": "error", "error": merged}


def error_bytes(api: Api, problem: ErrorType, message: str) -> tuple[int, bytes]:
    """The status and the encoded body of :func:`error_body`, ready to send."""
    status, body = error_body(api, problem, message)
    return status, dumps(body)


_REASONS = {400: "Bad Request", 408: "Request Timeout", 503: "Service Unavailable"}


def raw_error_response(problem: ErrorType, message: str) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, for answers made below the application
    (malformed HTTP, a slow head, too many connections), in the merged shape."""
    status, payload = error_bytes("any", problem, message)
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + payload


class HttpError(Exception):
    """A request the server refuses, answered in the API's shape. ``close`` ends the connection too
    (the body was not read, or the client is misbehaving)."""

    def __init__(
        self,
        problem: ErrorType,
        message: str,
        *,
        close: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.problem: ErrorType = problem
        self.message = message
        self.close = close
        self.headers = dict(headers or {})
