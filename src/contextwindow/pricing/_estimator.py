"""``Estimator``: the one ruler every part of contextwindow prices blocks, messages and requests with.

Contract:

- ``raw_block(block)`` is the unrounded price before the multiplier; ``block(block)`` is
  ``floor(raw × multiplier + 0.5)`` (JavaScript's ``Math.round``, as context-manager's store rounds);
  ``blocks`` sums per-top-level-block rounded prices. A tool result's nested blocks are summed raw
  and rounded once, with the tool result (as context-manager's store does).
- ``message`` adds the rule's per-message framing (0 in the ``seed-store`` preset), rounded as one
  more top-level item; ``request`` adds system, tools and the per-request framing.
- Media are priced from metadata only, never from bytes: a valid stamp wins, then the provider's
  rule from known dimensions/pages/duration, else a ceiling that errs high.
- Prices are never NaN or negative; bad text is an ``InvalidInput`` naming the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..content import (
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    RedactedThinking,
    Request,
    Text,
    Thinking,
    ToolResult,
    ToolSpec,
    ToolUse,
    Video,
    valid_stamp,
)
from ..errors import InvalidInput, UsageError
from ..limits import finite
from ..models import ModelProfile, get_profile
from ._media import MEDIA_FLAT_TOKENS, audio_tokens, document_tokens, ref_image_tokens, video_tokens
from ._seed_store import (
    ENCRYPTED_CARRIER_CHARS_PER_TOKEN,
    HIDDEN_THINKING_TOKENS_DEFAULT,
    IMAGE_TOKEN_ESTIMATE,
    SIGNATURE_CHARS_PER_TOKEN,
    TOOL_USE_OVERHEAD,
    estimate_text,
    js_json,
    js_round,
    json_tokens,
)
from ._text import Structure, exact_text, fitted_rule, structure_for
from ._thinking import thinking_stripped_before

__all__ = [
    "MULTIPLIER_BOUNDS",
    "Breakdown",
    "BreakdownRow",
    "Estimator",
    "Preset",
    "clamp_multiplier",
    "valid_multiplier",
]

Preset = Literal["default", "seed-store"]
"""Which pricing rules an :class:`Estimator` uses: the fitted rules, or the seeds' store rates."""

MULTIPLIER_BOUNDS = (0.25, 4.0)
"""The multipliers an :class:`Estimator` prices at, both bounds included: the one range calibration's
widest band (:data:`contextwindow.usage.calibration.WIDEST`) and the engine's rounded steps are held in
(:func:`clamp_multiplier`), so an engine never builds an estimator its own calibration cannot give.
A multiplier set by hand must be strictly inside (context-manager's ``setTokenCalibration``:
finite and 0.25 < f < 4, :meth:`~contextwindow.usage.calibration.Calibrator.set`)."""
MULTIPLIER_MIN, MULTIPLIER_MAX = MULTIPLIER_BOUNDS
_SEED_STRUCTURE = Structure(
    message=0, request=0, text_block=0, tool_use=0, tool_result=0, tool_spec=0, media_block=0
)


def valid_multiplier(value: object) -> bool:
    """Whether ``value`` is a multiplier an :class:`Estimator` prices at: a finite number within
    :data:`MULTIPLIER_BOUNDS`."""
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and finite(value) is not None
        and MULTIPLIER_MIN <= value <= MULTIPLIER_MAX
    )


def clamp_multiplier(value: float) -> float:
    """``value`` held within :data:`MULTIPLIER_BOUNDS` (a rounded step may fall just outside)."""
    return min(max(value, MULTIPLIER_MIN), MULTIPLIER_MAX)


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    """One priced item of a request, for ``contextwindow count``."""

    segment: Literal["request", "system", "tools", "messages"]
    message: int | None
    """Index of the message (``None`` for system, tools and framing)."""
    block: int | None
    """Index of the block in its message (``None`` for the message's framing)."""
    kind: str
    """Block type, ``tool`` for a tool definition, or ``framing``."""
    tokens: int


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Every priced item of a request; ``total`` equals ``Estimator.request`` of the same request."""

    rows: tuple[BreakdownRow, ...]

    @property
    def total(self) -> int:
        return sum(row.tokens for row in self.rows)

    def by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.rows:
            out[row.kind] = out.get(row.kind, 0) + row.tokens
        return out


class Estimator:
    """Prices blocks, messages and requests for one model profile.

    ``preset="default"`` counts text with the model's own tokenizer where it is available offline
    (tiktoken for OpenAI families, a ``tokenizer.json`` for open-weight models) and with the
    fitted, content-aware rule of its tokenizer family elsewhere, with the provider's media rules.
    ``exact``: ``None`` (the default) exact where available, else the rule; ``True`` exact or a
    ``UsageError`` saying how to get the tokenizer; ``False`` always the rule. Blocks are priced
    once, at admission, so exact counting is paid once per block.
    ``preset="seed-store"`` reproduces context-manager's message-store rates exactly (``exact=True``
    is refused). ``image_flat`` prices every image (and generated image) without a stamp at a fixed
    figure, as maka's 2,000-token ruler does.
    """

    __slots__ = ("_exact", "_image_flat", "_multiplier", "_preset", "_profile", "_structure", "_text")

    def __init__(
        self,
        profile: ModelProfile | str,
        multiplier: float = 1.0,
        *,
        preset: Preset = "default",
        exact: bool | None = None,
        image_flat: float | None = None,
    ) -> None:
        if not valid_multiplier(multiplier):
            raise InvalidInput(
                f"must be a finite number with {MULTIPLIER_MIN} ≤ multiplier ≤ {MULTIPLIER_MAX}",
                path="multiplier",
            )
        if preset not in ("default", "seed-store"):
            raise InvalidInput("must be 'default' or 'seed-store'", path="preset")
        if exact not in (None, True, False):
            raise InvalidInput("must be None, True or False", path="exact")
        if image_flat is not None and valid_stamp(image_flat) is None:
            raise InvalidInput("must be a finite number ≥ 0", path="image_flat")
        self._profile = get_profile(profile)
        self._multiplier = float(multiplier)
        self._preset: Preset = preset
        self._image_flat = image_flat
        family = self._profile.tokenizer
        self._text: Callable[[str], float]
        if preset == "seed-store":
            if exact is True:
                raise UsageError("the seed-store preset prices text by its rates: it has no exact mode")
            self._text = _seed_text
            self._structure = _SEED_STRUCTURE
            self._exact = False
        else:
            counter = exact_text(self._profile, exact)
            self._text = counter or fitted_rule(family)
            self._exact = counter is not None
            self._structure = structure_for(family)

    # -- identity -----------------------------------------------------------------------------

    @property
    def profile(self) -> ModelProfile:
        return self._profile

    @property
    def multiplier(self) -> float:
        return self._multiplier

    @property
    def preset(self) -> Preset:
        return self._preset

    @property
    def exact(self) -> bool:
        """Whether text is counted with the model's real tokenizer (else by the fitted rule)."""
        return self._exact

    def prices_like(self, other: Estimator) -> bool:
        """Whether ``other`` prices every block as this one does before the multiplier (the same
        profile's pricing, preset, text counting and image rule): its raw prices serve this one."""
        a, b = self._profile, other._profile
        return (
            (a.name, a.provider, a.tokenizer, a.image_rule, a.source)
            == (b.name, b.provider, b.tokenizer, b.image_rule, b.source)
            and self._preset == other._preset
            and self._exact == other._exact
            and self._image_flat == other._image_flat
        )

    def __repr__(self) -> str:
        return f"Estimator({self._profile.name!r}, {self._multiplier}, preset={self._preset!r}, exact={self._exact})"

    # -- text ---------------------------------------------------------------------------------

    def raw_text(self, text: str, *, path: str = "text") -> float:
        """Unrounded tokens of a string under this estimator's text rule."""
        if not isinstance(text, str):
            raise InvalidInput(f"must be a string, not {type(text).__name__}", path=path)
        return self._text(text)

    def text(self, text: str) -> int:
        """Tokens of a string, rounded after the multiplier."""
        return js_round(self.raw_text(text) * self._multiplier)

    def _json(self, value: object) -> float:
        return self._json_text(js_json(value))

    def _json_text(self, text: str) -> float:
        if self._preset == "seed-store":
            return float(json_tokens(text))
        return self._text(text)

    # -- blocks -------------------------------------------------------------------------------

    def raw_block(self, block: Block) -> float:
        """Unrounded price of one block before the multiplier (never NaN, never negative)."""
        s = self._structure
        seed = self._preset == "seed-store"
        if isinstance(block, Text):
            return self.raw_text(block.text) + s.text_block
        if isinstance(block, Image | GeneratedImage):
            return self._image(block) + s.media_block
        if isinstance(block, Document):
            if seed:
                return float(MEDIA_FLAT_TOKENS)
            return document_tokens(self._profile, block.ref) + s.media_block
        if isinstance(block, Audio):
            if seed:
                return float(MEDIA_FLAT_TOKENS)
            return audio_tokens(self._profile, block.ref) + s.media_block
        if isinstance(block, Video):
            if seed:
                return float(MEDIA_FLAT_TOKENS)
            return video_tokens(self._profile, block.ref) + s.media_block
        if isinstance(block, ToolUse):
            if seed:
                return self._json(dict(block.input)) + TOOL_USE_OVERHEAD
            return self._tool_input(block) + self.raw_text(block.name, path="name") + s.tool_use
        if isinstance(block, ToolResult):
            return self._tool_result(block)
        if isinstance(block, Thinking):
            return self._thinking(block)
        if isinstance(block, RedactedThinking):
            stamp = valid_stamp(block.token_estimate)
            if stamp is not None:
                return stamp
            if block.data:
                return float(js_round(len(block.data) / ENCRYPTED_CARRIER_CHARS_PER_TOKEN))
            return float(HIDDEN_THINKING_TOKENS_DEFAULT)
        unknown: object = block
        if seed:  # context-manager's store prices any other block at 0
            return 0.0
        raise InvalidInput(f"unknown block type {type(unknown).__name__}", path="type")

    def _image(self, block: Image | GeneratedImage) -> float:
        ref = block.ref
        stamp = valid_stamp(ref.token_estimate) if ref is not None else None
        if stamp is not None:
            return stamp
        if self._image_flat is not None:
            return float(self._image_flat)
        if self._preset == "seed-store":
            return float(IMAGE_TOKEN_ESTIMATE)
        detail = block.detail if isinstance(block, Image) else None
        return ref_image_tokens(self._profile.image_rule, ref, detail)

    def _tool_input(self, block: ToolUse) -> float:
        """A tool call's input: its JSON, or its parameters where the family renders a call that way
        (``Structure.tool_param``: each name and value, a string as it is, any other value as JSON)."""
        per = self._structure.tool_param
        if per is None:
            return self._json(dict(block.input))
        text = self._text
        return sum(
            per + text(str(name)) + (text(value) if isinstance(value, str) else text(js_json(value)))
            for name, value in block.input.items()
        )

    def _tool_result(self, block: ToolResult) -> float:
        content = block.content
        if isinstance(content, str):
            if self._preset == "seed-store":
                return float(json_tokens(content)) if content else 0.0
            return self.raw_text(content, path="content") + self._structure.tool_result
        total = 0.0 if self._preset == "seed-store" else self._structure.tool_result
        for nested in content:  # nested blocks are summed raw and rounded once, at the top level
            total += self.raw_block(nested)
        return total

    def _thinking(self, block: Thinking) -> float:
        stamp = valid_stamp(block.token_estimate)
        if stamp is not None:
            return stamp
        tokens = self.raw_text(block.thinking, path="thinking")
        if block.signature:
            # The later store rule: a signed block costs at least its signature's carrier.
            tokens = max(tokens, float(js_round(len(block.signature) / SIGNATURE_CHARS_PER_TOKEN)))
        return tokens + self._structure.text_block

    def block(self, block: Block) -> int:
        """One top-level block: ``floor(raw × multiplier + 0.5)``."""
        return js_round(self.raw_block(block) * self._multiplier)

    def blocks(self, blocks: Iterable[Block]) -> int:
        """Sum of per-top-level-block rounded prices."""
        m = self._multiplier
        raw = self.raw_block
        return sum(js_round(raw(b) * m) for b in blocks)

    # -- messages and requests ----------------------------------------------------------------

    def _framing(self, tokens: float) -> int:
        return js_round(tokens * self._multiplier)

    def message(self, message: Message) -> int:
        """A message: its blocks plus the rule's per-message framing."""
        return self.blocks(message.content) + self._framing(self._structure.message)

    def raw_message(self, message: Message) -> tuple[float, ...]:
        """Each top-level block's price before the multiplier (:meth:`raw_block`), in order."""
        raw = self.raw_block
        return tuple(raw(b) for b in message.content)

    def calibrated(self, raw: Iterable[float]) -> int:
        """A message priced from its :meth:`raw_message` at this multiplier: :meth:`message`'s figure,
        without pricing a block again."""
        m = self._multiplier
        return sum(js_round(r * m) for r in raw) + self._framing(self._structure.message)

    def messages(self, messages: Iterable[Message]) -> int:
        return sum(self.message(m) for m in messages)

    def tool_spec(self, tool: ToolSpec) -> int:
        """A tool definition: the JSON of its name, description and schema, plus framing."""
        return js_round((self._json_text(_spec_json(tool)) + self._structure.tool_spec) * self._multiplier)

    def request(self, request: Request) -> int:
        """System + tools + messages + the per-request framing; thinking the API strips (earlier turns'
        on some models, :func:`~contextwindow.pricing.thinking_stripped_before`) costs nothing."""
        return self.breakdown(request).total

    def uncharged(self, messages: Sequence[Message], raw: Sequence[Sequence[float]] | None = None) -> int:
        """The price of the blocks of ``messages`` the API strips and does not charge (earlier turns'
        thinking on some models, :func:`~contextwindow.pricing.thinking_stripped_before`): what a sum
        of the messages' prices holds beyond the request's charge. ``raw``, each message's
        :meth:`raw_message`, spares pricing those blocks again."""
        return sum(
            self.thinking_price(message, None if raw is None else raw[mi])
            for mi, message in enumerate(messages[: self.stripped_before(messages)])
        )

    def stripped_before(self, messages: Sequence[Message]) -> int:
        """Thinking blocks of the messages before this index are not charged (0: none, as under the
        seed-store preset, whose store charges every block)."""
        return 0 if self._preset == "seed-store" else thinking_stripped_before(messages, self._profile.name)

    def thinking_price(self, message: Message, raw: Sequence[float] | None = None) -> int:
        """What ``message``'s thinking blocks are priced at (what the API strips from an earlier turn,
        :meth:`uncharged`); ``raw``, its :meth:`raw_message`, spares pricing them again."""
        m = self._multiplier
        return sum(
            self.block(block) if raw is None else js_round(raw[bi] * m)
            for bi, block in enumerate(message.content)
            if isinstance(block, Thinking | RedactedThinking)
        )

    def breakdown(self, request: Request | Sequence[Message]) -> Breakdown:
        """Every priced item of a request (or a list of messages), for the CLI's ``count``."""
        rows: list[BreakdownRow] = []
        if isinstance(request, Request):
            messages: Sequence[Message] = request.messages
            for i, system_block in enumerate(request.system):
                rows.append(BreakdownRow("system", None, i, "text", self.block(system_block)))
            for i, tool in enumerate(request.tools):
                rows.append(BreakdownRow("tools", None, i, "tool", self.tool_spec(tool)))
            framing = self._framing(self._structure.request)
            if framing:
                rows.append(BreakdownRow("request", None, None, "framing", framing))
        else:
            messages = request
        for mi, message in enumerate(messages):
            if not isinstance(message, Message):
                raise InvalidInput(f"must be a Message, not {type(message).__name__}", path=f"messages[{mi}]")
        # Earlier turns' thinking is stripped by the API on some models: it costs nothing there.
        stripped = self.stripped_before(messages)
        for mi, message in enumerate(messages):
            framing = self._framing(self._structure.message)
            if framing:
                rows.append(BreakdownRow("messages", mi, None, "framing", framing))
            for bi, block in enumerate(message.content):
                charged = not (mi < stripped and isinstance(block, Thinking | RedactedThinking))
                rows.append(BreakdownRow("messages", mi, bi, block.type, self.block(block) if charged else 0))
        return Breakdown(tuple(rows))


def _seed_text(text: str) -> float:
    return float(estimate_text(text))


_SPEC_JSON: dict[int, tuple[ToolSpec, str, int]] = {}
"""The JSON of the tool definitions priced lately, by the definition's identity (a guarded agent's
tools are read once while its request's fields repeat, so each call prices the same objects)."""
_SPEC_JSON_MAX = 1024


def _spec_json(tool: ToolSpec) -> str:
    """The JSON a tool definition is priced by: its name, description and schema."""
    return _spec(tool)[1]


def tool_bytes(tool: ToolSpec) -> int:
    """A tool definition's size in UTF-8 bytes as JSON (its name, description and schema)."""
    return _spec(tool)[2]


def _spec(tool: ToolSpec) -> tuple[ToolSpec, str, int]:
    known = _SPEC_JSON.get(id(tool))
    if known is not None and known[0] is tool:
        return known
    text = js_json(
        {"name": tool.name, "description": tool.description, "input_schema": dict(tool.input_schema)}
    )
    if len(_SPEC_JSON) >= _SPEC_JSON_MAX:
        _SPEC_JSON.clear()
    known = _SPEC_JSON[id(tool)] = (tool, text, len(text.encode("utf-8", "surrogatepass")))
    return known
