"""The local provider's HTTP front: its endpoints as routes of an :class:`~.app.HttpApp`.

- ``POST /v1/messages`` — Anthropic Messages, JSON or SSE (``"stream": true``);
- ``POST /v1/messages/count_tokens`` — ``{"input_tokens": N}`` as the local provider counts;
- ``POST /v1/chat/completions`` — OpenAI Chat Completions, JSON or SSE, usage chunk with
  ``stream_options.include_usage``;
- ``POST /v1/responses`` — OpenAI Responses, JSON (not streamed);
- ``POST /v1/responses/input_tokens`` — OpenAI's Responses input count, ``{"object":
  "response.input_tokens", "input_tokens": N}``, counted as the equivalent Chat Completions request;
- ``GET /`` — what the server is: settings and tokenizer; ``GET /health`` — alive, and how busy.

Every answer carries ``x-contextwindow-tokenizer`` and, once counted, ``x-contextwindow-input-tokens``
(the provider's own count, whatever the usage setting reports). A ``x-contextwindow-session`` header
keys the running totals of ``cumulative`` usage (default: one session). What each request is answered
is decided by :class:`~contextwindow.testing.LocalModel`; this module only carries it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import InvalidInput, UnknownModel
from ..formats import WireFormat
from ..formats import anthropic as anthropic_format
from ..formats import openai as openai_format
from ..formats import responses as responses_format
from ..testing.counting import tokenizer_for
from ..testing.model import LocalModel, Rejection
from ..testing.wire import (
    anthropic_events,
    anthropic_message,
    chat_from_responses,
    openai_chunks,
    openai_completion,
    responses_object,
)
from .app import HttpApp, json_response
from .errors import HttpError
from .limits import ServerLimits
from .request import parse_json

__all__ = ["SESSION_HEADER", "local_app", "stream_flags"]

SESSION_HEADER = "x-contextwindow-session"


def local_app(model: LocalModel, limits: ServerLimits | None = None) -> HttpApp:
    """The local provider's ASGI application around ``model``."""
    app = HttpApp([], limits=limits, name="contextwindow local provider", info=lambda: _info(model))

    async def describe(request: Request) -> Response:
        return json_response(200, _info(model))

    async def post(request: Request) -> Response:
        path = request.url.path.rstrip("/")
        responses = path.endswith("/responses")
        responses_count = path.endswith("/responses/input_tokens")
        openai = path.endswith("/chat/completions") or responses or responses_count
        wire: WireFormat = "openai" if openai else "anthropic"
        async with app.gate.admit(request) as raw:
            data = parse_json(raw, app.limits)
            stream, include_usage = stream_flags(data)
            if responses and stream:
                raise HttpError("invalid_request_error", "streaming Responses are not served locally")
            if responses_count:
                data = chat_from_responses(dict(data))
            if model.settings.delay_seconds:
                await asyncio.sleep(model.settings.delay_seconds)
            session = request.headers.get(SESSION_HEADER) or "default"
            counting = path.endswith("/count_tokens") or responses_count
            shape = "responses" if responses else "responses_count" if responses_count else "chat"
            answer = (model, wire, data, counting, stream, include_usage, session, shape)
            if len(raw) <= app.limits.inline_body_bytes:
                # A small body is parsed and counted in well under a millisecond or two: on the
                # event loop, which is faster than handing it to a worker thread and back.
                return _answer(*answer)
            # A large one would hold every other connection up: off the event loop.
            return await anyio.to_thread.run_sync(_answer, *answer)

    app.router.routes.extend(
        [
            Route("/", describe, methods=["GET"]),
            Route("/v1/messages", post, methods=["POST"]),
            Route("/v1/messages/count_tokens", post, methods=["POST"]),
            Route("/v1/chat/completions", post, methods=["POST"]),
            Route("/v1/responses", post, methods=["POST"]),
            Route("/v1/responses/input_tokens", post, methods=["POST"]),
        ]
    )
    return app


def _info(model: LocalModel) -> dict[str, Any]:
    return {
        "server": "contextwindow local provider",
        "window": model.settings.window,
        "effective_window": model.settings.effective_window,
        "usage": model.settings.usage,
        "default_model": model.settings.default_model,
        "tokenizer": tokenizer_for(model.profile(None)).name,
    }


def stream_flags(data: Mapping[str, Any]) -> tuple[bool, bool]:
    """``stream`` and ``stream_options.include_usage``, refused (400) when they have the wrong type."""
    stream = data.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise HttpError("invalid_request_error", "stream: Input should be a valid boolean")
    options = data.get("stream_options")
    if options is None:
        return bool(stream), False
    if not isinstance(options, dict):
        raise HttpError("invalid_request_error", "stream_options: Input should be a valid object")
    include = options.get("include_usage", False)
    if include is not None and not isinstance(include, bool):
        raise HttpError(
            "invalid_request_error", "stream_options.include_usage: Input should be a valid boolean"
        )
    return bool(stream), bool(include)


def _answer(
    model: LocalModel,
    wire: WireFormat,
    data: Mapping[str, Any],
    counting: bool,
    stream: bool,
    include_usage: bool,
    session: str,
    shape: str = "chat",
) -> Response:
    reader = (
        responses_format if shape == "responses" else openai_format if wire == "openai" else anthropic_format
    )
    try:
        parsed = reader.parse_request(data)
        profile = model.profile(parsed.request.model)
    except InvalidInput as exc:
        raise HttpError("invalid_request_error", str(exc)) from None
    except UnknownModel:
        raise HttpError("not_found_error", f"model: {data.get('model')}") from None
    tokenizer = tokenizer_for(profile).name
    if counting:
        count = model.count(parsed.request, parsed.loader(), wire=wire)
        body: dict[str, Any] = {"input_tokens": count.input_tokens}
        if shape == "responses_count":
            body["object"] = "response.input_tokens"
        return json_response(200, body, {"x-contextwindow-tokenizer": tokenizer})
    max_tokens = parsed.request.max_tokens
    if wire == "anthropic" and max_tokens is None:
        raise HttpError("invalid_request_error", "max_tokens: Field required")
    outcome = model.handle(
        parsed.request, wire=wire, max_tokens=max_tokens, load=parsed.loader(), session=session
    )
    if isinstance(outcome, Rejection):
        return json_response(
            outcome.status, dict(outcome.body), {**outcome.headers, "x-contextwindow-tokenizer": tokenizer}
        )
    headers = {
        "x-contextwindow-tokenizer": outcome.tokenizer,
        "x-contextwindow-input-tokens": str(outcome.input_tokens),
        "request-id": outcome.id,
    }
    if shape == "responses":
        return json_response(200, responses_object(outcome), headers)
    if stream:
        events: Iterable[bytes] = (
            anthropic_events(outcome)
            if wire == "anthropic"
            else openai_chunks(outcome, include_usage=include_usage)
        )
        return Response(
            b"".join(events), headers={**headers, "cache-control": "no-cache"}, media_type="text/event-stream"
        )
    body = anthropic_message(outcome) if wire == "anthropic" else openai_completion(outcome)
    return json_response(200, body, headers)
