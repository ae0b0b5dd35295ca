"""A unit — a message with its tool calls' results, never split — rendered from the walk's context.

:func:`render_unit` renders the messages of one unit newest first, as the walk reaches them: which
stale results are archived, which media stay inline under the running media budget, and which
messages are cut to the per-message cap. The walk takes or refuses a unit whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..content import AttachmentRef, Message, ToolUse
from ._render import Rendered
from ._run import Run, result_id
from .media import MediaBudget
from .pairing import enforce_tool_pairing
from .state import ArchiveRecord, Truncation

__all__ = ["Evicted", "Spot", "Unit", "render_unit", "repair_price"]


@dataclass(frozen=True, slots=True)
class Evicted:
    """A media item a compile keeps out of line, and why (``count``, ``depth``, ``bytes``, ``budget``,
    ``wall``)."""

    position: int
    ordinal: int
    message_id: str
    ref: AttachmentRef | None
    reason: str


class Spot(NamedTuple):
    """Where the walk stands at a unit: its messages ``first..end``, and the turns and depth (tokens)
    counted before it. (A named tuple: the walk makes one per unit, and a tuple is built fastest.)"""

    first: int
    end: int
    turns: int
    depth: int


@dataclass(slots=True)
class Unit:
    """One unit as rendered: its messages (oldest first), price and decisions."""

    start: int
    end: int
    rendered: list[tuple[int, Rendered, frozenset[int], dict[str, ArchiveRecord]]] = field(
        default_factory=list
    )
    """``(position, render, evicted ordinals, archives in force)`` per message, oldest first."""
    tokens: int = 0
    evictions: list[Evicted] = field(default_factory=list)
    archives: list[ArchiveRecord] = field(default_factory=list)
    new_archives: list[ArchiveRecord] = field(default_factory=list)
    truncations: list[Truncation] = field(default_factory=list)
    kept: list[tuple[int, int]] = field(default_factory=list)
    """``(position, ordinal)`` of the media kept inline, newest first."""
    forced: bool = False
    """Decided by the room left (media out of line for the budget, cut, archived to fit): a later
    compile decides it again rather than reusing it."""
    media: bool = False
    """A message of the unit holds media: its decisions read the depth and the media budget's state."""
    repaired: bool = False
    """Tool pairing changes the unit (:func:`repair_price` may be more than 0 at any multiplier)."""


_OLDER = Message.user("older")
"""Stands for the message before a unit when it is repaired alone (see :func:`repair_price`)."""

Rendering = tuple[Unit, int, int]
"""A unit with the turns and depth after it."""


def render_unit(
    run: Run,
    spot: Spot,
    media: MediaBudget,
    cap: int,
    *,
    out_of_line: frozenset[tuple[int, int]] = frozenset(),
    archive_new: bool = True,
) -> Rendering:
    """The unit at ``spot`` rendered under ``cap``, with the turns and depth after it. The media items
    in ``out_of_line`` (``(position, ordinal)``) are placeholders whatever the budget says (reason
    ``budget``: the unit does not fit with them inline); ``archive_new`` allows new archives."""
    policy = run.policy
    newest = len(run.messages) - 1
    turns, depth = spot.turns, spot.depth
    unit = Unit(start=spot.first, end=spot.end)
    for position in range(spot.end, spot.first - 1, -1):
        base = run.base(position)
        turn = turns
        if base.human:
            turns += 1
        depth += base.tokens
        too_deep = (
            bool(policy.image_depth_tokens) and position != newest and depth > policy.image_depth_tokens
        )
        archived, new = run.archives_for(position, base, turn, new_allowed=archive_new)
        evicted: set[int] = set()
        message = run.messages[position].message
        if base.media:
            unit.media = True
            archived_tops = {i for i in base.results if result_id(message.content[i]) in archived}
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
                        Evicted(position, item.ordinal, message.id or f"@{position}", item.ref, why)
                    )
        rendered = run.render(position, archived, frozen := frozenset(evicted), cap)
        if rendered.truncated:
            unit.truncations.append(
                Truncation(
                    message_id=message.id or f"@{position}",
                    original_tokens=run.render(position, archived, frozen, 0).tokens,
                    rendered_tokens=rendered.tokens,
                )
            )
        unit.rendered.insert(0, (position, rendered, frozen, archived))
        unit.tokens += rendered.tokens
        unit.archives.extend(archived.values())
        unit.new_archives.extend(new)
    unit.truncations.reverse()
    unit.tokens += repair_price(run, unit)
    return unit, turns, depth


def repair_price(run: Run, unit: Unit) -> int:
    """What tool pairing adds to the unit's price when it repairs it (never less than 0): an
    orphan-only message says ``[tool call omitted]``, a call whose result is not in the unit gets a
    stub. A unit holds every call its results answer and every result its calls get (within
    :data:`~contextwindow.compile.pairing.LOOKAHEAD`), so it is repaired as the request will be."""
    renders = [r for _, r, _, _ in unit.rendered]
    if not any(run.base(p).results for p, _, _, _ in unit.rendered) and not any(
        isinstance(b, ToolUse) for r in renders for b in r.message.content
    ):
        return 0  # nothing to pair (the common case)
    # Repaired behind an older message, as in the request (one leading it is dropped, not kept).
    final, stubbed, dropped = enforce_tool_pairing([_OLDER, *(r.message for r in renders)])
    if not stubbed and not dropped and len(final) == len(renders) + 1:
        return 0
    unit.repaired = True
    by_message = {id(r.message): r.tokens for r in renders}
    repaired = sum(by_message.get(id(m)) or run.fresh(m).tokens for m in final[1:])
    return max(0, repaired - sum(by_message.values()))
