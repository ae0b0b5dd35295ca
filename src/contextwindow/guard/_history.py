"""An agent's history as the guard reads it: each call converts only what is new.

:class:`HistoryReader` remembers the last histories it read. When a request's history begins with the
whole of one of them, only the items after it are converted (SDK objects dumped, blocks parsed, media
decoded, chain hashes made); the canonical messages and hashes of the rest are reused. "Begins with"
is decided by value: each item read is kept as a copy of its containers whose leaves are the agent's
own objects (an SDK object is a leaf, compared by identity), so a message edited in place is read
afresh. The new items are parsed after the agent's leading system items, and only where the cut
cannot fall inside what a format merges into one message (the new part opens with the model's reply);
anywhere else the whole history is read.

The rest of the body (model, system, tools, parameters) is the same call after call, and a coding
agent's tools are tens of kilobytes: :meth:`HistoryReader.plain` gives a body equal by value to one
read before the same plain fields (the same objects), and their tools as read then, so what is priced,
checked or walked by identity further on (a tool's price, the breakpoints) is found again rather
than worked out anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..content import Message, ToolSpec
from ..formats import ParsedRequest
from ._match import chain
from ._wire import WireAdapter
from .replies import jsonable

__all__ = ["HistoryReader", "Read"]

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True, kw_only=True, slots=True)
class Read:
    """One request as read: its canonical form, and the chain hash after each of its messages."""

    parsed: ParsedRequest
    """The request, its whole history in canonical form; ``attachments`` holds the bytes of the media
    in the messages from :attr:`new_from` on (the others were read, and stored, before)."""
    hashes: list[str]
    new_from: int
    """How many leading messages were read before (0 when the whole history was read now)."""


@dataclass(frozen=True, slots=True)
class _Fields:
    """A body's fields but the history, as read: ``kept`` to compare the next body's with (its
    containers copied, as the history's items are), ``plain`` as JSON, and its tools as read."""

    kept: dict[str, Any]
    plain: dict[str, Any]
    tools: list[tuple[Any, tuple[ToolSpec, ...], bool]] = field(default_factory=list)
    """The tools read from ``plain`` (at most one entry): the plain list, what it parsed to, and
    whether the format was seen to read them apart from the rest of the body (checked when they
    repeat: a client made for one call reads them once, as before)."""


@dataclass(frozen=True, slots=True)
class _Seen:
    items: list[Any]
    """The history's items as read: containers copied, leaves the agent's own objects."""
    messages: tuple[Message, ...]
    hashes: list[str]


def _copied(value: Any) -> Any:
    """``value`` with its dicts and lists copied, all the way down; every other object is itself."""
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list or type(value) is tuple:
        return [_copied(v) for v in value]
    return value


class HistoryReader:
    """Reads requests in one wire format (see the module docstring); remembers the last ``memory``
    histories (a history continued by the next request takes its place)."""

    def __init__(self, wire: WireAdapter, key: str, *, memory: int = 4, copies: bool = True) -> None:
        self.wire = wire
        self.key = key
        """The body's field that holds the history (``messages``, or ``input`` for Responses)."""
        self.memory = memory
        self.copies = copies
        """Whether the items read are remembered as copies of their containers, so an item the agent
        edits in place is read afresh. ``False`` where nobody edits a body once it is made (the
        proxy's, parsed from bytes, whose items the next body shares when they repeat: then
        "begins with" is decided by identity, item by item, before any value is compared)."""
        self._seen: list[_Seen] = []
        self._fields: list[_Fields] = []
        """The last bodies' fields but the history (see :meth:`plain`), newest first."""
        self._looked: tuple[Any, int, _Seen | None] | None = None
        """The last :meth:`unread` lookup (the history, its length then, the history known in it),
        which the :meth:`read` of the same history that follows takes rather than compare again."""

    def plain(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``body`` with every field but the history as plain JSON (SDK objects dumped, the SDKs'
        ``NOT_GIVEN`` dropped) and the history as the agent gave it. Fields equal by value to a body's
        read before are that body's plain fields, the same objects (the module docstring)."""
        rest = {k: v for k, v in body.items() if k != self.key}
        out = dict(self._fields_of(rest).plain)
        if self.key in body:
            out[self.key] = body[self.key]
        return out

    def _fields_of(self, rest: Mapping[str, Any]) -> _Fields:
        for i, fields in enumerate(self._fields):
            if _same(fields.plain, rest) or fields.kept == rest:
                if i:
                    self._fields = [fields, *(f for f in self._fields if f is not fields)]
                return fields
        plain = jsonable(rest)
        fields = _Fields(kept=_copied(rest) if self.copies else plain, plain=plain)
        self._fields = [fields, *self._fields][: self.memory]
        return fields

    def _parse(self, rest: Mapping[str, Any], items: list[Any]) -> ParsedRequest:
        """The request of ``rest`` (the fields) and ``items`` (the history), its tools read once while
        the fields repeat: parsed without them, and the tools as read then put in."""
        fields = self._fields_of(rest)
        tools = fields.plain.get("tools")
        if not tools or not isinstance(tools, list):
            return self.wire.parse({**fields.plain, self.key: items})
        seen = fields.tools[0] if fields.tools and fields.tools[0][0] is tools else None
        if seen is not None and seen[2]:
            parsed = self.wire.parse({**_without_tools(fields.plain), self.key: items})
            return replace(parsed, request=replace(parsed.request, tools=seen[1]))
        whole = self.wire.parse({**fields.plain, self.key: items})
        if seen is None:
            fields.tools[:] = [(tools, whole.request.tools, False)]
            return whole
        apart = self.wire.parse({**_without_tools(fields.plain), self.key: items})
        if replace(whole.request, tools=()) == apart.request and whole.attachments == apart.attachments:
            # They repeat and read apart from the rest of the body: the tools as first read, from now on.
            fields.tools[:] = [(tools, seen[1], True)]
            return replace(whole, request=replace(whole.request, tools=seen[1]))
        return whole

    def unread(self, body: Mapping[str, Any]) -> Sequence[Any]:
        """The items of ``body``'s history after the longest history read before that it begins
        with: all of them when none is (none when the history is not a list)."""
        raw = body.get(self.key)
        if not isinstance(raw, list | tuple):
            return ()
        prior = self._known(list(raw))
        self._looked = (raw, len(raw), prior)
        return raw[len(prior.items) :] if prior is not None else raw

    def read(self, body: Mapping[str, Any], *, whole: bool = False) -> Read:
        """``body`` read; with ``whole``, its whole history read again (nothing taken as known)."""
        raw = body.get(self.key)
        if not isinstance(raw, list | tuple):
            parsed = self.wire.parse(jsonable(body))
            return Read(parsed=parsed, hashes=chain(parsed.request.messages), new_from=0)
        items = list(raw)
        rest = {k: v for k, v in body.items() if k != self.key}
        looked, self._looked = self._looked, None
        if whole:
            prior = None
        elif looked is not None and looked[0] is raw and looked[1] == len(raw):
            prior = looked[2]  # the lookup :meth:`unread` just made of this very history
        else:
            prior = self._known(items)
        read = self._continue(prior, items, rest) if prior is not None else None
        if read is None or prior is None:
            parsed = self._parse(rest, jsonable(items))
            read = Read(parsed=parsed, hashes=chain(parsed.request.messages), new_from=0)
            seen_items = [_copied(i) for i in items] if self.copies else items
        elif self.copies:
            seen_items = [*prior.items, *(_copied(i) for i in items[len(prior.items) :])]
        else:
            seen_items = items
        seen = _Seen(items=seen_items, messages=read.parsed.request.messages, hashes=read.hashes)
        self._remember(seen, replacing=prior)
        return read

    @staticmethod
    def head(items: Sequence[Any]) -> list[Any]:
        """The leading system and developer items of a history, as JSON (the agent's system prompt,
        which the formats read as such and a rendered request keeps verbatim)."""
        out: list[Any] = []
        for item in items:
            plain = jsonable(item)
            if not (
                isinstance(plain, Mapping)
                and plain.get("role") in _SYSTEM_ROLES
                and plain.get("type", "message") == "message"
            ):
                break
            out.append(plain)
        return out

    def _known(self, items: list[Any]) -> _Seen | None:
        best: _Seen | None = None
        for seen in self._seen:
            n = len(seen.items)
            if n == 0 or n >= len(items) or (best is not None and n <= len(best.items)):
                continue
            if items[:n] == seen.items:
                best = seen
        return best

    def _continue(self, known: _Seen, items: list[Any], rest: Mapping[str, Any]) -> Read | None:
        if not known.messages or known.messages[-1].role == "assistant":
            return None
        new = [jsonable(i) for i in items[len(known.items) :]]
        parsed = self._parse(rest, [*self.head(items), *new])
        added = parsed.request.messages
        if not added or added[0].role != "assistant":
            return None
        whole = replace(parsed, request=replace(parsed.request, messages=(*known.messages, *added)))
        hashes = [*known.hashes, *chain(added, start=known.hashes[-1] if known.hashes else "")]
        return Read(parsed=whole, hashes=hashes, new_from=len(known.messages))

    def _remember(self, seen: _Seen, *, replacing: _Seen | None) -> None:
        kept = [s for s in self._seen if s is not replacing]
        self._seen = [seen, *kept][: self.memory]


def _without_tools(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k != "tools"}


def _same(plain: Mapping[str, Any], rest: Mapping[str, Any]) -> bool:
    """Whether ``rest`` holds the very objects of ``plain`` (a body made of what :meth:`plain` gave)."""
    return len(plain) == len(rest) and all(rest.get(k, _ABSENT) is v for k, v in plain.items())


_ABSENT = object()
