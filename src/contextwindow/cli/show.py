"""``contextwindow show [FILE]``: the canonical content of a request, as contextwindow sees it.

It parses a request file you name (or the bundled coding-agent request: Anthropic format, with a
real PNG screenshot and a PDF), in either wire format, and shows messages, blocks and attachments
with their sniffed dimensions. ``count`` prices the same file.
"""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from ..content import AttachmentRef, Block, ToolResult, media_refs
from ..formats import ParsedRequest, parse_any
from ._app import app
from ._common import guarded, read_json

__all__ = ["BUNDLED_REQUEST", "load_request", "show", "summary_tables"]

BUNDLED_REQUEST = "coding_agent_anthropic.json"


def load_request(path: Path | None) -> tuple[str, ParsedRequest]:
    """The named request file (or the bundled one) parsed; its name for display. A file that cannot
    be read as a JSON request exits 2 with one line saying why."""
    if path is None:
        text = resources.files("contextwindow").joinpath("data", BUNDLED_REQUEST).read_text("utf-8")
        return f"bundled {BUNDLED_REQUEST}", parse_any(json.loads(text))
    data = read_json(path)
    with guarded():
        return str(path), parse_any(data)


def _kinds(blocks: tuple[Block, ...]) -> str:
    counts: Counter[str] = Counter()
    for block in blocks:
        counts[block.type] += 1
        if isinstance(block, ToolResult) and not isinstance(block.content, str):
            counts.update(f"{b.type} (in result)" for b in block.content)
    return ", ".join(f"{n}× {kind}" if n > 1 else kind for kind, n in counts.items())


def _chars(blocks: tuple[Block, ...]) -> int:
    total = 0
    for block in blocks:
        for attr in ("text", "thinking", "data"):
            value = getattr(block, attr, None)
            if isinstance(value, str):
                total += len(value)
        if isinstance(block, ToolResult):
            total += len(block.content) if isinstance(block.content, str) else _chars(block.content)
    return total


def _dimensions(ref: AttachmentRef) -> str:
    parts = []
    if ref.width and ref.height:
        parts.append(f"{ref.width}×{ref.height} px")
    if ref.pages:
        parts.append(f"{ref.pages} pages")
    if ref.duration_seconds is not None:
        parts.append(f"{ref.duration_seconds:.2f} s")
    return ", ".join(parts) or "unknown"


def summary_tables(parsed: ParsedRequest) -> list[Table]:
    """The messages table and the attachments table of a parsed request."""
    request = parsed.request
    messages = Table(title=f"{len(request.messages)} messages ({parsed.format} format)")
    for column, justify in (("#", "right"), ("role", "left"), ("blocks", "left"), ("text chars", "right")):
        messages.add_column(column, justify=justify)  # type: ignore[arg-type]
    for i, message in enumerate(request.messages):
        messages.add_row(str(i), message.role, _kinds(message.content), f"{_chars(message.content):,}")

    attachments = Table(title=f"{len(parsed.attachments)} attachments (bytes kept aside, by content hash)")
    for column in ("id", "media type", "size", "dimensions"):
        attachments.add_column(column)
    seen: set[str] = set()
    for message in request.messages:
        for ref in media_refs(message.content):
            if ref.id not in seen:
                seen.add(ref.id)
                attachments.add_row(ref.id, ref.media_type, f"{ref.size_bytes:,} B", _dimensions(ref))
    return [messages, attachments]


@app.command()
def show(
    request_file: Annotated[
        Path | None,
        typer.Argument(help="An Anthropic or OpenAI request JSON file; the bundled one by default."),
    ] = None,
) -> None:
    """Show the canonical content of a request file: messages, blocks, attachments with their dimensions."""
    console = Console()
    name, parsed = load_request(request_file)
    request = parsed.request
    header: dict[str, Any] = {
        "request": name,
        "model": request.model or "(none)",
        "system": f"{len(request.system)} text block(s)",
        "tools": ", ".join(t.name for t in request.tools) or "(none)",
    }
    for key, value in header.items():
        console.print(f"[bold]{key}[/bold]: {value}")
    for table in summary_tables(parsed):
        console.print(table)
