"""Canonical content: the blocks and messages every other part of contextwindow speaks.

Blocks and messages are frozen, keyword-only dataclasses with a ``type`` literal, as pydantic-ai's
message model is: pure values. Identity and position belong to the ledger; a ``Message`` may carry an
``id`` once the ledger has given it one. Media never hold bytes: they hold an ``AttachmentRef`` (hash,
media type, size and, where known, dimensions, duration or pages), so pricing and eviction decide from
metadata without reading a byte.

Validation happens at the edges (wire JSON, scenario files, the ledger's read boundary) through
pydantic ``TypeAdapter``s: :func:`parse_message`, :func:`parse_messages` and :func:`parse_block` turn
plain JSON-like data into these values or raise :class:`~contextwindow.errors.InvalidInput` naming the
path of the bad field (``messages[3].content[1].ref.width``). Inside the library the types are trusted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

import pydantic
from pydantic import AfterValidator, BeforeValidator, Field

from .errors import InvalidInput
from .limits import MAX_BYTES, MAX_DOCUMENT_DEPTH, MAX_TOKENS, check_depth, finite

if TYPE_CHECKING:
    from pydantic import TypeAdapter

__all__ = [
    "BLOCK_TAGS",
    "MEDIA_TYPES",
    "AttachmentRef",
    "Audio",
    "Block",
    "Document",
    "GeneratedImage",
    "Image",
    "MediaBlock",
    "Message",
    "RedactedThinking",
    "Request",
    "Role",
    "Text",
    "Thinking",
    "ToolResult",
    "ToolSpec",
    "ToolUse",
    "Video",
    "attachment_id",
    "block_to_dict",
    "media_refs",
    "message_as_data",
    "message_to_dict",
    "parse_attachment_ref",
    "parse_block",
    "parse_message",
    "parse_messages",
    "utf16_len",
    "valid_stamp",
]

Role: TypeAlias = Literal["user", "assistant"]
"""Who wrote a message; the system prompt belongs to the request, not the history."""

# Sanity bounds: beyond these a figure is corrupt data, not a real attachment.
MAX_DIMENSION_PX = 1_000_000
MAX_DURATION_SECONDS = 366 * 24 * 3600.0
MAX_PAGES = 10_000_000


def valid_stamp(value: object) -> float | None:
    """A token stamp counts only when it is a finite number between 0 and ``limits.MAX_TOKENS``;
    anything else (NaN, a negative, ``10**400``, a string) is absent."""
    as_float = finite(value)  # an int too large for a float is corrupt data, not a price
    if as_float is None or not 0 <= as_float <= MAX_TOKENS:
        return None
    return as_float


def _size(value: int) -> int:
    if not 0 <= value <= MAX_BYTES:
        raise ValueError(f"must be between 0 and {MAX_BYTES} bytes")
    return value


def _dimension(value: int | None) -> int | None:
    if value is not None and not 0 < value <= MAX_DIMENSION_PX:
        raise ValueError(f"must be between 1 and {MAX_DIMENSION_PX} pixels")
    return value


def _duration(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_DURATION_SECONDS):
        raise ValueError(f"must be a finite number of seconds between 0 and {MAX_DURATION_SECONDS:.0f}")
    return value


def _pages(value: int | None) -> int | None:
    if value is not None and not 0 < value <= MAX_PAGES:
        raise ValueError(f"must be between 1 and {MAX_PAGES}")
    return value


def _stamp(value: object) -> float | None:
    # An invalid stamp is ignored (priced by rule), never propagated: a NaN stamp taken as given makes
    # a whole projection NaN, so the round never restarts (the case agent-framework's projection
    # fixed). It runs before type validation, so a
    # string ("12", "NaN"), a boolean or a list is ignored too rather than coerced or refused: a stamp
    # is advice, and bad advice must not make a whole message unreadable.
    return valid_stamp(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class AttachmentRef:
    """What is known of an attachment without reading its bytes."""

    id: str
    """Stable id, derived from the content hash (``att_`` + sha256 prefix) by :func:`attachment_id`."""
    sha256: str
    """Hex SHA-256 of the bytes."""
    media_type: str
    """MIME type, e.g. ``image/png``."""
    size_bytes: Annotated[int, AfterValidator(_size)]
    """Size of the raw (decoded) bytes."""
    width: Annotated[int | None, AfterValidator(_dimension)] = None
    height: Annotated[int | None, AfterValidator(_dimension)] = None
    duration_seconds: Annotated[float | None, AfterValidator(_duration)] = None
    pages: Annotated[int | None, AfterValidator(_pages)] = None
    token_estimate: Annotated[float | None, BeforeValidator(_stamp)] = None
    """A price stamped by whoever admitted the attachment; used only when finite and ≥ 0."""


def attachment_id(sha256_hex: str) -> str:
    """The id an attachment with this content hash gets: versioned so a format change is detectable."""
    return f"att_{sha256_hex[:32]}"


def utf16_len(text: str) -> int:
    """A text's length in UTF-16 code units, JavaScript's ``.length`` (an astral character counts 2):
    the character measure of the rules that count characters (the seed rates, cutting to a size)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


@dataclass(frozen=True, kw_only=True, slots=True)
class Text:
    """Plain text."""

    type: Literal["text"] = "text"
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Image:
    """An image given by attachment (inline bytes kept aside) or by URL."""

    type: Literal["image"] = "image"
    ref: AttachmentRef | None = None
    url: str | None = None
    detail: Literal["auto", "low", "high", "original"] | None = None
    """OpenAI's ``detail`` setting, when the request named one."""

    def __post_init__(self) -> None:
        _one_source(self.ref, self.url, "image")


@dataclass(frozen=True, kw_only=True, slots=True)
class GeneratedImage:
    """An image the model produced. Priced as an image: formatters send it as one."""

    type: Literal["generated_image"] = "generated_image"
    ref: AttachmentRef
    prompt: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Document:
    """A document (PDF, plain text, ...) by attachment or URL."""

    type: Literal["document"] = "document"
    ref: AttachmentRef | None = None
    url: str | None = None
    title: str | None = None
    context: str | None = None
    filename: str | None = None

    def __post_init__(self) -> None:
        _one_source(self.ref, self.url, "document")


@dataclass(frozen=True, kw_only=True, slots=True)
class Audio:
    """Audio input."""

    type: Literal["audio"] = "audio"
    ref: AttachmentRef


@dataclass(frozen=True, kw_only=True, slots=True)
class Video:
    """Video input."""

    type: Literal["video"] = "video"
    ref: AttachmentRef


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolUse:
    """The model asked for a tool call."""

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_depth(self.input, path="input")


@dataclass(frozen=True, kw_only=True, slots=True)
class Thinking:
    """Model reasoning, with its signature when the provider signs it.

    An OpenAI Responses ``reasoning`` item is one block per summary part (one block, with empty
    ``thinking``, when the summary is empty), all with the item's ``id``; the first holds its
    ``encrypted_content`` as ``signature``."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None
    token_estimate: Annotated[float | None, BeforeValidator(_stamp)] = None
    id: str | None = None
    """The provider's id for this reasoning (an OpenAI Responses ``rs_…`` item); ``None`` elsewhere."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RedactedThinking:
    """Encrypted reasoning the provider returns opaque."""

    type: Literal["redacted_thinking"] = "redacted_thinking"
    data: str
    token_estimate: Annotated[float | None, BeforeValidator(_stamp)] = None


NestedBlock: TypeAlias = Annotated[
    Text | Image | GeneratedImage | Document | Audio | Video,
    Field(discriminator="type"),
]


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolResult:
    """The result of a tool call: a string or a list of blocks (text and media)."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str | tuple[NestedBlock, ...] = ""
    """A string, or blocks; a list of blocks (or strings) is taken as the tuple of blocks."""
    is_error: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.content, list):
            object.__setattr__(self, "content", _blocks(self.content))


Block: TypeAlias = Annotated[
    Text
    | Image
    | GeneratedImage
    | Document
    | Audio
    | Video
    | ToolUse
    | ToolResult
    | Thinking
    | RedactedThinking,
    Field(discriminator="type"),
]
"""Any content block of a message: text, media, a tool use or result, or reasoning; tagged by ``type``."""
MediaBlock: TypeAlias = Image | GeneratedImage | Document | Audio | Video
"""The blocks that point at an attachment."""
MEDIA_TYPES = (Image, GeneratedImage, Document, Audio, Video)
"""The classes of :data:`MediaBlock`, for ``isinstance``."""
_BLOCK_CLASSES = (*MEDIA_TYPES, Text, ToolUse, ToolResult, Thinking, RedactedThinking)


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One turn of the conversation. System prompt and tools belong to the request, not the history."""

    role: Role
    content: tuple[Block, ...]
    """The blocks. A string or a list (of blocks and strings) is taken as the tuple of blocks, so
    ``Message(role="user", content="hi")`` is ``Message(role="user", content=(Text(text="hi"),))``."""
    id: str | None = None
    """Given by the ledger when the message is appended."""
    created_at: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Converted at the edge, so the stored value is always the canonical tuple of blocks (a list
        # would make every serialisation warn).
        content = self.content
        if type(content) is not tuple:
            if isinstance(content, str):
                object.__setattr__(self, "content", (Text(text=content),))
            elif isinstance(content, list):
                object.__setattr__(self, "content", _blocks(content))
        if self.metadata:
            check_depth(self.metadata, path="metadata")

    @classmethod
    def user(cls, *parts: str | Block, **kwargs: Any) -> Message:
        """A user message from strings and blocks: ``Message.user("hi", Image(...))``."""
        return cls(role="user", content=_blocks(parts), **kwargs)

    @classmethod
    def assistant(cls, *parts: str | Block, **kwargs: Any) -> Message:
        """An assistant message from strings and blocks."""
        return cls(role="assistant", content=_blocks(parts), **kwargs)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolSpec:
    """A tool definition offered to the model."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def __post_init__(self) -> None:
        check_depth(self.input_schema, path="input_schema")


def _one_source(ref: AttachmentRef | None, url: str | None, what: str) -> None:
    # InvalidInput is a ValueError, so at the edge pydantic reports it with the block's path.
    if (ref is None) == (url is None):
        raise InvalidInput(f"an {what} needs exactly one of ref and url")


def _blocks(parts: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(Text(text=p) if isinstance(p, str) else p for p in parts)


def media_refs(blocks: Sequence[Block]) -> list[AttachmentRef]:
    """Every attachment a list of blocks points at, nested tool-result media included, in order."""
    refs: list[AttachmentRef] = []
    for block in blocks:
        if isinstance(block, ToolResult):
            if not isinstance(block.content, str):
                refs.extend(media_refs(block.content))
        elif isinstance(block, MEDIA_TYPES) and block.ref is not None:
            refs.append(block.ref)
    return refs


# ---------------------------------------------------------------------------------------------------
# The edge: plain data ⇄ values


# Built on first use (pydantic's TypeAdapter module too): building them costs more than importing the
# rest of this module.
@cache
def _block_adapter() -> TypeAdapter[Block]:
    from pydantic import TypeAdapter

    return TypeAdapter(Block)


@cache
def _ref_adapter() -> TypeAdapter[AttachmentRef]:
    from pydantic import TypeAdapter

    return TypeAdapter(AttachmentRef)


@cache
def _message_adapter() -> TypeAdapter[Message]:
    from pydantic import TypeAdapter

    return TypeAdapter(Message)


@cache
def _messages_adapter() -> TypeAdapter[list[Message]]:
    from pydantic import TypeAdapter

    return TypeAdapter(list[Message])


def _path(prefix: str, loc: tuple[int | str, ...]) -> str:
    """pydantic's error location as a field path: ``messages[3].content[1].ref.width``."""
    out = prefix
    after_index = True  # a location may open on a union tag (parse_block's own discriminator)
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
            after_index = True
            continue
        marker = (after_index and part in BLOCK_TAGS) or part.startswith(_MARKERS)
        after_index = False
        if not marker:
            out += f".{part}" if out else part
    return out


BLOCK_TAGS = frozenset(
    {
        "text",
        "image",
        "generated_image",
        "document",
        "audio",
        "video",
        "tool_use",
        "tool_result",
        "thinking",
        "redacted_thinking",
    }
)
"""The ``type`` tag of every block kind, as the wire formats and the ledger spell it."""
# Union-member and validator markers pydantic puts in a location; they are not fields.
_MARKERS = ("function-", "tuple[", "str", "json-or-python", "list[", "dict[", "nullable[", "union[")


def _invalid(err: pydantic.ValidationError, prefix: str) -> InvalidInput:
    # In a union every branch reports; the deepest location is the one the caller meant.
    first = max(err.errors(include_url=False), key=lambda e: len(e["loc"]))
    path = _path(prefix, tuple(first["loc"]))
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, InvalidInput):  # our own check inside a value: our message, the full path
        inner = cause.path or ""
        joined = f"{path}.{inner}" if path and inner else path or inner
        return InvalidInput(cause.reason, path=joined or None)
    message = str(first["msg"]).removeprefix("Value error, ")
    return InvalidInput(message, path=path or None)


def parse_block(data: Any, *, path: str = "") -> Block:
    """Validate one block from plain data; ``InvalidInput`` names the bad field."""
    check_depth(data, path=path, limit=MAX_DOCUMENT_DEPTH)
    try:
        return _block_adapter().validate_python(data)
    except pydantic.ValidationError as err:
        raise _invalid(err, path) from None


def parse_attachment_ref(data: Any, *, path: str = "ref") -> AttachmentRef:
    """Validate an attachment reference from plain data; ``InvalidInput`` names the bad field."""
    check_depth(data, path=path, limit=MAX_DOCUMENT_DEPTH)
    try:
        return _ref_adapter().validate_python(data)
    except pydantic.ValidationError as err:
        raise _invalid(err, path) from None


def parse_message(data: Any, *, path: str = "") -> Message:
    """Validate one message from plain data; ``InvalidInput`` names the bad field."""
    check_depth(data, path=path, limit=MAX_DOCUMENT_DEPTH)
    try:
        return _message_adapter().validate_python(data)
    except pydantic.ValidationError as err:
        raise _invalid(err, path) from None


def parse_messages(data: Any, *, path: str = "messages") -> list[Message]:
    """Validate a list of messages from plain data; ``InvalidInput`` names the bad field."""
    check_depth(data, path=path, limit=MAX_DOCUMENT_DEPTH)
    try:
        return _messages_adapter().validate_python(data)
    except pydantic.ValidationError as err:
        raise _invalid(err, path) from None


def _fields(value: Any) -> Any:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def _block_data(block: Any, nested: bool) -> Any:
    if not isinstance(block, _BLOCK_CLASSES):
        return block  # for the validator to refuse, with its path
    data = _fields(block)
    if isinstance(data.get("ref"), AttachmentRef):
        data["ref"] = _fields(data["ref"])
    content = data.get("content")
    if not nested and isinstance(block, ToolResult) and isinstance(content, tuple | list):
        data["content"] = [_block_data(item, True) for item in content]
    return data


def message_as_data(message: Message) -> dict[str, Any]:
    """A message built in Python as plain data, unchecked: what :func:`parse_message` validates when
    such a message is admitted (a dataclass runs no validators, so ``Text(text=5)`` constructs).

    It never serialises, so a wrongly typed field warns nothing and is refused by the validator
    with its path, whatever the warnings filter. Nesting is that of the block types (a tool result
    holds blocks, never another tool result), so the walk is bounded.
    """
    data: dict[str, Any] = _fields(message)
    content = data["content"]
    if isinstance(content, tuple | list):
        data["content"] = [_block_data(block, False) for block in content]
    return data


def block_to_dict(block: Block) -> dict[str, Any]:
    """A block as JSON-ready data that :func:`parse_block` reads back to an equal block."""
    out: dict[str, Any] = _block_adapter().dump_python(block, mode="json", exclude_none=True)
    return out


def message_to_dict(message: Message) -> dict[str, Any]:
    """A message as JSON-ready data that :func:`parse_message` reads back to an equal message."""
    out: dict[str, Any] = _message_adapter().dump_python(message, mode="json", exclude_none=True)
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """A whole request in canonical form: what a format adapter parses from and renders to the wire.

    ``params`` keeps the wire parameters contextwindow does not interpret (temperature, stop
    sequences, metadata, ...) so that parse → render gives the request back.
    """

    model: str | None = None
    system: tuple[Text, ...] = ()
    tools: tuple[ToolSpec, ...] = ()
    messages: tuple[Message, ...] = ()
    max_tokens: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.params:
            check_depth(self.params, path="params", limit=MAX_DOCUMENT_DEPTH)
