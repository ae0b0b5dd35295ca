"""Recognising a provider's "your request is too big" answer, and the quieter ways a window overflows.

:func:`classify` reads a provider's error (HTTP status plus body, or just the message) and returns a
:class:`~contextwindow.errors.ContextOverflow` carrying the provider's own numbers when its message
has them, or ``None`` when the error is something else. Matching is by message pattern, not by
status: 400 also covers unrelated errors, and litellm ignores OpenAI's ``code`` for the same reason.
Structured fields confirm a match where present (``code: context_length_exceeded`` for OpenAI and
Groq; ``type: exceed_context_size_error`` with ``n_prompt_tokens``/``n_ctx`` for llama.cpp).

The patterns and the look-alikes that must not match are the providers' own error texts
(Anthropic, OpenAI Chat and Responses, Azure, Gemini and Vertex, Bedrock, vLLM, llama.cpp, Ollama,
OpenRouter, DeepSeek, Mistral, Groq, xAI, Cerebras), as collected by pi-mono's ``isContextOverflow``
(https://github.com/badlogic/pi-mono/blob/main/packages/ai/src/utils/overflow.ts) and litellm's
exception mapping
(https://github.com/BerriAI/litellm/blob/main/litellm/litellm_core_utils/exception_mapping_utils.py).
Payload-size rejections (Anthropic 413 ``Request exceeds the maximum size``, Vertex ``Request
payload size exceeds``) are overflows of ``kind="bytes"``: a byte limit with no token numbers.

Besides rejections: :func:`output_cap_error` recognises a ``max_tokens`` above the model's own cap (a
separate 400 that compaction cannot fix; the engine tells its host with a ``context_output_cap``
note).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ContextOverflow

__all__ = [
    "OutputCapError",
    "classify",
    "error_text",
    "output_cap_error",
]

_FLAGS = re.IGNORECASE | re.DOTALL
_N = r"([\d,]+)"  # a number as providers print it; some add thousands separators


@dataclass(frozen=True, slots=True)
class _Pattern:
    """One provider message shape: ``groups`` names what each captured number is."""

    name: str
    regex: re.Pattern[str]
    groups: tuple[Literal["requested", "limit", "part"], ...] = ()
    input: Literal["requested", "first part", "in the messages"] | None = None
    """Where the rejected request's input count alone is: ``requested`` itself (the shape counts the
    prompt only), the first ``part`` ("input + max_tokens > limit"), OpenAI's "(A in the messages,
    ...)" when the message has it, or nowhere (``requested`` includes the output bound)."""


def _p(
    name: str,
    pattern: str,
    *groups: Literal["requested", "limit", "part"],
    input: Literal["requested", "first part", "in the messages"] | None = None,
) -> _Pattern:
    return _Pattern(name, re.compile(pattern, _FLAGS), groups, input)


# Shapes with numbers first (most specific), then number-less shapes. Sources: the two lists named in
# the module docstring, and the providers' messages as quoted in their issue trackers.
_TOKEN_PATTERNS: tuple[_Pattern, ...] = (
    # Anthropic (and Bedrock's "The model returned the following errors: ..." wrapper).
    _p(
        "anthropic",
        rf"prompt is too long:\s*{_N}\s*tokens\s*>\s*{_N}\s*maximum",
        "requested",
        "limit",
        input="requested",
    ),
    # Anthropic, older models: input + max_tokens over the window; requested is the sum.
    _p(
        "anthropic-input-plus-output",
        rf"input length and `?max_tokens`? exceed context limit:\s*{_N}\s*\+\s*{_N}\s*>\s*{_N}",
        "part",
        "part",
        "limit",
        input="first part",
    ),
    # OpenAI, Azure, vLLM, DeepSeek ("you requested N tokens") and OpenRouter ("about N").
    _p(
        "openai",
        rf"maximum context length is\s*{_N}\s*tokens.*?you requested (?:about )?{_N}\s*tokens",
        "limit",
        "requested",
        input="in the messages",
    ),
    _p(
        "openai-messages-resulted",
        rf"maximum context length is\s*{_N}\s*tokens.*?your messages resulted in\s*{_N}\s*tokens",
        "limit",
        "requested",
        input="requested",
    ),
    # Gemini API and Vertex.
    _p(
        "gemini",
        rf"input token count \({_N}\) exceeds the maximum number of tokens allowed \({_N}\)",
        "requested",
        "limit",
        input="requested",
    ),
    # Mistral (pi-mono pattern, unverified on a Mistral page).
    _p(
        "mistral",
        rf"prompt contains\s*{_N}\s*tokens,? too large for model with\s*{_N}\s*maximum context length",
        "requested",
        "limit",
        input="requested",
    ),
    # xAI.
    _p(
        "xai",
        rf"maximum prompt length is\s*{_N}\s*but the request contains\s*{_N}\s*tokens",
        "limit",
        "requested",
        input="requested",
    ),
    # Cerebras.
    _p("cerebras", rf"current length is\s*{_N}\s*while limit is\s*{_N}", "requested", "limit"),
    # Bedrock mantle.
    _p(
        "bedrock-mantle",
        rf"prompt tokens \({_N}\) exceed model maximum \({_N}\)",
        "requested",
        "limit",
        input="requested",
    ),
    # Newer Ollama gives only the excess.
    _p("ollama", r"exceeded max context length by\s*[\d,]+\s*tokens"),
    # Number-less shapes.
    _p("anthropic-no-numbers", r"prompt is too long"),
    _p("openai-responses", r"your input exceeds the context window"),
    _p("bedrock", r"input is too long for requested model"),
    _p("llama.cpp", r"exceeds the available context size"),
    _p("openai-generic", r"this model's maximum context length is"),
    _p("generic-context-limit", r"exceeds? (?:the )?context (?:limit|window|length)"),
    _p("litellm-model-context-limit", r"model's maximum context (?:limit|length)"),
    _p("litellm-longer-than", r"is longer than the model's context length"),
    _p("litellm-configured-limit", r"input tokens exceed the configured limit"),
    _p("together", r"`inputs` tokens \+ `max_new_tokens` must be"),
    _p("gemini-no-numbers", r"exceeds the maximum number of tokens allowed"),
    _p("maximum-input-length", r"maximum input length is\s*[\d,]+\s*tokens"),
    _p("bedrock-too-many-input-tokens", r"too many input tokens"),
    _p("ai21", r"prompt has too many tokens"),
    # Groq's body holds only the advice; its code (context_length_exceeded) confirms it too.
    _p("groq", r"please reduce the length of the messages or completion"),
)

_BYTE_PATTERNS: tuple[_Pattern, ...] = (
    _p("anthropic-413", r"request exceeds the maximum size"),
    _p("vertex-payload", r"request payload size exceeds"),
    _p("request-too-large", r"request_too_large"),
)

# Look-alikes that must never be read as a context overflow: throttling and validation errors that
# share words with an overflow (litellm excludes the same ones).
_EXCLUDE: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p, _FLAGS)
    for p in (
        r"too many tokens,? please wait",  # Bedrock throttling
        r"string_above_max_length",  # OpenAI: a string field over its length (its code)
        r"string too long\. expected a string with maximum length",
        r"invalid (?:value for )?'user'",  # OpenAI invalid-user errors
        r"many-image requests",  # Anthropic many-image dimension limit
        r"maximum allowed number of output tokens",  # Anthropic output cap
        r"max_tokens is too large",  # OpenAI output cap
        r"supports at most\s*[\d,]+\s*completion tokens",
    )
)

_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})


def error_text(body_or_message: Any) -> tuple[str, dict[str, Any]]:
    """The human message and the structured fields (code, type, numbers) of an error body.

    Accepts a message string, a JSON string, a body object (``{"error": {...}}`` as Anthropic, OpenAI,
    Gemini and llama.cpp send it, or a flat one as vLLM does), or ``None``.
    """
    if body_or_message is None:
        return "", {}
    if isinstance(body_or_message, bytes | bytearray):
        body_or_message = bytes(body_or_message).decode("utf-8", errors="replace")
    if isinstance(body_or_message, str):
        stripped = body_or_message.strip()
        if stripped.startswith("{"):
            try:
                decoded = json.loads(stripped)
            except ValueError:
                return body_or_message, {}
            if isinstance(decoded, Mapping):
                return error_text(decoded)
        return body_or_message, {}
    if isinstance(body_or_message, Mapping):
        fields: dict[str, Any] = {}
        texts: list[str] = []
        _collect(body_or_message, fields, texts, depth=0)
        return " | ".join(texts), fields
    return str(body_or_message), {}


def _collect(obj: Mapping[str, Any], fields: dict[str, Any], texts: list[str], depth: int) -> None:
    if depth > 4:
        return
    for key, value in obj.items():
        if isinstance(value, Mapping):
            _collect(value, fields, texts, depth + 1)
        elif isinstance(value, str):
            if key in ("message", "detail", "error", "msg"):
                texts.append(value)
            elif key in ("code", "type", "status", "reason", "param"):
                fields.setdefault(key, value)
                fields.setdefault("labels", []).append(value.lower())
        elif isinstance(value, int) and not isinstance(value, bool):
            fields.setdefault(key, value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping):
                    _collect(item, fields, texts, depth + 1)


_OPENAI_INPUT = re.compile(rf"\(\s*{_N}\s*in the messages", _FLAGS)
"""OpenAI's "(A in the messages, B in the completion)": A is the input count."""


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def classify(
    status: int | None,
    body_or_message: Any,
    *,
    provider: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ContextOverflow | None:
    """A ``ContextOverflow`` when this error is a rejection for size, else ``None``.

    ``requested`` and ``limit`` are filled from the message when it has them ("213462 tokens > 200000
    maximum"); for Anthropic's older "X + Y > M" shape ``requested`` is ``X + Y``; llama.cpp's
    ``n_prompt_tokens``/``n_ctx`` fields fill them when its message has no numbers. A 429 is never an
    overflow (a throttle), whatever its text.
    """
    if status == 429:
        return None
    message, fields = error_text(body_or_message)
    labels = set(fields.get("labels", ()))
    # Match against the human message and the body's codes and types (e.g. ``request_too_large``).
    haystack = " | ".join([message, *sorted(labels)])
    if any(p.search(haystack) for p in _EXCLUDE):
        return None

    def overflow(
        kind: str, requested: int | None, limit: int | None, input_tokens: int | None = None
    ) -> ContextOverflow:
        text = message or f"HTTP {status}: request too large"
        return ContextOverflow(
            text,
            requested=requested,
            limit=limit,
            input_tokens=input_tokens,
            kind=kind,
            status=status,
            body=body_or_message,
            headers=headers,
            provider=provider,
        )

    for pattern in _TOKEN_PATTERNS:
        match = pattern.regex.search(haystack)
        if match is None:
            continue
        numbers: dict[str, int] = {}
        parts: list[int] = []
        for name, value in zip(pattern.groups, match.groups(), strict=True):
            if name == "part":
                parts.append(_number(value))
            else:
                numbers[name] = _number(value)
        if parts:
            numbers["requested"] = sum(parts)
        requested = numbers.get("requested")
        limit = numbers.get("limit")
        input_tokens: int | None = None
        if pattern.input == "requested":
            input_tokens = requested
        elif pattern.input == "first part":
            input_tokens = parts[0]
        elif pattern.input == "in the messages":
            split = _OPENAI_INPUT.search(haystack)
            input_tokens = _number(split.group(1)) if split is not None else None
        if requested is None and limit is None:
            requested, limit = _structured_numbers(fields)
            input_tokens = requested  # llama.cpp's n_prompt_tokens: the prompt alone
        return overflow("tokens", requested, limit, input_tokens)
    if labels & _OVERFLOW_CODES:
        requested, limit = _structured_numbers(fields)
        return overflow("tokens", requested, limit, requested)
    if any(p.regex.search(haystack) for p in _BYTE_PATTERNS) or status == 413:
        return overflow("bytes", None, None)
    if status == 400 and not message.strip() and (provider or "").lower() == "cerebras":
        return overflow("tokens", None, None)  # Cerebras: 400 with no body (pi-mono)
    return None


def _structured_numbers(fields: Mapping[str, Any]) -> tuple[int | None, int | None]:
    # llama.cpp: {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": N, "n_ctx": M}}
    requested = fields.get("n_prompt_tokens")
    limit = fields.get("n_ctx")
    return (
        requested if isinstance(requested, int) else None,
        limit if isinstance(limit, int) else None,
    )


@dataclass(frozen=True, slots=True)
class OutputCapError:
    """A ``max_tokens`` above the model's own output cap: fix the request, compaction will not help."""

    requested: int
    cap: int


_OUTPUT_CAP = (
    # Anthropic: "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for ..."
    (re.compile(rf"max_tokens:\s*{_N}\s*>\s*{_N},\s*which is the maximum allowed", _FLAGS), ("r", "c")),
    # OpenAI: "max_tokens is too large: 65536. This model supports at most 16384 completion tokens, ..."
    (
        re.compile(rf"max_tokens is too large:\s*{_N}.*?supports at most\s*{_N}\s*completion tokens", _FLAGS),
        ("r", "c"),
    ),
)


def output_cap_error(status: int | None, body_or_message: Any) -> OutputCapError | None:
    """The two numbers of an output-cap rejection (``max_tokens`` over the model's cap), or ``None``."""
    message, _ = error_text(body_or_message)
    for regex, _order in _OUTPUT_CAP:
        match = regex.search(message)
        if match:
            return OutputCapError(requested=_number(match.group(1)), cap=_number(match.group(2)))
    return None
