"""The generated tables of the text rule, shipped as data and read on first use.

The fitting script (``benchmarks/fit_text_rule.py``) writes each table as ``data/<name>.json.gz``
inside this package: a gzip of one JSON object ``{"format", "version", "name", "sha256", "payload"}``
where ``payload`` is the table itself serialised as a JSON string and ``sha256`` the hex digest of
that string's UTF-8. :func:`table` reads a file through ``importlib.resources`` (so it works from a
wheel or a zip), checks the format, the version, the name and the checksum, and caches the parsed
payload; a file that fails any check is a :class:`~contextwindow.errors.DamagedData` naming the file
and the check, never a silently wrong price. Nothing is read at import: the first price does.

Tables (what the payload holds):

- ``coefficients``: ``{"claude_ratio": {family: ratio}, "claude_punctuation": {family: tokens per
  ASCII punctuation byte}, "claude_other_ratio": {family: ratio of the text that is not ASCII},
  "claude_structure": {family: {item: tokens}}}`` (items: ``message``, ``text_block``, ``tool_use``,
  ``tool_param``, ``tool_result``);
- ``textrule``: ``{"scale": {family: factor}}``, the fitted scale of each family's vocabulary rule;
- ``vocabulary-<family>``: ``{"tokens": {length: concatenated tokens}}``, every token of the family's
  tokenizer grouped by its length in bytes, each group one Latin-1 string (a character per byte).
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from typing import Any

from ..errors import DamagedData

__all__ = ["FORMAT", "FORMAT_VERSION", "TABLES", "decode", "encode", "table"]

FORMAT = "contextwindow.pricing-table"
FORMAT_VERSION = 1
"""Bump when the layout of a table's payload changes; the reader refuses any other version."""
TABLES = ("coefficients", "textrule", "vocabulary-o200k", "vocabulary-cl100k")


def encode(name: str, payload: Any) -> bytes:
    """The bytes of ``data/<name>.json.gz`` for ``payload`` (for the fitting script; deterministic:
    the same payload always gives the same bytes)."""
    import gzip

    text = json.dumps(payload, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    record = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "name": name,
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
        "payload": text,
    }
    body = json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return gzip.compress(body, compresslevel=9, mtime=0)


def decode(name: str, data: bytes) -> Any:
    """The payload of a table file's bytes, after every check; ``DamagedData`` when one fails."""
    import gzip

    where = f"contextwindow/pricing/data/{name}.json.gz"
    try:
        record = json.loads(gzip.decompress(data).decode("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
        raise DamagedData(f"{where} is not a gzip of JSON ({exc}); reinstall contextwindow") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        raise DamagedData(f"{where} is not a contextwindow pricing table; reinstall contextwindow")
    if record.get("version") != FORMAT_VERSION:
        raise DamagedData(
            f"{where} has format version {record.get('version')!r}, this contextwindow reads "
            f"{FORMAT_VERSION}; reinstall contextwindow"
        )
    if record.get("name") != name:
        raise DamagedData(f"{where} holds the table {record.get('name')!r}; reinstall contextwindow")
    text = record.get("payload")
    if not isinstance(text, str) or hashlib.sha256(text.encode("utf-8")).hexdigest() != record.get("sha256"):
        raise DamagedData(f"{where} fails its checksum; reinstall contextwindow")
    return json.loads(text)


@cache
def table(name: str) -> Any:
    """The payload of the shipped table ``name`` (one of :data:`TABLES`), read once and checked."""
    from importlib import resources

    if name not in TABLES:
        raise KeyError(name)
    try:
        data = resources.files(__package__).joinpath("data").joinpath(f"{name}.json.gz").read_bytes()
    except OSError as exc:
        raise DamagedData(
            f"contextwindow/pricing/data/{name}.json.gz is missing ({exc}); reinstall contextwindow"
        ) from None
    return decode(name, data)
