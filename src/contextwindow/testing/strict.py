"""What the real APIs refuse, refused by the local provider with their status and error shape.

:func:`check` reads one canonical request as a wire format carries it and returns the first refusal,
or ``None``. The rules, in the order they are checked:

1. at least one message, and (Anthropic) the first one from the user;
2. no empty content: a message with no blocks (Anthropic allows it only for a final assistant
   message, a prefill), and no empty text block;
3. tool pairing: every tool result answers a tool use of the message right before it, every tool use
   of an assistant message is answered in the next message, and the results open that message in the
   order the calls were made;
4. media bytes match their declared type (an image whose bytes are a JPEG declared as PNG).

Anthropic answers 400 ``invalid_request_error`` with a message that names the offending field
(``messages.3.content.0``); OpenAI answers 400 ``invalid_request_error`` with ``param`` naming it
(``messages.[3].role``). The texts follow what the APIs say for each case (see the public API error
references, https://docs.anthropic.com/en/api/errors and
https://platform.openai.com/docs/guides/error-codes); where an API words a case several ways over
time, one wording is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..attachments import sniff
from ..content import (
    AttachmentRef,
    Document,
    GeneratedImage,
    Image,
    Message,
    Request,
    Text,
    ToolResult,
    ToolUse,
)
from ..errors import ContextWindowError
from ..formats import WireFormat

__all__ = ["StrictRefusal", "check"]


class StrictRefusal:
    """A refusal: the message, and for OpenAI the ``param`` and ``code`` it names."""

    __slots__ = ("code", "message", "param")

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        self.message = message
        self.param = param
        self.code = code

    def __repr__(self) -> str:
        return f"StrictRefusal({self.message!r})"


def check(
    request: Request, wire: WireFormat, load: Callable[[AttachmentRef], bytes] | None = None
) -> StrictRefusal | None:
    """The first rule ``request`` breaks as ``wire`` carries it, or ``None`` (see the module docstring).
    ``load`` gives attachment bytes for the media check (without it, media are not checked)."""
    messages = request.messages
    offset = 1 if wire == "openai" and request.system else 0  # OpenAI counts its system message
    if not messages:
        if wire == "anthropic":
            return StrictRefusal("messages: at least one message is required")
        return StrictRefusal("[] is too short - 'messages'", param="messages", code="empty_array")
    if wire == "anthropic" and messages[0].role != "user":
        return StrictRefusal('messages: first message must use the "user" role')
    for i, message in enumerate(messages):
        refusal = _empty(message, i, i == len(messages) - 1, wire, offset)
        if refusal is not None:
            return refusal
    refusal = _pairing(messages, wire, offset)
    if refusal is not None:
        return refusal
    if load is not None:
        return _media(messages, wire, offset, load)
    return None


def _empty(message: Message, i: int, last: bool, wire: WireFormat, offset: int) -> StrictRefusal | None:
    if not message.content:
        if wire == "anthropic" and not (last and message.role == "assistant"):
            return StrictRefusal(
                f"messages.{i}: all messages must have non-empty content except for the optional final "
                "assistant message"
            )
        if wire == "openai" and message.role == "user":
            return _openai_empty(i + offset)
    for j, block in enumerate(message.content):
        if isinstance(block, Text) and not block.text:
            if wire == "anthropic":
                return StrictRefusal(f"messages.{i}.content.{j}.text: text content blocks must be non-empty")
            if message.role == "user":
                return _openai_empty(i + offset)
        if isinstance(block, ToolResult) and not isinstance(block.content, str):
            for k, inner in enumerate(block.content):
                if isinstance(inner, Text) and not inner.text and wire == "anthropic":
                    return StrictRefusal(
                        f"messages.{i}.content.{j}.content.{k}.text: text content blocks must be non-empty"
                    )
    return None


def _openai_empty(index: int) -> StrictRefusal:
    return StrictRefusal(
        f"Invalid 'messages[{index}].content': string too short. Expected a string with minimum length 1, "
        "but got an empty string instead.",
        param=f"messages.[{index}].content",
        code="string_below_min_length",
    )


def _pairing(messages: tuple[Message, ...], wire: WireFormat, offset: int) -> StrictRefusal | None:
    previous: list[str] = []
    for i, message in enumerate(messages):
        results = [(j, b) for j, b in enumerate(message.content) if isinstance(b, ToolResult)]
        for j, result in results:
            if result.tool_use_id not in previous:
                if wire == "anthropic":
                    return StrictRefusal(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{result.tool_use_id}. Each `tool_result` block must have a corresponding `tool_use` "
                        "block in the previous message."
                    )
                return StrictRefusal(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message "
                    "with 'tool_calls'.",
                    param=f"messages.[{i + offset}].role",
                )
        if previous:
            answered = [b.tool_use_id for _, b in results]
            missing = [c for c in previous if c not in answered]
            if missing:
                if wire == "anthropic":
                    return StrictRefusal(
                        f"messages.{i - 1}: `tool_use` ids were found without `tool_result` blocks immediately "
                        f"after: {', '.join(missing)}. Each `tool_use` block must have a corresponding "
                        "`tool_result` block in the next message."
                    )
                return StrictRefusal(
                    "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                    f"each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                    f"{', '.join(missing)}",
                    param=f"messages.[{i - 1 + offset}].role",
                )
            in_order = [c for c in answered if c in previous] == [c for c in previous if c in answered]
            first = all(isinstance(b, ToolResult) for b in message.content[: len(results)])
            if wire == "anthropic" and not (in_order and first):
                return StrictRefusal(
                    f"messages.{i}: `tool_result` blocks must come first in the message, in the order of the "
                    f"`tool_use` blocks of messages.{i - 1} they answer."
                )
        previous = (
            [b.id for b in message.content if isinstance(b, ToolUse)] if message.role == "assistant" else []
        )
    if previous:
        last = len(messages) - 1
        if wire == "anthropic":
            return StrictRefusal(
                f"messages.{last}: `tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{', '.join(previous)}. Each `tool_use` block must have a corresponding `tool_result` block "
                "in the next message."
            )
        return None  # OpenAI: a trailing call is the model's to answer; nothing is sent after it
    return None


def _media(
    messages: tuple[Message, ...], wire: WireFormat, offset: int, load: Callable[[AttachmentRef], bytes]
) -> StrictRefusal | None:
    for i, message in enumerate(messages):
        for j, block in enumerate(message.content):
            inner: list[Any] = [block]
            if isinstance(block, ToolResult) and not isinstance(block.content, str):
                inner = list(block.content)
            for item in inner:
                if not isinstance(item, Image | GeneratedImage | Document) or item.ref is None:
                    continue
                ref = item.ref
                if not ref.media_type.startswith("image/"):
                    continue
                try:
                    sniff(load(ref), ref.media_type, verify_type=True)
                except ContextWindowError:
                    if wire == "anthropic":
                        return StrictRefusal(
                            f"messages.{i}.content.{j}.image.source.base64: The image was specified using the "
                            f"{ref.media_type} media type, but does not appear to be a valid {ref.media_type} "
                            "image"
                        )
                    return StrictRefusal(
                        "You uploaded an unsupported image. Please make sure your image is valid and matches "
                        "its declared type.",
                        param=f"messages.[{i + offset}].content",
                        code="invalid_image_format",
                    )
    return None
