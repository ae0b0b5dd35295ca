"""The providers' own input counters: an exact source a host can opt into before the first call.

Anthropic (``messages.count_tokens``) and OpenAI (``responses.input_tokens.count``) count a request's
input as they will bill it, without generating: :class:`~contextwindow.providers.AnthropicProvider`
and :class:`~contextwindow.providers.OpenAIProvider` expose them as ``count_input_tokens``. The
estimator stays the one ruler for blocks; a count is the *anchor*: :func:`counted_anchor` turns it
into an :class:`~contextwindow.usage.anchor.Anchor` so a cold start (a resumed session, a model
switch) is priced from the provider's own figure, and only what changes afterwards is estimated.

Counts cost a network round trip each (and count against rate limits), so nothing calls them
unless the host does; ``contextwindow count FILE --provider`` prints one beside the estimate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..content import Request
from ..errors import InvalidInput
from ..formats import AttachmentLoader

if TYPE_CHECKING:
    from ..usage.anchor import Anchor
    from ._estimator import Estimator

__all__ = ["InputCounter", "counted_anchor", "no_attachments"]


@runtime_checkable
class InputCounter(Protocol):
    """Something that asks the provider to count a request's input tokens."""

    name: str

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int: ...


def no_attachments(ref: object) -> bytes:
    """An ``AttachmentLoader`` for requests without inline media: any attachment is bad input."""
    raise InvalidInput("this request has an attachment but no loader was given", path="load")


async def counted_anchor(
    counter: InputCounter,
    request: Request,
    *,
    estimator: Estimator,
    connection: str | None = None,
    load: AttachmentLoader = no_attachments,
) -> Anchor:
    """An anchor from the provider's own count of ``request``, with the estimator's price of it.

    Recorded in the session's :class:`~contextwindow.usage.anchor.AnchorBook`, the next estimate is
    the provider's count plus the estimated change since ``request``: exact for ``request`` itself.
    ``connection`` defaults to the counter's name, as the engine records it.
    """
    from ..usage.anchor import Anchor

    counted = await counter.count_input_tokens(request, load=load)
    return Anchor(
        model=request.model or estimator.profile.name,
        connection=connection or counter.name,
        input_tokens=max(1, counted),
        payload_estimate=estimator.request(request),
    )
