"""Reading a transcript file's text and JSON: the loaders' one edge, with the file and line named.

Every scenario and transcript loader reads through these two functions, so a file that cannot be
read, is not UTF-8 (a binary or UTF-16 file), holds JSON nested past
:data:`contextwindow.limits.MAX_DOCUMENT_DEPTH` or is not JSON at all is one
:class:`~contextwindow.errors.ScenarioError` naming the file (and line), never a bare ``OSError``,
``UnicodeDecodeError`` or ``RecursionError``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InvalidInput, ScenarioError
from ..limits import loads_json

__all__ = ["json_at", "lines", "read_text"]


def read_text(path: Path) -> str:
    """The whole file as UTF-8 text, or ``ScenarioError`` naming the file."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ScenarioError(f"cannot read: {err.strerror or err}", where=str(path)) from None
    except UnicodeDecodeError as err:
        raise ScenarioError(f"not UTF-8 text (byte {err.start})", where=str(path)) from None


def lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(number, line)`` of a UTF-8 text file, streamed; unreadable is ``ScenarioError`` at the line."""
    number = 0
    try:
        with path.open(encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                yield number, line
    except OSError as err:
        raise ScenarioError(f"cannot read: {err.strerror or err}", where=str(path)) from None
    except UnicodeDecodeError:
        raise ScenarioError("not UTF-8 text", where=f"{path}:{number + 1}") from None


def json_at(text: str, *, where: str) -> Any:
    """``text`` parsed as JSON, depth measured first; bad or too deep JSON is ``ScenarioError`` at ``where``."""
    try:
        return loads_json(text)
    except InvalidInput as err:
        raise ScenarioError(err.reason, where=where) from None
    except json.JSONDecodeError as err:
        raise ScenarioError(
            f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}", where=where
        ) from None
