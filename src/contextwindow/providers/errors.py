"""SDK exceptions into the error tree, shared by the Anthropic and OpenAI adapters.

Both official SDKs have the same shape (Stainless-generated): ``APIStatusError`` with
``status_code``, ``body`` and ``response``; ``APIConnectionError`` and its ``APITimeoutError``; a
root (``AnthropicError`` / ``OpenAIError``) for the rest. The mapping, in order:

1. a status error whose body :func:`~.overflow.classify` reads as too big → ``ContextOverflow``;
2. a status the SDKs themselves retry (408, 409, 429, ≥ 500, Anthropic's 529) → ``TransientProviderError``;
3. a dropped connection or a timeout → ``TransientProviderError`` (no status);
4. anything else from the SDK → ``ProviderError`` with whatever status, body and headers it had.
"""

from __future__ import annotations

from typing import Any

from ..errors import ProviderError, TransientProviderError
from .overflow import classify

__all__ = ["is_transient_status", "map_sdk_error"]


def is_transient_status(status: int | None) -> bool:
    """Statuses worth retrying, as the SDKs' own retry logic decides (``_should_retry``)."""
    return status is not None and (status in (408, 409, 429) or status >= 500)


def map_sdk_error(
    exc: BaseException, *, provider: str, connection_error: type[BaseException]
) -> ProviderError:
    """One SDK exception as the error tree's equivalent; the original is kept as ``__cause__``."""
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = None
    response: Any = getattr(exc, "response", None)
    headers: dict[str, str] = {}
    if response is not None:
        try:
            headers = {str(k): str(v) for k, v in response.headers.items()}
        except (AttributeError, TypeError):
            headers = {}
    body = getattr(exc, "body", None)
    message = str(getattr(exc, "message", None) or exc) or type(exc).__name__
    if status is not None:
        overflow = classify(status, body if body is not None else message, provider=provider, headers=headers)
        if overflow is None and body is not None:
            # Some bodies hold only a code; the SDK's message repeats the text with the status.
            overflow = classify(status, message, provider=provider, headers=headers)
            if overflow is not None:
                overflow.body = body
        if overflow is not None:
            return overflow
    err: ProviderError
    if is_transient_status(status) or isinstance(exc, connection_error):
        err = TransientProviderError(message, status=status, body=body, headers=headers, provider=provider)
    else:
        err = ProviderError(message, status=status, body=body, headers=headers, provider=provider)
    err.__cause__ = exc
    return err
