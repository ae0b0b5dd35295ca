"""``compile(state, profile, policy)``: fit the next request into the window. A pure function.

The budget is the window less the output reserve. The head — system, tools and the latest summary
checkpoint — is reserved; if it alone does not fit, :class:`~contextwindow.errors.OverBudget` says so
with the makeup. The tail is then filled newest first, one *unit* at a time (a message with its tool
calls' results, never split), over prices as rendered: stale tool results archived (``archive``),
media outside the count cap, depth or byte budget replaced by placeholders (``media``), messages
over the cap cut (``truncate``). A unit that does not fit with its media inline (the newest included)
goes with them out of line, oldest first, as far as it needs, and the walk goes on past it: one large
screenshot or document never ends the tail. The tail is emitted in order, tool pairing is enforced
(``pairing``), a manifest names the attachments left out of line, and the byte wall is checked.
Every decision is returned with ids.

Nothing here reads a byte of an attachment: ``CompiledRequest.inline_attachments`` lists the only
refs whose bytes rendering may load. A :class:`CompileCache` memoises the per-message work across
calls (keyed by message id, estimator, multiplier and policy); it never changes a result, which the
tests check by comparing cached and uncached compiles.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..content import AttachmentRef, Message, Request, Text, ToolResult, ToolSpec, ToolUse
from ..errors import InvalidInput, OverBudget
from ..models import ModelProfile
from ._render import Base, Pricer, Rendered, base_of, price_blocks, render_message
from ._walklog import Context, WalkLog, equivalent
from .archive import archive_record, event_ref, is_candidate
from .media import MediaBudget, MediaItem, hysteresis_limits, manifest_text, shed_media
from .pairing import enforce_tool_pairing, unit_start
from .policy import Policy
from .state import (
    SEGMENTS,
    ArchiveRecord,
    Checkpoint,
    CompiledRequest,
    CompileState,
    Decisions,
    Eviction,
    MediaWatermark,
    PricedMessage,
    Truncation,
)
from .truncate import MIN_CUT_TOKENS, text_only_estimate

__all__ = ["OPENING", "SUMMARY_HEADER", "CompileCache", "compile"]

OPENING = "[continued from earlier in the conversation]"
"""The user message a request opens with when its history, as kept, would open with the assistant."""

SUMMARY_HEADER = "[Summary of the earlier conversation, which is no longer shown in full]\n\n"
"""Opens the summary message that stands for the folded history."""


class CompileCache:
    """Memo of per-message work across compiles of one session. Never changes a result.

    Entries are keyed by message id (and position), so an append-only ledger keeps them valid; a
    change of estimator, multiplier or policy clears them.
    """

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._estimator: tuple[ModelProfile, float, Pricer] | None = None
        self.bases: dict[tuple[Any, int], tuple[PricedMessage, Base]] = {}
        self.renders: dict[tuple[Any, ...], Rendered] = {}
        self.plain: dict[tuple[Any, int, int], Rendered] = {}
        self.positions: dict[tuple[str, int], int] = {}
        self.head: dict[tuple[Any, ...], int] = {}
        self.walk: WalkLog | None = None

    def estimator(self, profile: ModelProfile, multiplier: float) -> Pricer:
        """The estimator for ``profile`` at ``multiplier``, kept while neither changes what it prices.

        A profile that differs only in its window or output cap prices every block the same (the
        engine fits against a shrunk window, and probes a smaller one before a fold): the same
        estimator is kept, so the per-message memo survives the change of window.
        """
        if (
            self._estimator is not None
            and _pricing_key(self._estimator[0]) == _pricing_key(profile)
            and self._estimator[1] == multiplier
        ):
            return self._estimator[2]
        est = _make_estimator(profile, multiplier)
        self._estimator = (profile, multiplier, est)
        return est

    def bind(self, key: tuple[Any, ...]) -> None:
        if (
            self._key is None
            or len(self._key) != len(key)
            or any(a is not b and a != b for a, b in zip(self._key, key, strict=True))
        ):
            self.bases.clear()
            self.renders.clear()
            self.plain.clear()
            self.positions.clear()
            self.head.clear()
            self.walk = None
            self._key = key
        if len(self.renders) > 200_000:  # bound memory: a render per message and decision set
            self.renders.clear()


def _pricing_key(profile: ModelProfile) -> tuple[Any, ...]:
    """What of a profile the estimator's prices depend on (not the window, not the output cap)."""
    return (profile.name, profile.provider, profile.tokenizer, profile.image_rule, profile.source)


def _make_estimator(profile: ModelProfile, multiplier: float) -> Pricer:
    from ..pricing import Estimator

    return Estimator(profile, multiplier)


@dataclass(frozen=True, slots=True)
class _Ev:
    position: int
    ordinal: int
    message_id: str
    ref: AttachmentRef | None
    reason: str


@dataclass(slots=True)
class _Unit:
    start: int
    end: int
    rendered: list[tuple[int, Rendered, frozenset[int], dict[str, ArchiveRecord]]] = field(
        default_factory=list
    )
    tokens: int = 0
    evictions: list[_Ev] = field(default_factory=list)
    archives: list[ArchiveRecord] = field(default_factory=list)
    new_archives: list[ArchiveRecord] = field(default_factory=list)
    truncations: list[Truncation] = field(default_factory=list)
    kept: list[tuple[int, int]] = field(default_factory=list)
    forced: bool = False
    """Some of its media are out of line because it did not fit with them inline (reason ``budget``)."""


def compile(
    state: CompileState,
    profile: ModelProfile,
    policy: Policy | None = None,
    *,
    estimator: Pricer | None = None,
    cache: CompileCache | None = None,
) -> CompiledRequest:
    """The next request for ``state`` on ``profile`` under ``policy``; see the module docstring."""
    policy = policy or Policy()
    multiplier = state.multiplier
    if (
        isinstance(multiplier, bool)
        or not isinstance(multiplier, int | float)
        or not (math.isfinite(multiplier) and multiplier > 0)
    ):
        raise InvalidInput(f"must be a finite number > 0, got {multiplier!r}", path="state.multiplier")
    if estimator is None:
        estimator = cache.estimator(profile, multiplier) if cache else _make_estimator(profile, multiplier)
    run = _Run(state, profile, policy, estimator, cache or CompileCache(), bind=cache is not None)
    return run.compile()


class _Run:
    """One compile: the walk's state kept together so each step reads as a sentence."""

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
        if bind:
            cache.bind((est, self.m, policy, state.session_id))
        self.messages = state.messages
        self.framing = est.message(Message(role="user", content=()))
        self.request_framing = est.request(Request())
        self.archived_by: dict[tuple[str | None, str], ArchiveRecord] = {
            (r.message_id, r.tool_use_id): r for r in state.archives
        }
        self.opening_room = 0
        self.lazy = policy.archive_stale_results and policy.archive_as_needed
        """New archives are taken only where the walk needs the room (``policy.archive_as_needed``)."""
        """The opening user message's price when no summary leads (the walk leaves room for it)."""

    # -- per-message memo --------------------------------------------------------------------------

    def base(self, position: int) -> Base:
        pm = self.messages[position]
        key = (pm.message.id if pm.message.id is not None else id(pm), position)
        hit = self.cache.bases.get(key)
        if hit is not None and (hit[0] is pm or pm.message.id is not None):
            return hit[1]
        base = base_of(pm, position, self.est, self.m)
        self.cache.bases[key] = (pm, base)
        return base

    def render(
        self, position: int, archived: dict[str, ArchiveRecord], evicted: frozenset[int], cap: int
    ) -> Rendered:
        pm = self.messages[position]
        if not archived and not evicted:  # the common case: one flat lookup
            plain_key = (pm.message.id if pm.message.id is not None else id(pm), position, cap)
            plain = self.cache.plain.get(plain_key)
            if plain is None or (pm.message.id is None and plain.message is not pm.message):
                plain = render_message(
                    pm,
                    self.base(position),
                    archived={},
                    evicted=frozenset(),
                    cap=cap,
                    est=self.est,
                    multiplier=self.m,
                    framing=self.framing,
                )
                self.cache.plain[plain_key] = plain
            return plain
        ident = pm.message.id if pm.message.id is not None else id(pm)
        key = (ident, position, tuple(sorted(r.artifact_id for r in archived.values())), evicted, cap)
        hit = self.cache.renders.get(key)
        if hit is not None and (pm.message.id is not None or hit.message is pm.message):
            return hit
        rendered = render_message(
            pm,
            self.base(position),
            archived=archived,
            evicted=evicted,
            cap=cap,
            est=self.est,
            multiplier=self.m,
            framing=self.framing,
        )
        self.cache.renders[key] = rendered
        return rendered

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

    # -- the compile -------------------------------------------------------------------------------

    def compile(self) -> CompiledRequest:
        state, policy, est = self.state, self.policy, self.est
        window = self.profile.context_window
        reserve = policy.reserve_for(window, self.profile.max_output_tokens)
        budget = window - reserve
        makeup = dict.fromkeys(SEGMENTS, 0)
        makeup["output_reserve"] = reserve
        if budget <= 0:
            raise OverBudget(
                "the output reserve leaves no room for input",
                budget=max(0, budget),
                required=reserve,
                makeup=makeup,
            )
        limit = math.floor(budget * (1 + policy.over_budget_grace_ratio))
        cap = policy.message_cap_for(budget)

        makeup["system"] = sum(est.block(t) for t in state.system) + self.request_framing
        makeup["tools"] = self.tools_tokens(state.tools)
        start = 0
        summary: Message | None = None
        folded: tuple[str, ...] = ()
        if state.checkpoint is not None:
            last = self.position_of(state.checkpoint.last_id)
            if last is None:
                raise InvalidInput(
                    f"the checkpoint covers up to {state.checkpoint.last_id!r}, which is not in the session",
                    path="state.checkpoint.last_id",
                )
            start = last + 1
            summary = Message(
                role="user",
                content=(Text(text=SUMMARY_HEADER + state.checkpoint.summary),),
                id=state.checkpoint.id,
            )
            makeup["summaries"] = est.message(summary) + self.counted_beyond_rule(state.checkpoint)
            folded = (state.checkpoint.first_id, state.checkpoint.last_id)
        head = makeup["system"] + makeup["tools"] + makeup["summaries"]
        if head > limit:
            raise OverBudget(
                "the head alone (system, tools, summary) does not fit",
                budget=budget,
                required=head,
                makeup=makeup,
            )

        # With no summary to lead, a tail that opens on the assistant gets a short user message first
        # (below): the walk leaves room for it (``opening_for``).
        opening = Message(role="user", content=(Text(text=OPENING),))
        opening_tokens = est.message(opening)
        self.opening_room = opening_tokens if summary is None else 0
        media, _, bound = self.media_budget(start)
        units = self.walk(start, head, budget, limit, cap, media, makeup)
        evictions = [e for u in units for e in u.evictions]
        new_watermark: MediaWatermark | None = state.watermark
        moved = False
        if bound:
            new_watermark = self.watermark_after(units, start)
            moved = new_watermark != state.watermark

        # The APIs open a conversation with a user message (Anthropic refuses anything else): with no
        # summary to lead, a tail that opens on the assistant (a cut inside a tool loop, or a history
        # stored that way) gets a short user message first, priced with the tail. Dropping such units
        # instead would drop every round of a tool loop whose one user message is its opener, and a
        # covering fold would then take all but the newest round.

        # Manifest: drop the oldest units until head + tail + manifest fits.
        manifest = ""
        manifest_tokens = 0
        while True:
            evictions = [e for u in units for e in u.evictions]
            entries = [e.ref for e in evictions if e.ref is not None]
            manifest = manifest_text(entries, max_entries=policy.manifest_max_entries) if entries else ""
            manifest_tokens = est.block(Text(text=manifest)) if manifest else 0
            tail = sum(u.tokens for u in units)
            if summary is None and units and units[-1].rendered[0][1].message.role != "user":
                tail += opening_tokens
            if head + tail + manifest_tokens <= budget or len(units) <= 1:
                break
            units.pop()  # units are newest first: the last one is the oldest

        renders = [r[1] for u in reversed(units) for r in u.rendered]
        final, stubbed, dropped = enforce_tool_pairing([r.message for r in renders])
        if summary is None and final and final[0].role != "user":
            final.insert(0, opening)
        if (
            stubbed
            or dropped
            or len(final) != len(renders)
            or any(m is not r.message for m, r in zip(final, renders, strict=True))
        ):  # repaired: look renders up by message
            by_message = {id(r.message): r for r in renders}
            renders = [by_message.get(id(m)) or self.fresh(m) for m in final]
        else:
            by_message = {}
        request_bytes = self.head_bytes(summary) + len(manifest.encode()) + sum(r.wire_bytes for r in renders)
        wall = policy.transport_max_bytes
        if wall and request_bytes > wall:
            if not policy.shed_media_over_wall:
                raise OverBudget(
                    f"the request would be about {request_bytes} bytes, over the {wall}-byte transport wall "
                    "(set shed_media_over_wall=True to shed media oldest first)",
                    budget=wall,
                    required=request_bytes,
                    makeup=makeup,
                )
            by_message = {id(r.message): r for r in renders}
            final, request_bytes, shed = self.shed(final, by_message, request_bytes, wall)
            evictions.extend(shed)
            renders = [by_message.get(id(m)) or self.fresh(m) for m in final]

        for segment in ("text", "tool_results", "images", "other_media"):
            makeup[segment] = 0
        inline: dict[str, AttachmentRef] = {}
        text = results = images = other = 0
        for rendered in renders:
            t, r, i, o = rendered.segments
            text += t
            results += r
            images += i
            other += o
            for ref in rendered.inline:
                inline.setdefault(ref.id, ref)
        # Selection priced earlier turns' thinking (erring high); the API strips it on some models, so
        # the request's estimate does not count it.
        text = max(0, text - self.est.uncharged(final))
        makeup["text"], makeup["tool_results"], makeup["images"], makeup["other_media"] = (
            text,
            results,
            images,
            other,
        )
        if manifest:
            final = _attach_manifest(final, manifest)
        makeup["manifest"] = manifest_tokens
        local = sum(v for k, v in makeup.items() if k != "output_reserve")
        accepted_first = units[-1].start if units else len(self.messages)
        omitted = self.ids(start, accepted_first)
        messages = ((summary,) if summary is not None else ()) + tuple(final)
        estimated, reason = self.anchored(local)
        decisions = Decisions(
            evicted=tuple(
                Eviction(
                    attachment_id=e.ref.id if e.ref else "",
                    message_id=e.message_id,
                    reason=e.reason,
                    media_type=e.ref.media_type if e.ref else "",
                    size_bytes=e.ref.size_bytes if e.ref else 0,
                )
                for e in evictions
            ),
            archived=tuple(a for u in reversed(units) for a in u.archives),
            new_archives=tuple(a for u in reversed(units) for a in u.new_archives),
            truncated=tuple(t for u in reversed(units) for t in u.truncations),
            folded=folded,
            omitted=omitted,
            stubbed=tuple(stubbed),
            dropped_results=tuple(dropped),
            watermark=new_watermark,
            new_watermark=moved,
        )
        return CompiledRequest(
            system=state.system,
            tools=state.tools,
            messages=messages,
            estimated_tokens=estimated,
            local_estimate=local,
            makeup=makeup,
            decisions=decisions,
            inline_attachments=tuple(inline.values()),
            budget=budget,
            output_reserve=reserve,
            request_bytes=request_bytes,
            model=self.profile.name,
            anchor_reason=reason,
        )

    # -- pieces ------------------------------------------------------------------------------------

    def tools_tokens(self, tools: tuple[ToolSpec, ...]) -> int:
        return sum(self.est.tool_spec(tool) for tool in tools)

    def head_bytes(self, summary: Message | None) -> int:
        total = sum(len(t.text.encode()) + 40 for t in self.state.system)
        for tool in self.state.tools:
            total += len(tool.name) + len(tool.description.encode()) + 40
            total += len(json.dumps(dict(tool.input_schema), default=str).encode())
        if summary is not None:
            total += sum(len(b.text.encode()) + 40 for b in summary.content if isinstance(b, Text))
        return total

    def fresh(self, message: Message) -> Rendered:
        return price_blocks(message, {}, self.est, self.m, self.framing)

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
        for index in range(position - 1, max(-1, position - 8), -1):
            for block in self.messages[index].message.content:
                if isinstance(block, ToolUse) and block.id == tool_use_id:
                    return block.name
        return ""

    def media_budget(self, start: int) -> tuple[MediaBudget, MediaWatermark | None, bool]:
        """The media budget for this compile; with hysteresis, trimmed when a limit binds."""
        policy = self.policy
        watermark_at: tuple[int, int] | None = None
        if self.state.watermark is not None:
            pos = self.position_of(self.state.watermark.message_id)
            if pos is not None:
                watermark_at = (pos, self.state.watermark.index)
        ratio = policy.media_hysteresis_ratio
        cap, byte_budget = policy.max_inline_images, policy.inline_media_bytes
        if ratio is None:
            return MediaBudget(count_cap=cap, byte_budget=byte_budget, watermark=watermark_at), None, False
        eligible: list[MediaItem] = []
        images = 0
        total = 0
        depth = 0
        turns = 0
        newest = len(self.messages) - 1
        for position in range(newest, start - 1, -1):
            base = self.base(position)
            turn = turns
            if base.human:
                turns += 1
            depth += base.tokens
            if not base.media:
                continue
            too_deep = (
                bool(policy.image_depth_tokens) and position != newest and depth > policy.image_depth_tokens
            )
            if too_deep:
                break
            archived, _ = self.archives_for(position, base, turn, new_allowed=not self.lazy)
            content = self.messages[position].message.content
            archived_tops = {i for i in base.results if _result_id(content[i]) in archived}
            stop = False
            for top, _, item in reversed(base.media):
                if top in archived_tops:
                    continue
                if watermark_at is not None and (item.position, item.ordinal) < watermark_at:
                    stop = True
                    break
                eligible.append(item)
                images += item.image
                total += item.wire_bytes
            if stop or (cap and images > cap) or total > byte_budget:
                break
        new_cap, new_bytes, bound = hysteresis_limits(
            eligible, count_cap=cap, byte_budget=byte_budget, ratio=ratio
        )
        budget = MediaBudget(
            count_cap=new_cap, byte_budget=new_bytes, watermark=watermark_at, contiguous=True
        )
        return budget, self.state.watermark, bound

    def watermark_after(self, units: list[_Unit], start: int) -> MediaWatermark | None:
        kept = [k for u in units for k in u.kept]
        if kept:
            pos, ordinal = min(kept)
        else:
            items = [(e.position, e.ordinal) for u in units for e in u.evictions]
            if not items:
                return self.state.watermark
            pos, ordinal = max(items)
            ordinal += 1
        message_id = self.message_id(pos)
        return MediaWatermark(message_id=message_id, index=ordinal) if message_id else None

    def walk(
        self,
        start: int,
        head: int,
        budget: int,
        limit: int,
        cap: int,
        media: MediaBudget,
        makeup: dict[str, int],
    ) -> list[_Unit]:
        """The tail, newest unit first, within the budget.

        With a cache, the previous walk's older units are reused from the first unit end both walks
        reach in equivalent contexts (see :mod:`._walklog`); the cut among them is a binary search.
        """
        policy = self.policy
        messages = _MessageView(self.messages)
        units: list[_Unit] = []
        contexts: list[Context] = []
        total = head
        depth = 0
        turns = 0
        newest = len(self.messages) - 1
        end = newest
        key = (start, cap, media.count_cap, media.byte_budget, media.watermark, media.contiguous)
        old = self.cache.walk
        reuse_below = self.reusable_below(old, key)
        stale_turns = policy.recent_turns_full if policy.archive_stale_results else None
        exhausted = True
        fresh = False  # decide the next unit afresh (reuse stopped at one it may take otherwise)
        while end >= start:
            context: Context = (turns, depth, media.snapshot())
            if not fresh and old is not None and units and end < reuse_below and end in old.by_end:
                k = old.by_end[end]
                same, settled = equivalent(
                    context, old.contexts[k], stale_turns=stale_turns, depth_limit=policy.image_depth_tokens
                )
                if same and _id_in(old.source, end) == self.message_id(end):
                    # Everything older is decided as before: take the old units that fit.
                    room = budget - total + old.prefix[k]
                    m = max(k, bisect_right(old.prefix, room, lo=k) - 1)
                    if self.opening_room:  # as the walk takes them: see ``opening_for``
                        for j in range(k, m):
                            if old.prefix[j + 1] + self.opening_for(old.units[j].start) > room:
                                m = j
                                break
                    # A unit whose media went out of line was decided by the room left then: it is
                    # decided again, not reused.
                    at = bisect_left(old.forced, k)
                    if at < len(old.forced):
                        m = min(m, old.forced[at])
                    taken = old.units[k:m]
                    old_turns, old_depth, _ = old.contexts[k]
                    dturns, ddepth = turns - old_turns, depth - old_depth
                    mine = context[2]
                    for t, d, ms in old.contexts[k:m]:
                        contexts.append((t + dturns, d + ddepth, mine if settled else ms))
                    units.extend(taken)
                    total += old.prefix[m] - old.prefix[k]
                    after_turns, after_depth, after_media = old.contexts[m]
                    turns, depth = after_turns + dturns, after_depth + ddepth
                    if not settled:
                        media.restore(after_media)
                    context = (turns, depth, media.snapshot())
                    short = total < policy.cut_to_fill_below * budget
                    if m < len(old.units) and (
                        old.units[m].forced or old.units[m].kept or short or self.lazy
                    ):
                        # It did not fit (or was fitted by the room left then) with media that may
                        # go out of line, or it may be cut or archived to fit: decide it afresh.
                        end = old.units[m].end
                        fresh = True
                        continue
                    if m < len(old.units) or old.exhausted:
                        exhausted = m == len(old.units) and old.exhausted
                        break
                    end = taken[-1].start - 1 if taken else end
                    continue
            fresh = False
            first = unit_start(messages, end, floor=start) if self.base(end).results else end
            room = (limit - total) if not units else (budget - total - self.opening_for(first))
            cut = bool(units) and total < policy.cut_to_fill_below * budget
            unit, after_turns, after_depth = self.fitted_unit(
                first, end, turns, depth, media, cap, room, cut=cut
            )
            turns, depth = after_turns, after_depth
            if unit.forced:
                media.passed_over()
            if not units:
                if total + unit.tokens > limit:
                    for _, rendered, _, _ in unit.rendered:
                        text, results, images, other = rendered.segments
                        makeup["text"] += text
                        makeup["tool_results"] += results
                        makeup["images"] += images
                        makeup["other_media"] += other
                    raise OverBudget(
                        "the newest message does not fit beside the head",
                        budget=budget,
                        required=total + unit.tokens,
                        makeup=makeup,
                    )
            elif unit.tokens > room:
                exhausted = False
                break
            total += unit.tokens
            units.append(unit)
            contexts.append(context)
            end = unit.start - 1
        # The context after the last unit taken: the refused unit's own steps do not count.
        contexts.append(context if not exhausted else (turns, depth, media.snapshot()))
        if self.bound:
            self.cache.walk = self.log_walk(key, newest, units, contexts, exhausted)
        return units

    def opening_for(self, first: int) -> int:
        """The room a unit older than the newest leaves for the opening user message: the tail gets
        one when no summary leads and it opens on the assistant, and this unit may be its oldest."""
        if not self.opening_room or self.messages[first].message.role == "user":
            return 0
        return self.opening_room

    def fitted_unit(
        self,
        first: int,
        end: int,
        turns: int,
        depth: int,
        media: MediaBudget,
        cap: int,
        room: int,
        *,
        cut: bool = False,
    ) -> tuple[_Unit, int, int]:
        """:meth:`unit`, fitted to ``room`` when it does not fit as it is. In turn: cut to the room
        left (``cut``, the tail is short: see :meth:`cut_unit`); with its stale results archived, when
        archives are taken as needed (``policy.archive_as_needed``: where the walk needs the room,
        newest pressure first); with the fewest of its media out of line (oldest first) that let it
        fit: no cliff at one large unit, the tail goes on past it instead of stopping short (a
        placeholder names each item, and the model can read it again; a bisection, since each one
        more out only lowers the price). When nothing fits, the unit with all its media out (the
        walk refuses it). A unit decided by the room left is marked ``forced``."""
        before = media.snapshot()
        archive_new = not self.lazy
        unit, after_turns, after_depth = self.unit(
            first, end, turns, depth, media, cap, archive_new=archive_new
        )
        if unit.tokens <= room:
            return unit, after_turns, after_depth
        if cut:
            fitted = self.cut_unit(
                first, end, turns, depth, media, cap, room, before, frozenset(), archive_new
            )
            if fitted[0].tokens <= room:
                return fitted
        if self.lazy:
            media.restore(before)
            archived = self.unit(first, end, turns, depth, media, cap, archive_new=True)
            if archived[0].new_archives:
                archive_new = True
                unit, after_turns, after_depth = archived
                unit.forced = True
                if unit.tokens <= room:
                    return archived
        if not unit.kept:
            media.restore(before)
            return self.unit(first, end, turns, depth, media, cap, archive_new=archive_new)
        inline = list(reversed(unit.kept))
        max_entries = self.policy.manifest_max_entries

        def without(count: int) -> tuple[_Unit, int, int]:
            media.restore(before)
            out = frozenset(inline[:count])
            return self.unit(first, end, turns, depth, media, cap, out_of_line=out, archive_new=archive_new)

        def fits(count: int) -> bool:
            # What it puts out of line is listed in the manifest, which the request carries too.
            taken = without(count)[0]
            refs = [e.ref for e in taken.evictions if e.ref is not None]
            listed = manifest_text(refs, max_entries=max_entries) if refs else ""
            return taken.tokens + (self.est.block(Text(text=listed)) if listed else 0) <= room

        low, high = 0, len(inline)
        if fits(high):
            while high - low > 1:
                mid = (low + high) // 2
                if fits(mid):
                    high = mid
                else:
                    low = mid
        elif cut:
            fitted = self.cut_unit(
                first, end, turns, depth, media, cap, room, before, frozenset(inline), archive_new
            )
            if fitted[0].tokens <= room:
                return fitted
        return without(high)

    def cut_unit(
        self,
        first: int,
        end: int,
        turns: int,
        depth: int,
        media: MediaBudget,
        cap: int,
        room: int,
        before: tuple[Any, ...],
        out_of_line: frozenset[tuple[int, int]],
        archive_new: bool = True,
    ) -> tuple[_Unit, int, int]:
        """The unit cut to ``room``: its messages rendered under the largest per-message cap (at
        least :data:`~contextwindow.compile.truncate.MIN_CUT_TOKENS`) with which it fits, as a
        message over the cap is (marked, priced as it renders). The walk asks for it when the
        unit does not fit and the tail so far fills less than ``policy.cut_to_fill_below`` of the
        budget: one large message just past the tail would otherwise leave the request a sliver of
        the window. Marked ``forced`` (decided by the room left), so a later compile decides it again.
        When even the smallest cap does not fit, the unit as it was (the walk refuses it)."""

        def at(limit: int) -> tuple[_Unit, int, int]:
            media.restore(before)
            return self.unit(
                first, end, turns, depth, media, limit, out_of_line=out_of_line, archive_new=archive_new
            )

        high = (
            cap
            if cap > 0
            else max(text_only_estimate(self.messages[p].message.content) for p in range(first, end + 1))
        )
        low = MIN_CUT_TOKENS
        if high <= low or at(low)[0].tokens > room:
            return at(cap)
        while high - low > 1:
            mid = (low + high) // 2
            if at(mid)[0].tokens <= room:
                low = mid
            else:
                high = mid
        unit, after_turns, after_depth = at(low)
        unit.forced = True
        return unit, after_turns, after_depth

    def unit(
        self,
        first: int,
        end: int,
        turns: int,
        depth: int,
        media: MediaBudget,
        cap: int,
        *,
        out_of_line: frozenset[tuple[int, int]] = frozenset(),
        archive_new: bool = True,
    ) -> tuple[_Unit, int, int]:
        """The unit of messages ``first..end`` as rendered from the walk's context (``turns`` and
        ``depth`` before it, the media budget's running state), with the turns and depth after it.
        The media items in ``out_of_line`` (``(position, ordinal)``) are placeholders whatever the
        budget says (reason ``budget``: the unit does not fit with them inline)."""
        policy = self.policy
        newest = len(self.messages) - 1
        unit = _Unit(start=first, end=end)
        for position in range(end, unit.start - 1, -1):
            base = self.base(position)
            turn = turns
            if base.human:
                turns += 1
            depth += base.tokens
            too_deep = (
                bool(policy.image_depth_tokens) and position != newest and depth > policy.image_depth_tokens
            )
            archived, new = self.archives_for(position, base, turn, new_allowed=archive_new)
            evicted: set[int] = set()
            message = self.messages[position].message
            if base.media:
                archived_tops = {i for i in base.results if _result_id(message.content[i]) in archived}
                for top, _, item in reversed(base.media):
                    if top in archived_tops:
                        continue
                    key = (item.position, item.ordinal)
                    why = media.admit(item, too_deep=too_deep) if key not in out_of_line else "budget"
                    unit.forced = unit.forced or key in out_of_line
                    if why is None:
                        unit.kept.append(key)
                    else:
                        evicted.add(item.ordinal)
                        unit.evictions.append(
                            _Ev(position, item.ordinal, message.id or f"@{position}", item.ref, why)
                        )
            frozen = frozenset(evicted)
            rendered = self.render(position, archived, frozen, cap)
            if rendered.truncated:
                unit.truncations.append(
                    Truncation(
                        message_id=message.id or f"@{position}",
                        original_tokens=self.render(position, archived, frozen, 0).tokens,
                        rendered_tokens=rendered.tokens,
                    )
                )
            unit.rendered.insert(0, (position, rendered, frozen, archived))
            unit.tokens += rendered.tokens
            unit.archives.extend(archived.values())
            unit.new_archives.extend(new)
        unit.truncations.reverse()
        return unit, turns, depth

    def reusable_below(self, old: WalkLog | None, key: tuple[Any, ...]) -> int:
        """Unit ends below this index may be reused from ``old`` (-1: none may).

        The previous walk must have had the same fixed inputs, and its units must sit below its own
        newest message and below every message whose archive records changed since.
        """
        if old is None or old.key != key:
            return -1
        below = old.newest
        if old.archives != self.archived_by:
            changed = {
                k
                for k in old.archives.keys() | self.archived_by.keys()
                if old.archives.get(k) != self.archived_by.get(k)
            }
            for message_id, _ in changed:
                position = self.position_of(message_id) if message_id is not None else None
                if position is None:
                    return -1
                below = min(below, position)
        return below

    def log_walk(
        self,
        key: tuple[Any, ...],
        newest: int,
        units: list[_Unit],
        contexts: list[Context],
        exhausted: bool,
    ) -> WalkLog:
        prefix = [0]
        for unit in units:
            prefix.append(prefix[-1] + unit.tokens)
        return WalkLog(
            key=key,
            newest=newest,
            units=list(units),  # compile pops from its own list; the log keeps the walk
            contexts=contexts,
            prefix=prefix,
            by_end={unit.end: index for index, unit in enumerate(units)},
            forced=[index for index, unit in enumerate(units) if unit.forced],
            exhausted=exhausted,
            archives=dict(self.archived_by),
            source=self.messages,
        )

    def shed(
        self,
        final: list[Message],
        by_message: dict[int, Rendered],
        request_bytes: int,
        wall: int,
    ) -> tuple[list[Message], int, list[_Ev]]:
        """Replace inline media oldest first, nested ones included, until within the wall (opt-in)."""
        shed: list[_Ev] = []
        out = list(final)
        for index, message in enumerate(out):
            if request_bytes <= wall:
                break
            replaced, freed, refs = shed_media(message, request_bytes - wall)
            if not refs:
                continue
            request_bytes -= freed
            out[index] = replaced
            by_message[id(replaced)] = self.fresh(replaced)
            position = self.position_of(message.id) if message.id else None
            shed.extend(
                _Ev(position if position is not None else -1, -1, message.id or "", ref, "wall")
                for ref in refs
            )
        if request_bytes > wall:
            raise OverBudget(
                f"the request is about {request_bytes} bytes even without inline media, over the {wall}-byte wall",
                budget=wall,
                required=request_bytes,
                makeup={},
            )
        return out, request_bytes, shed

    def counted_beyond_rule(self, checkpoint: Checkpoint) -> int:
        """What the summariser's own count of the summary says it costs beyond the rule's price of
        its text (0 when uncounted or the rule prices it higher). A fresh summary is content no
        anchor has counted yet, and the rule prices it up to a tenth under; its output count is
        the same text in the provider's units, as its input count will be."""
        if checkpoint.summary_tokens is None:
            return 0
        return max(0, checkpoint.summary_tokens - self.est.text(checkpoint.summary))

    def anchored(self, local: int) -> tuple[int, str | None]:
        anchor = self.state.anchor
        if anchor is None:
            return local, None
        from ..usage.tracker import anchored_estimate

        result = anchored_estimate(
            anchor, model=self.profile.name, connection=self.state.connection, estimate_now=local
        )
        return result.value, (result.reason if result.cold else None)


def _attach_manifest(messages: list[Message], manifest: str) -> list[Message]:
    block = Text(text=manifest)
    if messages and messages[-1].role == "user":
        last = messages[-1]
        replaced = Message(
            role="user",
            content=(*last.content, block),
            id=last.id,
            created_at=last.created_at,
            metadata=last.metadata,
        )
        return [*messages[:-1], replaced]
    return [*messages, Message(role="user", content=(block,))]


class _MessageView(Sequence[Message]):
    """The stored messages as a sequence of ``Message`` without copying 10,000 references."""

    def __init__(self, priced: Sequence[PricedMessage]) -> None:
        self._priced = priced

    def __len__(self) -> int:
        return len(self._priced)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return [pm.message for pm in self._priced[index]]
        return self._priced[index].message


def _id_in(messages: Sequence[PricedMessage], position: int) -> str | None:
    id_at = getattr(messages, "id_at", None)
    return str(id_at(position)) if id_at is not None else messages[position].message.id


def _result_id(block: object) -> str | None:
    return block.tool_use_id if isinstance(block, ToolResult) else None
