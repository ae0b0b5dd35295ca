"""litellm: ``completion`` and ``acompletion`` guarded, over litellm's own provider routing.

::

    from contextwindow.integrations.litellm import GuardedLiteLLM

    llm = GuardedLiteLLM()
    response = llm.completion(model="anthropic/claude-sonnet-4-6", messages=history, tools=TOOLS)

The call takes litellm's arguments (its body is a Chat Completions body, whatever the provider); the
guard core matches the conversation in the ledger, compiles the history to the window and the call
goes out through ``litellm.completion`` (or ``acompletion``) with the compiled messages and every
other argument as given, so routing, keys, ``api_base``, retries and fallbacks are litellm's. A
rejection for size is recognised through contextwindow's own classifier (from the provider's message
litellm carries, for the providers that classifier knows), the guard compacts and retries once, and a
second one is :class:`~contextwindow.errors.ContextOverflow`; every other error is litellm's own.
Summaries go through the same model and routing. ``compaction="provider"`` (or ``"auto"``) on a
model litellm routes to Anthropic sends Anthropic's context editing as litellm's
``context_management`` argument (litellm adds its beta header); on any other route ``"provider"``
folds locally, saying so once. ``stream=True`` returns an iterator (an async one
for ``acompletion``) over litellm's chunks; the reply is recorded when it ends.

Re-reads are the guard's own, as under ``guard(client)``: when a placeholder in the compiled request
names ``read_archived``, the call offers it beside the agent's tools; a reply that only re-reads is
answered from the ledger and the model asked again, and the agent's copy of a reply that mixes them
carries only its own calls (not on streamed calls, where no placeholder names the tool). A ``max_tokens`` that cannot fit the window is
sent lowered (the guard's ``max_tokens_lowered`` event).

The model profile is litellm's model name without its provider prefix (``anthropic/claude-…`` is
``claude-…``); ``model=`` on :class:`GuardedLiteLLM` names another. litellm reads its model-cost map
from the package (``LITELLM_LOCAL_MODEL_COST_MAP=True`` is set before it is imported, unless the
environment says otherwise), so nothing is fetched at run time. When litellm was imported first, it
fetched its map then (offline, it falls back to the package's and keeps retrying in a background
thread); importing this module then honours the setting all the same: the packaged map replaces a
fetched one and the retries stop without another fetch.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import warnings
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import litellm

from ..compaction import CompactionMode
from ..compile import Policy
from ..engine.observe import EventHook
from ..engine.settings import EngineSettings
from ..guard import Exchange, GuardOptions, Reply
from ..guard.replies import OpenAIChunks, jsonable, openai_reply
from ..store import Store
from ._bridge import REREAD_NAME, ChatBridge, anthropic_edits

__all__ = ["GuardedLiteLLM"]


_FETCH = "_attempt_fetch_sync"
"""One attempt at litellm's remote cost-map fetch: a module global its background retries read at
each attempt."""


def _local_cost_map() -> bool:
    return os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").lower() == "true"


def _keep_the_packaged_cost_map() -> None:
    """Honour ``LITELLM_LOCAL_MODEL_COST_MAP`` in a litellm that read its map before it was set
    (imported before this module): its background retries of the remote fetch end without fetching,
    and a map it fetched is replaced by the package's. Through litellm's cost-map loader (1.110 and
    later); with another litellm, a warning says what to do."""
    if not _local_cost_map():
        return
    try:
        from litellm.litellm_core_utils import get_model_cost_map as loader

        info = loader.get_model_cost_map_source_info()
        if info["is_env_forced"]:
            return  # litellm read the setting itself
        fetch = getattr(loader, _FETCH)
        packaged = loader.GetModelCostMap.load_local_model_cost_map_with_revision
        finalize = loader._finalize_loaded_model_cost_map
        adopt = loader.adopt_model_cost_map
        unavailable = loader.ModelCostMapReloadUnavailable
    except (ImportError, AttributeError, KeyError, TypeError):
        warnings.warn(
            "litellm was imported before contextwindow.integrations.litellm and may fetch its model cost "
            "map at run time: set LITELLM_LOCAL_MODEL_COST_MAP=True in the environment, or import "
            "contextwindow.integrations.litellm first",
            RuntimeWarning,
            stacklevel=3,
        )
        return

    def no_fetch(**kwargs: Any) -> Any:
        if _local_cost_map():  # not worth retrying: the retries end
            return unavailable(reason="LITELLM_LOCAL_MODEL_COST_MAP is set")
        return fetch(**kwargs)

    setattr(loader, _FETCH, no_fetch)
    if info["source"] == "remote":
        adopt(finalize(packaged()).model_cost_map)


_keep_the_packaged_cost_map()

_ROUTING = frozenset(
    {"api_base", "base_url", "api_key", "api_version", "custom_llm_provider", "timeout", "extra_headers"}
)
"""litellm arguments that say where and how to call, kept for the summariser's calls too."""
_BODY = frozenset({"model", "messages", "tools", "max_tokens", "max_completion_tokens", "stream"})
"""What the guard reads of a call: the rest goes to litellm untouched."""


class GuardedLiteLLM:
    """``completion``/``acompletion`` through the guard (see the module docstring)."""

    def __init__(
        self,
        *,
        model: str | None = None,
        store: Store | str | Path | None = None,
        session: str | None = None,
        context_window: int | None = None,
        summarize: bool = True,
        summary_model: str | None = None,
        policy: Policy | None = None,
        settings: EngineSettings | None = None,
        on_event: EventHook | None = None,
        reread: bool = True,
        compaction: CompactionMode = "local",
    ) -> None:
        self.model = model
        self.summary_model = summary_model
        self.bridge = ChatBridge(
            GuardOptions(
                store=store,
                session=session,
                summarizer=None if summarize else False,
                summary_model=_profile_name(summary_model) if summary_model else None,
                context_window=context_window,
                policy=policy,
                settings=settings,
                on_event=on_event,
                reread=reread,
                compaction=compaction,
            ),
            reply_of=openai_reply,
        )

    @property
    def store(self) -> Store:
        return self.bridge.store

    @property
    def last_exchange(self) -> Exchange | None:
        return self.bridge.last_exchange

    def _body(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        body = {k: jsonable(v) for k, v in kwargs.items() if k in _BODY and v is not None}
        body["model"] = self.model or _profile_name(str(kwargs.get("model", "")))
        return body

    def _call(self, kwargs: Mapping[str, Any], sent: Mapping[str, Any]) -> dict[str, Any]:
        call = dict(kwargs)
        call["messages"] = sent["messages"]
        for key in ("max_tokens", "max_completion_tokens"):
            if key in sent:
                call[key] = sent[key]
        edits = anthropic_edits(sent)
        if edits is not None:
            # litellm's Anthropic route takes context_management and adds the beta header it needs.
            call["context_management"] = dict(edits.context_management)
        own = [t for t in sent.get("tools") or () if (t.get("function") or {}).get("name") == REREAD_NAME]
        if own:
            # The guard offers its re-read tool on this call: beside the agent's tools as given.
            call["tools"] = [*(kwargs.get("tools") or ()), *own]
        return call

    def _summary_call(self, kwargs: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
        call = {k: v for k, v in kwargs.items() if k in _ROUTING}
        call["model"] = self.summary_model or kwargs["model"]
        call["messages"] = body["messages"]
        if isinstance(body.get("max_tokens"), int):
            call["max_tokens"] = body["max_tokens"]
        return call

    def completion(self, **kwargs: Any) -> Any:
        """``litellm.completion(**kwargs)``, fitted to the window."""

        def send(sent: dict[str, Any]) -> Any:
            return litellm.completion(**self._call(kwargs, sent))

        def summarize(body: dict[str, Any]) -> Reply:
            return openai_reply(litellm.completion(**self._summary_call(kwargs, body)))

        exchange = self.bridge.run(self._body(kwargs), send, summarize, provider_wire=_wire(kwargs))
        if kwargs.get("stream"):
            return _tap(exchange)
        exchange.finish(openai_reply(exchange.result))
        return exchange.result

    async def acompletion(self, **kwargs: Any) -> Any:
        """``await litellm.acompletion(**kwargs)``, fitted to the window."""

        async def send(sent: dict[str, Any]) -> Any:
            return await litellm.acompletion(**self._call(kwargs, sent))

        async def summarize(body: dict[str, Any]) -> Reply:
            return openai_reply(await litellm.acompletion(**self._summary_call(kwargs, body)))

        exchange = await self.bridge.arun(self._body(kwargs), send, summarize, provider_wire=_wire(kwargs))
        if kwargs.get("stream"):
            return _atap(exchange)
        exchange.finish(openai_reply(exchange.result))
        return exchange.result


def _wire(kwargs: Mapping[str, Any]) -> str | None:
    """``"anthropic"`` when litellm routes the call to Anthropic's Messages API (where the provider's
    own compaction is Anthropic's context editing), else ``None`` (the call's Chat Completions body)."""
    try:
        _name, provider, _key, _base = litellm.get_llm_provider(
            str(kwargs.get("model", "")), custom_llm_provider=kwargs.get("custom_llm_provider")
        )
    except Exception:  # litellm does not know the provider
        return None
    return "anthropic" if provider == "anthropic" else None


def _profile_name(model: str) -> str:
    """litellm's ``provider/model`` as the model's own name."""
    try:
        name, _provider, _key, _base = litellm.get_llm_provider(model)
    except Exception:  # litellm does not know the provider: the name as written
        return model.split("/", 1)[-1]
    return str(name)


def _tap(exchange: Exchange) -> Iterator[Any]:
    chunks = OpenAIChunks()
    for chunk in exchange.result:
        chunks.feed(chunk)
        yield chunk
    exchange.finish(chunks.reply())


async def _atap(exchange: Exchange) -> AsyncIterator[Any]:
    chunks = OpenAIChunks()
    async for chunk in exchange.result:
        chunks.feed(chunk)
        yield chunk
    exchange.finish(chunks.reply())
