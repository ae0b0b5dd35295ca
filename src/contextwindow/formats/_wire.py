"""Shared pieces of the wire-format adapters: the parse result, typed field access with paths, and
the attachment sink that keeps decoded bytes aside.

Wire JSON is checked by hand while it is walked, so that an error names the exact field
(``messages[3].content[1].source.data``) and nothing half-built escapes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..attachments import decode_base64, make_ref
from ..content import AttachmentRef, Request
from ..errors import InvalidInput

__all__ = ["SPELLING_PARAMS", "AttachmentLoader", "ParsedRequest", "Sink", "expect", "loader_from"]

T = TypeVar("T")

SPELLING_PARAMS = frozenset({"system_role", "max_tokens_field"})
"""``Request.params`` keys recording how one wire format spelled a request (OpenAI's ``developer``
role, ``max_completion_tokens``); they are not wire parameters and no renderer sends them as such."""

AttachmentLoader = Callable[[AttachmentRef], bytes]
"""How a renderer gets the bytes of an inline attachment: called once per attachment it renders."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ParsedRequest:
    """A wire request in canonical form, with the decoded bytes of its inline media kept aside by id."""

    request: Request
    attachments: Mapping[str, bytes] = field(default_factory=dict)
    format: str = ""
    """``"anthropic"`` or ``"openai"``: which wire format it was read from."""

    def loader(self) -> AttachmentLoader:
        """A loader serving this request's own attachments, for rendering it back."""
        return loader_from(self.attachments)


def loader_from(attachments: Mapping[str, bytes]) -> AttachmentLoader:
    """An ``AttachmentLoader`` over an id → bytes mapping; a missing id is ``InvalidInput``."""

    def load(ref: AttachmentRef) -> bytes:
        try:
            return attachments[ref.id]
        except KeyError:
            raise InvalidInput(f"no bytes for attachment {ref.id}", path=ref.id) from None

    return load


_RECENT = 64
"""How many recently decoded media a parse remembers: an agent that resends its whole history sends
the same screenshots on every call, and decoding, hashing and sniffing them again is most of a parse."""


@functools.lru_cache(maxsize=_RECENT)
def _decoded(text: str) -> bytes:
    return decode_base64(text, path="")


@functools.lru_cache(maxsize=_RECENT)
def _ref(data: bytes, media_type: str) -> AttachmentRef:
    return make_ref(data, media_type)


class Sink:
    """Collects decoded attachments during one parse; identical bytes are kept once. The last
    :data:`_RECENT` media decoded (by any parse) are remembered by their text: a value, so a repeat
    gives the same bytes and ref as a fresh decode would."""

    def __init__(self) -> None:
        self.attachments: dict[str, bytes] = {}

    def add(self, data: bytes, media_type: str, *, media_type_path: str, **meta: Any) -> AttachmentRef:
        """Hash, size and sniff ``data``; keep it once by id. A bad media type names its wire path."""
        if meta or not isinstance(data, bytes) or not isinstance(media_type, str):
            ref = make_ref(data, media_type, media_type_path=media_type_path, **meta)
        else:
            try:
                ref = _ref(data, media_type)
            except InvalidInput:
                ref = make_ref(data, media_type, media_type_path=media_type_path)  # the error, with its path
        self.attachments.setdefault(ref.id, data)
        return ref

    def decode(self, value: Any, path: str) -> bytes:
        """Base64 text at ``path`` decoded; anything else is ``InvalidInput`` at ``path``."""
        text = expect(value, str, path, "base64 text")
        try:
            return _decoded(text)
        except InvalidInput:
            return decode_base64(text, path=path)  # the error, with its path


def expect(value: Any, kind: type[T] | tuple[type, ...], path: str, what: str | None = None) -> T:
    """``value`` if it is of ``kind``, else ``InvalidInput`` naming ``path``."""
    if isinstance(value, bool) and kind in (int, float):
        raise InvalidInput(f"expected {what or _name(kind)}, got a boolean", path=path)
    if not isinstance(value, kind):
        raise InvalidInput(f"expected {what or _name(kind)}, got {type(value).__name__}", path=path)
    return value  # type: ignore[return-value]


def _name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_name(k) for k in kind)
    return {dict: "an object", list: "a list", str: "a string", int: "an integer"}.get(kind, kind.__name__)
