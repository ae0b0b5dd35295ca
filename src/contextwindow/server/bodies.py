"""Request bodies parsed once: what a request repeats of the one before it on its connection is taken
from that parse, not parsed again.

An agent resends its whole history on every call, so the proxy's body at 400 messages is 400
messages it parsed a moment ago plus one or two new ones. :class:`Bodies` keeps the last body of each
recent connection: its bytes up to the end of its history's last item, and what they parsed to. When
the next body on that connection begins with exactly those bytes, and goes on with a comma or the
end of the history, only the rest is parsed (each new item, then the members after the history) and
the history's earlier items are the very objects parsed before. Equal bytes parse to equal values, so
the result is the one :func:`~.request.parse_json` gives, with the same checks: the repeated bytes
passed them in the body before; the rest passes them here (nesting counted from where it starts).
Anything else (a body that differs earlier, an encoding other than UTF-8, a member named twice, a
history that is not a list, whatever the part-parse refuses) is parsed whole by ``parse_json``, which
gives its own answer and its own errors.

The objects of a body are shared with the next one's: nothing may edit a parsed body in place (the
guard reads bodies and builds what it sends anew). What is kept is bounded: at most
:data:`ENTRIES` connections and :data:`TEXT_BYTES` bytes of kept bodies, the least recently used let go.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from json import JSONDecoder
from typing import Any

from .limits import ServerLimits
from .request import checked_text, parse_json, refuse_constant

__all__ = ["ENTRIES", "TEXT_BYTES", "Bodies"]

ENTRIES = 128
"""Connections whose last body is kept."""
TEXT_BYTES = 32 * 1024 * 1024
"""Bytes of kept bodies, all connections together."""

_scan = JSONDecoder(parse_constant=refuse_constant).raw_decode
"""One JSON value at an index: ``(value, end)``, as :func:`json.loads` parses it."""
_SPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, i: int) -> int:
    """Where JSON's whitespace (RFC 8259) from ``i`` ends."""
    found = _SPACE.match(text, i)
    return found.end() if found is not None else i


@dataclass(frozen=True, slots=True)
class _Kept:
    """One parsed body: its bytes up to the end of its history's last item (just after the ``[``
    when it has none), and what they parsed to."""

    key: str
    """The member holding the history (``messages``, ``input``)."""
    prefix: bytes
    leading: tuple[tuple[str, Any], ...]
    """The members before the history, as parsed."""
    items: tuple[Any, ...]
    """The history's items, as parsed."""


class Bodies:
    """The last body of each recent connection (see the module docstring)."""

    def __init__(self, *, entries: int = ENTRIES, text_bytes: int = TEXT_BYTES) -> None:
        self.entries = entries
        self.text_bytes = text_bytes
        self._kept: OrderedDict[Hashable, _Kept] = OrderedDict()
        self._bytes = 0
        self.continued = 0
        """How many bodies were parsed from where their connection's last one ended (the tests read it)."""

    def parse(
        self, raw: bytes, limits: ServerLimits, *, history: str | None, where: Hashable | None
    ) -> dict[str, Any]:
        """``raw`` as a JSON object, as :func:`~.request.parse_json` parses it (the same value, the
        same 400s); ``history``: the member holding the history, ``where``: the connection (``None``:
        nothing is kept)."""
        if history is None or where is None:
            return parse_json(raw, limits)
        prior = self._kept.pop(where, None)
        if prior is not None:
            self._bytes -= len(prior.prefix)
            found = _continued(raw, prior, limits)
            if found is not None:
                self.continued += 1
                body, kept = found
                self._keep(where, kept)
                return body
        text = checked_text(raw, limits)
        whole = _whole(text, history)
        if whole is None:
            return parse_json(raw, limits)  # its own value, or its own error
        self._keep(where, whole[1])
        return whole[0]

    def __len__(self) -> int:
        return len(self._kept)

    def _keep(self, where: Hashable, kept: _Kept | None) -> None:
        if kept is None or len(kept.prefix) > self.text_bytes:
            return
        self._kept[where] = kept
        self._bytes += len(kept.prefix)
        while len(self._kept) > self.entries or self._bytes > self.text_bytes:
            _, dropped = self._kept.popitem(last=False)
            self._bytes -= len(dropped.prefix)


def _whole(text: str, history: str) -> tuple[dict[str, Any], _Kept | None] | None:
    """``text`` parsed member by member, and what to keep of it; ``None`` when it is not a JSON
    object as this walk reads it (``parse_json`` then answers)."""
    try:
        i = _skip(text, 0)
        if text[i : i + 1] != "{":
            return None
        body: dict[str, Any] = {}
        i = _skip(text, i + 1)
        cut: int | None = None
        items: list[Any] = []
        leading: tuple[tuple[str, Any], ...] = ()
        if text[i : i + 1] != "}":
            while True:
                name, i = _name(text, i)
                if name in body:
                    return None  # a member named twice: as json.loads takes it
                if name == history and text[i : i + 1] == "[":
                    leading = tuple(body.items())
                    cut = i + 1
                    i, cut = _items(text, cut, items, cut, first=True)
                    body[name] = items
                else:
                    body[name], i = _scan(text, i)
                i = _skip(text, i)
                if text[i : i + 1] == ",":
                    i = _skip(text, i + 1)
                    continue
                if text[i : i + 1] != "}":
                    return None
                break
        if _skip(text, i + 1) != len(text):
            return None
    except (ValueError, RecursionError):
        return None
    if cut is None:
        return body, None
    kept = _Kept(key=history, prefix=text[:cut].encode(), leading=leading, items=tuple(items))
    return body, kept


def _name(text: str, i: int) -> tuple[str, int]:
    """The member name at ``i`` and where its value starts."""
    if text[i : i + 1] != '"':
        raise ValueError("a member's name")
    name, i = _scan(text, i)
    i = _skip(text, i)
    if text[i : i + 1] != ":":
        raise ValueError("a member's colon")
    return name, _skip(text, i + 1)


def _items(text: str, i: int, into: list[Any], end: int, *, first: bool) -> tuple[int, int]:
    """The items of an array from ``i`` appended to ``into``: from just after its ``[`` (``first``)
    or after an item's comma; where the array ends, and where its last item ends (``end`` when it
    has none)."""
    i = _skip(text, i)
    if first and text[i : i + 1] == "]":
        return i + 1, end
    while True:
        value, i = _scan(text, i)
        into.append(value)
        end = i
        i = _skip(text, i)
        if text[i : i + 1] == ",":
            i = _skip(text, i + 1)
            continue
        if text[i : i + 1] != "]":
            raise ValueError("an array's comma")
        return i + 1, end


def _continued(raw: bytes, prior: _Kept, limits: ServerLimits) -> tuple[dict[str, Any], _Kept] | None:
    """``raw`` parsed from where ``prior``'s history ended, when it begins with ``prior``'s bytes;
    ``None`` when it does not, or when what follows does not parse here."""
    if not raw.startswith(prior.prefix):
        return None
    try:
        # Inside the body's object and its history's array: two levels deep.
        rest = checked_text(raw[len(prior.prefix) :], limits, within=2)
    except Exception:
        return None  # parse_json says what is wrong with the whole body
    try:
        i = _skip(rest, 0)
        items = list(prior.items)
        if items:
            # The prior's last item ended here: the bytes after it must not extend it (a number).
            if rest[i : i + 1] == ",":
                i, end = _items(rest, i + 1, items, 0, first=False)
            elif rest[i : i + 1] == "]":
                i, end = i + 1, 0
            else:
                return None
        else:
            i, end = _items(rest, i, items, 0, first=True)
        body = dict(prior.leading)
        body[prior.key] = items
        i = _skip(rest, i)
        while rest[i : i + 1] == ",":
            name, i = _name(rest, _skip(rest, i + 1))
            if name in body:
                return None
            body[name], i = _scan(rest, i)
            i = _skip(rest, i)
        if rest[i : i + 1] != "}" or _skip(rest, i + 1) != len(rest):
            return None
    except (ValueError, RecursionError):
        return None
    grown = prior.prefix + rest[:end].encode() if len(items) > len(prior.items) else prior.prefix
    return body, _Kept(key=prior.key, prefix=grown, leading=prior.leading, items=tuple(items))
