"""What every framework adapter shares: a guard core that speaks Chat Completions, and the way back.

A framework keeps its own message objects. Each adapter writes the framework's request as an OpenAI
Chat Completions body (the lingua franca every framework can already produce), hands it to a
:class:`~contextwindow.guard.GuardCore`, and makes the call the core asks for with the framework's
own machinery (its model, its handler, its router). So the guard's matching, pricing, folding,
media budget and recovery are the same code for every framework and for ``guard(client)``.

The compiled history comes back as Chat Completions messages. :class:`Originals` turns them back
into the framework's objects: a compiled message that is exactly one the agent sent (most of them)
is that very object again, with its ids and metadata; only what the guard changed (a summary
checkpoint, a placeholder, a truncated message) is built anew.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..compile.reread import READ_ARCHIVED, READ_ARCHIVED_TOOL, read_archived
from ..content import Document, Image, Text
from ..errors import ContextOverflow, ContextWindowError, InvalidInput
from ..formats import openai as openai_format
from ..guard import Exchange, GuardCore, GuardOptions, Reply, Send, resolve_store, run_async, run_sync
from ..guard.replies import openai_reply
from ..providers.overflow import classify
from ..store import Store
from ..usage.tracker import Usage

__all__ = [
    "REREAD_DESCRIPTION",
    "REREAD_NAME",
    "REREAD_SCHEMA",
    "AnthropicEdits",
    "ChatBridge",
    "Originals",
    "Reread",
    "Stepper",
    "anthropic_edits",
    "fitted_max_tokens",
    "leading_system",
    "names_reread",
    "read_overflow",
    "reply_from_wire",
    "usage_from_totals",
    "without_reread",
]

T = TypeVar("T")

REREAD_NAME = READ_ARCHIVED
"""The name of the re-read tool an adapter registers with its framework (the placeholders name it)."""
REREAD_DESCRIPTION = READ_ARCHIVED_TOOL.description
REREAD_SCHEMA: Mapping[str, Any] = READ_ARCHIVED_TOOL.input_schema

_MAX_CHAIN = 8  # how deep to follow __cause__/__context__ for the provider's error


def read_overflow(exc: BaseException) -> ContextOverflow | None:
    """The rejection for size that ``exc`` means, or ``None``.

    Frameworks wrap the provider's error in their own (pydantic-ai's ``ModelHTTPError``, LangChain's
    ``ContextOverflowError``, litellm's mapped exceptions), so the exception and its causes are each
    read as the SDK errors are: the status and body when it has them, else its message, through the
    project's classifier (:func:`contextwindow.providers.overflow.classify`).
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    for _ in range(_MAX_CHAIN):
        if current is None or id(current) in seen:
            return None
        seen.add(id(current))
        if isinstance(current, ContextOverflow):
            return current
        found = _classify_one(current)
        if found is not None:
            return found
        current = current.__cause__ or current.__context__
    return None


def _classify_one(exc: BaseException) -> ContextOverflow | None:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool):
        status = None
    body = getattr(exc, "body", None)
    message = str(getattr(exc, "message", None) or exc)
    found = classify(status, body) if body is not None else None
    if found is None:
        found = classify(status, message)
    return found


def reply_from_wire(
    message: Mapping[str, Any], *, usage: Usage | None = None, stop_reason: str | None = None
) -> Reply:
    """A Chat Completions assistant message (and the call's usage) as the guard's :class:`Reply`."""
    reply = openai_reply({"choices": [{"message": dict(message), "finish_reason": stop_reason}]})
    return Reply(message=reply.message, usage=usage, stop_reason=stop_reason)


def usage_from_totals(
    *, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0, reasoning: int = 0
) -> Usage | None:
    """A call's usage from a framework's totals, where ``input_tokens`` is everything the provider
    counted as input (cache reads and writes included), as LangChain and pydantic-ai report it;
    ``None`` when it reported no input (an unreported call, not an empty one)."""
    if input_tokens <= 0:
        return None
    read = min(max(cache_read, 0), input_tokens)
    write = min(max(cache_write, 0), input_tokens - read)
    output = max(output_tokens, 0)
    return Usage(
        fresh_input=input_tokens - read - write,
        cache_read=read,
        cache_write=write,
        output=output,
        reasoning=min(max(reasoning, 0), output),
    )


def _key(wire: Mapping[str, Any]) -> str | None:
    """One Chat Completions message as the guard renders it, as text; ``None`` if it is not one."""
    try:
        parsed = openai_format.parse_wire_messages([dict(wire)])
        rendered = openai_format.render_messages(parsed.request.messages, parsed.loader())
    except (ContextWindowError, ValueError, TypeError, KeyError):
        return None
    if len(rendered) != 1:
        return None
    return json.dumps(rendered[0], sort_keys=True, ensure_ascii=False)


class Originals(Generic[T]):
    """The framework's own messages by their Chat Completions form, to hand back what was sent."""

    def __init__(self, pairs: Iterable[tuple[Mapping[str, Any], T]]) -> None:
        self._by_key: dict[str, deque[T]] = {}
        for wire, original in pairs:
            key = _key(wire)
            if key is not None:
                self._by_key.setdefault(key, deque()).append(original)

    def restore(self, wire: Sequence[Mapping[str, Any]], build: Callable[[Mapping[str, Any]], T]) -> list[T]:
        """``wire`` as framework messages: the agent's own object where the message is unchanged
        (in order, for repeated equal messages), ``build(message)`` where the guard wrote it."""
        out: list[T] = []
        for message in wire:
            key = json.dumps(dict(message), sort_keys=True, ensure_ascii=False)
            kept = self._by_key.get(key)
            out.append(kept.popleft() if kept else build(message))
        return out


def leading_system(wire: Sequence[Mapping[str, Any]]) -> int:
    """How many of ``wire``'s first messages are the system prompt (kept verbatim by the guard)."""
    n = 0
    for message in wire:
        if message.get("role") not in ("system", "developer"):
            break
        n += 1
    return n


@dataclass(frozen=True, slots=True)
class AnthropicEdits:
    """The provider's own compaction a guarded body asks the framework's Anthropic call to carry:
    its ``context_management`` and the betas it needs (:func:`~contextwindow.compaction.guarded_body`)."""

    context_management: Mapping[str, Any]
    betas: tuple[str, ...]


def anthropic_edits(sent: Mapping[str, Any]) -> AnthropicEdits | None:
    """What of Anthropic's context editing the body ``sent`` carries (``None``: none, the call folds
    or goes out as it is)."""
    management = (sent.get("extra_body") or {}).get("context_management")
    if not isinstance(management, Mapping):
        return None
    header = next(
        (str(v) for k, v in (sent.get("extra_headers") or {}).items() if str(k).lower() == "anthropic-beta"),
        "",
    )
    return AnthropicEdits(
        context_management=management, betas=tuple(b.strip() for b in header.split(",") if b.strip())
    )


def fitted_max_tokens(asked: int | None, sent: Mapping[str, Any]) -> int | None:
    """The output bound the guard sent in ``sent`` when it lowered the agent's ``asked`` to fit the
    window (the guard's ``MaxTokensLowered``), for the adapter to give the framework's own call;
    ``None`` when the agent's bound goes out as it asked."""
    for key in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
        value = sent.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and (asked is None or value < asked):
            return value
    return None


_NAMED = f"call {READ_ARCHIVED} with"


def names_reread(sent: Mapping[str, Any]) -> bool:
    """Whether the compiled body ``sent`` holds a placeholder telling the model to call the re-read
    tool: the adapter offers its framework's ``read_archived`` tool on that call only, as the guard
    offers its own (a model is never told of a tool it has nothing to read with)."""
    return _NAMED in json.dumps(sent.get("messages") or [], ensure_ascii=False)


def without_reread(tools: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Chat Completions ``tools`` without the adapter's own re-read tool (what the guard prices and
    compiles is the agent's tools; the re-read tool is the adapter's to offer)."""
    return [t for t in tools if (t.get("function") or {}).get("name", t.get("name")) != READ_ARCHIVED]


@dataclass(frozen=True, kw_only=True, slots=True)
class Reread:
    """What the re-read tool answers, for a framework to render as its tool's return: the text, and
    the attachments as bytes (``(media_type, data)``)."""

    text: str
    media: tuple[tuple[str, bytes], ...] = ()
    error: bool = False
    """Whether the id named nothing in the session (the text says so)."""


Send_ = Callable[[dict[str, Any]], Any]
Summarize = Callable[[dict[str, Any]], Reply]


class ChatBridge:
    """A :class:`~contextwindow.guard.GuardCore` over Chat Completions bodies, for one adapter,
    configured by the adapter's :class:`~contextwindow.guard.GuardOptions`.

    ``send(body)`` makes the agent's call with the framework (and returns whatever the framework
    returns); ``summarize(body)`` makes a summariser's call and returns its :class:`Reply`. After
    :meth:`run` the caller records the framework's answer with ``exchange.finish(reply)``.
    ``host_rereads``: the adapter offers its framework's re-read tool, so placeholders tell the model
    to call it (else they name no tool, unless the core answers re-reads itself).
    """

    def __init__(
        self,
        options: GuardOptions,
        *,
        reply_of: Callable[[Any], Reply] | None = None,
        host_rereads: bool = False,
    ) -> None:
        self.core = GuardCore(
            resolve_store(options.store), "openai", overflow=read_overflow, options=options, reply_of=reply_of
        )
        self.core.host_rereads = host_rereads
        self.last_exchange: Exchange | None = None
        """The latest call's :class:`~contextwindow.guard.Exchange` (session id, body sent, events)."""

    def reread(self, ident: str) -> Reread:
        """The re-read tool's answer for ``ident`` (the id a placeholder names), read from the ledger
        session of the latest call: the original tool result or attachment, never an exception."""
        exchange = self.last_exchange
        if exchange is None or not exchange.session_id:
            return Reread(text=f"nothing archived yet: no {ident!r} to read again", error=True)
        session = self.core.store.session(exchange.session_id)
        try:
            content = read_archived(session, ident)
        except InvalidInput as exc:
            return Reread(text=str(exc), error=True)
        if isinstance(content, str):
            return Reread(text=content)
        texts: list[str] = []
        media: list[tuple[str, bytes]] = []
        for block in content:
            if isinstance(block, Text):
                texts.append(block.text)
            elif isinstance(block, Image | Document) and block.ref is not None:
                media.append((block.ref.media_type, session.read_attachment(block.ref)))
                texts.append(f"[{ident}: {block.ref.media_type}]")
        return Reread(text="\n".join(texts), media=tuple(media))

    @property
    def store(self) -> Store:
        """The ledger the adapter keeps its sessions in."""
        return self.core.store

    def run(
        self, body: Mapping[str, Any], send: Send_, summarize: Summarize, *, provider_wire: str | None = None
    ) -> Exchange:
        """One call; ``provider_wire``: the wire the framework's model speaks (``"anthropic"``), for
        the provider's own compaction (the body then carries it: :func:`anthropic_edits`)."""

        def perform(step: Send) -> Any:
            if step.purpose == "summary":
                return summarize(dict(step.body))
            return send(dict(step.body))

        self.last_exchange = run_sync(self.core.request(body, provider_wire=provider_wire), perform)
        return self.last_exchange

    async def arun(
        self,
        body: Mapping[str, Any],
        send: Callable[[dict[str, Any]], Awaitable[Any]],
        summarize: Callable[[dict[str, Any]], Awaitable[Reply]],
        *,
        provider_wire: str | None = None,
    ) -> Exchange:
        async def perform(step: Send) -> Any:
            if step.purpose == "summary":
                return await summarize(dict(step.body))
            return await send(dict(step.body))

        self.last_exchange = await run_async(self.core.request(body, provider_wire=provider_wire), perform)
        return self.last_exchange


class Stepper:
    """The guard core for one call, stepped across a framework's separate hooks.

    Some frameworks do not hand the adapter a function that makes the call: they call the model
    themselves between two hooks (one before, one after, one on error) and let a hook ask for another
    attempt. :meth:`start` runs the core to the call it asks for, :meth:`accepted` hands it the
    framework's answer, :meth:`rejected` hands it the call's failure and returns the retry (or raises
    what the core raises: the failure itself, or ``ContextOverflow``). Summary calls the core needs on
    the way are made at once with ``summarize``.
    """

    def __init__(
        self,
        core: GuardCore,
        body: Mapping[str, Any],
        summarize: Callable[[dict[str, Any]], Awaitable[Reply]],
        *,
        provider_wire: str | None = None,
    ) -> None:
        self._coro = core.request(body, provider_wire=provider_wire)
        self._summarize = summarize
        self.step: Send | None = None
        """The call the core asked for last: the body to send now."""
        self.exchange: Exchange | None = None

    async def _advance(self, answer: Any = None, error: BaseException | None = None) -> Send | Exchange:
        while True:
            try:
                step = self._coro.throw(error) if error is not None else self._coro.send(answer)
            except StopIteration as done:
                self.step = None
                self.exchange = done.value
                return done.value  # type: ignore[no-any-return]
            if not isinstance(step, Send):  # pragma: no cover - the core awaits nothing else
                self._coro.close()
                raise RuntimeError(f"the guard core awaited {step!r}, not a call")
            if step.purpose != "summary":
                self.step = step
                return step
            try:
                answer, error = await self._summarize(dict(step.body)), None
            except Exception as exc:
                answer, error = None, exc

    async def start(self) -> Send:
        step = await self._advance()
        assert isinstance(step, Send), "the guard core asks for the call before it returns"
        return step

    async def accepted(self, result: Any) -> Exchange:
        done = await self._advance(answer=result)
        assert isinstance(done, Exchange), "the guard core returns once its call was answered"
        return done

    async def rejected(self, error: BaseException) -> Send:
        retry = await self._advance(error=error)
        assert isinstance(retry, Send), "after a failure the guard core raises or asks again"
        return retry

    def close(self) -> None:
        self._coro.close()
