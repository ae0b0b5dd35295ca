"""The providers' own input counters: an exact source a host can opt into before the first call.

Anthropic (``messages.count_tokens``), OpenAI (``responses.input_tokens.count``) and Gemini
(``models.countTokens``) count a request's input as they will bill it, without generating:
:class:`~contextwindow.providers.AnthropicProvider` and :class:`~contextwindow.providers.OpenAIProvider`
expose theirs as ``count_input_tokens``, and :class:`GeminiCounter` Gemini's, over the official
``google-genai`` client (``pip install 'contextwindow[gemini]'``). The
estimator stays the one ruler for blocks; a count is the *anchor*: :func:`counted_anchor` turns it
into an :class:`~contextwindow.usage.anchor.Anchor` so a cold start (a resumed session, a model
switch) is priced from the provider's own figure, and only what changes afterwards is estimated.

Counts cost a network round trip each (and count against rate limits), so nothing calls them
unless the host does; ``contextwindow count FILE --provider`` prints one beside the estimate.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..content import Request
from ..errors import InvalidInput, ProviderError, UsageError
from ..formats import AttachmentLoader

if TYPE_CHECKING:
    from ..usage.anchor import Anchor
    from ._estimator import Estimator

__all__ = ["GeminiCounter", "InputCounter", "counted_anchor", "no_attachments"]


@runtime_checkable
class InputCounter(Protocol):
    """Something that asks the provider to count a request's input tokens."""

    name: str

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int: ...


class GeminiCounter:
    """Gemini's own count of a request's input, by ``models.countTokens``
    (https://ai.google.dev/api/tokens#method:-models.counttokens), over ``google.genai.Client``.

    ``client`` defaults to ``genai.Client()`` (key from ``GEMINI_API_KEY``/``GOOGLE_API_KEY``);
    ``model`` is used when the request names none. The SDK's Gemini Developer API mode counts
    ``contents`` only (it refuses a system instruction or tools in the count's config), so both are
    counted as a leading user content: the system text, then each tool's declaration as JSON. That
    prices them as the model reads them, give or take the few framing tokens Gemini adds around
    each; a count through Vertex AI, or of a request without either, is exact.
    """

    name = "gemini"

    def __init__(self, client: Any = None, *, model: str | None = None) -> None:
        if client is None:
            try:
                from google import genai
            except ImportError:
                raise UsageError(
                    "GeminiCounter needs the google-genai package: pip install 'contextwindow[gemini]'"
                ) from None
            client = genai.Client()
        self.client = client
        self.model = model

    def contents(self, request: Request, *, load: AttachmentLoader) -> list[dict[str, Any]]:
        """The ``contents`` this counter sends for ``request`` (see the class docstring)."""
        import json

        from ..formats import gemini

        body = gemini.render_request(request, load)
        lead: list[dict[str, Any]] = list(body.get("systemInstruction", {}).get("parts", []))
        for tool in body.get("tools", []):
            lead += [{"text": json.dumps(fn, ensure_ascii=False)} for fn in tool["functionDeclarations"]]
        contents: list[dict[str, Any]] = ([{"role": "user", "parts": lead}] if lead else []) + body[
            "contents"
        ]
        for content in contents:  # the SDK takes inline bytes as bytes, not base64 text
            for part in content["parts"]:
                if "inlineData" in part:
                    inline = part.pop("inlineData")
                    part["inline_data"] = {
                        "mime_type": inline["mimeType"],
                        "data": base64.b64decode(inline["data"]),
                    }
                if "functionCall" in part:
                    part["function_call"] = part.pop("functionCall")
                if "functionResponse" in part:
                    part["function_response"] = part.pop("functionResponse")
        return contents

    async def count_input_tokens(self, request: Request, *, load: AttachmentLoader) -> int:
        """Gemini's count of ``request``'s input; a refusal is a :class:`ProviderError`."""
        from google.genai import errors

        model = request.model or self.model
        if model is None:
            raise UsageError("GeminiCounter: the request names no model and the counter has none")
        try:
            counted = await self.client.aio.models.count_tokens(
                model=model, contents=self.contents(request, load=load)
            )
        except errors.APIError as exc:
            raise ProviderError(
                f"gemini countTokens: {exc.message or exc}",
                status=exc.code,
                body=exc.details,
                provider=self.name,
            ) from exc
        return int(counted.total_tokens or 0)


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
