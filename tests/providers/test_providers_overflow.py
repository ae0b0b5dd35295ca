"""The overflow classifier against the providers' verbatim messages, and the look-alikes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.errors import ContextOverflow
from contextwindow.providers.overflow import (
    classify,
    output_cap_error,
)

# (id, status, body or message, provider, requested, limit, kind)
OVERFLOWS: list[tuple[str, int | None, Any, str | None, int | None, int | None, str]] = [
    (
        "anthropic-prompt-too-long",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 213462 tokens > 200000 maximum",
            },
        },
        "anthropic",
        213462,
        200000,
        "tokens",
    ),
    (
        "anthropic-input-plus-max-tokens",
        400,
        "input length and `max_tokens` exceed context limit: 198981 + 21333 > 200000, decrease input "
        "length or `max_tokens` and try again",
        "anthropic",
        198981 + 21333,
        200000,
        "tokens",
    ),
    (
        "anthropic-413-payload",
        413,
        {
            "type": "error",
            "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"},
        },
        "anthropic",
        None,
        None,
        "bytes",
    ),
    (
        "openai-chat",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 4097 tokens. However, you requested 4120 "
                "tokens (3120 in the messages, 1000 in the completion). Please reduce the length of the "
                "messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        "openai",
        4120,
        4097,
        "tokens",
    ),
    (
        "openai-messages-resulted",
        400,
        "This model's maximum context length is 8192 tokens, however your messages resulted in 9001 tokens. "
        "Please reduce the length of the messages.",
        "openai",
        9001,
        8192,
        "tokens",
    ),
    (
        "openai-functions-variant",
        400,
        "This model's maximum context length is 8192 tokens. However, you requested 8500 tokens (8000 in "
        "the messages, 500 in the functions). Please reduce the length of the messages or functions.",
        "openai",
        8500,
        8192,
        "tokens",
    ),
    (
        "openai-responses",
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust your input "
                "and try again.",
                "code": "context_length_exceeded",
            }
        },
        "openai",
        None,
        None,
        "tokens",
    ),
    (
        "azure",
        400,
        "This model's maximum context length is 128000 tokens. However, you requested 130000 tokens "
        "(126000 in the messages, 4000 in the completion).",
        "azure",
        130000,
        128000,
        "tokens",
    ),
    (
        "gemini",
        400,
        {
            "error": {
                "code": 400,
                "message": "The input token count (1200293) exceeds the maximum number of tokens allowed "
                "(1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        "gemini",
        1200293,
        1048576,
        "tokens",
    ),
    (
        "vertex-payload",
        400,
        "400 Request payload size exceeds the limit: 20971520 bytes.",
        "vertex",
        None,
        None,
        "bytes",
    ),
    (
        "bedrock-input-too-long",
        400,
        "Input is too long for requested model.",
        "bedrock",
        None,
        None,
        "tokens",
    ),
    (
        "bedrock-claude",
        400,
        "The model returned the following errors: prompt is too long: 903884 tokens > 200000 maximum",
        "bedrock",
        903884,
        200000,
        "tokens",
    ),
    (
        "vllm",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 16384 tokens. However, you requested 19591 "
            "tokens (9591 in the messages, 10000 in the completion). Please reduce the length of the "
            "messages or completion.",
            "type": "BadRequestError",
            "code": 400,
        },
        "vllm",
        19591,
        16384,
        "tokens",
    ),
    (
        "llama.cpp",
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
        "llama.cpp",
        9000,
        8192,
        "tokens",
    ),
    (
        "llama.cpp-older",
        400,
        "the request exceeds the available context size, try increasing the context size or enable context shift",
        "llama.cpp",
        None,
        None,
        "tokens",
    ),
    (
        "ollama-newer",
        400,
        "prompt too long; exceeded max context length by 1892 tokens",
        "ollama",
        None,
        None,
        "tokens",
    ),
    (
        "openrouter",
        400,
        "This endpoint's maximum context length is 131072 tokens. However, you requested about 150000 tokens",
        "openrouter",
        150000,
        131072,
        "tokens",
    ),
    (
        "deepseek",
        400,
        "This model's maximum context length is 65536 tokens. However, you requested 69648 tokens (69648 in "
        "the messages, 0 in the completion). Please reduce the length of the messages or completion.",
        "deepseek",
        69648,
        65536,
        "tokens",
    ),
    (
        "mistral",
        400,
        "Prompt contains 300000 tokens, too large for model with 131072 maximum context length",
        "mistral",
        300000,
        131072,
        "tokens",
    ),
    (
        "groq",
        400,
        {
            "error": {
                "message": "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        "groq",
        None,
        None,
        "tokens",
    ),
    (
        "xai",
        400,
        "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
        "xai",
        537812,
        131072,
        "tokens",
    ),
    ("cerebras", 400, "Current length is 140000 while limit is 131072", "cerebras", 140000, 131072, "tokens"),
    ("cerebras-413-no-body", 413, "", "cerebras", None, None, "bytes"),
    ("cerebras-400-no-body", 400, "", "cerebras", None, None, "tokens"),
    (
        "bedrock-mantle",
        400,
        "prompt tokens (250000) exceed model maximum (200000)",
        "bedrock",
        250000,
        200000,
        "tokens",
    ),
    (
        "thousands-separators",
        400,
        "prompt is too long: 1,200,000 tokens > 1,000,000 maximum",
        "anthropic",
        1_200_000,
        1_000_000,
        "tokens",
    ),
]

NOT_OVERFLOWS: list[tuple[str, int | None, Any]] = [
    ("bedrock-throttle", 400, "Too many tokens, please wait before trying again."),
    ("bedrock-throttle-429", 429, "Too many tokens, please wait before trying again."),
    (
        "string-above-max-length",
        400,
        {
            "error": {
                "message": "Invalid 'messages[1].content': string too long. Expected a string with maximum "
                "length 10485760, but got a string with length 10500000 instead.",
                "type": "invalid_request_error",
                "param": "messages[1].content",
                "code": "string_above_max_length",
            }
        },
    ),
    (
        "openai-invalid-user",
        400,
        "Invalid 'user': string too long. Expected a string with maximum length 64, but got a string with "
        "length 100 instead.",
    ),
    (
        "anthropic-output-cap",
        400,
        "max_tokens: 100000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5",
    ),
    (
        "openai-output-cap",
        400,
        "max_tokens is too large: 65536. This model supports at most 16384 completion tokens, whereas you "
        "provided 65536.",
    ),
    (
        "many-image-dimension",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "messages.100.content.2.image.source.base64.data: At least one of the image "
                "dimensions exceed max allowed size for many-image requests: 2000 pixels",
            },
        },
    ),
    ("overloaded", 529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    (
        "rate-limit",
        429,
        {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}},
    ),
    ("invalid-api-key", 401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}),
    ("plain-bad-request", 400, "messages: roles must alternate between user and assistant"),
    ("empty-400", 400, ""),
    ("none-body", 500, None),
]


class TestClassify:
    @pytest.mark.parametrize(
        ("status", "body", "provider", "requested", "limit", "kind"),
        [case[1:] for case in OVERFLOWS],
        ids=[case[0] for case in OVERFLOWS],
    )
    def test_recognises_each_providers_rejection_for_size_with_its_numbers(
        self, status: int, body: Any, provider: str, requested: int | None, limit: int | None, kind: str
    ) -> None:
        overflow = classify(status, body, provider=provider)
        assert isinstance(overflow, ContextOverflow)
        assert (overflow.requested, overflow.limit, overflow.kind) == (requested, limit, kind)
        assert overflow.status == status
        assert overflow.provider == provider
        assert overflow.body == body

    @pytest.mark.parametrize(
        ("status", "body"), [c[1:] for c in NOT_OVERFLOWS], ids=[c[0] for c in NOT_OVERFLOWS]
    )
    def test_leaves_look_alikes_and_other_errors_alone(self, status: int, body: Any) -> None:
        assert classify(status, body) is None

    def test_reads_a_json_string_body_as_the_object_it_encodes(self) -> None:
        body = '{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 5 tokens > 4 maximum"}}'
        overflow = classify(400, body)
        assert overflow is not None and (overflow.requested, overflow.limit) == (5, 4)

    def test_the_overflow_message_is_the_providers_own_text(self) -> None:
        overflow = classify(400, OVERFLOWS[0][2])
        assert overflow is not None
        assert str(overflow) == "prompt is too long: 213462 tokens > 200000 maximum"

    @given(st.text(max_size=300), st.sampled_from([None, 400, 404, 422, 500]))
    def test_never_raises_on_arbitrary_text(self, text: str, status: int | None) -> None:
        result = classify(status, text)
        assert result is None or isinstance(result, ContextOverflow)

    def test_handles_a_megabyte_message_quickly(self) -> None:
        assert classify(400, "x" * 1_000_000) is None
        found = classify(400, "y" * 500_000 + "prompt is too long: 7 tokens > 6 maximum")
        assert found is not None and found.requested == 7


class TestOutputLimits:
    @pytest.mark.parametrize(
        ("body", "requested", "cap"),
        [
            (NOT_OVERFLOWS[4][2], 100000, 64000),
            (NOT_OVERFLOWS[5][2], 65536, 16384),
        ],
        ids=["anthropic", "openai"],
    )
    def test_reads_the_numbers_of_an_output_cap_rejection(self, body: str, requested: int, cap: int) -> None:
        found = output_cap_error(400, body)
        assert found is not None and (found.requested, found.cap) == (requested, cap)

    def test_an_overflow_is_not_an_output_cap_rejection(self) -> None:
        assert output_cap_error(400, OVERFLOWS[0][2]) is None
