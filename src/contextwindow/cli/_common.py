"""What every command shares: exit codes, turning library errors into messages a person can act on.

Exit codes (documented in ``contextwindow --help`` and the README):

- 0: done; for ``doctor``, the store is clean.
- 1: the command ran and found a problem (``doctor`` found invariants broken; ``simulate`` ended in an
  unrecovered provider rejection).
- 2: bad input or usage: a missing or malformed file, an unknown model, a bad option.
- 3: the store failed or was busy past its timeout, was written by a newer contextwindow, or is
  not a store at all (an empty file, a text file).

Whatever goes wrong, a command prints one line on stderr and exits with one of these codes; it never
shows a traceback (an unexpected failure is reported as an internal error, exit 1).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import ContextWindowError, InvalidInput, StoreError, UnknownModel, UsageError
from ..limits import loads_json

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FOUND_PROBLEM",
    "EXIT_OK",
    "EXIT_STORE",
    "emit_json",
    "fail",
    "guarded",
    "read_json",
    "stderr",
]

EXIT_OK = 0
EXIT_FOUND_PROBLEM = 1
EXIT_BAD_INPUT = 2
EXIT_STORE = 3

stderr = Console(stderr=True, highlight=False)


def fail(message: str, code: int) -> NoReturn:
    """Print ``message`` on stderr, on one line, and exit with ``code``."""
    one_line = " ".join(message.split())
    if len(one_line) > _MAX_MESSAGE:  # a path 100 levels deep names itself by its start and end
        one_line = f"{one_line[: _MAX_MESSAGE // 2]} … {one_line[-_MAX_MESSAGE // 4 :]}"
    stderr.print(f"[bold red]error:[/] {escape(one_line)}", soft_wrap=True)
    raise typer.Exit(code)


_MAX_MESSAGE = 400


@contextmanager
def guarded() -> Iterator[None]:
    """Map library errors to a one-line message and the documented exit code."""
    try:
        yield
    except UnknownModel as err:
        fail(str(err), EXIT_BAD_INPUT)
    except StoreError as err:
        fail(f"store: {err}", EXIT_STORE)
    except (InvalidInput, UsageError) as err:
        fail(str(err), EXIT_BAD_INPUT)
    except ContextWindowError as err:
        fail(str(err), EXIT_FOUND_PROBLEM)


def read_json(path: Path) -> Any:
    """A JSON file's content, or exit 2 with one line naming what is wrong with it: missing,
    unreadable, not UTF-8 (a binary or UTF-16 file), not JSON, or nested past
    ``contextwindow.limits.MAX_DOCUMENT_DEPTH``."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        fail(f"{path}: no such file", EXIT_BAD_INPUT)
    except IsADirectoryError:
        fail(f"{path}: is a directory, not a file", EXIT_BAD_INPUT)
    except UnicodeDecodeError as err:
        fail(f"{path}: not UTF-8 text (byte {err.start}; a binary or UTF-16 file?)", EXIT_BAD_INPUT)
    except OSError as err:
        fail(f"{path}: cannot read: {err.strerror or err}", EXIT_BAD_INPUT)
    try:
        return loads_json(text)
    except InvalidInput as err:
        fail(f"{path}: {err.reason}", EXIT_BAD_INPUT)
    except json.JSONDecodeError as err:
        fail(f"{path}:{err.lineno}:{err.colno}: not valid JSON: {err.msg}", EXIT_BAD_INPUT)


def emit_json(data: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
