"""How the servers read and write JSON, and which event loop they run on: chosen once, at import.

- :func:`dumps` writes what goes upstream and every answer the servers make, compact, in UTF-8.
  `orjson <https://github.com/ijl/orjson>`_ writes it when installed (the ``server`` extra), several
  times faster than :mod:`json`; a value orjson cannot write exactly goes through :mod:`json`
  instead, so nothing is ever changed on the way: an integer beyond 64 bits (orjson refuses it, and
  :func:`json.loads` keeps it whole), a key that is not a string, a string holding a lone surrogate
  (escaped, as :mod:`json` writes it). ``NaN`` and the infinities are not JSON and are refused in
  every body the servers read (:func:`~.request.parse_json`).
- Parsing stays :func:`json.loads`: orjson reads an integer beyond 64 bits as a float, and a request's
  numbers must reach the upstream as the agent wrote them.
- :data:`LOOP` is ``"uvloop"`` when `uvloop <https://github.com/MagicStack/uvloop>`_ is installed
  (the ``server`` extra), else ``"asyncio"``; :func:`new_event_loop` makes one of that kind.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["LOOP", "WRITER", "dumps", "new_event_loop"]


def _json_dumps(value: Any) -> bytes:
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate: written as the escape it was read from
        return json.dumps(value, separators=(",", ":")).encode()


_fast: Callable[..., bytes] | None
try:
    import orjson

    _fast = orjson.dumps
    # A dataclass or a date is not JSON: handed back, so json refuses it as it always did.
    _OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
except ImportError:  # pragma: no cover - the server extra installs it
    _fast, _OPTIONS = None, 0

WRITER: Literal["orjson", "json"] = "json" if _fast is None else "orjson"
"""Which library :func:`dumps` writes with."""


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON in UTF-8, exactly (see the module docstring)."""
    if _fast is not None:
        try:
            return _fast(value, option=_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: what it cannot write exactly, json writes
            pass
    return _json_dumps(value)


_uvloop_factory: Callable[[], asyncio.AbstractEventLoop] | None
try:
    import uvloop

    _uvloop_factory = uvloop.new_event_loop
except ImportError:
    _uvloop_factory = None

LOOP: Literal["uvloop", "asyncio"] = "asyncio" if _uvloop_factory is None else "uvloop"
"""The event loop the servers run on (uvicorn's ``loop`` setting)."""


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the kind :data:`LOOP` names."""
    return asyncio.new_event_loop() if _uvloop_factory is None else _uvloop_factory()
