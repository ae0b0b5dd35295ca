"""The one error tree of contextwindow.

Every error the library raises on purpose is a ``ContextWindowError``; every sqlite3, psycopg or SDK
error that can escape a public call is mapped into this tree (a test proves it)::

    ContextWindowError
     ├── InvalidInput            the caller's data is wrong: bad content, stamps, usage samples, budgets
     │    └── ScenarioError      a scenario or transcript file is wrong: file:line and field
     ├── UsageError              the developer called the API wrong (unknown model, closed store, ...)
     │    └── UnknownModel       no profile for a model name; says how to declare one
     ├── OverBudget              the reserved head alone does not fit; carries the makeup
     ├── DamagedData             a data file shipped with contextwindow fails its check (reinstall)
     ├── StoreError              the ledger failed
     │    ├── StoreBusy          contention outlasted the busy timeout
     │    ├── SessionMoved       another writer appended to the session since the length expected
     │    └── SchemaTooNew       the database was written by a newer library; refused for writing
     └── ProviderError           a provider refused or failed (status, body, headers)
          ├── ContextOverflow    the provider rejected the request for its size (its own numbers)
          └── TransientProviderError   a retryable failure (rate limit, overload, connection)

Two families, as pydantic-ai separates them: ``InvalidInput`` and ``UsageError`` are the caller's
mistakes and never retried; ``ProviderError`` and ``StoreError`` are runtime failures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ContextOverflow",
    "ContextWindowError",
    "DamagedData",
    "InvalidInput",
    "OverBudget",
    "ProviderError",
    "ScenarioError",
    "SchemaTooNew",
    "SessionMoved",
    "StoreBusy",
    "StoreError",
    "TransientProviderError",
    "UnknownModel",
    "UsageError",
]


class ContextWindowError(Exception):
    """Root of every error contextwindow raises on purpose."""


class InvalidInput(ContextWindowError, ValueError):
    """The caller's data is wrong. ``path`` names the bad field, e.g. ``messages[3].content[1].source.data``."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}" if path else message)


class ScenarioError(InvalidInput):
    """A scenario (or transcript) is wrong at a known place: ``scenario.jsonl:12: content[1].width: …``.

    ``where`` is the file and line (or entry) and ``field`` the field path inside it; either may be
    empty. It is an ``InvalidInput``, so callers catching bad input catch it.
    """

    def __init__(self, message: str, *, where: str = "", field: str = "") -> None:
        self.where = where
        self.field = field
        path = ": ".join(p for p in (where, field) if p) or None
        super().__init__(message, path=path)


class UsageError(ContextWindowError):
    """The developer called the API wrong (a closed store, a missing argument, an unknown model)."""


class UnknownModel(UsageError, LookupError):
    """No profile matches a model name. The message says how to declare one."""

    def __init__(self, name: str, *, known: list[str] | None = None) -> None:
        self.name = name
        hint = (
            f"unknown model {name!r}: declare it with "
            "contextwindow.models.register(ModelProfile(name=..., provider=..., context_window=..., "
            "max_output_tokens=..., tokenizer=...)) or pass profile=ModelProfile(...) directly"
        )
        if known:
            hint += f"; close names: {', '.join(known[:5])}"
        super().__init__(hint)


class OverBudget(ContextWindowError):
    """What must be kept does not fit the budget. ``makeup`` is tokens by segment; nothing was dropped."""

    def __init__(self, message: str, *, budget: int, required: int, makeup: Mapping[str, int]) -> None:
        self.budget = budget
        self.required = required
        self.makeup = dict(makeup)
        super().__init__(f"{message} (required {required} > budget {budget}; makeup {self.makeup})")


class DamagedData(ContextWindowError, RuntimeError):
    """A data file shipped inside the package (the pricing tables) is damaged, truncated or of another
    format version: the installation is broken, and reinstalling contextwindow repairs it."""


class StoreError(ContextWindowError):
    """The ledger failed. The store is left as it was before the failing call."""


class StoreBusy(StoreError):
    """Another writer held the store longer than the busy timeout."""


class SessionMoved(StoreError):
    """A conditional append found the session longer than the caller expected: another writer (a
    process, a worker) appended to it since the caller last read it. Nothing was written; read what
    was appended (``session.messages(after=...)``) and decide again."""

    def __init__(self, session_id: str, *, expected: int, found: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.found = found
        super().__init__(
            f"session {session_id!r} holds {found} entries, not the {expected} expected: "
            "another writer appended to it; nothing was written"
        )


class SchemaTooNew(StoreError):
    """The database was written by a newer contextwindow; it is refused for writing."""

    def __init__(self, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            f"store schema version {found} is newer than this library supports ({supported}); "
            "upgrade contextwindow to write to it"
        )


class ProviderError(ContextWindowError):
    """A provider refused or failed a request. Carries what the provider said, unaltered."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        provider: str | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        self.provider = provider
        super().__init__(message)


class ContextOverflow(ProviderError):
    """The provider rejected the request for its size.

    ``requested`` and ``limit`` are the provider's own numbers when its message had them (e.g.
    "213462 tokens > 200000 maximum"); ``kind`` is ``"tokens"`` for a token overflow and
    ``"bytes"`` for a payload-size limit, which has no token numbers. ``input_tokens`` is the
    provider's count of the rejected request's input alone, when its message separates it from the
    output bound (``requested`` is input + ``max_tokens`` in OpenAI's and Anthropic's older shape):
    a real input count of a known request, which the engine learns from as from reported usage.
    """

    def __init__(
        self,
        message: str,
        *,
        requested: int | None = None,
        limit: int | None = None,
        input_tokens: int | None = None,
        kind: str = "tokens",
        status: int | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        provider: str | None = None,
    ) -> None:
        self.requested = requested
        self.limit = limit
        self.input_tokens = input_tokens
        self.kind = kind
        super().__init__(message, status=status, body=body, headers=headers, provider=provider)


class TransientProviderError(ProviderError):
    """A failure worth retrying: rate limit, overload, timeout or a dropped connection."""
