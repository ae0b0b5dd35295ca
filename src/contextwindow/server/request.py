"""Admitting a request: a slot, a body budget, the body read within bounds, the JSON checked.

The order matters for memory: a request reserves its body budget *before* a byte of its body is
read, so a waiting request holds only its connection's small read buffer (the server stops reading a
connection whose body nobody consumes). A body is refused by its ``Content-Length`` before it is
read, and a chunked one as soon as it passes the limit. A handling slot is taken only once the body
is in, so slow clients hold body budget (for at most the read timeout), never a slot.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from array import array
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from itertools import accumulate
from typing import Any

from starlette.requests import Request

from .errors import HttpError
from .limits import ServerLimits

__all__ = ["ClientGone", "Gate", "json_depth_exceeds", "parse_json"]

_ESCAPED = b"/bfnrtu"
"""The characters other than a quote or a backslash that may follow a backslash in a JSON string
(RFC 8259 section 7, https://www.rfc-editor.org/rfc/rfc8259#section-7)."""
_STRUCTURE = b'"\\[]{}' + _ESCAPED
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in _STRUCTURE)
_TO_SQUARE = bytes.maketrans(b"{}" + _ESCAPED, b"[]" + b"u" * len(_ESCAPED))
"""Objects nest as arrays do; the escaped letters all read as one placeholder."""
_TO_STEPS = bytes.maketrans(b"[]", b"\x01\xff")
"""An opening bracket as +1, a closing one as -1 (as signed bytes)."""


class ClientGone(Exception):
    """The client closed the connection before its request was read or answered: nobody to answer."""


class _ByteBudget:
    """A semaphore counted in bytes: ``reserve(n)`` waits until ``n`` more fit under the capacity."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self.peak = 0
        self._changed = asyncio.Condition()
        self._waiting = 0

    async def reserve(self, n: int, timeout: float) -> None:
        if self.used + n <= self.capacity and not self._waiting:
            self.used += n  # room now and nobody waiting before it: no lock, no timer
            self.peak = max(self.peak, self.used)
            return
        self._waiting += 1
        try:
            async with self._changed:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self.used + n <= self.capacity), timeout
                )
                self.used += n
                self.peak = max(self.peak, self.used)
        finally:
            self._waiting -= 1

    async def release(self, n: int) -> None:
        self.used -= n
        if self._waiting:
            async with self._changed:
                self._changed.notify_all()


class Gate:
    """The admission of one server: at most ``inflight_body_bytes`` of body held at once and at most
    ``max_concurrency`` requests handled at once (see the module docstring)."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self._slots = asyncio.Semaphore(limits.max_concurrency)
        self.bodies = _ByteBudget(limits.inflight_body_bytes)
        self.active = 0

    @asynccontextmanager
    async def admit(self, request: Request, *, json_body: bool = True) -> AsyncIterator[bytes]:
        """Wait for the body budget, read the body, wait for a slot: yields the body's bytes.

        ``json_body`` also refuses a content-type other than JSON before anything is read.
        """
        limits = self.limits
        started = time.monotonic()
        if json_body:
            _check_json_content_type(request)
        claimed = _content_length(request)
        if claimed is not None and claimed > limits.max_body_bytes:
            raise HttpError(
                "request_too_large",
                f"Request exceeds the maximum size ({claimed} bytes > {limits.max_body_bytes})",
                close=True,
            )
        reserve = claimed if claimed is not None else limits.max_body_bytes
        try:
            await self.bodies.reserve(reserve, limits.queue_timeout)
        except TimeoutError:
            raise HttpError(
                "overloaded_error", "Overloaded", close=True, headers={"retry-after": "1"}
            ) from None
        try:
            # The read deadline starts once the body is read: waiting for budget is the server's time.
            body = await _read_body(request, limits, deadline=time.monotonic() + limits.read_timeout)
            # A slot is taken once the body is in: a slow client holds body budget, never a slot.
            waited = time.monotonic() - started
            try:
                if self._slots.locked():
                    async with asyncio.timeout(max(0.01, limits.queue_timeout - waited)):
                        await self._slots.acquire()
                else:
                    await self._slots.acquire()
            except TimeoutError:
                raise HttpError(
                    "overloaded_error", "Overloaded", close=True, headers={"retry-after": "1"}
                ) from None
            self.active += 1
            try:
                yield body
            finally:
                self.active -= 1
                self._slots.release()
        finally:
            await self.bodies.release(reserve)


def _content_length(request: Request) -> int | None:
    raw = request.headers.get("content-length")
    if raw is None:
        return None
    # The HTTP parser has already refused a malformed value; this guards other servers.
    if not raw.isdigit():
        raise HttpError("invalid_request_error", "Content-Length must be a non-negative integer", close=True)
    return int(raw)


def _check_json_content_type(request: Request) -> None:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if kind != "application/json":
        shown = kind or "none"
        raise HttpError(
            "unsupported_media_type",
            f"Content-Type must be application/json (got {shown})",
            close=True,
        )


async def _read_body(request: Request, limits: ServerLimits, *, deadline: float) -> bytes:
    body = bytearray()
    receive = request.receive
    while True:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                message = await receive()
        except TimeoutError:
            raise HttpError(
                "request_timeout",
                f"The request body was not received within {limits.read_timeout:g} s",
                close=True,
            ) from None
        if message["type"] == "http.disconnect":
            raise ClientGone
        body += message.get("body", b"")
        if len(body) > limits.max_body_bytes:
            raise HttpError(
                "request_too_large",
                f"Request exceeds the maximum size ({limits.max_body_bytes} bytes)",
                close=True,
            )
        if not message.get("more_body", False):
            return bytes(body)


def json_depth_exceeds(raw: bytes, limit: int) -> bool:
    """Whether objects and arrays in ``raw`` nest deeper than ``limit`` (brackets in strings do not count).

    Linear, and each step is one pass of a bytes method in C, so it costs less than parsing the body:
    only the structure is kept (quotes, backslashes, brackets and the letters an escape may hold), an
    escaped backslash or quote is dropped, the strings between the remaining quotes are dropped, and
    the deepest level is the largest running sum of the brackets left. Exact for valid JSON; for
    anything else it says whether the brackets reach past ``limit``, and the parser refuses the rest.
    """
    kept = raw.translate(_TO_SQUARE, _NOT_STRUCTURE)
    if kept.count(b"[") <= limit:
        return False  # fewer brackets than the limit (the common case): cannot nest deeper
    if b"\\" in kept:
        # An escape keeps its next character here, so backslashes pair as they do in the body.
        kept = kept.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(kept.translate(_TO_STEPS, b"\\u").split(b'"')[::2])
    steps = array("b")
    steps.frombytes(outside)
    return max(accumulate(steps, initial=0)) > limit


class _NotJson(ValueError):
    """What Python's parser accepts and JSON does not (RFC 8259 has no NaN or Infinity)."""


def refuse_constant(name: str) -> Any:
    """The parser's ``parse_constant``: ``NaN`` and the infinities are refused (:class:`_NotJson`)."""
    raise _NotJson(f"{name} is not a JSON number")


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""``\\uD800`` to ``\\uDFFF``: the escape of a UTF-16 surrogate, high (``D8``-``DB``) or low."""


def _lone_surrogate_escaped(text: str) -> bool:
    """Whether a surrogate escape in ``text`` is not one half of a pair (a high one right before a
    low one). Only the escapes are visited: a backslash that is itself escaped starts none."""
    pending_high = -1  # where the escape of a high surrogate awaiting its low one ends
    for found in _SURROGATE_ESCAPE.finditer(text):
        start = found.start()
        before = start
        while before and text[before - 1] == "\\":
            before -= 1
        if (start - before) % 2:
            continue  # an escaped backslash, then the letters "ud..."
        high = found[0][3] in "89abAB"
        if pending_high >= 0:
            if high or start != pending_high:
                return True  # the high one before had no low one after it
            pending_high = -1
        elif high:
            pending_high = found.end()
        else:
            return True  # a low one with no high one right before it
    return pending_high >= 0


def parse_json(raw: bytes, limits: ServerLimits) -> dict[str, Any]:
    """The body as a JSON object, or a 400 naming what is wrong with it."""
    text = checked_text(raw, limits)
    try:
        data = json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise not_json(exc) from None
    if not isinstance(data, dict):
        raise HttpError("invalid_request_error", "The request body must be a JSON object.")
    return data


def checked_text(raw: bytes, limits: ServerLimits, *, within: int = 0) -> str:
    """``raw`` decoded, once it passed the checks a body passes before it is parsed (else the 400
    naming what is wrong): nesting within the limit, valid in its encoding, no lone surrogate.
    ``within``: how many levels deep ``raw`` starts, when it is a part of a body (then it is UTF-8)."""
    if json_depth_exceeds(raw, limits.max_json_depth - within):
        raise HttpError(
            "invalid_request_error", f"The request body nests deeper than {limits.max_json_depth} levels."
        )
    # Decoded as json.loads decodes it, but strictly: an encoded surrogate does not get through. A
    # surrogate escaped alone is found among the escapes, without serialising the parsed body again.
    encoding = "utf-8" if within else json.detect_encoding(raw)
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        raise HttpError(
            "invalid_request_error", f"The request body is not valid JSON: it is not valid {encoding}."
        ) from None
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate_escaped(text):
        raise HttpError(
            "invalid_request_error", "The request body is not valid JSON: a string holds a lone surrogate."
        )
    return text


def not_json(exc: BaseException) -> HttpError:
    """The 400 for a body the parser refused with ``exc``."""
    reason = f": {exc}" if isinstance(exc, _NotJson) else ""
    return HttpError("invalid_request_error", f"The request body is not valid JSON{reason}.")
