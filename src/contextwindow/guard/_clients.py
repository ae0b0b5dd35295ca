"""The guarded SDK clients behind ``contextwindow.guard(client)``: one line in an existing agent.

::

    client = contextwindow.guard(anthropic.Anthropic())       # the only line that changes
    response = client.messages.create(model=..., max_tokens=..., system=..., tools=..., messages=history)

The wrapper answers every attribute from the client it wraps, so everything else about the client is
unchanged; only the calls that send a conversation go through the guard core (:mod:`._core`):

- ``anthropic.Anthropic`` / ``AsyncAnthropic``: ``messages.create`` (with or without ``stream``),
  ``messages.stream`` and ``messages.count_tokens`` (it counts the request the guard would send);
- ``openai.OpenAI`` / ``AsyncOpenAI``: ``chat.completions.create`` (with or without ``stream``),
  ``responses.create`` (with or without ``stream``; with ``previous_response_id``, see
  :mod:`._chained`) and the SDK's ``responses.stream`` helper.

Responses and streams are the SDK's own objects: a stream is the SDK's ``Stream`` whose events are
read as they pass by the agent, and its reply is recorded when the stream ends. Errors other than a
rejection for size are the SDK's own exceptions; a rejection the guard could not recover (after one
compaction and retry) is :class:`~contextwindow.errors.ContextOverflow`, with the SDK's exception as
its cause.
"""

from __future__ import annotations

import contextvars
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

from ..errors import ContextOverflow, ProviderError, UsageError
from ..store import Store
from ._core import Exchange, GuardCore
from ._options import GuardOptions, resolve_store
from ._steps import Reply, Send, run_async, run_sync
from ._wire import GuardFormat
from .replies import (
    AnthropicEvents,
    OpenAIChunks,
    ResponsesEvents,
    anthropic_reply,
    openai_reply,
    responses_reply,
)

__all__ = ["GuardedAnthropic", "GuardedOpenAI", "wrap"]

_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout"})
"""Keyword arguments of the SDK methods that are not part of the request body."""
_COUNT_FIELDS = frozenset({"model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers"})
"""What Anthropic's ``count_tokens`` accepts of a Messages body."""


def wrap(client: Any, options: GuardOptions) -> Any:
    """What :func:`contextwindow.guard` does (it loads this module on first use)."""
    kind, is_async = _kind(client)
    summarizer = options.summarizer
    if summarizer is not None and summarizer is not False:
        other, other_async = _kind(summarizer)
        if other != kind or other_async != is_async:
            raise UsageError(
                "the summarizer client must be of the same kind as the guarded client (sync or async)"
            )
    core = GuardCore(
        resolve_store(options.store),
        kind,
        overflow=_overflow_reader(kind),
        options=options,
        reply_of=anthropic_reply if kind == "anthropic" else openai_reply,
    )
    summary_client = client if summarizer in (None, False) else summarizer
    if kind == "anthropic":
        return GuardedAnthropic(client, core, summary_client, is_async)
    return GuardedOpenAI(client, core, summary_client, is_async)


def _kind(client: Any) -> tuple[GuardFormat, bool]:
    try:
        import anthropic
    except ImportError:  # pragma: no cover - the extra is not installed
        anthropic = None  # type: ignore[assignment]
    try:
        import openai
    except ImportError:  # pragma: no cover
        openai = None  # type: ignore[assignment]
    if anthropic is not None:
        if isinstance(client, anthropic.AsyncAnthropic):
            return "anthropic", True
        if isinstance(client, anthropic.Anthropic):
            return "anthropic", False
    if openai is not None:
        if isinstance(client, openai.AsyncOpenAI):
            return "openai", True
        if isinstance(client, openai.OpenAI):
            return "openai", False
    raise UsageError(
        f"guard() wraps anthropic.Anthropic, anthropic.AsyncAnthropic, openai.OpenAI or openai.AsyncOpenAI, "
        f"not {type(client).__name__}"
    )


def _overflow_reader(kind: GuardFormat) -> Callable[[BaseException], ContextOverflow | None]:
    if kind == "anthropic":
        import anthropic

        from ..providers.anthropic import map_anthropic_error

        def read_anthropic(exc: BaseException) -> ContextOverflow | None:
            if not isinstance(exc, anthropic.APIStatusError):
                return None
            mapped = map_anthropic_error(exc)
            return mapped if isinstance(mapped, ContextOverflow) else None

        return read_anthropic
    import openai

    from ..providers.openai import map_openai_error

    def read_openai(exc: BaseException) -> ContextOverflow | None:
        if not isinstance(exc, openai.APIStatusError):
            return None
        mapped = map_openai_error(exc)
        return mapped if isinstance(mapped, ContextOverflow) else None

    return read_openai


def _split(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request body and the SDK's own options of a call's keywords. The body is as the agent gave
    it: the core reads it (:meth:`~._history.HistoryReader.plain`), converting only what is new."""
    body = {k: v for k, v in kwargs.items() if k not in _OPTIONS}
    options = {k: v for k, v in kwargs.items() if k in _OPTIONS}
    return body, options


def _merged(body: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords of one SDK call: the body the core sends and the agent's own options, the
    ``extra_body`` / ``extra_headers`` of both merged (the provider's context editing adds its own:
    :func:`contextwindow.compaction.guarded_body`; the agent's headers win on a clash, its betas kept)."""
    merged = {**body, **options}
    for key in ("extra_body", "extra_headers"):
        if key in body and key in options:
            merged[key] = {**dict(body[key] or {}), **dict(options[key] or {})}
    ours, theirs = (body.get("extra_headers") or {}), (options.get("extra_headers") or {})
    if "anthropic-beta" in ours and "anthropic-beta" in theirs:
        betas = dict.fromkeys(
            b.strip() for h in (theirs["anthropic-beta"], ours["anthropic-beta"]) for b in h.split(",")
        )
        merged["extra_headers"]["anthropic-beta"] = ",".join(b for b in betas if b)
    return merged


_LAST_EXCHANGES: contextvars.ContextVar[dict[int, tuple[weakref.ref[Any], Exchange]] | None] = (
    contextvars.ContextVar("contextwindow_last_exchanges", default=None)
)
"""Per thread and asyncio task (a context), each guarded client's latest exchange, by the client's
id; the weak reference tells a live client from one whose id was reused."""


def _summary_failed(exc: Exception, core: GuardCore) -> ProviderError:
    """The SDK's own error of a summary call as the summariser takes it, so the agent's request never
    fails of it: a refusal for size is the provider's ``ContextOverflow`` (the fold halves what it
    summarises and asks again), any other a ``provider_error`` (the fold cuts with a note)."""
    overflow = core.overflow(exc)
    if overflow is not None:
        return overflow
    return ProviderError(
        f"the summary call failed: {type(exc).__name__}: {exc}", status=getattr(exc, "status_code", None)
    )


class _Proxy:
    """Answers every attribute it does not define from the object it wraps."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"<guarded {self._inner!r}>"


class _Guarded(_Proxy):
    def __init__(self, inner: Any, core: GuardCore, summary_client: Any, is_async: bool) -> None:
        super().__init__(inner)
        self.guard_core = core
        """The :class:`~contextwindow.guard.GuardCore` behind this client (its store, its sessions)."""
        self._summary_client = summary_client
        self._is_async = is_async
        self._responses_core: GuardCore | None = None

    @property
    def last_exchange(self) -> Exchange | None:
        """The :class:`~contextwindow.guard.Exchange` of the latest call this thread or asyncio task
        made through this client (its session id, the body sent, what the guard did: ``events``):
        another thread's or task's call never shows here. A task starts with what its creator had."""
        held = (_LAST_EXCHANGES.get() or {}).get(id(self))
        return held[1] if held is not None and held[0]() is self else None

    @last_exchange.setter
    def last_exchange(self, exchange: Exchange | None) -> None:
        # Immutable per context: a task's copy is its own. Clients gone are dropped as it is rewritten.
        held = {
            k: v for k, v in (_LAST_EXCHANGES.get() or {}).items() if v[0]() is not None and k != id(self)
        }
        if exchange is not None:
            held[id(self)] = (weakref.ref(self), exchange)
        _LAST_EXCHANGES.set(held)

    @property
    def store(self) -> Store:
        """The ledger the guard keeps its sessions in."""
        return self.guard_core.store


# -- the stream tap: the SDK's own Stream, its events read as they pass by ----------------------------

_TAPPED: dict[type, type] = {}


def _tap(stream: Any, accumulator: Any, finish: Callable[[Reply], None]) -> Any:
    """Make ``stream`` (an SDK ``Stream``/``AsyncStream``) feed ``accumulator`` as it is read and
    ``finish`` with its reply at the end; it stays an instance of its SDK class."""
    base = type(stream)
    cls = _TAPPED.get(base)
    if cls is None:
        cls = _TAPPED[base] = type(base.__name__, (base,), dict(_TAP_METHODS))
    stream.__class__ = cls
    stream._cw_accumulator = accumulator
    stream._cw_finish = finish
    return stream


def _tap_item(self: Any, item: Any) -> Any:
    self._cw_accumulator.feed(item)
    if self._cw_accumulator.done:
        _tap_end(self)
    return item


def _tap_end(self: Any) -> None:
    finish = self.__dict__.pop("_cw_finish", None)
    if finish is not None and (self._cw_accumulator.done or self._cw_accumulator.usage):
        finish(self._cw_accumulator.reply())


def _iter(self: Any) -> Iterator[Any]:
    for item in super(type(self), self).__iter__():
        yield _tap_item(self, item)
    _tap_end(self)


def _next(self: Any) -> Any:
    try:
        return _tap_item(self, super(type(self), self).__next__())
    except StopIteration:
        _tap_end(self)
        raise


async def _aiter(self: Any) -> AsyncIterator[Any]:
    async for item in super(type(self), self).__aiter__():
        yield _tap_item(self, item)
    _tap_end(self)


async def _anext(self: Any) -> Any:
    try:
        return _tap_item(self, await super(type(self), self).__anext__())
    except StopAsyncIteration:
        _tap_end(self)
        raise


_TAP_METHODS: dict[str, Any] = {
    "__iter__": _iter,
    "__next__": _next,
    "__aiter__": _aiter,
    "__anext__": _anext,
}


# -- Anthropic ----------------------------------------------------------------------------------------


class GuardedAnthropic(_Guarded):
    """An ``anthropic.Anthropic`` or ``AsyncAnthropic`` whose ``messages`` are guarded."""

    @property
    def messages(self) -> Any:
        return _AnthropicMessages(self._inner.messages, self)

    @property
    def beta(self) -> Any:
        """The SDK's ``beta`` with its ``messages`` guarded: ``create``, ``stream`` and the tool runner."""
        return _AnthropicBeta(self._inner.beta, self)


class _AnthropicBeta(_Proxy):
    def __init__(self, inner: Any, owner: GuardedAnthropic) -> None:
        super().__init__(inner)
        self._owner = owner

    @property
    def messages(self) -> Any:
        return _AnthropicBetaMessages(self._inner.messages, self._owner)


class _RunnerClient(_Proxy):
    """The client a tool runner is made on: the guarded ``beta.messages`` for its calls, and no
    message threads (a conversation the server holds is one the guard cannot fit), so each turn
    sends the whole history, which the guard fits to the window."""

    _supports_message_threads = False

    def __init__(self, owner: GuardedAnthropic) -> None:
        super().__init__(owner._inner)
        self._owner = owner

    @property
    def beta(self) -> Any:
        return self._owner.beta


class _AnthropicMessages(_Proxy):
    def __init__(self, inner: Any, owner: GuardedAnthropic) -> None:
        super().__init__(inner)
        self._owner = owner

    def _perform(self, options: Mapping[str, Any]) -> Callable[[Send], Any]:
        summary = self._owner._summary_client.messages

        def perform(step: Send) -> Any:
            if step.purpose == "summary":
                try:
                    return anthropic_reply(summary.create(**step.body))
                except Exception as exc:
                    raise _summary_failed(exc, self._owner.guard_core) from exc
            if step.purpose == "count":
                return self._inner.count_tokens(**_count_body(step.body), **options)
            return self._inner.create(**_merged(step.body, options))

        return perform

    def _aperform(self, options: Mapping[str, Any]) -> Callable[[Send], Any]:
        summary = self._owner._summary_client.messages

        async def perform(step: Send) -> Any:
            if step.purpose == "summary":
                try:
                    return anthropic_reply(await summary.create(**step.body))
                except Exception as exc:
                    raise _summary_failed(exc, self._owner.guard_core) from exc
            if step.purpose == "count":
                return await self._inner.count_tokens(**_count_body(step.body), **options)
            return await self._inner.create(**_merged(step.body, options))

        return perform

    def _done(self, exchange: Exchange, streamed: bool) -> Any:
        self._owner.last_exchange = exchange
        if streamed:
            return _tap(exchange.result, AnthropicEvents(), exchange.finish)
        exchange.finish(anthropic_reply(exchange.result))
        return exchange.result

    def create(self, **kwargs: Any) -> Any:
        body, options = _split(kwargs)
        core = self._owner.guard_core
        if self._owner._is_async:
            return self._acreate(body, options)
        exchange = run_sync(core.request(body), self._perform(options))
        return self._done(exchange, bool(body.get("stream")))

    async def _acreate(self, body: dict[str, Any], options: dict[str, Any]) -> Any:
        exchange = await run_async(self._owner.guard_core.request(body), self._aperform(options))
        return self._done(exchange, bool(body.get("stream")))

    def stream(self, **kwargs: Any) -> Any:
        from anthropic import NOT_GIVEN
        from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager

        body, options = _split(kwargs)
        body["stream"] = True
        if self._owner._is_async:
            return AsyncMessageStreamManager(self._acreate(body, options), output_format=NOT_GIVEN)
        core = self._owner.guard_core

        def api_request() -> Any:
            return self._done(run_sync(core.request(body), self._perform(options)), True)

        return MessageStreamManager(api_request, output_format=NOT_GIVEN)

    def count_tokens(self, **kwargs: Any) -> Any:
        body, options = _split(kwargs)
        body.setdefault("max_tokens", 1)
        core = self._owner.guard_core
        if self._owner._is_async:
            return self._acount(body, options)
        exchange = run_sync(core.request(body, count=True), self._perform(options))
        self._owner.last_exchange = exchange
        return exchange.result

    async def _acount(self, body: dict[str, Any], options: dict[str, Any]) -> Any:
        exchange = await run_async(self._owner.guard_core.request(body, count=True), self._aperform(options))
        self._owner.last_exchange = exchange
        return exchange.result


class _AnthropicBetaMessages(_AnthropicMessages):
    def tool_runner(self, **kwargs: Any) -> Any:
        """``client.beta.messages.tool_runner(...)``: the SDK's own runner, its every call guarded
        (made on :class:`_RunnerClient`)."""
        host = _Proxy(self._inner)
        host._client = _RunnerClient(self._owner)  # type: ignore[attr-defined]  # what the SDK's method reads
        return type(self._inner).tool_runner(host, **kwargs)


def _count_body(body: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k in _COUNT_FIELDS}


# -- OpenAI -------------------------------------------------------------------------------------------


class GuardedOpenAI(_Guarded):
    """An ``openai.OpenAI`` or ``AsyncOpenAI`` whose ``chat.completions`` are guarded."""

    @property
    def chat(self) -> Any:
        return _OpenAIChat(self._inner.chat, self)

    @property
    def responses(self) -> Any:
        return _OpenAIResponses(self._inner.responses, self)


class _OpenAIChat(_Proxy):
    def __init__(self, inner: Any, owner: GuardedOpenAI) -> None:
        super().__init__(inner)
        self._owner = owner

    @property
    def completions(self) -> Any:
        return _OpenAICompletions(self._inner.completions, self._owner)


class _OpenAICompletions(_Proxy):
    def __init__(self, inner: Any, owner: GuardedOpenAI) -> None:
        super().__init__(inner)
        self._owner = owner

    def _done(self, exchange: Exchange, streamed: bool) -> Any:
        self._owner.last_exchange = exchange
        if streamed:
            return _tap(exchange.result, OpenAIChunks(), exchange.finish)
        exchange.finish(openai_reply(exchange.result))
        return exchange.result

    def create(self, **kwargs: Any) -> Any:
        body, options = _split(kwargs)
        summary = self._owner._summary_client.chat.completions
        if self._owner._is_async:
            return self._acreate(body, options, summary)

        def perform(step: Send) -> Any:
            if step.purpose == "summary":
                try:
                    return openai_reply(summary.create(**step.body))
                except Exception as exc:
                    raise _summary_failed(exc, self._owner.guard_core) from exc
            return self._inner.create(**step.body, **options)

        exchange = run_sync(self._owner.guard_core.request(body), perform)
        return self._done(exchange, bool(body.get("stream")))

    async def _acreate(self, body: dict[str, Any], options: dict[str, Any], summary: Any) -> Any:
        async def perform(step: Send) -> Any:
            if step.purpose == "summary":
                try:
                    return openai_reply(await summary.create(**step.body))
                except Exception as exc:
                    raise _summary_failed(exc, self._owner.guard_core) from exc
            return await self._inner.create(**step.body, **options)

        exchange = await run_async(self._owner.guard_core.request(body), perform)
        return self._done(exchange, bool(body.get("stream")))


class _OpenAIResponses(_Proxy):
    """``responses.create`` guarded: the same core over the Responses wire format (its own session
    state: a Responses conversation is kept apart from a Chat Completions one)."""

    def __init__(self, inner: Any, owner: GuardedOpenAI) -> None:
        super().__init__(inner)
        self._owner = owner

    def _core(self) -> GuardCore:
        core = self._owner.guard_core
        twin = getattr(self._owner, "_responses_core", None)
        if twin is None:
            twin = GuardCore(
                core.store,
                "openai-responses",
                overflow=core.overflow,
                options=core.options,
                reply_of=responses_reply,
            )
            self._owner._responses_core = twin
        return twin

    def _done(self, exchange: Exchange, streamed: bool) -> Any:
        self._owner.last_exchange = exchange
        if streamed:
            return _tap(exchange.result, ResponsesEvents(), exchange.finish)
        exchange.finish(responses_reply(exchange.result))
        return exchange.result

    def stream(self, **kwargs: Any) -> Any:
        """The SDK's own ``responses.stream`` helper, its request made by the guarded :meth:`create`."""
        from openai.lib._response_resources import async_stream, stream

        return (async_stream if self._owner._is_async else stream)(self, **kwargs)  # type: ignore[arg-type]

    def create(self, **kwargs: Any) -> Any:
        body, options = _split(kwargs)
        summary = self._owner._summary_client.responses
        if self._owner._is_async:
            return self._acreate(body, options, summary)

        def perform(step: Send) -> Any:
            if step.purpose == "summary":
                try:
                    return responses_reply(summary.create(**step.body))
                except Exception as exc:
                    raise _summary_failed(exc, self._owner.guard_core) from exc
            return self._inner.create(**step.body, **options)

        exchange = run_sync(self._core().request(body), perform)
        return self._done(exchange, bool(body.get("stream")))

    async def _acreate(self, body: dict[str, Any], options: dict[str, Any], summary: Any) -> Any:
        async def perform(step: Send) -> Any:
            if step.purpose == "summary":
                try:
                    return responses_reply(await summary.create(**step.body))
                except Exception as exc:
                    raise _summary_failed(exc, self._owner.guard_core) from exc
            return await self._inner.create(**step.body, **options)

        exchange = await run_async(self._core().request(body), perform)
        return self._done(exchange, bool(body.get("stream")))
