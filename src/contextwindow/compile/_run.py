"""One compile's inputs and the per-message lookups every step of it shares.

:class:`Run` holds the state, profile, policy and estimator of one compile, and answers, memoised in
its :class:`~contextwindow.compile.cache.CompileCache`: a message's base and render, ids and positions
(without decoding a row when the source can say), and the archive records in force for its results.
"""

from __future__ import annotations

from ..content import Message, Request, ToolResult, ToolUse
from ..models import ModelProfile
from ._render import (
    Base,
    Pricer,
    Rendered,
    base_of,
    price_blocks,
    rebased,
    recalibrated,
    render_message,
    same_at,
)
from .archive import archive_record, event_ref, is_candidate
from .cache import CompileCache
from .policy import Policy
from .state import ArchiveRecord, CompileState

__all__ = ["Run", "result_id"]

_TOOL_NAME_LOOKBACK = 8
"""How many messages back a result's call is looked for to name the tool in its archive record."""


class Run:
    """One compile: its inputs and memoised per-message lookups, shared by the head, the walk and
    the assembly."""

    def __init__(
        self,
        state: CompileState,
        profile: ModelProfile,
        policy: Policy,
        est: Pricer,
        cache: CompileCache,
        *,
        bind: bool,
    ) -> None:
        self.state = state
        self.profile = profile
        self.policy = policy
        self.est = est
        self.m = float(state.multiplier)
        self.cache = cache
        self.bound = bind
        """Whether ``cache`` is the caller's (kept across compiles), so the walk is logged in it."""
        self.messages = state.messages
        self.framing = est.message(Message(role="user", content=()))
        if bind:
            cache.bind((cache.pricing(est), policy, state.session_id))
        self.request_framing = est.request(Request())
        self.archived_by: dict[tuple[str | None, str], ArchiveRecord] = {
            (r.message_id, r.tool_use_id): r for r in state.archives
        }
        self.opening_room = 0
        """The opening user message's price when no summary leads (the walk leaves room for it)."""
        self.lazy = policy.archive_stale_results and policy.archive_as_needed
        """New archives are taken only where the walk needs the room (``policy.archive_as_needed``)."""

    def base(self, position: int) -> Base:
        """The base of the message at ``position`` (memoised by id and position)."""
        pm = self.messages[position]
        key = (pm.message.id if pm.message.id is not None else id(pm), position)
        hit = self.cache.bases.get(key)
        if hit is not None and (hit[0] is pm or pm.message.id is not None):
            if hit[1].multiplier != self.m:  # priced before a step of the multiplier
                self.cache.bases[key] = (hit[0], rebased(hit[1], self.m))
            return self.cache.bases[key][1]
        base = base_of(pm, position, self.est, self.m)
        self.cache.bases[key] = (pm, base)
        return base

    def render(
        self, position: int, archived: dict[str, ArchiveRecord], evicted: frozenset[int], cap: int
    ) -> Rendered:
        """The message at ``position`` rendered under these decisions (memoised)."""
        pm = self.messages[position]
        if not archived and not evicted:  # the common case: one flat lookup
            plain_key = (pm.message.id if pm.message.id is not None else id(pm), position)
            made = self.cache.plain.get(plain_key)
            if (
                made is None
                or (pm.message.id is None and made[1].message is not pm.message)
                or not same_at(made[1], made[0], cap)  # a cap that cuts it differently
            ):
                plain = self._render(position, archived={}, evicted=frozenset(), cap=cap)
                self.cache.plain[plain_key] = (cap, plain)
                return plain
            plain = made[1]
            if plain.priced_at != (self.m, self.framing):  # priced before a step of the multiplier
                plain = recalibrated(plain, self.m, self.framing)
                self.cache.plain[plain_key] = (made[0], plain)
            return plain
        ident = pm.message.id if pm.message.id is not None else id(pm)
        key = (ident, position, tuple(sorted(r.artifact_id for r in archived.values())), evicted, cap)
        hit = self.cache.renders.get(key)
        if hit is not None and (pm.message.id is not None or hit.message is pm.message):
            if hit.priced_at != (self.m, self.framing):  # priced before a step of the multiplier
                hit = self.cache.renders[key] = recalibrated(hit, self.m, self.framing)
            return hit
        rendered = self._render(position, archived=archived, evicted=evicted, cap=cap)
        self.cache.renders[key] = rendered
        return rendered

    def _render(
        self, position: int, *, archived: dict[str, ArchiveRecord], evicted: frozenset[int], cap: int
    ) -> Rendered:
        return render_message(
            self.messages[position],
            self.base(position),
            archived=archived,
            evicted=evicted,
            cap=cap,
            est=self.est,
            multiplier=self.m,
            framing=self.framing,
            reread=self.policy.reread_tool,
        )

    def fresh(self, message: Message) -> Rendered:
        """A message compile made (a repair, a shed), priced as it renders."""
        return price_blocks(message, {}, self.est, self.m, self.framing)

    def message_id(self, position: int) -> str | None:
        """The id of the message at ``position``, without decoding it when the source can say."""
        id_at = getattr(self.messages, "id_at", None)
        if id_at is not None:
            return str(id_at(position))
        return self.messages[position].message.id

    def ids(self, start: int, stop: int) -> tuple[str, ...]:
        """Ids of the messages ``start:stop`` (``@index`` for one without an id), undecoded if possible."""
        ids = getattr(self.messages, "ids", None)
        if ids is not None:
            return tuple(ids(start, stop))
        return tuple(self.messages[i].message.id or f"@{i}" for i in range(start, stop))

    def position_of(self, message_id: str) -> int | None:
        """The newest index of ``message_id``, or ``None`` (memoised per length of the source)."""
        key = (message_id, len(self.messages))
        if key in self.cache.positions:
            return self.cache.positions[key]
        found = None
        index_of = getattr(self.messages, "index_of", None)
        if index_of is not None:
            found = index_of(message_id)
        else:
            for index in range(len(self.messages) - 1, -1, -1):
                if self.messages[index].message.id == message_id:
                    found = index
                    break
        if found is not None:
            self.cache.positions[key] = found
        return found

    def archives_for(
        self, position: int, base: Base, turn: int, *, new_allowed: bool = True
    ) -> tuple[dict[str, ArchiveRecord], list[ArchiveRecord]]:
        """Archives in force for a message's results: recorded ones, and (``new_allowed``) new ones
        for stale results."""
        if not base.results:
            return {}, []
        pm = self.messages[position]
        message_id = pm.message.id
        in_force: dict[str, ArchiveRecord] = {}
        new: list[ArchiveRecord] = []
        stale = new_allowed and self.policy.archive_stale_results and turn >= self.policy.recent_turns_full
        for index in base.results:
            block = pm.message.content[index]
            if not isinstance(block, ToolResult):  # pragma: no cover - base.results indexes results
                continue
            tool_use_id = block.tool_use_id
            record = self.archived_by.get((message_id, tool_use_id))
            if record is None and stale and message_id is not None:
                raw = base.raw[index]
                if is_candidate(block, raw, self.policy):
                    record = archive_record(
                        block,
                        raw_price=raw,
                        session_id=self.state.session_id,
                        message_id=message_id,
                        event=event_ref(position),
                        tool_name=self.tool_name(position, tool_use_id),
                    )
                    new.append(record)
            if record is not None:
                in_force[tool_use_id] = record
        return in_force, new

    def tool_name(self, position: int, tool_use_id: str) -> str:
        """The name of the call ``tool_use_id`` answers, from the messages just before ``position``."""
        for index in range(position - 1, max(-1, position - _TOOL_NAME_LOOKBACK), -1):
            for block in self.messages[index].message.content:
                if isinstance(block, ToolUse) and block.id == tool_use_id:
                    return block.name
        return ""

    def opening_for(self, first: int) -> int:
        """The room a unit older than the newest leaves for the opening user message: the tail gets
        one when no summary leads and it opens on the assistant, and this unit may be its oldest."""
        if not self.opening_room or self.messages[first].message.role == "user":
            return 0
        return self.opening_room


def result_id(block: object) -> str | None:
    """The call a block answers, if it is a tool result."""
    return block.tool_use_id if isinstance(block, ToolResult) else None
