"""``contextwindow count FILE``: price a request file block by block.

The file is an Anthropic Messages or OpenAI Chat Completions request (or a bare message list),
detected from its content. The model comes from ``--model`` or the request's own ``model``.
``--provider anthropic|openai`` also asks the provider to count the request with its own counter
(``messages.count_tokens``, ``responses.input_tokens.count``) through the official SDK, which reads
its key and base URL from the environment (or ``--base-url``), and prints it beside the estimate.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..content import Request, media_refs
from ..errors import UsageError
from ..formats import AttachmentLoader, parse_any
from ..models import ModelProfile, get_profile
from ..pricing import BreakdownRow, Estimator
from ..pricing.tokenizers import FAMILY_ENCODINGS, FILE_FAMILIES, missing_reason

if TYPE_CHECKING:
    from ..providers.anthropic import AnthropicProvider
    from ..providers.openai import OpenAIProvider
from ._app import app
from ._common import EXIT_BAD_INPUT, emit_json, fail, guarded, read_json, stderr

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
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help="Also ask the provider to count the request: anthropic (messages.count_tokens), openai "
            "(responses.input_tokens.count) or gemini (models.countTokens); the SDK reads its key from the "
            "environment.",
        ),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="The provider's base URL (default: the SDK's).")
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
        if exact is None and not estimator.exact and _has_public_tokenizer(profile):
            stderr.print(
                f"[bold yellow]warning:[/] {escape(missing_reason(profile))}; text is counted by the fitted "
                "rule instead",
                soft_wrap=True,
            )
        counted = None
        if provider is not None:
            if provider not in ("anthropic", "openai", "gemini"):
                fail(f"--provider must be anthropic, openai or gemini, not {provider!r}", EXIT_BAD_INPUT)
            request = parsed.request if parsed.request.model else replace(parsed.request, model=profile.name)
            counted = asyncio.run(_provider_count(provider, base_url, request, parsed.loader()))  # type: ignore[arg-type]
    methods = [_method(r, parsed.request, estimator) for r in breakdown.rows]
    rows = [
        {
            "segment": r.segment,
            "message": r.message,
            "block": r.block,
            "kind": r.kind,
            "tokens": r.tokens,
            "counted": method,
        }
        for r, method in zip(breakdown.rows, methods, strict=True)
    ]
    if as_json:
        emit_json(
            {
                "file": str(file),
                "format": parsed.format,
                "model": profile.name,
                "context_window": profile.context_window,
                "total": breakdown.total,
                "exact": estimator.exact,
                "provider_count": counted,
                "provider": provider,
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
        ("counted", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for r, method in zip(breakdown.rows, methods, strict=True):
        table.add_row(
            r.segment,
            "" if r.message is None else str(r.message),
            "" if r.block is None else str(r.block),
            r.kind,
            f"{r.tokens:,}",
            method,
        )
    console.print(table)
    kinds = ", ".join(
        f"{kind} {tokens:,}" for kind, tokens in sorted(breakdown.by_kind().items(), key=lambda kv: -kv[1])
    )
    share = breakdown.total / profile.context_window
    console.print(
        f"total [bold]{breakdown.total:,}[/] tokens ({share:.1%} of the {profile.context_window:,}-token window): {kinds}"
    )
    if counted is not None:
        console.print(
            f"{provider} counts [bold]{counted:,}[/] input tokens ({counted - breakdown.total:+,} vs the estimate)"
        )


_TEXT_KINDS = frozenset({"text", "thinking", "tool_use", "tool", "tool_result"})
"""Rows whose tokens are text the tokenizer counts (when exact); media and framing are priced by rule."""


def _method(row: BreakdownRow, request: Request, estimator: Estimator) -> str:
    """How a row was counted: ``exact`` (the model's tokenizer), ``rule`` (the fitted rule, the
    media rules or the framing constants) or ``exact+rule`` (text with media inside, a tool result
    holding an image)."""
    if row.kind not in _TEXT_KINDS or not estimator.exact:
        return "rule"
    if row.kind == "tool_result" and row.message is not None and row.block is not None:
        block = request.messages[row.message].content[row.block]
        if media_refs([block]):
            return "exact+rule"
    return "exact"


def _has_public_tokenizer(profile: ModelProfile) -> bool:
    """Whether the model's tokenizer can be had offline (tiktoken's files, a tokenizer.json), so a
    count by rule is a fallback a user would want to know about, not the model's only way."""
    return bool(
        profile.tokenizer_file or profile.tokenizer in FAMILY_ENCODINGS or profile.tokenizer in FILE_FAMILIES
    )


async def _provider_count(
    provider: Literal["anthropic", "openai", "gemini"],
    base_url: str | None,
    request: Request,
    load: AttachmentLoader,
) -> int:
    """The provider's own count of ``request`` through its official SDK (errors mapped)."""
    counter: AnthropicProvider | OpenAIProvider
    if provider == "gemini":
        return await _gemini_count(base_url, request, load)
    if provider == "anthropic":
        import anthropic

        try:
            client = anthropic.AsyncAnthropic(base_url=base_url)
        except anthropic.AnthropicError as exc:
            raise UsageError(f"--provider anthropic: {exc}") from None
        if client.api_key is None and client.auth_token is None:
            # The SDK would only find out when sending, as a TypeError: a missing key is the user's to set.
            raise UsageError(
                "--provider anthropic needs an API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"
            )
        from ..providers.anthropic import AnthropicProvider

        counter = AnthropicProvider(client, cache_breakpoints=False)
    else:
        import openai

        try:
            openai_client = openai.AsyncOpenAI(base_url=base_url)
        except openai.OpenAIError as exc:
            raise UsageError(f"--provider openai: {exc}") from None
        from ..providers.openai import OpenAIProvider

        counter = OpenAIProvider(openai_client)
    async with counter.client:
        return await counter.count_input_tokens(request, load=load)


async def _gemini_count(base_url: str | None, request: Request, load: AttachmentLoader) -> int:
    try:
        from google import genai
        from google.genai import types
    except ImportError:
        raise UsageError(
            "--provider gemini needs google-genai: pip install 'contextwindow[gemini]'"
        ) from None
    from ..pricing.counters import GeminiCounter

    try:
        client = genai.Client(http_options=types.HttpOptions(base_url=base_url) if base_url else None)
    except ValueError as exc:  # no API key in the environment
        raise UsageError(f"--provider gemini: {exc}") from None
    try:
        return await GeminiCounter(client).count_input_tokens(request, load=load)
    finally:
        await client.aio.aclose()
