"""The local provider's HTTP front: its endpoints as routes of an :class:`~.app.HttpApp`.

- ``POST /v1/messages`` — Anthropic Messages, JSON or SSE (``"stream": true``), with server-side
  compaction (``compact_20260112``: :mod:`contextwindow.testing.anthropic_compaction`);
- ``POST /v1/messages/count_tokens`` — ``{"input_tokens": N}``: the input a call with that body would
  report (:meth:`~contextwindow.testing.LocalModel.count_input`), bad input refused as the call
  refuses it;
- ``POST /v1/chat/completions`` — OpenAI Chat Completions, JSON or SSE, usage chunk with
  ``stream_options.include_usage``;
- ``POST /v1/responses`` — OpenAI Responses, JSON or SSE, with stored responses for
  ``previous_response_id`` and reasoning items (:mod:`contextwindow.testing.responses`);
- ``POST /v1/responses/compact`` — OpenAI's standalone compaction, ``{"object": "response.compaction",
  "output": [...]}`` (:mod:`contextwindow.testing.openai_compaction`, which also serves the
  ``context_management`` compaction of ``/v1/responses``);
- ``POST /v1/responses/input_tokens`` — OpenAI's Responses input count, ``{"object":
  "response.input_tokens", "input_tokens": N}``, counted as the equivalent Chat Completions request;
- ``POST /v1beta/models/{model}:countTokens`` (and ``/v1/…``, as the SDK's ``api_version`` says) — Gemini's input count, ``{"totalTokens": N}``, of a
  Gemini body (``contents``, or a whole ``generateContentRequest``), refused in Gemini's error shape;
- ``GET /`` — what the server is: settings and tokenizer; ``GET /health`` — alive, and how busy.

Every answer carries ``x-contextwindow-tokenizer`` and, once counted, ``x-contextwindow-input-tokens``
(the provider's own count, whatever the usage setting reports). A ``x-contextwindow-session`` header
keys the running totals of ``cumulative`` usage (default: one session). What each request is answered
is decided by :class:`~contextwindow.testing.LocalModel`; this module only carries it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import InvalidInput, UnknownModel
from ..formats import ParsedRequest, WireFormat, loader_from
from ..formats import anthropic as anthropic_format
from ..formats import gemini as gemini_format
from ..formats import openai as openai_format
from ..formats import responses as responses_format
from ..testing.anthropic_compaction import CompactionPass, compacting_answer, read_compactions
from ..testing.caching import breakpoints_in
from ..testing.context_management import betas_of
from ..testing.counting import tokenizer_for
from ..testing.model import LocalModel, Rejection
from ..testing.openai_compaction import compact_response, compacting_call, compaction_threshold, expanded
from ..testing.responses import ResponsesMemory, Stored, response_events, response_object
from ..testing.wire import (
    anthropic_events,
    anthropic_message,
    chat_from_responses,
    openai_chunks,
    openai_completion,
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
    memory = ResponsesMemory()

    async def describe(request: Request) -> Response:
        return json_response(200, _info(model))

    async def post(request: Request) -> Response:
        path = request.url.path.rstrip("/")
        responses = path.endswith("/responses")
        compact = path.endswith("/responses/compact")
        responses_count = path.endswith("/responses/input_tokens")
        openai = path.endswith("/chat/completions") or responses or responses_count
        wire: WireFormat = "openai" if openai else "anthropic"
        async with app.gate.admit(request) as raw:
            data = parse_json(raw, app.limits)
            stream, include_usage = stream_flags(data)
            if responses_count:
                data = chat_from_responses(dict(data), memory.unseal)
            if model.settings.delay_seconds:
                await asyncio.sleep(model.settings.delay_seconds)
            session = request.headers.get(SESSION_HEADER) or "default"
            counting = path.endswith("/count_tokens") or responses_count
            shape = "responses" if responses else "responses_count" if responses_count else "chat"
            inline = len(raw) <= app.limits.inline_body_bytes
            # A small body is parsed and counted in well under a millisecond or two: on the event
            # loop, which is faster than handing it to a worker thread and back. A large one would
            # hold every other connection up: off the event loop.
            if compact:
                return await anyio.to_thread.run_sync(_compact, model, memory, data)
            if responses:
                respond = (model, memory, data, stream, session)
                if inline:
                    return _respond(*respond)
                return await anyio.to_thread.run_sync(_respond, *respond)
            if not openai and request.headers.get("anthropic-beta"):
                # The betas the call is made under (context editing, compaction): read with the body.
                data = {**data, "betas": list(betas_of(request.headers.get("anthropic-beta")))}
            answer = (model, wire, data, counting, stream, include_usage, session, shape)
            if inline:
                return _answer(*answer)
            return await anyio.to_thread.run_sync(_answer, *answer)

    async def gemini_count(request: Request) -> Response:
        async with app.gate.admit(request) as raw:
            data = parse_json(raw, app.limits)
            if model.settings.delay_seconds:
                await asyncio.sleep(model.settings.delay_seconds)
            name = str(request.path_params["model"])
            return await anyio.to_thread.run_sync(_gemini_count, model, data, name)

    app.router.routes.extend(
        [
            Route("/v1beta/models/{model}:countTokens", gemini_count, methods=["POST"]),
            Route("/v1/models/{model}:countTokens", gemini_count, methods=["POST"]),
            Route("/", describe, methods=["GET"]),
            Route("/v1/messages", post, methods=["POST"]),
            Route("/v1/messages/count_tokens", post, methods=["POST"]),
            Route("/v1/chat/completions", post, methods=["POST"]),
            Route("/v1/responses", post, methods=["POST"]),
            Route("/v1/responses/input_tokens", post, methods=["POST"]),
            Route("/v1/responses/compact", post, methods=["POST"]),
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
        "prompt_cache": model.settings.prompt_cache,
        "tokenizer": tokenizer_for(model.profile(None), model.settings.count_scale).name,
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


def _gemini_count(model: LocalModel, data: Mapping[str, Any], name: str) -> Response:
    parsed, tokenizer = _parsed(
        model,
        lambda: gemini_format.parse_request(data, model=name),
        f"models/{name} is not found for API version v1beta, or is not supported",
    )
    count = model.count(parsed.request, parsed.loader(), wire="anthropic")
    return json_response(200, {"totalTokens": count.input_tokens}, {"x-contextwindow-tokenizer": tokenizer})


def _parsed(model: LocalModel, parse: Callable[[], ParsedRequest], unknown: str) -> tuple[ParsedRequest, str]:
    """The request ``parse`` reads, and the name of the tokenizer that counts it (with the model's
    count scale); bad input and an unknown model are the API's 4xx (``unknown`` says which)."""
    try:
        parsed = parse()
        profile = model.profile(parsed.request.model)
    except InvalidInput as exc:
        raise HttpError("invalid_request_error", str(exc)) from None
    except UnknownModel:
        raise HttpError("not_found_error", unknown) from None
    return parsed, tokenizer_for(profile, model.settings.count_scale).name


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
    reader = openai_format if wire == "openai" else anthropic_format
    betas = tuple(data.get("betas") or ()) if wire == "anthropic" else ()
    if wire == "anthropic":
        # Anthropic's compaction blocks, sent back: checked, and what is before the newest dropped.
        read = read_compactions(data, betas)
        if isinstance(read, str):
            raise HttpError("invalid_request_error", read)
        data = read
    parsed, tokenizer = _parsed(model, lambda: reader.parse_request(data), f"model: {data.get('model')}")
    if counting:
        count = model.count_input(parsed.request, wire=wire, load=parsed.loader())
        if isinstance(count, Rejection):
            return json_response(count.status, dict(count.body), {"x-contextwindow-tokenizer": tokenizer})
        body: dict[str, Any] = {"input_tokens": count.input_tokens}
        if shape == "responses_count":
            body["object"] = "response.input_tokens"
        return json_response(200, body, {"x-contextwindow-tokenizer": tokenizer})
    max_tokens = parsed.request.max_tokens
    if wire == "anthropic" and max_tokens is None:
        raise HttpError("invalid_request_error", "max_tokens: Field required")
    breakpoints = breakpoints_in(data) if wire == "anthropic" else ()
    if isinstance(breakpoints, str):
        raise HttpError("invalid_request_error", breakpoints)
    compaction: CompactionPass | None = None
    if wire == "anthropic":
        outcome, compaction = compacting_answer(
            model,
            parsed.request,
            max_tokens=max_tokens,
            load=parsed.loader(),
            session=session,
            breakpoints=breakpoints,
            betas=betas,
        )
    else:
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
    if stream:
        events: Iterable[bytes] = (
            anthropic_events(outcome, compaction)
            if wire == "anthropic"
            else openai_chunks(outcome, include_usage=include_usage)
        )
        return Response(
            b"".join(events), headers={**headers, "cache-control": "no-cache"}, media_type="text/event-stream"
        )
    body = anthropic_message(outcome, compaction) if wire == "anthropic" else openai_completion(outcome)
    return json_response(200, body, headers)


def _continued(model: LocalModel, memory: ResponsesMemory, data: Mapping[str, Any]) -> Stored | Rejection:
    """What a Responses call continues (its ``previous_response_id``'s conversation, else nothing), or
    the API's refusal of the call: an unknown response id, or (strict) what the API checks first."""
    earlier = Stored(messages=())
    if data.get("previous_response_id") is not None:
        found = memory.history(data["previous_response_id"])
        if isinstance(found, Rejection):
            return found
        earlier = found
    refusal = memory.check(data) if model.settings.strict else None
    return earlier if refusal is None else refusal


def _respond(
    model: LocalModel, memory: ResponsesMemory, data: Mapping[str, Any], stream: bool, session: str
) -> Response:
    """A Responses call: the conversation it continues, its reasoning items checked, its answer
    stored (unless ``store`` is false) and sent as a ``response`` object or its SSE events."""
    parsed, name = _parsed(model, lambda: responses_format.parse_request(data), f"model: {data.get('model')}")
    tokenizer = {"x-contextwindow-tokenizer": name}
    earlier = _continued(model, memory, data)
    if isinstance(earlier, Rejection):
        return json_response(earlier.status, dict(earlier.body), tokenizer)
    attachments = {**earlier.attachments, **parsed.attachments}
    request = replace(parsed.request, messages=(*earlier.messages, *parsed.request.messages))
    request = expanded(request, memory.unseal)
    load = loader_from(attachments)
    outcome, item, request = compacting_call(
        model, memory, request, threshold=compaction_threshold(data), load=load, session=session
    )
    if isinstance(outcome, Rejection):
        return json_response(outcome.status, dict(outcome.body), {**outcome.headers, **tokenizer})
    message = memory.name(outcome)
    body = response_object(outcome, message, request=data, load=load)
    if item is not None:
        body["output"].insert(0, item)
    if data.get("store") is not False:
        memory.keep(
            body["id"], Stored(messages=(*request.messages, message), attachments=attachments), body["output"]
        )
    headers = {
        "x-contextwindow-tokenizer": outcome.tokenizer,
        "x-contextwindow-input-tokens": str(outcome.input_tokens),
        "request-id": outcome.id,
    }
    if stream:
        return Response(
            b"".join(response_events(body)),
            headers={**headers, "cache-control": "no-cache"},
            media_type="text/event-stream",
        )
    return json_response(200, body, headers)


def _compact(model: LocalModel, memory: ResponsesMemory, data: Mapping[str, Any]) -> Response:
    """``POST /responses/compact`` (:func:`~contextwindow.testing.openai_compaction.compact_response`)."""
    fields = {k: data[k] for k in ("model", "input", "instructions") if k in data}
    parsed, name = _parsed(
        model, lambda: responses_format.parse_request(fields), f"model: {data.get('model')}"
    )
    tokenizer = {"x-contextwindow-tokenizer": name}
    earlier = _continued(model, memory, data)
    if isinstance(earlier, Rejection):
        return json_response(earlier.status, dict(earlier.body), tokenizer)
    request = replace(parsed.request, messages=(*earlier.messages, *parsed.request.messages))
    load = loader_from({**earlier.attachments, **parsed.attachments})
    answer = compact_response(model, memory, data, expanded(request, memory.unseal), load)
    if isinstance(answer, Rejection):
        return json_response(answer.status, dict(answer.body), tokenizer)
    return json_response(200, answer, tokenizer)
