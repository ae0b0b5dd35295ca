"""The bounds every public boundary checks before anything else runs: nesting depth and numbers.

A public boundary (constructors of content values, ``Session.append``/``attach``, ``count_tokens``,
``parse_any``, the scenario and transcript loaders, the command line) refuses what is outside these
bounds with :class:`~contextwindow.errors.InvalidInput` naming the path of the bad field, so no code
inside ever meets a value it cannot handle:

- **Depth**: a free-form value (a tool's input, message metadata, a tool's schema, an OpenAI
  ``arguments`` string) nests at most :data:`MAX_DEPTH` containers (objects, arrays, dicts, lists,
  tuples); a whole document that holds such values (a wire request, a message as data, a scenario
  or transcript line, a stored payload) at most :data:`MAX_DOCUMENT_DEPTH`. JSON text is measured
  before it is parsed. The checks are iterative, so they cannot themselves recurse past the
  interpreter's limit, and everything recursive inside (validation, canonical JSON, pricing) then
  stays far below that limit.
- **Numbers**: every count, price, size and dimension is a finite number ≥ 0 within a documented
  bound: :data:`MAX_TOKENS` for token counts, prices and stamps; :data:`MAX_BYTES` for sizes (the
  dimension, duration and page bounds are in :mod:`contextwindow.content`). A number beyond a float's
  range (``10**400``) is refused like any other, never an ``OverflowError``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from .errors import InvalidInput

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_DOCUMENT_DEPTH",
    "MAX_TOKENS",
    "check_count",
    "check_depth",
    "check_json_depth",
    "finite",
    "loads_json",
    "shown",
]

MAX_DEPTH: Final[int] = 100
"""Containers a value may nest. Real tool inputs, metadata and JSON schemas nest a handful; 100 keeps
every recursive step inside well under Python's default recursion limit of 1,000 frames."""

MAX_DOCUMENT_DEPTH: Final[int] = MAX_DEPTH + 16
"""Containers a whole document may nest: its free-form values' ``MAX_DEPTH`` plus 16 levels of its
own structure (request → messages → message → content → block → ... is 6)."""

MAX_TOKENS: Final[int] = 10**12
"""Largest token count, price or stamp accepted: a trillion tokens is five orders of magnitude past
the largest context window offered; beyond it a figure is corrupt data."""

MAX_BYTES: Final[int] = 2**53 - 1
"""Largest size in bytes: the largest integer JSON readers agree on exactly (RFC 8259, section 6,
https://www.rfc-editor.org/rfc/rfc8259#section-6)."""

_CONTAINERS = (dict, list, tuple, Mapping)


def finite(value: object) -> float | None:
    """``value`` as a float when it is a finite real number (not a boolean), else ``None``.

    Unlike ``math.isfinite`` it never raises: an int too large for a float is not finite here.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        as_float = float(value)
    except OverflowError:
        return None
    return as_float if math.isfinite(as_float) else None


def check_count(value: object, *, path: str, bound: int = MAX_TOKENS, what: str = "a count") -> int:
    """A whole number ``0 ≤ value ≤ bound`` (an integral float from JSON is accepted), or ``InvalidInput``."""
    as_float = finite(value)
    if as_float is None:
        raise InvalidInput(f"must be {what} (a finite whole number), got {shown(value)}", path=path)
    if isinstance(value, float) and value != int(value):
        raise InvalidInput(f"must be {what} (a whole number), got {value!r}", path=path)
    number = int(as_float) if isinstance(value, float) else int(value)  # type: ignore[call-overload]
    if not 0 <= number <= bound:
        raise InvalidInput(f"must be {what} between 0 and {bound}, got {shown(number)}", path=path)
    return number


def shown(value: object) -> str:
    """A short description of a bad value for an error message (a 400-digit int is not printed)."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return repr(value) if abs(value) < 10**30 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"a string of {len(value)} characters"
    return type(value).__name__


def _join(prefix: str, trail: tuple[Any, ...] | None) -> str:
    keys: list[object] = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    out = prefix
    for key in reversed(keys):
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out


def check_depth(value: object, *, path: str = "", limit: int = MAX_DEPTH) -> None:
    """``InvalidInput`` naming the first path that nests more than ``limit`` containers.

    Iterative (an explicit stack), so a value nested a million deep, or one that contains itself,
    is refused without a single recursive call.
    """
    if not isinstance(value, _CONTAINERS):
        return
    stack: list[tuple[Any, int, tuple[Any, ...] | None]] = [(value, 1, None)]
    while stack:
        node, depth, trail = stack.pop()
        if depth > limit:
            raise InvalidInput(f"nests deeper than {limit} levels", path=_join(path, trail) or None)
        items = node.items() if isinstance(node, Mapping) else enumerate(node)
        for key, item in items:
            if isinstance(item, _CONTAINERS) and not isinstance(item, str | bytes):
                stack.append((item, depth + 1, (trail, key)))


_JSON_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def check_json_depth(text: str, *, path: str = "", limit: int = MAX_DOCUMENT_DEPTH) -> None:
    """``InvalidInput`` when JSON text nests more than ``limit`` arrays and objects.

    Measured on the text, before ``json.loads`` (which recurses once per level) ever sees it.
    """
    if text.count("[") + text.count("{") <= limit:
        return
    depth = 0
    for match in _JSON_STRUCTURE.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                raise InvalidInput(
                    f"JSON nests deeper than {limit} levels (at character {match.start()})", path=path or None
                )
        elif token in ("]", "}"):
            depth -= 1


def loads_json(text: str, *, path: str = "", limit: int = MAX_DOCUMENT_DEPTH) -> Any:
    """``json.loads`` of text measured first: too deep is ``InvalidInput``; bad JSON stays
    ``json.JSONDecodeError`` (a ``ValueError``) for the caller to report with its line and column."""
    check_json_depth(text, path=path, limit=limit)
    return json.loads(text)
