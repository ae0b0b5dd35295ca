"""Scenarios: a scripted agent run — system prompt, tools, turns, scripted replies, tool results, media.

A :class:`Scenario` is what ``contextwindow simulate`` and ``contextwindow demo`` replay through the
engine against the local provider: the user message of each turn, the assistant messages the local
provider answers with (in order, :meth:`Scenario.scripted_replies`), the result of every tool call
(:meth:`Scenario.tool_runner`), and the messages that arrive mid-turn, at a given round.

Scenarios come from three places: a scenario file (JSON Lines, :func:`contextwindow.replay.scenario_file.load_scenario`,
documented in ``docs/scenarios.md``), an importer of a real transcript
(:mod:`contextwindow.replay.importers`), or code (:class:`ScenarioBuilder`, used by all of them and by the
bundled demo). The builder checks the script's shape as it is built, so every scenario is replayable:
each tool use has exactly one result before the next scripted reply, ids are unique, a mid-turn
message arrives before a round that exists. A mistake is an :class:`ScenarioError` naming where.

Attachment bytes are kept aside, as the wire parsers keep them: inline and generated media hold their
bytes; media given by file path are hashed at load and read again only when asked for
(:meth:`Scenario.load_attachment`), and a file changed since is refused rather than silently served.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..attachments import make_ref, sniff
from ..content import (
    AttachmentRef,
    Message,
    Text,
    ToolResult,
    ToolSpec,
    ToolUse,
    attachment_id,
    media_refs,
    parse_attachment_ref,
)
from ..errors import InvalidInput, ScenarioError, UsageError

__all__ = [
    "AssistantStep",
    "InjectStep",
    "Injection",
    "Scenario",
    "ScenarioBuilder",
    "ScenarioError",
    "Step",
    "ToolResultStep",
    "Turn",
]

_CHUNK = 1 << 20


@dataclass(frozen=True, kw_only=True, slots=True)
class AssistantStep:
    """A scripted reply: what the local provider answers at this round."""

    kind: Literal["assistant"] = "assistant"
    message: Message


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResultStep:
    """The result the tool runner gives for one tool use of the reply before it."""

    kind: Literal["tool_result"] = "tool_result"
    result: ToolResult


@dataclass(frozen=True, kw_only=True, slots=True)
class InjectStep:
    """A message that arrives while the turn runs; it joins the request of round ``round``."""

    kind: Literal["inject"] = "inject"
    round: int
    """The provider call of this turn (0 is the call the user message starts) it is sent with; ≥ 1."""
    message: Message


Step: TypeAlias = AssistantStep | ToolResultStep | InjectStep


@dataclass(frozen=True, kw_only=True, slots=True)
class Injection:
    """A mid-turn message and the round it joins."""

    round: int
    message: Message


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    """One user message and everything scripted until the turn's final reply, in order."""

    user: Message
    steps: tuple[Step, ...]

    @property
    def replies(self) -> tuple[Message, ...]:
        """The scripted assistant messages of this turn, in order (one per provider call)."""
        return tuple(s.message for s in self.steps if isinstance(s, AssistantStep))

    @property
    def tool_results(self) -> Mapping[str, ToolResult]:
        """Scripted results keyed by tool-use id."""
        return {s.result.tool_use_id: s.result for s in self.steps if isinstance(s, ToolResultStep)}

    @property
    def injections(self) -> tuple[Injection, ...]:
        """Mid-turn messages with their rounds, in order."""
        return tuple(
            Injection(round=s.round, message=s.message) for s in self.steps if isinstance(s, InjectStep)
        )


@dataclass(frozen=True, slots=True)
class _FileSource:
    """Bytes that live in a file: read again on demand and checked against the hash taken at load."""

    path: Path
    sha256: str


AttachmentSource: TypeAlias = bytes | _FileSource | Callable[[], bytes]


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    """A replayable agent run. Build one with :class:`ScenarioBuilder` or load one from a file."""

    name: str = "scenario"
    description: str = ""
    model: str | None = None
    """The model the scenario was written for or recorded with, when known."""
    window: int | None = None
    """A suggested window for replaying it (e.g. the demo's small one), when the scenario has one."""
    system: tuple[Text, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    turns: tuple[Turn, ...] = ()
    sources: Mapping[str, AttachmentSource] = field(default_factory=dict, repr=False)
    """Attachment id → its bytes, a file to read them from, or a deterministic generator."""

    def scripted_replies(self) -> list[Message]:
        """Every scripted assistant message, turn after turn, in the order the provider gives them."""
        return [reply for turn in self.turns for reply in turn.replies]

    def tool_results(self) -> dict[str, ToolResult]:
        """Every scripted tool result keyed by tool-use id."""
        return {k: v for turn in self.turns for k, v in turn.tool_results.items()}

    def tool_runner(self) -> Callable[[ToolUse], Awaitable[ToolResult]]:
        """An async tool runner answering each tool use with its scripted result.

        A tool use the scenario has no result for is a :class:`~contextwindow.errors.UsageError`: the
        replies come from the same script, so it means the replay went off script.
        """
        results = self.tool_results()

        async def run(tool_use: ToolUse) -> ToolResult:
            try:
                return results[tool_use.id]
            except KeyError:
                raise UsageError(
                    f"scenario {self.name!r} has no scripted result for tool use {tool_use.id!r} "
                    f"({tool_use.name})"
                ) from None

        return run

    def attachment_refs(self) -> list[AttachmentRef]:
        """Every attachment the scenario's messages point at, in order of appearance, once each."""
        seen: dict[str, AttachmentRef] = {}
        for message in self.messages():
            for ref in media_refs(message.content):
                seen.setdefault(ref.id, ref)
        return list(seen.values())

    def messages(self) -> Iterator[Message]:
        """Every message of the script in order: user, replies, tool-result carriers, injections."""
        for turn in self.turns:
            yield turn.user
            for step in turn.steps:
                if isinstance(step, AssistantStep | InjectStep):
                    yield step.message
                else:
                    yield Message(role="user", content=(step.result,))

    def load_attachment(self, ref: AttachmentRef | str) -> bytes:
        """The bytes of an attachment; a file is read now and refused if it changed since load."""
        key = ref if isinstance(ref, str) else ref.id
        try:
            source = self.sources[key]
        except KeyError:
            raise InvalidInput(f"scenario has no attachment {key}", path=key) from None
        if isinstance(source, bytes):
            return source
        if isinstance(source, _FileSource):
            try:
                data = source.path.read_bytes()
            except OSError as err:
                raise InvalidInput(f"cannot read {source.path}: {err.strerror}", path=key) from None
            if hashlib.sha256(data).hexdigest() != source.sha256:
                raise InvalidInput(f"{source.path} changed since the scenario was loaded", path=key)
            return data
        return source()

    @property
    def calls(self) -> int:
        """How many provider calls the script holds (one per scripted reply)."""
        return sum(len(turn.replies) for turn in self.turns)


class ScenarioBuilder:
    """Builds a :class:`Scenario` step by step and checks it is replayable as it goes.

    Every method takes ``where`` (``"scenario.jsonl:12"``, ``"session.jsonl:40"``) so a mistake names
    its place. Rules: system and tools come before the first user message; a turn starts with
    :meth:`user`; each tool use in a reply gets exactly one :meth:`tool_result` before the next reply;
    tool-use ids are unique in the whole scenario; a mid-turn message needs a later reply to be sent
    with; a turn ends with a reply that asks for no tools.
    """

    def __init__(
        self,
        *,
        name: str = "scenario",
        description: str = "",
        model: str | None = None,
        window: int | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.model = model
        self.window = window
        self._system: list[Text] = []
        self._tools: list[ToolSpec] = []
        self._turns: list[Turn] = []
        self._user: Message | None = None
        self._user_where = ""
        self._steps: list[tuple[str, Step]] = []
        self._pending: dict[str, str] = {}  # tool-use id → where it was asked for, awaiting a result
        self._asked: set[str] = set()
        self._sources: dict[str, AttachmentSource] = {}

    # -- attachments --------------------------------------------------------------------------------

    def add_bytes(
        self, data: bytes, media_type: str, *, where: str = "", field: str = "", **meta: Any
    ) -> AttachmentRef:
        """Register bytes held in memory; returns their reference (sniffed for size, pages, duration)."""
        try:
            ref = make_ref(data, media_type, **meta)
        except InvalidInput as err:
            raise ScenarioError(err.reason, where=where, field=_join(field, err.path)) from None
        self._sources.setdefault(ref.id, bytes(data))
        return ref

    def add_generated(
        self,
        make: Callable[[], bytes],
        media_type: str,
        *,
        where: str = "",
        field: str = "",
        keep: bool = True,
    ) -> AttachmentRef:
        """Register deterministic generated bytes; with ``keep=False`` they are regenerated on demand."""
        try:
            data = make()
        except InvalidInput as err:
            raise ScenarioError(err.reason, where=where, field=_join(field, err.path)) from None
        ref = self.add_bytes(data, media_type, where=where, field=field)
        if not keep:
            self._sources[ref.id] = make
        return ref

    def add_file(self, path: Path, media_type: str, *, where: str = "", field: str = "") -> AttachmentRef:
        """Register a file: hashed and sniffed now (streamed, header only), read again when loaded."""
        digest = hashlib.sha256()
        size = 0
        try:
            with path.open("rb") as f:
                head = f.read(_CHUNK)
                chunk = head
                while chunk:
                    digest.update(chunk)
                    size += len(chunk)
                    chunk = f.read(_CHUNK)
        except OSError as err:
            raise ScenarioError(f"cannot read {path}: {err.strerror}", where=where, field=field) from None
        sha = digest.hexdigest()
        media_type = media_type.lower()
        # Images need only the header; PDFs and WAVs are sniffed from the whole file when it is small.
        sniffed = sniff(
            head if media_type.startswith("image/") or size > 64 * _CHUNK else path.read_bytes(), media_type
        )
        fields: dict[str, Any] = {
            "id": attachment_id(sha),
            "sha256": sha,
            "media_type": media_type,
            "size_bytes": size,
            **sniffed,
        }
        try:
            ref = parse_attachment_ref(fields)
        except InvalidInput as err:
            raise ScenarioError(err.reason, where=where, field=_join(field, err.path)) from None
        self._sources.setdefault(ref.id, _FileSource(path=path, sha256=sha))
        return ref

    # -- the script ---------------------------------------------------------------------------------

    def system(self, text: str, *, where: str = "") -> None:
        """Append a system-prompt text block."""
        if self._user is not None or self._turns:
            raise ScenarioError("the system prompt must come before the first user message", where=where)
        self._system.append(Text(text=text))

    def tools(self, specs: list[ToolSpec], *, where: str = "") -> None:
        """Append tool definitions; names must be unique."""
        if self._user is not None or self._turns:
            raise ScenarioError("tool definitions must come before the first user message", where=where)
        known = {t.name for t in self._tools}
        for i, spec in enumerate(specs):
            if spec.name in known:
                raise ScenarioError(
                    f"tool {spec.name!r} is defined twice", where=where, field=f"tools[{i}].name"
                )
            known.add(spec.name)
            self._tools.append(spec)

    def user(self, message: Message, *, where: str = "") -> None:
        """Start a turn with this user message (closing the turn before it)."""
        self._close_turn(where)
        _check_role(message, "user", where)
        if any(isinstance(b, ToolResult | ToolUse) for b in message.content):
            raise ScenarioError(
                "a user message carries no tool results; give them as tool_result events", where=where
            )
        self._user, self._user_where = message, where

    def assistant(self, message: Message, *, where: str = "") -> None:
        """A scripted reply for the next provider call of the current turn."""
        self._need_turn(where)
        _check_role(message, "assistant", where)
        if self._pending:
            missing, asked_at = next(iter(self._pending.items()))
            raise ScenarioError(
                f"tool use {missing!r} (asked at {asked_at}) has no tool_result before this reply",
                where=where,
            )
        for i, block in enumerate(message.content):
            if isinstance(block, ToolResult):
                raise ScenarioError("a reply cannot hold a tool result", where=where, field=f"content[{i}]")
            if isinstance(block, ToolUse):
                if block.id in self._asked:
                    raise ScenarioError(
                        f"tool use id {block.id!r} is used twice", where=where, field=f"content[{i}].id"
                    )
                self._asked.add(block.id)
                self._pending[block.id] = where or "?"
        self._steps.append((where, AssistantStep(message=message)))

    def tool_result(self, result: ToolResult, *, where: str = "") -> None:
        """The scripted result of a tool use asked for by the latest reply."""
        self._need_turn(where)
        if result.tool_use_id not in self._pending:
            said = "already has a result" if result.tool_use_id in self._asked else "was not asked for"
            raise ScenarioError(
                f"tool use {result.tool_use_id!r} {said} in this turn", where=where, field="tool_use_id"
            )
        del self._pending[result.tool_use_id]
        self._steps.append((where, ToolResultStep(result=result)))

    def inject(self, message: Message, *, round: int | None = None, where: str = "") -> None:
        """A mid-turn message sent with round ``round`` (default: the next call, after the replies so far)."""
        self._need_turn(where)
        _check_role(message, "user", where)
        replies_so_far = sum(isinstance(s, AssistantStep) for _, s in self._steps)
        at = replies_so_far if round is None else round
        if isinstance(at, bool) or not isinstance(at, int) or at < max(1, replies_so_far):
            raise ScenarioError(
                f"must be ≥ {max(1, replies_so_far)}: a mid-turn message joins a call after the "
                f"{replies_so_far} reply(ies) already scripted",
                where=where,
                field="round",
            )
        self._steps.append((where, InjectStep(round=at, message=message)))

    def build(self, *, where: str = "end of scenario") -> Scenario:
        """The scenario, once the last turn is checked complete."""
        self._close_turn(where)
        if not self._turns:
            raise ScenarioError("a scenario needs at least one user message", where=where)
        return Scenario(
            name=self.name,
            description=self.description,
            model=self.model,
            window=self.window,
            system=tuple(self._system),
            tools=tuple(self._tools),
            turns=tuple(self._turns),
            sources=dict(self._sources),
        )

    @property
    def in_turn(self) -> bool:
        """Whether a turn is open (a user message was given)."""
        return self._user is not None

    @property
    def pending_tool_uses(self) -> tuple[str, ...]:
        """Tool-use ids of the latest reply still waiting for their result."""
        return tuple(self._pending)

    def _need_turn(self, where: str) -> None:
        if self._user is None:
            raise ScenarioError("this needs a turn: give a user message first", where=where)

    def _close_turn(self, where: str) -> None:
        if self._user is None:
            return
        replies = [s for _, s in self._steps if isinstance(s, AssistantStep)]
        if not replies:
            raise ScenarioError("the turn has no scripted assistant reply", where=self._user_where or where)
        if self._pending:
            missing = next(iter(self._pending))
            raise ScenarioError(f"tool use {missing!r} has no tool_result", where=self._pending[missing])
        if any(isinstance(b, ToolUse) for b in replies[-1].message.content):
            raise ScenarioError(
                "the turn ends on a reply that asks for tools; add a final reply without tool uses",
                where=where,
            )
        for step_where, step in self._steps:
            if isinstance(step, InjectStep) and step.round >= len(replies):
                raise ScenarioError(
                    f"round {step.round} does not exist: the turn has {len(replies)} scripted replies "
                    f"(rounds 0–{len(replies) - 1})",
                    where=step_where,
                    field="round",
                )
        self._turns.append(Turn(user=self._user, steps=tuple(s for _, s in self._steps)))
        self._user, self._steps = None, []


def _check_role(message: Message, role: str, where: str) -> None:
    if message.role != role:
        raise ScenarioError(f"expected a {role} message, got {message.role}", where=where, field="role")
    if not message.content:
        raise ScenarioError("a message needs at least one content block", where=where, field="content")


def _join(prefix: str, path: str | None) -> str:
    if not path or path in ("data", "media_type"):
        return prefix
    return f"{prefix}.{path}" if prefix else path
