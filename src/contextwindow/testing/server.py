"""The local provider over HTTP, for the real SDK clients and agents in any language.

The endpoints are :mod:`contextwindow.server.local` (Anthropic Messages with ``count_tokens``, OpenAI
Chat Completions, ``/health``) on the project's HTTP stack (:mod:`contextwindow.server`: uvicorn,
bodies bounded before they are read, read and idle timeouts, bounded concurrency, errors in each API's
shape). That stack is the ``server`` extra, imported when a server is made, so the local provider
itself (:class:`~.provider.LocalProvider`) needs none of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..content import Message
from ..errors import UsageError
from ..usage.tracker import UsageMode
from .counting import tokenizer_for
from .model import LocalModel, LocalSettings

if TYPE_CHECKING:
    from ..server import ServerLimits

__all__ = ["LocalServer", "serve"]


def _stack() -> Any:
    """``contextwindow.server``, or a :class:`UsageError` saying which extra to install."""
    try:
        from .. import server
        from ..server import local
    except ImportError as missing:
        raise UsageError(
            f"serving over HTTP needs the 'server' extra ({missing.name} is missing): "
            "pip install 'contextwindow[server]'"
        ) from None
    return server, local


class LocalServer:
    """The local provider on ``host:port`` (port 0 picks a free one), served from a background thread.

    Use as a context manager, or :meth:`start` / :meth:`stop`. ``url`` is the base URL for the SDKs:
    ``anthropic.Anthropic(base_url=server.url)``, ``openai.OpenAI(base_url=server.url + "/v1")``.
    ``http`` picks the HTTP/1.1 parser (``contextwindow.server.PARSERS``; default: the first).
    """

    def __init__(
        self,
        model: LocalModel | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: ServerLimits | None = None,
        http: str | None = None,
    ) -> None:
        server, local = _stack()
        self.model = model or LocalModel()
        self.app = local.local_app(self.model, limits)
        self._server = server.BackgroundServer(self.app, host=host, port=port, http=http)

    @property
    def host(self) -> str:
        return str(self._server.host)

    @property
    def port(self) -> int:
        return int(self._server.port)

    @property
    def url(self) -> str:
        return str(self._server.url)

    def start(self) -> LocalServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

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
    call_tools: bool = False,
    limits: ServerLimits | None = None,
    prompt_cache: bool = False,
) -> None:
    """Serve the local provider until interrupted (what ``contextwindow serve`` runs); ``call_tools``
    answers a request that offers tools by calling each once; ``prompt_cache`` caches prompts as the
    providers do (:mod:`.caching`)."""
    server, local = _stack()
    settings = LocalSettings(
        window=window,
        effective_window=effective_window,
        usage=usage,
        default_model=default_model,
        delay_seconds=delay_seconds,
        call_tools=call_tools,
        prompt_cache=prompt_cache,
    )
    model = LocalModel(settings, script=script)
    model.fail_next(fail_transient)
    sock = server.bind(host, port)
    print(
        f"contextwindow local provider on http://{host}:{sock.getsockname()[1]} "
        f"(window {window or 'per model'}, usage {usage}, tokenizer {tokenizer_for(model.profile(None), model.settings.count_scale).name})",
        flush=True,
    )
    try:
        server.run(local.local_app(model, limits), sock)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
