"""``contextwindow proxy``: the providers' HTTP APIs in front of a real provider, for agents in any language.

Point an agent's base URL at it (``ANTHROPIC_BASE_URL=http://127.0.0.1:8787`` for Claude Code, an
OpenAI client's ``base_url="http://127.0.0.1:8787/v1"``); it fits each request to the model's window
with the guard (conversations kept in ``--store``), forwards it to ``--upstream`` with the agent's own
credentials, streams the answers back, and writes one JSON access-log line per request on stderr
(never a header or a body).
"""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer

from ._app import app
from ._common import EXIT_BAD_INPUT, fail, guarded

__all__ = ["proxy"]


@app.command()
def proxy(
    upstream: Annotated[
        str,
        typer.Option(
            help="The provider's base URL, e.g. https://api.anthropic.com or https://api.openai.com."
        ),
    ],
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on (0 picks a free one).")] = 8787,
    store: Annotated[
        str | None,
        typer.Option(help="Ledger for the conversations: a SQLite path, sqlite:///PATH or postgresql://…"),
    ] = None,
    window: Annotated[
        int | None, typer.Option(help="Context window to keep requests within; default: each model's own.")
    ] = None,
    durability: Annotated[
        str,
        typer.Option(
            help="normal: a commit survives the proxy's crash, an OS crash may drop the last few "
            "(the agent resends them); full: every commit synced to disk."
        ),
    ] = "normal",
    max_body_mb: Annotated[int, typer.Option(help="Largest request body accepted, in MiB.")] = 32,
    max_concurrency: Annotated[int, typer.Option(help="Requests handled at once; more wait briefly.")] = 256,
    guard: Annotated[
        bool,
        typer.Option(
            "--guard/--no-guard", help="Fit each request to the window (--no-guard: forward as sent)."
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option(help="No access log.")] = False,
) -> None:
    """Forward the Anthropic and OpenAI APIs to --upstream until interrupted (Ctrl-C)."""
    if not upstream.startswith(("http://", "https://")):
        fail("--upstream must be an http:// or https:// URL", EXIT_BAD_INPUT)
    if window is not None and window <= 0:
        fail("--window must be > 0", EXIT_BAD_INPUT)
    if durability not in ("normal", "full"):
        fail("--durability must be normal or full", EXIT_BAD_INPUT)
    with guarded():
        try:
            from ..server import MIB, ServerLimits, bind, run
            from ..server.proxy import proxy_app
            from ..server.transform import transform_for
        except ImportError as missing:
            fail(
                f"the proxy needs the 'server' extra ({missing.name} is missing): "
                "pip install 'contextwindow[server]'",
                EXIT_BAD_INPUT,
            )
        limits = ServerLimits(
            max_body_bytes=max_body_mb * MIB,
            inflight_body_bytes=max(8 * max_body_mb, 256) * MIB,
            max_concurrency=max_concurrency,
        )
        transform, described = transform_for(store=store, window=window, guard=guard, durability=durability)
        if not quiet:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(message)s"))
            access = logging.getLogger("contextwindow.access")
            access.addHandler(handler)
            access.setLevel(logging.INFO)
            access.propagate = False
        sock = bind(host, port)
        print(
            f"contextwindow proxy on http://{host}:{sock.getsockname()[1]} -> {upstream} ({described})",
            flush=True,
        )
        try:
            run(proxy_app(upstream, transform=transform, limits=limits, info={"mode": described}), sock)
        except KeyboardInterrupt:
            pass
        finally:
            sock.close()
