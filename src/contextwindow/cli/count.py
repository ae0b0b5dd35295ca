"""``contextwindow count FILE``: price a request file block by block.

The file is an Anthropic Messages or OpenAI Chat Completions request (or a bare message list),
detected from its content. The model comes from ``--model`` or the request's own ``model``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..formats import parse_any
from ..models import get_profile
from ..pricing import Estimator
from . import app
from ._common import EXIT_BAD_INPUT, emit_json, fail, guarded, read_json

__all__ = ["count"]


@app.command()
def count(
    file: Annotated[
        Path, typer.Argument(help="A request file: Anthropic Messages or OpenAI Chat Completions JSON.")
    ],
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Model to price for; default: the request's own model."),
    ] = None,
    exact: Annotated[
        bool | None,
        typer.Option(
            "--exact/--rule",
            help="--exact: count text with the model's tokenizer or fail; --rule: always the fitted rule; "
            "default: exact where the tokenizer is available offline.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the breakdown as JSON.")] = False,
) -> None:
    """Price a request file block by block with the model's rules (text, images, documents, framing)."""
    data = read_json(file)
    with guarded():
        parsed = parse_any(data)
        name = model or parsed.request.model
        if not name:
            fail("the request names no model: pass --model", EXIT_BAD_INPUT)
        profile = get_profile(name)
        estimator = Estimator(profile, exact=exact)
        breakdown = estimator.breakdown(parsed.request)
    rows = [
        {"segment": r.segment, "message": r.message, "block": r.block, "kind": r.kind, "tokens": r.tokens}
        for r in breakdown.rows
    ]
    if as_json:
        emit_json(
            {
                "file": str(file),
                "format": parsed.format,
                "model": profile.name,
                "context_window": profile.context_window,
                "total": breakdown.total,
                "by_kind": breakdown.by_kind(),
                "rows": rows,
            }
        )
        return
    console = Console()
    table = Table(title=f"{file} — {parsed.format} format, priced for {profile.name}")
    for column, justify in (
        ("segment", "left"),
        ("message", "right"),
        ("block", "right"),
        ("kind", "left"),
        ("tokens", "right"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for r in breakdown.rows:
        table.add_row(
            r.segment,
            "" if r.message is None else str(r.message),
            "" if r.block is None else str(r.block),
            r.kind,
            f"{r.tokens:,}",
        )
    console.print(table)
    kinds = ", ".join(
        f"{kind} {tokens:,}" for kind, tokens in sorted(breakdown.by_kind().items(), key=lambda kv: -kv[1])
    )
    share = breakdown.total / profile.context_window
    console.print(
        f"total [bold]{breakdown.total:,}[/] tokens ({share:.1%} of the {profile.context_window:,}-token window): {kinds}"
    )
