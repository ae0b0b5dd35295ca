"""Providers for tests: a function as a provider, and the local provider, which behaves like a real one.

:class:`FunctionProvider` answers each call with a plain function (:mod:`.function`): the fake for
unit tests. The local provider is for tests, benchmarks and the demo.

It counts input with a real tokenizer (:mod:`.counting`), enforces a hard window with the real
provider's error body, caches prompts as the providers do when asked (:mod:`.caching`), reports usage
by setting, answers from a script or writes a summary
(:mod:`.model`, :mod:`.summary`), in process (:class:`LocalProvider`) or over HTTP for the real SDK
clients (:class:`LocalServer`, :func:`serve`, ``python -m contextwindow.testing``).
"""

from __future__ import annotations

from .counting import (
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    RequestCount,
    Tokenizer,
    count_request,
    tokenizer_for,
)
from .function import (
    CountingFunctionProvider,
    FunctionAnswer,
    FunctionCounter,
    FunctionHandler,
    FunctionProvider,
    FunctionReply,
)
from .model import LocalModel, LocalReply, LocalSettings, Rejection
from .provider import LocalProvider, rejection_error
from .server import LocalServer, serve
from .summary import SUMMARY_MARKER, summary_ask, write_summary

__all__ = [
    "MESSAGE_OVERHEAD",
    "REPLY_PRIMING",
    "SUMMARY_MARKER",
    "CountingFunctionProvider",
    "FunctionAnswer",
    "FunctionCounter",
    "FunctionHandler",
    "FunctionProvider",
    "FunctionReply",
    "LocalModel",
    "LocalProvider",
    "LocalReply",
    "LocalServer",
    "LocalSettings",
    "Rejection",
    "RequestCount",
    "Tokenizer",
    "count_request",
    "rejection_error",
    "serve",
    "summary_ask",
    "tokenizer_for",
    "write_summary",
]
