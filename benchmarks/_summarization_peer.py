"""LangChain's ``SummarizationMiddleware`` on the agent's own history, with the local provider as its model.

What a LangChain 1.x user would do with ``create_agent`` to keep a long agent inside its window: the
middleware (https://docs.langchain.com/oss/python/langchain/middleware/built-in#summarization), before
each model call, counts the agent's messages with ``count_tokens_approximately`` and, past its
``trigger``, has its model summarise everything but the newest messages (``keep``), then replaces the
history with one human message holding the summary and the messages kept. Its ``before_model`` hook is
called here exactly as the agent's graph calls it, on the same state (the LangChain messages
:func:`~benchmarks._trim_peer.to_lc` builds), and the state it returns is the history from then on.

Its model is a ``ChatOpenAI`` pointed at the local provider (:class:`~contextwindow.testing.LocalServer`,
Chat Completions, the same provider the calls go to, so its cache and its bill are the same one), as
``benchmarks/integrations.py``'s LangChain peer has it. The summary calls' usage is read from each
response's ``usage_metadata`` (input, output, cache reads).

The settings: ``trigger=("tokens", TRIGGER × room)`` and ``keep=("tokens", KEEP × room)``, where the
room is the window less the call's ``max_tokens`` and less the system prompt and tools (which the
middleware does not count: they are not in the agent's messages). A user who sizes the middleware to
the window does this; with LangChain's example settings (4,000 tokens, keep 20 messages) the real
sessions' tool results put 20 messages over a 16k window.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.outputs import LLMResult

from contextwindow.content import AttachmentRef, Message, Request
from contextwindow.formats import WireFormat
from contextwindow.replay.scenario import Scenario

from ._trim_peer import (
    PeerCall,
    PeerSend,
    from_lc,
    history_messages,
    peer_provider,
    send_peer_call,
    to_lc,
    whole_count,
)

__all__ = ["KEEP", "TRIGGER", "SummaryCall", "SummaryPeerRun", "run_summarization_peer"]

TRIGGER = 0.75
"""The middleware summarises once the agent's messages pass this share of the room (module docstring)."""
KEEP = 0.4
"""The share of the room the newest messages it keeps may fill."""


@dataclass(frozen=True, slots=True)
class SummaryCall:
    """One summary call's usage as the provider reported it."""

    input_tokens: int
    output_tokens: int
    cache_read: int


@dataclass
class SummaryPeerRun:
    calls: list[PeerCall] = field(default_factory=list)
    summaries: list[SummaryCall] = field(default_factory=list)
    summarized_before: list[bool] = field(default_factory=list)
    """Per call: whether the middleware summarised just before it."""


class _Usage(BaseCallbackHandler):
    """Collects each summary call's ``usage_metadata``."""

    def __init__(self, into: list[SummaryCall]) -> None:
        self.into = into

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
                details = usage.get("input_token_details") or {}
                self.into.append(
                    SummaryCall(
                        input_tokens=int(usage.get("input_tokens", 0)),
                        output_tokens=int(usage.get("output_tokens", 0)),
                        cache_read=int(details.get("cache_read", 0) or 0),
                    )
                )


def _merged(messages: Sequence[Message]) -> list[Message]:
    """Consecutive messages of one role as one (the summary message beside a kept user message)."""
    out: list[Message] = []
    for message in messages:
        if out and out[-1].role == message.role:
            out[-1] = Message(role=message.role, content=out[-1].content + message.content)
        else:
            out.append(message)
    return out


def run_summarization_peer(
    scenario: Scenario,
    *,
    model: str,
    window: int,
    reserve: int,
    served: int | None,
    load: Callable[[AttachmentRef], bytes],
    render: Callable[[Request], dict[str, Any]],
    count_scale: float = 1.0,
    wire: WireFormat = "anthropic",
) -> SummaryPeerRun:
    """Replay ``scenario`` with ``SummarizationMiddleware`` in front of the local provider (module
    docstring), the calls over ``wire`` as :func:`~benchmarks._trim_peer.run_trim_peer` sends them."""
    from langchain.agents.middleware import SummarizationMiddleware
    from langchain_openai import ChatOpenAI

    from contextwindow.testing import LocalServer

    provider = peer_provider(scenario, model=model, window=window, served=served, count_scale=count_scale)
    send = PeerSend(
        provider=provider, wire=wire, reserve=reserve, load=load, render=render, count_scale=count_scale
    )
    run = SummaryPeerRun()
    head = whole_count(send, scenario, model, ())
    room = max(1, window - reserve - head)
    with LocalServer(provider) as server:
        chat = ChatOpenAI(
            model=model,
            base_url=server.url + "/v1",
            api_key="local",  # type: ignore[arg-type]
            max_retries=0,
            max_tokens=reserve,  # type: ignore[call-arg]
            callbacks=[_Usage(run.summaries)],
        )
        middleware = SummarizationMiddleware(
            chat, trigger=("tokens", int(TRIGGER * room)), keep=("tokens", int(KEEP * room))
        )
        state: list[BaseMessage] = []
        history: list[Message] = []
        for message, is_reply in history_messages(scenario):
            if is_reply:
                update = middleware.before_model({"messages": state}, None)  # type: ignore[arg-type]
                if update is not None:
                    state = [m for m in update["messages"] if not isinstance(m, RemoveMessage)]
                run.summarized_before.append(update is not None)
                full = whole_count(send, scenario, model, history)
                kept = _merged(from_lc(state, history))
                run.calls.append(send_peer_call(send, scenario, model, kept, full=full, history=len(history)))
            history.append(message)
            state.extend(to_lc(message, len(history) - 1))
    return run
