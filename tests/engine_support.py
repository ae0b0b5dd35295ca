"""Test support for the engine: a scripted provider speaking the Provider protocol and a plain compiler.

The scripted provider (a :class:`~contextwindow.testing.FunctionProvider`) replays assistant messages
with the usage samples a test gives (cumulative ones, as a provider layer reporting a running total
does), and raises the rejections a step carries.
The compiler here sends every visible message after the latest checkpoint, which is what the engine
tests need to isolate the engine's own decisions from compile's fitting.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from contextwindow.compile import Decisions, Policy
from contextwindow.content import Message, Request, Text, ToolResult, ToolSpec, ToolUse
from contextwindow.engine.compiler import CompileContext, EngineCompiler
from contextwindow.engine.folding.summarizer import Summarizer
from contextwindow.engine.loop import Engine, EngineSettings, ToolRunner
from contextwindow.errors import ProviderError
from contextwindow.models import ModelProfile
from contextwindow.pricing import Estimator
from contextwindow.replay.simulate import RecordingModel
from contextwindow.store import Session
from contextwindow.testing import SUMMARY_MARKER, FunctionProvider, FunctionReply, LocalProvider
from contextwindow.usage.tracker import Usage


@dataclass
class Step:
    """One scripted call: the reply, and the usage sample to report (``None``: no sample at all)."""

    reply: Message
    sample: Usage | None = None
    reject: ProviderError | None = None
    stop_reason: str | None = None
    """The provider's own stop reason (``None``: ``tool_use`` when the reply calls tools, else ``end_turn``)."""


class ScriptedProvider(FunctionProvider):
    """A function provider answering each call with the next step (a step's ``reject`` is raised)."""

    def __init__(self, steps: list[Step], *, name: str = "scripted") -> None:
        super().__init__(self._next, name=name)
        self.steps = steps

    def _next(self, request: Request, max_tokens: int) -> FunctionReply:
        step = self.steps.pop(0)
        if step.reject is not None:
            raise step.reject
        return FunctionReply(message=step.reply, usage=step.sample, stop_reason=step.stop_reason)


@dataclass(frozen=True)
class PlainCompiled:
    system: tuple[Text, ...]
    tools: tuple[ToolSpec, ...]
    messages: tuple[Message, ...]
    estimated_tokens: int
    local_estimate: int
    output_reserve: int
    decisions: Decisions = field(default_factory=Decisions)


@dataclass
class PlainCompiler:
    """Every message after the latest checkpoint, the checkpoint's summary first; no fitting."""

    output_reserve: int = 32_000
    calls: int = 0
    multipliers: list[float] = field(default_factory=list)

    def __call__(self, context: CompileContext) -> PlainCompiled:
        session, profile, multiplier = context.session, context.profile, context.multiplier
        self.calls += 1
        self.multipliers.append(multiplier)
        messages = [s.message for s in session.messages()]
        checkpoint = session.latest("checkpoint")
        head: list[Message] = []
        if checkpoint is not None:
            ids = [m.id for m in messages]
            messages = messages[ids.index(checkpoint.payload["last_id"]) + 1 :]
            head = [Message.user("[summary]\n" + checkpoint.payload["summary"])]
        while messages and all(isinstance(b, ToolResult) for b in messages[0].content):
            messages.pop(0)
        out = tuple(head + messages)
        estimate = Estimator(profile, multiplier).messages(out)
        return PlainCompiled(
            system=(Text(text="You are a test agent."),),
            tools=(),
            messages=out,
            estimated_tokens=estimate,
            local_estimate=estimate,
            output_reserve=self.output_reserve,
        )


def blob_call(n: int) -> Message:
    return Message.assistant(ToolUse(id=f"call{n}", name="blob", input={}))


async def blob_tool(use: ToolUse) -> ToolResult:
    return ToolResult(tool_use_id=use.id, content=json.dumps({"blob": "x" * 30_000}, separators=(",", ":")))


def cumulative(per_call: Sequence[Usage]) -> list[Usage]:
    """Running totals of per-call usages: what a cumulative provider layer reports."""
    out: list[Usage] = []
    total = Usage()
    for usage in per_call:
        total = total + usage
        out.append(total)
    return out


def local_engine(
    session: Session,
    model: RecordingModel,
    profile: ModelProfile,
    tool_runner: ToolRunner,
    *,
    reserve: int,
    settings: EngineSettings,
    provider: Any = None,
) -> Engine:
    """An engine against the local provider over ``model`` (``provider`` wraps it when given), with
    the engine compiler at ``reserve`` and a summarizer on the same model's "summarizer" session."""
    return Engine(
        session,
        provider or LocalProvider(model),
        profile,
        compiler=EngineCompiler(Policy(output_reserve=reserve)),
        tool_runner=tool_runner,
        summarizer=Summarizer(
            LocalProvider(model, session="summarizer"), profile, instruction_suffix=f"{SUMMARY_MARKER}]]"
        ),
        settings=settings,
    )


PROVIDER_TOKENIZER = "cl100k"
"""The tokenizer the engine tests that need under-priced content have the local provider count with
(``LocalSettings(tokenizer=...)``): not the o200k the Claude rule is built on."""


def gibberish(chars: int, seed: str) -> str:
    """Words of random Armenian and Latin letters (from digests): text a provider counting with
    :data:`PROVIDER_TOKENIZER` counts at about 1.5 times the Claude rule's price (cl100k splits
    Armenian into bytes; the rule prices it as o200k, which merges it). Engine tests use it where they need
    content the rule under-prices."""
    raw = b"".join(hashlib.sha256(f"{seed} {i}".encode()).digest() for i in range(chars // 24 + 2))
    words, at = [], 0
    while at + 12 < len(raw):
        size = 3 + raw[at] % 8
        base, letters = (0x561, 38) if raw[at] % 2 else (0x61, 26)  # one word in two Armenian
        words.append("".join(chr(base + b % letters) for b in raw[at + 1 : at + 1 + size]))
        at += 1 + size
    return " ".join(words)[:chars]
