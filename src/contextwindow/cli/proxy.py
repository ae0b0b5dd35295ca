"""``contextwindow proxy``: the providers' HTTP APIs in front of a real provider, for agents in any language.

Point an agent's base URL at it (``ANTHROPIC_BASE_URL=http://127.0.0.1:8787`` for Claude Code, an
OpenAI client's ``base_url="http://127.0.0.1:8787/v1"``); it fits each request to the model's window
with the guard (conversations kept in ``--store``), forwards it to ``--upstream`` with the agent's own
credentials, streams the answers back, and writes one JSON access-log line per request on stderr
(never a header or a body).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any

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
    workers: Annotated[
        int, typer.Option(help="Processes serving the port, all on the same --store (POSIX).")
    ] = 1,
    cache_mb: Annotated[
        int | None,
        typer.Option(
            help="MiB of conversations held in memory per process (default 512); the others are read "
            "back from the store when they come back."
        ),
    ] = None,
    tenant_header: Annotated[
        str | None,
        typer.Option(
            help="The header that names the caller (set by an auth gateway); default: the API key "
            "(x-api-key or Authorization: Bearer)."
        ),
    ] = None,
    tenant_secret_file: Annotated[
        str | None,
        typer.Option(
            help="A file holding the secret the tenants are hashed with (default: "
            "$CONTEXTWINDOW_TENANT_SECRET, else a file made beside the store)."
        ),
    ] = None,
    guard: Annotated[
        bool,
        typer.Option(
            "--guard/--no-guard", help="Fit each request to the window (--no-guard: forward as sent)."
        ),
    ] = True,
    compaction: Annotated[
        str,
        typer.Option(
            help="Who makes a long conversation fit: local (the guard folds), provider (the "
            "provider's own compaction or context editing, folding locally where it cannot fit), "
            "auto (whichever costs less per call)."
        ),
    ] = "local",
    quiet: Annotated[bool, typer.Option(help="No access log.")] = False,
    read_timeout: Annotated[
        float,
        typer.Option(help="Seconds a client has to send a request's head, and then its body; then 408."),
    ] = 30.0,
) -> None:
    """Forward the Anthropic and OpenAI APIs to --upstream until interrupted (Ctrl-C)."""
    if not upstream.startswith(("http://", "https://")):
        fail("--upstream must be an http:// or https:// URL", EXIT_BAD_INPUT)
    if window is not None and window <= 0:
        fail("--window must be > 0", EXIT_BAD_INPUT)
    if durability not in ("normal", "full"):
        fail("--durability must be normal or full", EXIT_BAD_INPUT)
    if workers < 1:
        fail("--workers must be >= 1", EXIT_BAD_INPUT)
    if workers > 1 and not hasattr(os, "fork"):
        fail("--workers needs a POSIX system (fork)", EXIT_BAD_INPUT)
    if workers > 1 and guard and (store or "").strip() in (":memory:", "memory:", "memory://"):
        fail("--workers needs a store the workers share (a SQLite file or PostgreSQL)", EXIT_BAD_INPUT)
    if compaction not in ("local", "provider", "auto"):
        fail("--compaction must be local, provider or auto", EXIT_BAD_INPUT)
    if cache_mb is not None and cache_mb < 1:
        fail("--cache-mb must be >= 1", EXIT_BAD_INPUT)
    if tenant_secret_file is not None and not Path(tenant_secret_file).is_file():
        fail(f"--tenant-secret-file: no such file: {tenant_secret_file}", EXIT_BAD_INPUT)

    if not read_timeout > 0:
        fail("--read-timeout must be > 0", EXIT_BAD_INPUT)
    with guarded():
        try:
            from ..server import MIB, ServerLimits, bind, run
            from ..server.conversations import DEFAULT_CACHE_MB
            from ..server.proxy import proxy_app
            from ..server.transform import describe, transform_for
            from ..server.workers import run_workers
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
            read_timeout=read_timeout,
        )

        # What the transform is made with and the first line says.
        settings: dict[str, Any] = {
            "store": store,
            "window": window,
            "guard": guard,
            "durability": durability,
            "tenant_header": tenant_header,
            "compaction": compaction,
        }

        def make_app() -> Any:
            # Each worker makes its own: its own connection to the store, its own conversations.
            transform, described = transform_for(
                **settings,
                tenant_secret_file=tenant_secret_file,
                cache_mb=cache_mb or DEFAULT_CACHE_MB,
            )
            info = {"mode": described, "pid": os.getpid()}
            return proxy_app(upstream, transform=transform, limits=limits, info=info)

        described = describe(**settings)
        if workers > 1:
            described += f", {workers} workers"
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
            if workers > 1:
                status = run_workers(make_app, sock, workers)
                if status:
                    fail("a worker could not start (its error is above)", status)
            else:
                run(make_app(), sock)
        except KeyboardInterrupt:
            pass
        finally:
            sock.close()
