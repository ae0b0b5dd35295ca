"""The local provider over HTTP: the Anthropic Messages and OpenAI Chat Completions endpoints.

Dependency-free (stdlib ``http.server`` with a thread per connection, HTTP/1.1 keep-alive, chunked
transfer for streams) so it runs wherever contextwindow does. Endpoints:

- ``POST /v1/messages`` — Anthropic Messages, JSON or SSE (``"stream": true``);
- ``POST /v1/messages/count_tokens`` — ``{"input_tokens": N}`` as the local provider counts;
- ``POST /v1/chat/completions`` — OpenAI Chat Completions, JSON or SSE, usage chunk with
  ``stream_options.include_usage``;
- ``POST /v1/responses`` — OpenAI Responses, JSON (not streamed);
- ``GET /`` — what the server is: settings and tokenizer.

Every answer carries ``x-contextwindow-tokenizer`` and, once counted, ``x-contextwindow-input-tokens``
(the provider's own count, whatever the usage setting reports). A ``x-contextwindow-session`` header
keys the running totals of ``cumulative`` usage (default: one session). Bad requests get each API's
400 ``invalid_request_error``; an unknown model its 404.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..content import Message
from ..errors import InvalidInput, UnknownModel
from ..formats import WireFormat
from ..formats import anthropic as anthropic_format
from ..formats import openai as openai_format
from ..formats import responses as responses_format
from ..usage.tracker import UsageMode
from .counting import tokenizer_for
from .model import LocalModel, LocalSettings, Rejection, Reply, error_json
from .wire import anthropic_events, anthropic_message, openai_chunks, openai_completion, responses_object

__all__ = ["LocalServer", "serve"]

_MAX_BODY = 64 * 1024 * 1024  # above Anthropic's 32 MB request limit (its vision page): 413 past it


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms delayed-ACK stall
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests and benchmarks
        return

    def do_GET(self) -> None:
        model = self.server.model
        info = {
            "server": "contextwindow local provider",
            "window": model.settings.window,
            "effective_window": model.settings.effective_window,
            "usage": model.settings.usage,
            "default_model": model.settings.default_model,
            "tokenizer": tokenizer_for(model.profile(None)).name,
        }
        self._json(200, info, {})

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        wire: WireFormat = "openai" if path.endswith(("/chat/completions", "/responses")) else "anthropic"
        if path not in ("/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions", "/v1/responses"):
            self._reject(wire, 404, "not_found_error", f"no route for POST {self.path}")
            return
        length = int(self.headers.get("content-length") or 0)
        if length > _MAX_BODY:
            self.rfile.read(length)
            self._reject(wire, 413, "request_too_large", "Request exceeds the maximum size")
            return
        raw = self.rfile.read(length)
        try:
            data = json.loads(raw)
        except ValueError:
            self._reject(wire, 400, "invalid_request_error", "The request body is not valid JSON.")
            return
        if not isinstance(data, dict):
            self._reject(wire, 400, "invalid_request_error", "The request body must be a JSON object.")
            return
        try:
            reader = (
                responses_format
                if path.endswith("/responses")
                else openai_format
                if wire == "openai"
                else anthropic_format
            )
            parsed = reader.parse_request(data)
            model = self.server.model
            profile = model.profile(parsed.request.model)
        except InvalidInput as exc:
            self._reject(wire, 400, "invalid_request_error", str(exc))
            return
        except UnknownModel:
            self._reject(wire, 404, "not_found_error", f"model: {parsed.request.model}")
            return
        tokenizer = tokenizer_for(profile).name
        if path.endswith("/count_tokens"):
            count = model.count(parsed.request, parsed.loader())
            self._json(200, {"input_tokens": count.input_tokens}, {"x-contextwindow-tokenizer": tokenizer})
            return
        max_tokens = parsed.request.max_tokens
        if wire == "anthropic" and max_tokens is None:
            self._reject(wire, 400, "invalid_request_error", "max_tokens: Field required")
            return
        if model.settings.delay_seconds:
            time.sleep(model.settings.delay_seconds)
        session = self.headers.get("x-contextwindow-session") or "default"
        outcome = model.handle(
            parsed.request, wire=wire, max_tokens=max_tokens, load=parsed.loader(), session=session
        )
        if isinstance(outcome, Rejection):
            self._send(
                outcome.status,
                error_json(outcome),
                {**outcome.headers, "x-contextwindow-tokenizer": tokenizer},
            )
            return
        headers = {
            "x-contextwindow-tokenizer": outcome.tokenizer,
            "x-contextwindow-input-tokens": str(outcome.input_tokens),
            "request-id": outcome.id,
        }
        if path.endswith("/responses"):
            if data.get("stream"):
                self._reject(wire, 400, "invalid_request_error", "streaming Responses are not served locally")
                return
            self._json(200, responses_object(outcome), headers)
        elif data.get("stream"):
            include_usage = bool((data.get("stream_options") or {}).get("include_usage"))
            self._stream(self._events(wire, outcome, include_usage), headers)
        elif wire == "anthropic":
            self._json(200, anthropic_message(outcome), headers)
        else:
            self._json(200, openai_completion(outcome), headers)

    # -- writing -------------------------------------------------------------------------------------

    @staticmethod
    def _events(wire: WireFormat, reply: Reply, include_usage: bool) -> Iterable[bytes]:
        if wire == "anthropic":
            return anthropic_events(reply)
        return openai_chunks(reply, include_usage=include_usage)

    def _reject(self, wire: WireFormat, status: int, kind: str, message: str) -> None:
        if wire == "anthropic":
            body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
        else:
            body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
        self._json(status, body, {})

    def _json(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        self._send(status, json.dumps(body, separators=(",", ":")).encode(), headers)

    def _send(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, events: Iterable[bytes], headers: Mapping[str, str]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        # One chunk per flush keeps it streamed while bounding syscalls: events are small.
        buffer = b"".join(events)
        self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(buffer), buffer))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], model: LocalModel) -> None:
        self.model = model
        super().__init__(address, _Handler)


class LocalServer:
    """The local provider on ``host:port`` (port 0 picks a free one), served from a background thread.

    Use as a context manager, or :meth:`start` / :meth:`stop`. ``url`` is the base URL for the SDKs:
    ``anthropic.Anthropic(base_url=server.url)``, ``openai.OpenAI(base_url=server.url + "/v1")``.
    """

    def __init__(self, model: LocalModel | None = None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.model = model or LocalModel()
        self._server = _Server((host, port), self.model)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> LocalServer:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"contextwindow-local:{self.port}",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    window: int | None = None,
    usage: UsageMode = "per-call",
    effective_window: int | None = None,
    default_model: str = "claude-sonnet-4-6",
    delay_seconds: float = 0.0,
    fail_transient: int = 0,
    script: Iterable[Message] = (),
) -> None:
    """Serve the local provider until interrupted (what ``contextwindow serve`` runs)."""
    settings = LocalSettings(
        window=window,
        effective_window=effective_window,
        usage=usage,
        default_model=default_model,
        delay_seconds=delay_seconds,
    )
    model = LocalModel(settings, script=script)
    model.fail_next(fail_transient)
    server = _Server((host, port), model)
    print(
        f"contextwindow local provider on http://{host}:{server.server_address[1]} "
        f"(window {window or 'per model'}, usage {usage}, tokenizer {tokenizer_for(model.profile(None)).name})",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
