"""Model profiles: lookup, declaring and overriding models, and the sanity of every built-in figure."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest

from contextwindow import models
from contextwindow.errors import InvalidInput, UnknownModel, UsageError
from contextwindow.models import (
    AnthropicPatchRule,
    FlatImageRule,
    GeminiMediaResolutionRule,
    GeminiTileRule,
    ModelProfile,
    OpenAIPatchRule,
    OpenAITileRule,
    get_profile,
    register,
)

RULES = (
    AnthropicPatchRule,
    OpenAITileRule,
    OpenAIPatchRule,
    GeminiTileRule,
    GeminiMediaResolutionRule,
    FlatImageRule,
)


@pytest.fixture
def registry() -> Iterator[None]:
    """Registering is global; each test that registers gets the registry back as it was."""
    saved = dict(models._registry)
    yield
    with models._lock:
        models._registry.clear()
        models._registry.update(saved)


def _custom(name: str = "acme-llm", **changes: object) -> ModelProfile:
    fields: dict[str, object] = {
        "name": name,
        "provider": "other",
        "context_window": 32_000,
        "max_output_tokens": 4_000,
        "tokenizer": "unknown",
    }
    fields.update(changes)
    return ModelProfile(**fields)  # type: ignore[arg-type]


class TestLookup:
    @pytest.mark.parametrize(
        ("asked", "found"),
        [
            ("claude-sonnet-4-5", "claude-sonnet-4-5"),
            ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
            ("claude-opus-4-1-20250805", "claude-opus-4-1"),
            ("claude-opus-4-20250514", "claude-opus-4"),
            ("anthropic/claude-haiku-4-5", "claude-haiku-4-5"),
            ("gpt-4o", "gpt-4o"),
            ("gpt-4o-2024-08-06", "gpt-4o"),
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("openai/gpt-4.1-nano", "gpt-4.1-nano"),
            ("azure/gpt-5-mini", "gpt-5-mini"),
            ("gpt-5.1-codex", "gpt-5.1"),
            ("GPT-4o", "gpt-4o"),
            ("  gpt-4o  ", "gpt-4o"),
            ("models/gemini-2.5-pro", "gemini-2.5-pro"),
            ("google/gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
            ("gemini-3-pro-preview", "gemini-3-pro"),
        ],
    )
    def test_finds_exact_dated_and_prefixed_names(self, asked: str, found: str) -> None:
        assert get_profile(asked).name == found

    @pytest.mark.parametrize("asked", ["gpt-5.3", "claude-opus-9", "llama-3-70b", "gpt-4oo", "claude"])
    def test_an_unknown_model_says_how_to_declare_one(self, asked: str) -> None:
        with pytest.raises(UnknownModel) as caught:
            get_profile(asked)
        message = str(caught.value)
        assert asked in message
        assert "register(ModelProfile(" in message and "profile=ModelProfile(...)" in message
        assert isinstance(caught.value, UsageError)

    def test_a_prefix_matches_only_at_a_separator(self) -> None:
        # "gpt-5" must not claim "gpt-5.3": a wrong window is worse than a clear error.
        with pytest.raises(UnknownModel):
            get_profile("gpt-5.3")

    def test_an_unknown_model_suggests_close_names(self) -> None:
        with pytest.raises(UnknownModel) as caught:
            get_profile("gpt-4p")
        assert "gpt-4o" in str(caught.value)

    def test_a_profile_passes_through(self) -> None:
        profile = _custom()
        assert get_profile(profile) is profile

    @pytest.mark.parametrize("bad", ["", None, 5, ["gpt-4o"]])
    def test_a_non_name_is_invalid_input(self, bad: object) -> None:
        with pytest.raises(InvalidInput) as caught:
            get_profile(bad)  # type: ignore[arg-type]
        assert caught.value.path == "model"


class TestDeclaringModels:
    def test_register_makes_a_model_known(self, registry: None) -> None:
        register(_custom("acme-llm"))
        assert get_profile("acme-llm").context_window == 32_000
        assert get_profile("acme-llm-2025-01-01").name == "acme-llm"

    def test_a_registered_name_with_capitals_is_found_by_prefix(self, registry: None) -> None:
        register(_custom("MyProxy"))
        assert get_profile("MyProxy").name == "MyProxy"
        assert get_profile("myproxy-v2").name == "MyProxy"

    def test_register_overrides_a_built_in(self, registry: None) -> None:
        smaller = get_profile("gpt-4o").with_(context_window=32_000)
        register(smaller)
        assert get_profile("gpt-4o-2024-08-06").context_window == 32_000

    def test_register_can_refuse_to_replace(self, registry: None) -> None:
        with pytest.raises(InvalidInput):
            register(_custom("gpt-4o"), replace_existing=False)
        assert get_profile("gpt-4o").provider == "openai"

    def test_with_overrides_without_touching_the_registry(self) -> None:
        original = get_profile("claude-sonnet-4-5")
        proxied = original.with_(context_window=100_000)
        assert proxied.context_window == 100_000 and proxied.name == original.name
        assert get_profile("claude-sonnet-4-5").context_window == 200_000

    @pytest.mark.parametrize(
        ("changes", "path"),
        [
            ({"name": ""}, "name"),
            ({"context_window": 0}, "context_window"),
            ({"context_window": -5}, "context_window"),
            ({"context_window": "big"}, "context_window"),
            ({"context_window": True}, "context_window"),
            ({"max_output_tokens": 0}, "max_output_tokens"),
            ({"max_output_tokens": 40_000}, "max_output_tokens"),
            ({"max_output_tokens": 1.5}, "max_output_tokens"),
        ],
    )
    def test_an_insane_profile_is_refused(self, changes: dict[str, object], path: str) -> None:
        with pytest.raises(InvalidInput) as caught:
            _custom(**changes)
        assert caught.value.path == path

    def test_with_validates_too(self) -> None:
        with pytest.raises(InvalidInput):
            get_profile("gpt-4o").with_(max_output_tokens=10**9)


BUILTIN = list(models._BUILTIN)


class TestBuiltInProfiles:
    @pytest.mark.parametrize("profile", BUILTIN, ids=lambda p: p.name)
    def test_figures_are_sane(self, profile: ModelProfile) -> None:
        assert 8_000 <= profile.context_window <= 2_000_000
        assert 4_000 <= profile.max_output_tokens <= profile.context_window
        assert profile.name == profile.name.strip().lower()
        assert profile.provider in ("anthropic", "openai", "gemini", "other")
        assert isinstance(profile.image_rule, RULES)

    @pytest.mark.parametrize("profile", BUILTIN, ids=lambda p: p.name)
    def test_each_profile_cites_its_source(self, profile: ModelProfile) -> None:
        assert "https://" in profile.source

    @pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
    def test_each_image_rule_cites_its_source(self, rule: type) -> None:
        doc = inspect.getdoc(rule) or ""
        assert "Source:" in doc or "ai.google.dev" in doc or "errs high" in doc

    def test_names_are_unique(self) -> None:
        names = [p.name for p in BUILTIN]
        assert len(names) == len(set(names))

    def test_every_provider_has_models(self) -> None:
        assert {p.provider for p in BUILTIN} == {"anthropic", "openai", "gemini", "other"}

    @pytest.mark.parametrize(
        ("name", "window", "output"),
        [
            ("claude-sonnet-4-5", 200_000, 64_000),
            ("claude-opus-4-1", 200_000, 32_000),
            ("claude-opus-4-6", 1_000_000, 128_000),
            ("gpt-4o", 128_000, 16_384),
            ("gpt-4.1", 1_047_576, 32_768),
            ("gpt-5", 400_000, 128_000),
            ("o3", 200_000, 100_000),
            ("gemini-2.5-pro", 1_048_576, 65_536),
            ("gemini-2.0-flash", 1_048_576, 8_192),
        ],
    )
    def test_documented_figures(self, name: str, window: int, output: int) -> None:
        """The figures on the vendors' model pages (each profile's ``source``)."""
        profile = get_profile(name)
        assert (profile.context_window, profile.max_output_tokens) == (window, output)

    @pytest.mark.parametrize(
        ("name", "max_edge", "max_tokens"),
        [
            ("claude-sonnet-4-5", 1568, 1568),
            ("claude-opus-4-6", 1568, 1568),
            ("claude-opus-4-7", 2576, 4784),
            ("claude-fable-5", 2576, 4784),
            ("claude-opus-5", 2576, 4784),
        ],
    )
    def test_claude_image_limits_by_generation(self, name: str, max_edge: int, max_tokens: int) -> None:
        rule = get_profile(name).image_rule
        assert isinstance(rule, AnthropicPatchRule)
        assert (rule.max_edge, rule.max_tokens, rule.patch) == (max_edge, max_tokens, 28)

    @pytest.mark.parametrize(
        ("name", "family"),
        [
            ("gpt-4o", "o200k"),
            ("gpt-4", "cl100k"),
            ("claude-opus-4-6", "claude"),
            ("claude-opus-4-7", "claude-2026"),
        ],
    )
    def test_tokenizer_families(self, name: str, family: str) -> None:
        assert get_profile(name).tokenizer == family

    def test_openai_tile_and_patch_models(self) -> None:
        assert isinstance(get_profile("gpt-4o").image_rule, OpenAITileRule)
        mini = get_profile("gpt-4o-mini").image_rule
        assert isinstance(mini, OpenAITileRule) and (mini.billing_base, mini.billing_per_tile) == (2833, 5667)
        for name, multiplier in (
            ("gpt-4.1-mini", 1.62),
            ("gpt-4.1-nano", 2.46),
            ("o4-mini", 1.72),
            ("gpt-5-nano", 1.5),
        ):
            rule = get_profile(name).image_rule
            assert isinstance(rule, OpenAIPatchRule) and rule.multiplier == multiplier

    def test_patch_budget_falls_back_to_high(self) -> None:
        rule = OpenAIPatchRule(multiplier=1.2, budgets=(("high", 2048, 2500), ("low", 512, 256)))
        assert rule.budget(None) == rule.budget("auto") == (2048, 2500)
        assert rule.budget("low") == (512, 256)


class TestPlatformIds:
    """Cloud platforms' ids name the model they serve: real ids from each platform's model page."""

    @pytest.mark.parametrize(
        ("asked", "found"),
        [
            # Bedrock: docs.aws.amazon.com/bedrock/latest/userguide/models-supported.html, inference profiles
            ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
            ("anthropic.claude-3-5-sonnet-20241022-v2:0", "claude-3-5-sonnet"),
            ("eu.anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
            ("global.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
            ("apac.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
            (
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-opus-4-1-20250805-v1:0",
                "claude-opus-4-1",
            ),
            # Vertex AI: cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude
            ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
            ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
            ("publishers/anthropic/models/claude-opus-4-1@20250805", "claude-opus-4-1"),
            ("publishers/google/models/gemini-2.5-pro", "gemini-2.5-pro"),
            # OpenRouter: openrouter.ai/models
            ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
            ("anthropic/claude-3.7-sonnet:thinking", "claude-3-7-sonnet"),
            ("openai/gpt-4o", "gpt-4o"),
            ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
            ("google/gemini-2.5-flash", "gemini-2.5-flash"),
            ("deepseek/deepseek-chat", "deepseek-chat"),
            # LiteLLM routes: docs.litellm.ai/docs/providers
            ("bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
            ("vertex_ai/claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
            ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
            ("azure/gpt-4o-2024-08-06", "gpt-4o"),
        ],
    )
    def test_a_platform_id_resolves_to_the_profile_it_names(self, asked: str, found: str) -> None:
        assert get_profile(asked).name == found

    @pytest.mark.parametrize(
        "asked",
        [
            "llama3.1:8b",  # Ollama: ollama.com/library/llama3.1
            "Qwen/Qwen2.5-72B-Instruct",  # Hugging Face: huggingface.co/Qwen/Qwen2.5-72B-Instruct
            "my-gpt4o-deployment",  # an Azure OpenAI deployment: the customer's own name
            "openai/gpt-5.3",  # a dotted version is dashed for Claude only: gpt-5 does not claim it
        ],
    )
    def test_a_name_no_profile_names_stays_unknown(self, asked: str) -> None:
        with pytest.raises(UnknownModel):
            get_profile(asked)

    def test_a_registered_name_with_a_slash_is_found_as_written(self) -> None:
        profile = ModelProfile(
            name="acme/house-model",
            provider="other",
            context_window=9_000,
            max_output_tokens=1_000,
            tokenizer="unknown",
        )
        register(profile)
        try:
            assert get_profile("acme/house-model") is profile
        finally:
            models._registry.pop("acme/house-model")


class TestFallbackProfile:
    @pytest.mark.parametrize(
        ("asked", "provider", "tokenizer"),
        [
            ("claude-opus-9", "anthropic", "claude-2026"),
            ("bedrock/us.anthropic.claude-opus-9-v1:0", "anthropic", "claude-2026"),
            ("openai/gpt-7", "openai", "o200k"),
            ("gemini-9-ultra", "gemini", "gemini"),
            ("deepseek-ai/DeepSeek-V4", "other", "deepseek"),
            ("llama3.1:8b", "other", "unknown"),
            ("my-deployment", "other", "unknown"),
        ],
    )
    def test_an_unknown_model_gets_its_familys_rule_at_the_window_given(
        self, asked: str, provider: str, tokenizer: str
    ) -> None:
        profile = models.fallback_profile(asked, 16_000)
        assert (profile.name, profile.provider, profile.tokenizer) == (asked, provider, tokenizer)
        assert profile.context_window == 16_000 and profile.max_output_tokens == 4_000

    def test_the_default_errs_high(self) -> None:
        profile = models.fallback_profile("llama3.1:8b", 200_000)
        assert profile.image_rule == FlatImageRule() and profile.max_output_tokens == 32_768
