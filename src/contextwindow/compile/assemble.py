"""The result assembly: from the units the walk took to the :class:`CompiledRequest`.

The tail is emitted oldest first with the opening user message when it needs one, tool pairing is
enforced (:mod:`.pairing`), a manifest names the attachments left out of line (the oldest units go
until head, tail and manifest fit), the byte wall is checked (media shed oldest first when the
policy allows), and every decision is returned with ids.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..content import AttachmentRef, Block, Message, NestedBlock, Text, ToolResult
from ..errors import OverBudget
from ._render import Rendered
from ._run import Run
from ._tail import TailSums, tail_sums
from .head import Head, head_bytes
from .media import manifest_text, shed_media
from .pairing import enforce_tool_pairing, shape_of
from .reread import names_reread
from .state import CompiledRequest, Decisions, Eviction, MediaWatermark
from .unit import Evicted, Unit

__all__ = ["OPENING", "Opening", "assemble"]

OPENING = "[continued from earlier in the conversation]"
"""The user message a request opens with when its history, as kept, would open with the assistant."""


@dataclass(frozen=True, slots=True)
class Opening:
    """The opening user message and its price."""

    message: Message
    tokens: int


@dataclass(frozen=True, slots=True)
class _Emitted:
    """The tail as it goes out: messages, their renders, and what pairing repaired. ``plain``: the
    renders are those of the tail's sums from ``start`` on, after the opening when ``opened``, so
    their figures are read from the sums."""

    final: list[Message]
    renders: list[Rendered]
    stubbed: list[str]
    dropped: list[str]
    sums: TailSums | None = None
    start: int = 0
    opened: Rendered | None = None

    def total(self, figure: str) -> int:
        """The renders' sum of ``figure`` (``tokens``, ``wire``, …) read from the sums (``sums`` set)."""
        assert self.sums is not None
        prefix: list[int] = getattr(self.sums, figure)
        opened = 0
        if self.opened is not None:
            opened = self.opened.wire_bytes if figure == "wire" else self.opened.tokens
        return opened + prefix[-1] - prefix[self.start]


def assemble(
    run: Run,
    head: Head,
    units: list[Unit],
    *,
    opening: Opening,
    watermark: MediaWatermark | None,
    moved: bool,
) -> CompiledRequest:
    """The request from the head and the walk's ``units`` (newest first; the oldest are dropped
    while the manifest does not fit). Raises :class:`~contextwindow.errors.OverBudget` over the byte
    wall."""
    makeup, summary = head.makeup, head.summary
    sums = tail_sums(run.cache.tail if run.bound else None, units, run.cache.shapes)
    if run.bound:
        run.cache.tail = sums
    manifest, manifest_tokens, emitted = _fit(run, head, units, opening, sums)
    decided = sums.decided_units(len(sums.units) - len(units))
    evictions = [e for u in reversed(decided) for e in u.evictions]
    final, renders, request_bytes = _within_wall(run, head, emitted, manifest=manifest, evictions=evictions)
    inline = _count_segments(run, makeup, emitted if renders is emitted.renders else None, renders, final)
    if manifest:
        final = _attach_manifest(final, manifest)
    names = _names_reread(emitted, summary, final, manifest) if renders is emitted.renders else None
    makeup["manifest"] = manifest_tokens
    local = sum(v for k, v in makeup.items() if k != "output_reserve")
    accepted_first = units[-1].start if units else len(run.messages)
    estimated, reason = _anchored(run, local)
    decisions = Decisions(
        evicted=tuple(_eviction(e) for e in evictions),
        archived=tuple(a for u in decided for a in u.archives),
        new_archives=tuple(a for u in decided for a in u.new_archives),
        truncated=tuple(t for u in decided for t in u.truncations),
        folded=head.folded,
        omitted=run.ids(head.bounds.floor, accepted_first),
        stubbed=tuple(emitted.stubbed),
        dropped_results=tuple(emitted.dropped),
        watermark=watermark,
        new_watermark=moved,
    )
    return CompiledRequest(
        system=run.state.system,
        tools=run.state.tools,
        messages=((summary,) if summary is not None else ()) + tuple(final),
        estimated_tokens=estimated,
        local_estimate=local,
        makeup=makeup,
        decisions=decisions,
        inline_attachments=inline,
        budget=head.bounds.budget,
        output_reserve=head.reserve,
        request_bytes=request_bytes,
        model=run.profile.name,
        anchor_reason=reason,
        names_reread=names,
    )


def _names_reread(
    emitted: _Emitted, summary: Message | None, final: list[Message], manifest: str
) -> bool | None:
    """Whether the request names the re-read tool, read off the sums (``None``: the tail is not
    theirs as it is): a message of theirs does, or the summary, the opening or the message that
    carries the manifest."""
    sums = emitted.sums
    if sums is None:
        return None
    if sums.among(sums.rereads, emitted.start, len(sums.renders)):
        return True
    others = [m for m in (summary, emitted.opened.message if emitted.opened else None) if m is not None]
    if manifest and final:
        others.append(final[-1])
    return names_reread(others)


def _fit(
    run: Run, head: Head, units: list[Unit], opening: Opening, sums: TailSums
) -> tuple[str, int, _Emitted]:
    """``(manifest, its price, the tail as emitted)`` within the budget: the oldest units (from the end
    of ``units``) go until head, manifest and the tail *as it goes out* fit, or one unit is left.

    The walk priced each unit as stored; tool pairing may add to that (an orphan-only message says
    ``[tool call omitted]``, a call whose result is gone gets a stub), so the sum is checked again on
    the emitted renders.
    """
    while True:
        manifest, manifest_tokens = _fit_manifest(run, head, units, opening, sums)
        emitted = _emit(run, units, head.summary, opening, sums)
        tail = _tail_tokens(emitted, sums)
        if head.bounds.head + tail + manifest_tokens <= head.bounds.budget or len(units) <= 1:
            return manifest, manifest_tokens, emitted
        units.pop()  # units are newest first: the last one is the oldest


def _tail_tokens(emitted: _Emitted, sums: TailSums) -> int:
    if emitted.sums is None:
        return sum(r.tokens for r in emitted.renders)
    return emitted.total("tokens")


def _fit_manifest(
    run: Run, head: Head, units: list[Unit], opening: Opening, sums: TailSums
) -> tuple[str, int]:
    """``(manifest, its price)``, dropping the oldest units (from the end of ``units``) until head,
    tail and manifest fit or one unit is left."""
    policy, est, budget = run.policy, run.est, head.bounds.budget
    while True:
        lo = len(sums.units) - len(units)
        decided = sums.decided_units(lo)
        entries = [e.ref for u in reversed(decided) for e in u.evictions if e.ref is not None]
        manifest = (
            manifest_text(entries, max_entries=policy.manifest_max_entries, reread=policy.reread_tool)
            if entries
            else ""
        )
        manifest_tokens = est.block(Text(text=manifest)) if manifest else 0
        tail = sums.unit_tokens[-1] - sums.unit_tokens[lo]
        if head.summary is None and units and units[-1].rendered[0][1].message.role != "user":
            tail += opening.tokens
        if head.bounds.head + tail + manifest_tokens <= budget or len(units) <= 1:
            return manifest, manifest_tokens
        units.pop()  # units are newest first: the last one is the oldest


def _emit(run: Run, units: list[Unit], summary: Message | None, opening: Opening, sums: TailSums) -> _Emitted:
    """The tail oldest first, tool pairing enforced, opening on a user message when no summary leads.

    The APIs open a conversation with a user message (Anthropic refuses anything else). Dropping a
    unit that opens on the assistant instead would drop every round of a tool loop whose one user
    message is its opener, and a covering fold would then take all but the newest round.
    """
    start, stop = sums.span(len(sums.units) - len(units))
    renders = sums.renders[start:stop]
    if sums.paired(start, stop, run.cache.shapes):  # nothing to repair: the sums' own messages
        final = sums.messages[start:stop]
        opened = None
        if summary is None and final and final[0].role != "user":
            final.insert(0, opening.message)
            opened = run.fresh(opening.message)
            renders.insert(0, opened)
        return _Emitted(
            final=final, renders=renders, stubbed=[], dropped=[], sums=sums, start=start, opened=opened
        )
    final, stubbed, dropped = enforce_tool_pairing([r.message for r in renders], memo=run.cache.shapes)
    if summary is None and final and final[0].role != "user":
        final.insert(0, opening.message)
    if (
        stubbed
        or dropped
        or len(final) != len(renders)
        or any(m is not r.message for m, r in zip(final, renders, strict=True))
    ):  # repaired: look renders up by message
        by_message = {id(r.message): r for r in renders}
        renders = [by_message.get(id(m)) or run.fresh(m) for m in final]
    return _Emitted(final=final, renders=renders, stubbed=stubbed, dropped=dropped)


def _within_wall(
    run: Run, head: Head, emitted: _Emitted, *, manifest: str, evictions: list[Evicted]
) -> tuple[list[Message], list[Rendered], int]:
    """``(messages, renders, request bytes)`` within ``policy.transport_max_bytes``: media shed oldest
    first (``policy.shed_media_over_wall``, added to ``evictions``), else
    :class:`~contextwindow.errors.OverBudget`."""
    final, renders = emitted.final, emitted.renders
    tail_bytes = emitted.total("wire") if emitted.sums is not None else sum(r.wire_bytes for r in renders)
    request_bytes = head_bytes(run.state, head.summary) + len(manifest.encode()) + tail_bytes
    wall = run.policy.transport_max_bytes
    if not wall or request_bytes <= wall:
        return final, renders, request_bytes
    if not run.policy.shed_media_over_wall:
        raise OverBudget(
            f"the request would be about {request_bytes} bytes, over the {wall}-byte transport wall "
            "(set shed_media_over_wall=True to shed media oldest first)",
            budget=wall,
            required=request_bytes,
            makeup=head.makeup,
        )
    by_message = {id(r.message): r for r in renders}
    final, request_bytes, shed = _shed(run, final, by_message, request_bytes=request_bytes, wall=wall)
    evictions.extend(shed)
    renders = [by_message.get(id(m)) or run.fresh(m) for m in final]
    return final, renders, request_bytes


def _shed(
    run: Run, final: list[Message], by_message: dict[int, Rendered], *, request_bytes: int, wall: int
) -> tuple[list[Message], int, list[Evicted]]:
    """Replace inline media oldest first, nested ones included, until within the wall (opt-in)."""
    shed: list[Evicted] = []
    out = list(final)
    for index, message in enumerate(out):
        if request_bytes <= wall:
            break
        replaced, freed, refs = shed_media(message, request_bytes - wall, reread=run.policy.reread_tool)
        if not refs:
            continue
        request_bytes -= freed
        out[index] = replaced
        by_message[id(replaced)] = run.fresh(replaced)
        position = run.position_of(message.id) if message.id else None
        shed.extend(
            Evicted(position if position is not None else -1, -1, message.id or "", ref, "wall")
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


def _count_segments(
    run: Run, makeup: dict[str, int], plain: _Emitted | None, renders: list[Rendered], final: list[Message]
) -> tuple[AttachmentRef, ...]:
    """Fill the tail's segments of ``makeup`` from the renders; return the refs sent inline.
    ``plain``: the tail as emitted when ``renders`` are its renders as the sums hold them (its
    figures read from there)."""
    inline: dict[str, AttachmentRef] = {}
    shapes = run.cache.shapes
    if plain is not None and plain.sums is not None:
        sums, start = plain.sums, plain.start
        text, results, images, other = (
            getattr(sums, f)[-1] - getattr(sums, f)[start] for f in ("text", "results", "images", "other")
        )
        with_media = [sums.renders[r] for r in sums.among(sums.inline, start, len(sums.renders))]
        thinking = bool(sums.among(sums.thinking, start, len(sums.renders)))
        if plain.opened is not None:
            t, r, i, o = plain.opened.segments
            text, results, images, other = text + t, results + r, images + i, other + o
            with_media.insert(0, plain.opened)
            thinking = thinking or shape_of(plain.opened.message, shapes).thinking
        for rendered in with_media:
            for ref in rendered.inline:
                inline.setdefault(ref.id, ref)
    else:
        text = results = images = other = 0
        for rendered in renders:
            t, r, i, o = rendered.segments
            text += t
            results += r
            images += i
            other += o
            for ref in rendered.inline:
                inline.setdefault(ref.id, ref)
        thinking = any(shape_of(m, shapes).thinking for m in final)
    # Selection priced earlier turns' thinking (erring high); the API strips it on some models, so
    # the request's estimate does not count it.
    makeup["text"] = max(0, text - run.est.uncharged(final)) if thinking else text
    makeup["tool_results"], makeup["images"], makeup["other_media"] = results, images, other
    return tuple(inline.values())


def _eviction(e: Evicted) -> Eviction:
    return Eviction(
        attachment_id=e.ref.id if e.ref else "",
        message_id=e.message_id,
        reason=e.reason,
        media_type=e.ref.media_type if e.ref else "",
        size_bytes=e.ref.size_bytes if e.ref else 0,
    )


def _anchored(run: Run, local: int) -> tuple[int, str | None]:
    """The estimate anchored on the provider's last count, when the state has an anchor."""
    anchor = run.state.anchor
    if anchor is None:
        return local, None
    from ..usage.anchor import anchored_estimate

    result = anchored_estimate(
        anchor, model=run.profile.name, connection=run.state.connection, estimate_now=local
    )
    return result.value, (result.reason if result.cold else None)


def _attach_manifest(messages: list[Message], manifest: str) -> list[Message]:
    """``messages`` with the manifest at the end of the last user message: inside its last tool
    result when it ends with one, so a request after a tool result still ends with the results on
    every wire (a framework reads a message after them as a new request and runs the tool again)."""
    block = Text(text=manifest)
    if not messages or messages[-1].role != "user":
        return [*messages, Message(role="user", content=(block,))]
    last = messages[-1]
    content: tuple[Block, ...] = (*last.content, block)
    if last.content and isinstance(result := last.content[-1], ToolResult):
        # A text result stays text (the wire's plainest form): the manifest follows it after a blank line.
        held: str | tuple[NestedBlock, ...] = (*result.content, block)
        if isinstance(result.content, str):
            held = f"{result.content}\n\n{manifest}" if result.content else manifest
        content = (*last.content[:-1], replace(result, content=held))
    replaced = Message(
        role="user", content=content, id=last.id, created_at=last.created_at, metadata=last.metadata
    )
    return [*messages[:-1], replaced]
