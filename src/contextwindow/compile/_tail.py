"""The tail as it goes out, oldest first, with running sums: what the assembly reads of it at a range.

The walk hands the assembly its units newest first, and most of them are the very units the previous
compile took (the walk reuses them, :mod:`._walklog`). :class:`TailSums` keeps the previous
assembly's units oldest first with their renders and messages, running sums (each unit's price; each
render's tokens, segments and wire bytes) and where the rare things are (units with decisions, renders
with inline media, thinking, a placeholder naming the re-read tool, a break in tool pairing). The next
compile keeps the run of those units it took again and adds only the new ones (:func:`tail_sums`);
the sums are absolute, so a range's figure is a difference whichever end was cut. What the assembly
reads of a range is the same as a pass over it: the tests compare incremental compiles with cold ones.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import attrgetter, is_
from typing import TYPE_CHECKING

from ..content import Message
from ._render import Rendered
from .pairing import ShapeMemo, shape_of
from .reread import names_reread

if TYPE_CHECKING:
    from .unit import Unit

__all__ = ["TailSums", "tail_sums"]

_start = attrgetter("start")


@dataclass(slots=True)
class TailSums:
    """Units oldest first with their renders and running sums (machine integers: a long history's
    sums are not a Python int each). Indices into the lists are *local*;
    the index lists (``decided`` …) hold *absolute* ones: local = absolute − ``unit_base`` (units) or
    − ``render_base`` (renders), so cutting the oldest units off keeps every figure."""

    unit_base: int = 0
    render_base: int = 0
    units: list[Unit] = field(default_factory=list)
    first: array[int] = field(default_factory=lambda: array("q", [0]))
    """``first[i]``: the absolute index of unit ``i``'s first render (one past the last: ``first[-1]``)."""
    unit_tokens: array[int] = field(default_factory=lambda: array("q", [0]))
    renders: list[Rendered] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    tokens: array[int] = field(default_factory=lambda: array("q", [0]))
    text: array[int] = field(default_factory=lambda: array("q", [0]))
    results: array[int] = field(default_factory=lambda: array("q", [0]))
    images: array[int] = field(default_factory=lambda: array("q", [0]))
    other: array[int] = field(default_factory=lambda: array("q", [0]))
    wire: array[int] = field(default_factory=lambda: array("q", [0]))
    decided: list[int] = field(default_factory=list)
    """Units with evictions, archives or cuts."""
    inline: list[int] = field(default_factory=list)
    """Renders with media inline."""
    thinking: list[int] = field(default_factory=list)
    rereads: list[int] = field(default_factory=list)
    """Renders whose message names the re-read tool (:func:`~.reread.names_reread`)."""
    breaks: list[int] = field(default_factory=list)
    """Renders that tool pairing would repair after the render before them (see :meth:`paired`)."""

    def extend(self, units: list[Unit], shapes: ShapeMemo) -> None:
        """Add ``units`` (oldest first) after the newest."""
        for unit in units:
            u = self.unit_base + len(self.units)
            self.units.append(unit)
            self.unit_tokens.append(self.unit_tokens[-1] + unit.tokens)
            if unit.evictions or unit.archives or unit.new_archives or unit.truncations:
                self.decided.append(u)
            for _, rendered, _, _ in unit.rendered:
                self._add(rendered, shapes)
            self.first.append(self.render_base + len(self.renders))

    def cut(self, keep: int) -> None:
        """Keep the oldest ``keep`` units alone (with their renders, sums and marks)."""
        r = self.first[keep] - self.render_base
        renders = self.render_base + r
        del self.units[keep:], self.first[keep + 1 :], self.unit_tokens[keep + 1 :]
        del self.renders[r:], self.messages[r:]
        for sums in (self.tokens, self.text, self.results, self.images, self.other, self.wire):
            del sums[r + 1 :]
        del self.decided[bisect_left(self.decided, self.unit_base + keep) :]
        for marks in (self.inline, self.thinking, self.rereads, self.breaks):
            del marks[bisect_left(marks, renders) :]

    def _add(self, rendered: Rendered, shapes: ShapeMemo) -> None:
        r = self.render_base + len(self.renders)
        message = rendered.message
        _, answers, sendable, thinking = shape_of(message, shapes)
        previous = shape_of(self.messages[-1], shapes).calls if self.messages else ()
        if (
            not sendable
            or (previous and (message.role != "user" or answers != previous))
            or (answers and not previous)
        ):
            self.breaks.append(r)
        self.renders.append(rendered)
        self.messages.append(message)
        text, results, images, other = rendered.segments
        self.tokens.append(self.tokens[-1] + rendered.tokens)
        self.text.append(self.text[-1] + text)
        self.results.append(self.results[-1] + results)
        self.images.append(self.images[-1] + images)
        self.other.append(self.other[-1] + other)
        self.wire.append(self.wire[-1] + rendered.wire_bytes)
        if rendered.inline:
            self.inline.append(r)
        if thinking:
            self.thinking.append(r)
        if names_reread((message,)):
            self.rereads.append(r)

    # -- ranges: units ``lo..`` (local, oldest first) up to the newest ---------------------------------

    def span(self, lo: int) -> tuple[int, int]:
        """The local render range of units ``lo..``."""
        return self.first[lo] - self.render_base, len(self.renders)

    def decided_units(self, lo: int) -> list[Unit]:
        """The units ``lo..`` with evictions, archives or cuts, oldest first."""
        at = bisect_left(self.decided, self.unit_base + lo)
        return [self.units[u - self.unit_base] for u in self.decided[at:]]

    def among(self, marks: list[int], start: int, stop: int) -> list[int]:
        """The local indices of ``marks`` (a render index list) within renders ``start..stop``."""
        base = self.render_base
        return [r - base for r in marks[bisect_left(marks, base + start) : bisect_left(marks, base + stop)]]

    def paired(self, start: int, stop: int, shapes: ShapeMemo) -> bool:
        """Whether renders ``start..stop`` pass tool pairing's check as they are (every call answered
        in the next message, every result answering the one before, all sendable)."""
        if start >= stop:
            return True
        _, answers, sendable, _ = shape_of(self.messages[start], shapes)
        if not sendable or answers:
            return False
        if self.among(self.breaks, start + 1, stop):
            return False
        return not shape_of(self.messages[stop - 1], shapes).calls


def tail_sums(old: TailSums | None, units: list[Unit], shapes: ShapeMemo) -> TailSums:
    """The sums of ``units`` (newest first, as the walk gives them): the run of ``old``'s units they
    take again, oldest first, kept as it is, and the rest added."""
    oldest = units[::-1]
    if old is None or not oldest or not old.units:
        return _fresh(oldest, shapes)
    a = bisect_left(old.units, oldest[0].start, key=_start)
    if a >= len(old.units) or old.units[a] is not oldest[0]:
        return _fresh(oldest, shapes)
    keep = min(len(old.units) - a, len(oldest))
    while keep and oldest[keep - 1] is not old.units[a + keep - 1]:
        keep -= 1  # the newest units were decided again: new objects
    if not all(map(is_, oldest[:keep], old.units[a : a + keep])):
        # A unit among them was decided again too (one with media reads the depth): the run ends there.
        keep = next(
            i
            for i, (mine, theirs) in enumerate(zip(oldest, old.units[a:], strict=False))
            if mine is not theirs
        )
    if not keep:
        return _fresh(oldest, shapes)
    if a == 0:
        # The oldest unit of the previous assembly is taken again (a history that only grew): its
        # sums up to ``keep`` are this one's first part as they are, so they are cut there and the
        # new units added in place (nothing else holds them: the cache keeps the newest assembly's).
        old.cut(keep)
        old.extend(oldest[keep:], shapes)
        return old
    r0, r1 = old.first[a] - old.render_base, old.first[a + keep] - old.render_base
    u0, u1 = old.unit_base + a, old.unit_base + a + keep
    b0, b1 = old.render_base + r0, old.render_base + r1
    sums = TailSums(
        unit_base=u0,
        render_base=b0,
        units=old.units[a : a + keep],
        first=old.first[a : a + keep + 1],
        unit_tokens=old.unit_tokens[a : a + keep + 1],
        renders=old.renders[r0:r1],
        messages=old.messages[r0:r1],
        tokens=old.tokens[r0 : r1 + 1],
        text=old.text[r0 : r1 + 1],
        results=old.results[r0 : r1 + 1],
        images=old.images[r0 : r1 + 1],
        other=old.other[r0 : r1 + 1],
        wire=old.wire[r0 : r1 + 1],
        decided=_within(old.decided, u0, u1),
        inline=_within(old.inline, b0, b1),
        thinking=_within(old.thinking, b0, b1),
        rereads=_within(old.rereads, b0, b1),
        breaks=_within(old.breaks, b0, b1),
    )
    sums.extend(oldest[keep:], shapes)
    return sums


def _fresh(oldest: list[Unit], shapes: ShapeMemo) -> TailSums:
    sums = TailSums()
    sums.extend(oldest, shapes)
    return sums


def _within(marks: list[int], start: int, stop: int) -> list[int]:
    return marks[bisect_left(marks, start) : bisect_left(marks, stop)]
