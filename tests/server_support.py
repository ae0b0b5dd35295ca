"""Raw HTTP on a socket, for the server tests: what a misbehaving client sends, byte by byte."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

ANTHROPIC_BODY = json.dumps(
    {"model": "claude-haiku-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
).encode()


@dataclass(frozen=True, kw_only=True)
class RawReply:
    status: int
    headers: dict[str, str]
    body: bytes
    seconds: float
    closed: bool
    """The server closed the connection after its answer."""

    def json(self) -> Any:
        return json.loads(self.body)


def post_head(
    path: str = "/v1/messages",
    *,
    content_length: str | None = None,
    content_type: str | None = "application/json",
    extra: str = "",
) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "host: 127.0.0.1"]
    if content_type is not None:
        lines.append(f"content-type: {content_type}")
    if content_length is not None:
        lines.append(f"content-length: {content_length}")
    head = "\r\n".join(lines) + "\r\n" + extra + "\r\n"
    return head.encode()


def post(path: str, body: bytes, *, content_type: str | None = "application/json") -> bytes:
    return post_head(path, content_length=str(len(body)), content_type=content_type) + body


def exchange(port: int, data: bytes, *, wait: float = 10.0) -> RawReply:
    """Send ``data`` and read one HTTP response (or until the server closes, or ``wait`` passes)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as conn:
        conn.sendall(data)
        return read_reply(conn, started, wait)


def read_reply(conn: socket.socket, started: float, wait: float = 10.0) -> RawReply:
    conn.settimeout(wait)
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = conn.recv(65536)
        if not chunk:
            raise AssertionError(f"closed without an answer after {buffer!r}")
        buffer += chunk
    head, _, rest = buffer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    closed = False
    conn.settimeout(0.2)  # a closing server has already sent its FIN with the answer
    try:
        closed = conn.recv(1) == b""
    except (TimeoutError, ConnectionResetError):
        closed = False
    return RawReply(
        status=int(status_line.split()[1]),
        headers=headers,
        body=rest[:length],
        seconds=time.monotonic() - started,
        closed=closed or headers.get("connection") == "close",
    )


def assert_serving(port: int) -> None:
    """A well-formed Messages request is still answered 200."""
    reply = exchange(port, post("/v1/messages", ANTHROPIC_BODY))
    assert reply.status == 200, reply.body
    assert reply.json()["type"] == "message"


@contextmanager
def running(*args: str) -> Iterator[str]:
    """``python -m contextwindow ARGS --port 0``: yields its base URL, stops it with SIGINT."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "contextwindow", *args, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert " on http://" in line, line + (process.stderr.read() if process.stderr else "")
        yield line.split(" on ", 1)[1].split()[0]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


class AccessLines(logging.Handler):
    """The access log's lines, caught on the access logger itself (whatever the root logger does)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def wait(self, needle: str = "", seconds: float = 3.0, *, count: int = 1) -> list[str]:
        """The lines, once ``count`` holding ``needle`` have come (a line is written once its answer
        has gone out, a stream's when it ends: the client may hold the answer before its line)."""
        deadline = time.monotonic() + seconds
        while sum(needle in line for line in self.lines) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return list(self.lines)


@contextmanager
def access_lines() -> Iterator[AccessLines]:
    logger = logging.getLogger("contextwindow.access")
    handler = AccessLines()
    saved = (logger.level, logger.disabled)
    logger.setLevel(logging.INFO)
    logger.disabled = False
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.disabled = saved[1]
