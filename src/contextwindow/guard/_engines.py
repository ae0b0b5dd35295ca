"""The engine that runs a conversation for one model, its provider calls made through the driver.

:func:`engine_for` builds it once per conversation and model: an
:class:`~contextwindow.engine.loop.Engine` over the conversation's ledger session, fitted to the
window the options give (never above what a rejection taught this process), summarising through
the same driver unless the options say no summaries. :class:`Relay` is the provider whose calls go
out as ``Send`` steps (:mod:`._steps`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

from ..content import Request
from ..engine.folding.summarizer import Summarizer
from ..engine.loop import Engine
from ..engine.settings import EngineSettings
from ..errors import UnknownModel
from ..models import ModelProfile, get_profile
from ..providers.base import ProviderEvent, Stop, UsageSample, normalise_stop_reason
from ..store.slots import LedgerSlot, StateSlot
from ..usage.calibration import CALIBRATION_PRICING_EPOCH
from ._conversation import Conversation
from ._options import GuardOptions
from ._steps import Ask, Reply, Send
from ._wire import WireAdapter

__all__ = ["Relay", "engine_for"]


class Relay:
    """A :class:`~contextwindow.providers.Provider` whose calls go out through the driver as
    ``Send(purpose="summary")`` steps: the summariser talks to the guard's own client."""

    def __init__(self, wire: WireAdapter, model: str) -> None:
        self.name: str = wire.name
        self.wire = wire
        self.model = model

    async def stream(self, request: Request, *, max_tokens: int, load: Any) -> AsyncIterator[ProviderEvent]:
        body = self.wire.summary(
            Request(
                model=self.model,
                system=request.system,
                messages=request.messages,
                max_tokens=max_tokens,
            ),
            model=self.model,
        )
        reply: Reply = await Ask(Send(body=body, purpose="summary"))
        if reply.usage is not None:
            yield UsageSample(usage=reply.usage)
        yield Stop(
            reason=normalise_stop_reason(reply.stop_reason),
            raw_reason=reply.stop_reason,
            message=reply.message,
        )


def engine_for(
    conversation: Conversation,
    model: str,
    *,
    wire: WireAdapter,
    options: GuardOptions,
    settings: EngineSettings,
    profile: ModelProfile | None = None,
) -> Engine:
    """The engine of ``conversation`` for ``model``, made on first use and kept on the conversation;
    ``profile`` is the model's when no registered profile names it (:func:`~contextwindow.models.fallback_profile`)."""
    engine = conversation.engines.get(model)
    if engine is not None:
        return engine
    profile = profile or get_profile(model)
    window = options.context_window or profile.context_window
    window = conversation.window_for(model, window)
    if window != profile.context_window:
        profile = profile.with_(
            context_window=window, max_output_tokens=min(profile.max_output_tokens, window)
        )
    summarizer = None
    if options.summarize:
        summary_model = options.summary_model or model
        summary_profile = profile if summary_model == model else _profile_or(summary_model, profile)
        summarizer = Summarizer(
            Relay(wire, summary_model),
            summary_profile.with_(
                context_window=min(summary_profile.context_window, profile.context_window),
                max_output_tokens=min(summary_profile.max_output_tokens, profile.context_window),
            ),
        )
    engine = Engine(
        conversation.session,
        Relay(wire, model),
        profile,
        compiler=conversation.compiler,
        summarizer=summarizer,
        settings=settings,
        on_event=options.on_event,
        calibration=_calibration(conversation, profile.name, settings.connection),
    )
    conversation.engines[model] = engine
    return engine


def _calibration(conversation: Conversation, model: str, connection: str) -> StateSlot | None:
    """Where the engine keeps its calibration: its session's record, and the store's for a session
    that has none yet (a record of other pricing rules is not taken from the store)."""
    if conversation.learned is None:
        return None
    own = LedgerSlot(conversation.session, "calibration", match={"model": model, "connection": connection})
    return conversation.learned.calibration(own, model=model, connection=connection, usable=_current_rules)


def _current_rules(record: Mapping[str, Any]) -> bool:
    return record.get("pricing") == CALIBRATION_PRICING_EPOCH


def _profile_or(model: str, fallback: ModelProfile) -> ModelProfile:
    """``model``'s profile, or ``fallback`` (the guarded model's) when no registered profile names it."""
    try:
        return get_profile(model)
    except UnknownModel:
        return fallback.with_(name=model)
