"""A fake provider for the proxy's tests: records who sent what, answers slowly when asked to.

:class:`FakeUpstream` answers Anthropic Messages (and ``count_tokens``) and OpenAI Responses, not
streamed. It records each request with the credential it came with, writes summaries that name the
key they were written with (``SUMMARY-FOR-<key>``), waits ``delay`` seconds before answering (a
request that holds ``STALL`` and not ``RESUME`` waits 60 s: a stalled upstream call), and notes when a caller left
before its answer.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from contextwindow.server import BackgroundServer, HttpApp, json_response

SUMMARY_ASK = "You are compacting the earlier part of a conversation"


def summary_for(key: str) -> str:
    """The summary the fake writes for a caller with ``key``: every section the guard requires."""
    marker = f"SUMMARY-FOR-{key}"
    sections = ("Goal", "Decisions", "Files and artefacts", "Open work", "Latest state")
    return "\n\n".join(f"## {s}\n{marker}: {s.lower()} as it stood." for s in sections)


@dataclass(frozen=True, kw_only=True)
class Seen:
    key: str
    path: str
    body: str


class FakeUpstream:
    def __init__(self, *, delay: float = 0.0) -> None:
        self.delay = delay
        self.seen: list[Seen] = []
        self.left: list[float] = []
        """When each caller that left before its answer was seen gone (monotonic seconds)."""
        self.active = 0
        self.peak = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.app = HttpApp(
            [
                Route("/v1/messages/count_tokens", self.count, methods=["POST"]),
                Route("/v1/messages", self.messages, methods=["POST"]),
                Route("/v1/responses", self.responses, methods=["POST"]),
            ],
            name="fake upstream",
        )

    def sent_with(self, key: str) -> str:
        """Everything sent upstream with ``key``, as one text."""
        return "\n".join(s.body for s in self.seen if s.key == key)

    async def _arrive(self, request: Request) -> tuple[str, dict[str, Any], str]:
        raw = (await request.body()).decode()
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix(
            "Bearer "
        )
        with self._lock:
            self.seen.append(Seen(key=key, path=request.url.path, body=raw))
        return key, json.loads(raw), raw

    async def _wait(self, request: Request, raw: str) -> bool:
        """Wait out the delay; False when the caller left first."""
        delay = 60.0 if "STALL" in raw and "RESUME" not in raw else self.delay
        if delay <= 0:
            return True
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            waiting = asyncio.ensure_future(asyncio.sleep(delay))
            gone = asyncio.ensure_future(_disconnect(request))
            await asyncio.wait((waiting, gone), return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            gone.cancel()
            if gone.done() and not gone.cancelled():
                self.left.append(time.monotonic())
                return False
            return True
        finally:
            self.active -= 1

    async def count(self, request: Request) -> Response:
        _, _, raw = await self._arrive(request)
        return json_response(200, {"input_tokens": len(raw) // 4})

    async def messages(self, request: Request) -> Response:
        key, body, raw = await self._arrive(request)
        if body.get("stream"):
            return StreamingResponse(self._events(body, raw), media_type="text/event-stream")
        if not await self._wait(request, raw):
            return Response(status_code=499)
        n = next(self._ids)
        text = summary_for(key) if SUMMARY_ASK in raw else f"reply {n}"
        return json_response(
            200,
            {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": len(raw) // 4, "output_tokens": len(text) // 4},
            },
        )

    async def _events(self, body: dict[str, Any], raw: str) -> AsyncIterator[bytes]:
        """An Anthropic stream: its start at once, the rest after the delay (a stall: never)."""
        n = next(self._ids)

        def event(kind: str, data: dict[str, Any]) -> bytes:
            return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()

        message = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": len(raw) // 4, "output_tokens": 1},
        }
        yield event("message_start", {"message": message})
        try:
            await asyncio.sleep(60.0 if "STALL" in raw and "RESUME" not in raw else self.delay)
        except asyncio.CancelledError:
            self.left.append(time.monotonic())
            raise
        yield event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        yield event(
            "content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": f"reply {n}"}}
        )
        yield event("content_block_stop", {"index": 0})
        yield event(
            "message_delta",
            {"delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 2}},
        )
        yield event("message_stop", {})

    async def responses(self, request: Request) -> Response:
        _, body, raw = await self._arrive(request)
        if not await self._wait(request, raw):
            return Response(status_code=499)
        n = next(self._ids)
        return json_response(
            200,
            {
                "id": f"resp_{n}",
                "object": "response",
                "status": "completed",
                "model": body.get("model"),
                "store": body.get("store", True),
                "output": [
                    {
                        "type": "message",
                        "id": f"msg_{n}",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": f"reply {n}", "annotations": []}],
                    }
                ],
                "usage": {
                    "input_tokens": len(raw) // 4,
                    "output_tokens": 2,
                    "total_tokens": len(raw) // 4 + 2,
                },
            },
        )


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


@contextmanager
def fake_upstream(*, delay: float = 0.0) -> Iterator[tuple[FakeUpstream, BackgroundServer]]:
    upstream = FakeUpstream(delay=delay)
    with BackgroundServer(upstream.app) as running:
        yield upstream, running
