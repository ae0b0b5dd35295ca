"""``contextwindow serve``: the local provider over HTTP, for the real SDK clients and other languages.

It speaks ``POST /v1/messages`` (Anthropic) and ``POST /v1/chat/completions`` (OpenAI), counts every
request with a real tokenizer, and rejects a request over its window with the real provider's error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from ..testing import serve as serve_local
from ..usage.tracker import USAGE_MODES
from ._app import app
from ._common import EXIT_BAD_INPUT, fail, guarded

__all__ = ["serve_command"]


@contextmanager
def _listening(host: str, port: int) -> Iterator[None]:
    """A port that is taken or a host that cannot be listened on is one line and exit 2."""
    try:
        yield
    except KeyboardInterrupt:
        return
    except OverflowError:
        fail(f"cannot listen on port {port}: ports are 0 to 65535", EXIT_BAD_INPUT)
    except OSError as err:
        reason = err.strerror or str(err)
        fail(f"cannot listen on {host}:{port}: {reason}", EXIT_BAD_INPUT)


@app.command("serve")
def serve_command(
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to listen on, 0 to 65535 (0 picks a free one).")
    ] = 8765,
    window: Annotated[
        int | None, typer.Option(help="Declared context window for every model; default: each model's own.")
    ] = None,
    effective_window: Annotated[
        int | None,
        typer.Option(
            help="Reject above this many tokens while declaring --window (a provider serving less)."
        ),
    ] = None,
    usage: Annotated[
        str, typer.Option(help="How usage is reported: cumulative, per-call, output-only or none.")
    ] = "per-call",
    model: Annotated[str, typer.Option(help="Model used when a request names none.")] = "claude-sonnet-4-6",
    delay: Annotated[float, typer.Option(help="Seconds to wait before answering each request.")] = 0.0,
    fail_transient: Annotated[
        int, typer.Option(help="Fail this many first requests with an overload error.")
    ] = 0,
    call_tools: Annotated[
        bool, typer.Option(help="Answer a request that offers tools by calling each once (test a tool loop).")
    ] = False,
    prompt_cache: Annotated[
        bool,
        typer.Option(
            help="Cache prompts as the providers do: Anthropic on cache_control breakpoints, OpenAI "
            "automatically from 1,024 tokens (usage reports cache reads and writes)."
        ),
    ] = False,
    read_timeout: Annotated[
        float,
        typer.Option(help="Seconds a client has to send a request's head, and then its body; then 408."),
    ] = 30.0,
) -> None:
    """Run the local provider over HTTP until interrupted (Ctrl-C)."""
    if usage not in USAGE_MODES:
        raise typer.BadParameter(f"must be one of {', '.join(USAGE_MODES)}", param_hint="--usage")
    if not read_timeout > 0:
        fail("--read-timeout must be > 0", EXIT_BAD_INPUT)
    with guarded(), _listening(host, port):
        from ..server.limits import ServerLimits

        serve_local(
            host,
            port,
            window=window,
            usage=usage,
            effective_window=effective_window,
            default_model=model,
            delay_seconds=delay,
            fail_transient=fail_transient,
            call_tools=call_tools,
            prompt_cache=prompt_cache,
            limits=ServerLimits(read_timeout=read_timeout),
        )
