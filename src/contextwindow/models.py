"""Model profiles: each model's window, output cap, tokenizer family and media rules.

Every rule in contextwindow is keyed by model, because vendors change how they count from one
generation to the next (each vendor's page is cited in ``docs/concepts.md``, "Sources"). A
:class:`ModelProfile` carries what
pricing and compile need; the built-in registry holds current Claude, GPT and Gemini models with the
figures the vendors document, each cited beside its entry.

Lookup (:func:`get_profile`) takes an exact name first, then the longest registered prefix, so dated
ids (``claude-sonnet-4-5-20250929``) and provider prefixes (``anthropic/claude-...``) resolve. An
unknown model is a :class:`~contextwindow.errors.UnknownModel` that says how to declare one:
``register(ModelProfile(...))`` or pass a profile directly. ``profile.with_(context_window=...)``
overrides a figure (a smaller real window behind a proxy, say) without touching the registry.
"""

from __future__ import annotations

import difflib
import re
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeAlias

from .errors import InvalidInput, UnknownModel
from .limits import MAX_TOKENS

__all__ = [
    "AnthropicPatchRule",
    "FlatImageRule",
    "GeminiMediaResolutionRule",
    "GeminiTileRule",
    "ImageRule",
    "ModelProfile",
    "OpenAIPatchRule",
    "OpenAITileRule",
    "ProviderName",
    "TokenizerFamily",
    "canonical_name",
    "fallback_profile",
    "get_profile",
    "output_cap",
    "register",
]

ProviderName: TypeAlias = Literal["anthropic", "openai", "gemini", "other"]
"""Which provider family serves a model: decides usage normalisation and media rules."""
TokenizerFamily: TypeAlias = Literal[
    "o200k",  # tiktoken o200k_base: gpt-4o, 4.1, 4.5, 5.x, o-series
    "cl100k",  # tiktoken cl100k_base: gpt-4, gpt-3.5-turbo
    "claude",  # Claude 3 .. 4.6 (not public; fitted against real usage)
    "claude-2026",  # Opus 4.7 and later: the newer tokenizer, ~30% more tokens (Anthropic's docs)
    "gemini",  # not public offline; priced with a margin
    "deepseek",  # DeepSeek-V3 and R1: a public Hugging Face tokenizer.json
    "unknown",
]
"""Which tokenizer a model counts text with: exact where a tokenizer file exists, else a fitted rule."""


@dataclass(frozen=True, kw_only=True, slots=True)
class AnthropicPatchRule:
    """Anthropic's current rule: ⌈w/28⌉·⌈h/28⌉ after the aspect-preserving resize to fit both limits.

    Source: platform.claude.com/docs/en/build-with-claude/vision (current page, ``resized_size``).
    """

    kind: Literal["anthropic-patch"] = "anthropic-patch"
    max_edge: int = 1568
    max_tokens: int = 1568
    patch: int = 28


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenAITileRule:
    """OpenAI tile models: fit 2048², shortest side to 768, 512-px tiles, base + tiles × per_tile.

    Source: platform.openai.com/docs/guides/images-vision (tile section). ``billing_base`` and
    ``billing_per_tile`` differ only for gpt-4o-mini, whose inflated figures are billing-only.
    """

    kind: Literal["openai-tile"] = "openai-tile"
    base: int = 85
    per_tile: int = 170
    fit: int = 2048
    short_side: int = 768
    tile: int = 512
    billing_base: int | None = None
    billing_per_tile: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenAIPatchRule:
    """OpenAI patch models: 32-px patches under a per-detail (max px, patch budget), ceil(patches × multiplier).

    Source: developers.openai.com/api/docs/guides/images-vision (patch section). ``budgets`` maps a
    detail level to ``(max_edge_px, max_patches)``; a budget of 0 means no patch budget.
    """

    kind: Literal["openai-patch"] = "openai-patch"
    multiplier: float = 1.2
    patch: int = 32
    budgets: tuple[tuple[str, int, int], ...] = (
        ("low", 512, 256),
        ("high", 2048, 2500),
        ("auto", 2048, 2500),
    )

    def budget(self, detail: str | None) -> tuple[int, int]:
        wanted = detail or "auto"
        for name, px, patches in self.budgets:
            if name == wanted:
                return px, patches
        for name, px, patches in self.budgets:
            if name == "high":
                return px, patches
        return self.budgets[-1][1], self.budgets[-1][2]


@dataclass(frozen=True, kw_only=True, slots=True)
class GeminiTileRule:
    """Gemini 1.5/2.x: 258 for an image ≤ 384 px on both sides, else 258 per 768-px tile.

    Source: ai.google.dev/gemini-api/docs/tokens. The 2.x tiling is unpublished, so pricing computes
    both documented variants and takes the larger (an estimate errs high).
    """

    kind: Literal["gemini-tile"] = "gemini-tile"
    per_tile: int = 258
    small_edge: int = 384
    tile: int = 768


@dataclass(frozen=True, kw_only=True, slots=True)
class GeminiMediaResolutionRule:
    """Gemini 3: a fixed maximum per image by ``media_resolution`` (ai.google.dev/.../media-resolution)."""

    kind: Literal["gemini-media-resolution"] = "gemini-media-resolution"
    resolution: Literal["unspecified", "low", "medium", "high", "ultra_high"] = "unspecified"
    image_tokens: tuple[tuple[str, int], ...] = (
        ("unspecified", 1120),
        ("low", 280),
        ("medium", 560),
        ("high", 1120),
        ("ultra_high", 2240),
    )
    pdf_page_tokens: tuple[tuple[str, int], ...] = (
        ("unspecified", 560),
        ("low", 280),
        ("medium", 560),
        ("high", 1120),
        ("ultra_high", 1120),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class FlatImageRule:
    """A flat price per image, for models whose rule is unknown: errs high."""

    kind: Literal["flat"] = "flat"
    tokens: int = 4784


ImageRule: TypeAlias = (
    AnthropicPatchRule
    | OpenAITileRule
    | OpenAIPatchRule
    | GeminiTileRule
    | GeminiMediaResolutionRule
    | FlatImageRule
)
"""How a model prices an image from its dimensions: one rule per provider family."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelProfile:
    """What contextwindow needs to know about one model."""

    name: str
    provider: ProviderName
    context_window: int
    """Total tokens the model accepts: input + output."""
    max_output_tokens: int
    """The model's own cap on ``max_tokens``."""
    tokenizer: TokenizerFamily
    image_rule: ImageRule = field(default_factory=FlatImageRule)
    source: str = ""
    """Where the figures come from."""
    tokenizer_file: str | None = None
    """A Hugging Face ``tokenizer.json`` for this model (an open-weight model's own tokenizer): text
    is then counted exactly with it. ``None``: the family's tokenizer where one is available offline
    (``contextwindow.pricing.tokenizers``)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidInput("a model profile needs a name", path="name")
        for key in ("context_window", "max_output_tokens"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidInput(f"must be an integer, got {type(value).__name__}", path=key)
        if self.tokenizer_file is not None and (
            not isinstance(self.tokenizer_file, str) or not self.tokenizer_file
        ):
            raise InvalidInput("must be a path to a tokenizer.json, or None", path="tokenizer_file")
        if not 0 < self.context_window <= MAX_TOKENS:
            raise InvalidInput(f"must be > 0 and ≤ {MAX_TOKENS}", path="context_window")
        if not 0 < self.max_output_tokens <= self.context_window:
            raise InvalidInput(
                f"must be > 0 and ≤ context_window ({self.context_window})", path="max_output_tokens"
            )

    def with_(self, **changes: Any) -> ModelProfile:
        """A copy with some figures overridden, e.g. ``profile.with_(context_window=32_000)``. A smaller
        window without a new output cap lowers the cap to fit it (a model cannot write more than its
        window holds)."""
        window = changes.get("context_window")
        if (
            "max_output_tokens" not in changes
            and isinstance(window, int)
            and not isinstance(window, bool)
            and 0 < window < self.max_output_tokens
        ):
            changes["max_output_tokens"] = window
        return replace(self, **changes)


# ---------------------------------------------------------------------------------------------------
# The built-in registry. Windows and output caps from the vendors' model pages; image rules from their
# vision pages (each profile's ``source`` names them).

_ANTHROPIC_DOC = (
    "https://platform.claude.com/docs/en/about-claude/models/overview; vision rule "
    "https://platform.claude.com/docs/en/build-with-claude/vision"
)
_STANDARD = AnthropicPatchRule(max_edge=1568, max_tokens=1568)
_HIRES = AnthropicPatchRule(max_edge=2576, max_tokens=4784)  # Opus 4.7+, Fable 5, Mythos 5


def _claude(
    name: str, window: int, output: int, *, hires: bool = False, new_tok: bool = False
) -> ModelProfile:
    return ModelProfile(
        name=name,
        provider="anthropic",
        context_window=window,
        max_output_tokens=output,
        tokenizer="claude-2026" if new_tok else "claude",
        image_rule=_HIRES if hires else _STANDARD,
        source=_ANTHROPIC_DOC,
    )


_OPENAI_DOC = (
    "vendor-derived model pages and the litellm 1.110.2 catalog (https://pypi.org/project/litellm/); "
    "vision https://platform.openai.com/docs/guides/images-vision"
)


def _gpt(
    name: str, window: int, output: int, rule: ImageRule, tok: TokenizerFamily = "o200k"
) -> ModelProfile:
    return ModelProfile(
        name=name,
        provider="openai",
        context_window=window,
        max_output_tokens=output,
        tokenizer=tok,
        image_rule=rule,
        source=_OPENAI_DOC,
    )


_GEMINI_DOC = (
    "https://ai.google.dev/gemini-api/docs/models; vision https://ai.google.dev/gemini-api/docs/tokens"
)


def _gemini(name: str, window: int, output: int, rule: ImageRule) -> ModelProfile:
    return ModelProfile(
        name=name,
        provider="gemini",
        context_window=window,
        max_output_tokens=output,
        tokenizer="gemini",
        image_rule=rule,
        source=_GEMINI_DOC,
    )


_TILE_4O = OpenAITileRule(base=85, per_tile=170)
_TILE_4O_MINI = OpenAITileRule(base=85, per_tile=170, billing_base=2833, billing_per_tile=5667)
_TILE_O = OpenAITileRule(base=75, per_tile=150)  # o1, o1-pro, o3
_TILE_5 = OpenAITileRule(base=70, per_tile=140)  # gpt-5, gpt-5.1
# Mid-2025 page: gpt-4.1-mini/nano and o4-mini cap at 1536 patches (worked example 1800×2400 → 1452).
_PATCH_1536 = (("low", 2048, 1536), ("high", 2048, 1536), ("auto", 2048, 1536))
_PATCH_52 = (("low", 2048, 6144), ("high", 2048, 6144), ("auto", 2048, 6144))  # gpt-5.2
_PATCH_55 = (("low", 512, 256), ("high", 2048, 2500), ("auto", 2048, 2500), ("original", 6000, 10_000))
_PATCH_54 = (("low", 2048, 6144), ("high", 2048, 2500), ("auto", 2048, 2500), ("original", 6000, 10_000))
_PATCH_56 = (("low", 512, 256), ("high", 2048, 2500), ("auto", 65_535, 0), ("original", 65_535, 0))

_DEEPSEEK_DOC = "https://api-docs.deepseek.com/quick_start/pricing (models and context length)"


def _deepseek(name: str, window: int, output: int) -> ModelProfile:
    return ModelProfile(
        name=name,
        provider="other",
        context_window=window,
        max_output_tokens=output,
        tokenizer="deepseek",
        source=_DEEPSEEK_DOC,
    )


_BUILTIN: tuple[ModelProfile, ...] = (
    # Anthropic (models overview page)
    _claude("claude-3-5-haiku", 200_000, 8_192),
    _claude("claude-3-5-sonnet", 200_000, 8_192),
    _claude("claude-3-7-sonnet", 200_000, 64_000),
    _claude("claude-opus-4", 200_000, 32_000),
    _claude("claude-opus-4-1", 200_000, 32_000),
    _claude("claude-sonnet-4", 200_000, 64_000),
    _claude("claude-sonnet-4-5", 200_000, 64_000),
    _claude("claude-haiku-4-5", 200_000, 64_000),
    _claude("claude-opus-4-5", 200_000, 64_000),
    _claude("claude-opus-4-6", 1_000_000, 128_000),
    _claude("claude-sonnet-4-6", 1_000_000, 128_000),
    _claude("claude-opus-4-7", 1_000_000, 128_000, hires=True, new_tok=True),
    _claude("claude-opus-4-8", 1_000_000, 128_000, hires=True, new_tok=True),
    _claude("claude-fable-5", 1_000_000, 128_000, hires=True, new_tok=True),
    _claude("claude-mythos-5", 1_000_000, 128_000, hires=True, new_tok=True),
    # The vision page names the high-resolution models up to Opus 4.8; the limits are taken for every
    # Claude ≥ 4.7. Taking them errs high on image cost, the safe side for an estimate.
    _claude("claude-opus-5", 1_000_000, 128_000, hires=True, new_tok=True),
    _claude("claude-sonnet-5", 1_000_000, 128_000, hires=True, new_tok=True),
    # OpenAI (model pages; tile vs patch by model, as the images-vision page lists them)
    _gpt("gpt-3.5-turbo", 16_385, 4_096, OpenAITileRule(), tok="cl100k"),
    _gpt("gpt-4", 8_192, 8_192, OpenAITileRule(), tok="cl100k"),
    _gpt("gpt-4-turbo", 128_000, 4_096, _TILE_4O, tok="cl100k"),
    _gpt("gpt-4o", 128_000, 16_384, _TILE_4O),
    _gpt("gpt-4o-mini", 128_000, 16_384, _TILE_4O_MINI),
    _gpt("gpt-4.1", 1_047_576, 32_768, _TILE_4O),
    _gpt("gpt-4.1-mini", 1_047_576, 32_768, OpenAIPatchRule(multiplier=1.62, budgets=_PATCH_1536)),
    _gpt("gpt-4.1-nano", 1_047_576, 32_768, OpenAIPatchRule(multiplier=2.46, budgets=_PATCH_1536)),
    _gpt("gpt-4.5", 128_000, 16_384, _TILE_4O),
    _gpt("o1", 200_000, 100_000, _TILE_O),
    _gpt("o3", 200_000, 100_000, _TILE_O),
    _gpt("o4-mini", 200_000, 100_000, OpenAIPatchRule(multiplier=1.72, budgets=_PATCH_1536)),
    _gpt("gpt-5", 400_000, 128_000, _TILE_5),
    _gpt("gpt-5.1", 400_000, 128_000, _TILE_5),
    _gpt("gpt-5-mini", 400_000, 128_000, OpenAIPatchRule(multiplier=1.2, budgets=_PATCH_52)),
    _gpt("gpt-5-nano", 400_000, 128_000, OpenAIPatchRule(multiplier=1.5, budgets=_PATCH_52)),
    _gpt("gpt-5.2", 400_000, 128_000, OpenAIPatchRule(multiplier=1.2, budgets=_PATCH_52)),
    _gpt("gpt-5.4", 1_050_000, 128_000, OpenAIPatchRule(multiplier=1.2, budgets=_PATCH_54)),
    _gpt("gpt-5.5", 1_050_000, 128_000, OpenAIPatchRule(multiplier=1.2, budgets=_PATCH_55)),
    _gpt("gpt-5.6", 922_000, 128_000, OpenAIPatchRule(multiplier=1.2, budgets=_PATCH_56)),
    # Gemini (model pages; tiles or media resolution by generation)
    _gemini("gemini-2.0-flash", 1_048_576, 8_192, GeminiTileRule()),
    _gemini("gemini-2.5-pro", 1_048_576, 65_536, GeminiTileRule()),
    _gemini("gemini-2.5-flash", 1_048_576, 65_536, GeminiTileRule()),
    _gemini("gemini-2.5-flash-lite", 1_048_576, 65_536, GeminiTileRule()),
    _gemini("gemini-3-pro", 1_048_576, 65_536, GeminiMediaResolutionRule()),
    _gemini("gemini-3-flash", 1_048_576, 65_536, GeminiMediaResolutionRule()),
    # DeepSeek (text only): the API's deepseek-chat and deepseek-reasoner, both on the V3 tokenizer
    _deepseek("deepseek-chat", 128_000, 8_192),
    _deepseek("deepseek-reasoner", 128_000, 65_536),
)

_lock = threading.Lock()
_registry: dict[str, ModelProfile] = {p.name: p for p in _BUILTIN}


def register(profile: ModelProfile, *, replace_existing: bool = True) -> ModelProfile:
    """Declare a model (or override a built-in one). Returns the profile."""
    with _lock:
        if not replace_existing and profile.name in _registry:
            raise InvalidInput(f"model {profile.name!r} is already registered", path="name")
        _registry[profile.name] = profile
    return profile


def get_profile(model: str | ModelProfile) -> ModelProfile:
    """The profile for a model name: exact match, then the longest registered prefix of the name as
    :func:`canonical_name` reads it (a cloud platform's id names the model it serves).

    A ``ModelProfile`` passes through, so every API that takes a model also takes a profile.
    """
    if isinstance(model, ModelProfile):
        return model
    if not isinstance(model, str) or not model:
        raise InvalidInput("a model is a non-empty name or a ModelProfile", path="model")
    asked = model.strip().lower()
    name = canonical_name(model)
    with _lock:
        exact = _registry.get(model) or _registry.get(asked) or _registry.get(name)
        if exact is not None:
            return exact
        # Registered names are compared without case, as the asked name is: "MyProxy-v2" finds "MyProxy".
        candidates = [
            n
            for n in _registry
            for each in (asked, name)
            if each.startswith(n.lower()) and _boundary(each, len(n))
        ]
        if candidates:
            return _registry[max(candidates, key=len)]
        close = difflib.get_close_matches(name, list(_registry), n=5, cutoff=0.5)
    raise UnknownModel(model, known=close)


def output_cap(model: str) -> int | None:
    """The most output tokens a registered profile says ``model`` writes in one reply (a request
    asking for more is refused by its provider), or ``None`` when no profile names the model: a
    family's rule only guesses its cap, and the guess is not a bound to hold an agent to."""
    try:
        return get_profile(model).max_output_tokens
    except UnknownModel:
        return None


def fallback_profile(model: str, context_window: int) -> ModelProfile:
    """A profile for a model no registered profile names, fitted to ``context_window``: its family's
    rule where the name says the family (Claude, GPT and o-series, Gemini, DeepSeek), else a
    conservative default (o200k with a 25% margin, the highest flat image price), so an estimate
    errs high. The output cap is the window's quarter, at most 32,768 tokens."""
    name = canonical_name(model)
    family = next((f for prefix, f in _FAMILIES if name.startswith(prefix)), None)
    provider, tokenizer = family or ("other", "unknown")
    return ModelProfile(
        name=model,
        provider=provider,
        context_window=context_window,
        max_output_tokens=max(1, min(32_768, context_window // 4)),
        tokenizer=tokenizer,
        image_rule=_HIRES if provider == "anthropic" else FlatImageRule(),
        source=f"no profile names {model!r}: the {provider if family else 'default'} rule, the window given",
    )


_FAMILIES: tuple[tuple[str, tuple[ProviderName, TokenizerFamily]], ...] = (
    ("claude", ("anthropic", "claude-2026")),  # the newer tokenizer counts more: errs high
    ("gpt-", ("openai", "o200k")),
    ("chatgpt-", ("openai", "o200k")),
    ("o1", ("openai", "o200k")),
    ("o3", ("openai", "o200k")),
    ("o4", ("openai", "o200k")),
    ("gemini", ("gemini", "gemini")),
    ("deepseek", ("other", "deepseek")),
)


# ---------------------------------------------------------------------------------------------------
# Cloud platforms' model ids. Each shape is from the platform's public model-id page:
#   Bedrock  https://docs.aws.amazon.com/bedrock/latest/userguide/models-supported.html and
#            .../inference-profiles-support.html: [region.]vendor.model[-vN[:M]],
#            "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic.claude-3-5-sonnet-20241022-v2:0",
#            or the inference profile's ARN ("arn:aws:bedrock:…:inference-profile/us.anthropic.…")
#   Vertex   https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude: model@version,
#            "claude-sonnet-4-5@20250929"; "publishers/anthropic/models/claude-…" in resource paths
#   OpenRouter https://openrouter.ai/models: vendor/model with dotted versions and :variant,
#            "anthropic/claude-sonnet-4.5", "openai/gpt-4o", "anthropic/claude-3.7-sonnet:thinking"
#   LiteLLM  https://docs.litellm.ai/docs/providers: route/model, "bedrock/…", "vertex_ai/…", "openrouter/…"
#   Ollama   https://ollama.com/library: name:tag, "llama3.1:8b"
#   Hugging Face https://huggingface.co/models: owner/name, "Qwen/Qwen2.5-72B-Instruct"
# Azure OpenAI deployment names are the customer's own (any string): only ``context_window=`` guards them.

_BEDROCK_REGIONS = ("us", "us-gov", "eu", "apac", "jp", "au", "ca", "global")
_BEDROCK_VENDORS = (
    "anthropic", "meta", "amazon", "mistral", "cohere", "ai21", "deepseek", "openai", "qwen", "writer"
)  # fmt: skip
_BEDROCK = re.compile(
    rf"^(?:(?:{'|'.join(map(re.escape, _BEDROCK_REGIONS))})\.)?(?:{'|'.join(_BEDROCK_VENDORS)})\.(?P<model>.+)$"
)
_BEDROCK_VERSION = re.compile(r"(?:-v\d+)?(?::\d+)?$")
_OPENROUTER_VARIANTS = re.compile(r":(?:free|beta|thinking|extended|nitro|floor|online)$")
_DOTTED_VERSION = re.compile(r"(?<=\d)\.(?=\d)")


def canonical_name(model: str) -> str:
    """The model a platform's id names, lower-cased: an ARN's resource, routes and owners
    (``bedrock/``, ``anthropic/``, ``Qwen/``), Bedrock's region, vendor and version, Vertex's
    ``@version`` and OpenRouter's ``:variant`` stripped, and Claude's dotted versions dashed
    (``claude-sonnet-4.5`` is ``claude-sonnet-4-5``). Dates stay: a registered prefix claims them."""
    name = model.strip().lower()
    if name.startswith("arn:"):
        name = name.rsplit("/", 1)[-1]
    name = name.rsplit("/", 1)[-1]  # routes, vendors and owners; Vertex's publishers/…/models/
    name = name.split("@", 1)[0]
    bedrock = _BEDROCK.match(name)
    if bedrock is not None:
        name = _BEDROCK_VERSION.sub("", bedrock["model"]) or bedrock["model"]
    name = _OPENROUTER_VARIANTS.sub("", name)
    if name.startswith("claude"):
        name = _DOTTED_VERSION.sub("-", name)
    return name


def _boundary(name: str, at: int) -> bool:
    # "gpt-4o" claims "gpt-4o-2024-08-06" but "gpt-5" does not claim an unregistered "gpt-5.3":
    # a prefix matches only up to a separator, and a wrong window is worse than a clear error.
    return at == len(name) or name[at] in "-_:@"
