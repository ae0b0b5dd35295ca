"""``python -m contextwindow.testing [--host H] [--port N] [--window N] [--usage MODE] ...``"""

from __future__ import annotations

import argparse

from ..usage.tracker import USAGE_MODES
from .server import serve


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m contextwindow.testing", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument(
        "--window", type=int, default=None, help="window in tokens (default: each model's own)"
    )
    parser.add_argument("--effective-window", type=int, default=None, help="reject above this many tokens")
    parser.add_argument("--usage", choices=USAGE_MODES, default="per-call")
    parser.add_argument("--model", default="claude-sonnet-4-6", help="model when a request names none")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before each answer")
    parser.add_argument("--fail-transient", type=int, default=0, help="fail the first N calls (overloaded)")
    parser.add_argument(
        "--prompt-cache", action="store_true", help="cache prompts as the providers do (usage reports it)"
    )
    args = parser.parse_args(argv)
    serve(
        args.host,
        args.port,
        window=args.window,
        usage=args.usage,
        effective_window=args.effective_window,
        default_model=args.model,
        delay_seconds=args.delay,
        fail_transient=args.fail_transient,
        prompt_cache=args.prompt_cache,
    )


if __name__ == "__main__":
    main()
