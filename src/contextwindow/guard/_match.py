"""Recognising a conversation across calls: a hash chain over the messages an agent sends.

An agent that keeps its own history sends all of it on every call, and that history only grows: the
request of call *n + 1* is the request of call *n*, plus the reply, plus what the agent added. So a
request is matched to a stored session by its prefix. Each message gets a key: every field that
reaches the provider (its role, what its metadata says on the wire, each block's every field, media by
their bytes' sha256), empty text left out, nothing the ledger adds (ids, times, token stamps). So an
agent that edits anything of a message (a title, an image's detail, an OpenAI ``name``) is not matched
to the stored copy, and the request goes out with the agent's own content. The chain hash of message *i* is ``sha256(chain[i - 1] + key[i])``. Two histories share a
prefix exactly when they share the chain hash at its end, so one dictionary lookup per message finds
the longest stored prefix of a request.

The key is made from canonical content, so the same message parsed from the agent's wire request and
parsed from the provider's response (the SDK's own objects, resent by the agent) has the same key.
The guard's own tool calls and their answers (:mod:`._own_calls`), which the agent never sees, are
left out of a stored message's key; a stored message that holds nothing else has no key and takes no
place in the chain.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, assert_never

from ..content import (
    Audio,
    Block,
    Document,
    GeneratedImage,
    Image,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
    Video,
)
from ..formats.responses import ITEM_IDS
from ._own_calls import OWN_CALLS, is_own, own_ids

__all__ = ["chain", "extend_chain", "longest_known", "message_key"]


_UNSAID = frozenset({OWN_CALLS, ITEM_IDS})
"""Metadata left out of the key: the guard's own calls, and the ids the provider gave its Responses
output items (an agent that sends a reply back as a plain message, without them, continues the same
conversation; the stored ids go out with it)."""


def _ref_key(block: Image | GeneratedImage | Document | Audio | Video) -> list[Any]:
    """A medium by its bytes (their sha256 and the media type they are sent as), else its URL."""
    ref = block.ref
    if ref is None:
        return [None, None, getattr(block, "url", None)]
    return [ref.sha256, ref.media_type, getattr(block, "url", None)]


def _block_key(block: Block) -> list[Any] | None:
    """Every field of ``block`` that reaches the provider (:data:`~contextwindow.content.Block`):
    an edit of any of them is a different message. Stamps the ledger adds (token estimates, the
    attachment's id) are left out."""
    match block:
        case Text():
            return ["text", block.text] if block.text else None
        case Image():
            return ["image", *_ref_key(block), block.detail]
        case GeneratedImage():
            return ["generated_image", *_ref_key(block), block.prompt]
        case Document():
            return ["document", *_ref_key(block), block.title, block.context, block.filename]
        case Audio() | Video():
            return [block.type, *_ref_key(block)]
        case ToolUse():
            return ["tool_use", block.id, block.name, dict(block.input)]
        case ToolResult():
            content: Any = (
                block.content
                if isinstance(block.content, str)
                else [k for k in (_block_key(b) for b in block.content) if k is not None]
            )
            return ["tool_result", block.tool_use_id, block.is_error, content]
        case Thinking():
            key = ["thinking", block.thinking, block.signature]
            return [*key, block.id] if block.id is not None else key
        case RedactedThinking():
            return ["redacted_thinking", block.data]
        case _:
            assert_never(block)


def message_key(message: Message) -> bytes | None:
    """The bytes a message contributes to the chain: its role, content and what its metadata says
    to the provider (an OpenAI ``name``, a system message met mid-history; not the Responses items' ids),
    nothing the ledger adds and none of the guard's own calls; ``None`` for a message of the guard's
    own calls alone."""
    own = own_ids(message)
    content = [b for b in message.content if not is_own(b, own)] if own else message.content
    if own and not content:
        return None
    blocks = [k for k in (_block_key(b) for b in content) if k is not None]
    said = {k: v for k, v in message.metadata.items() if k not in _UNSAID} if message.metadata else {}
    text = json.dumps(
        [message.role, said, blocks],
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return text.encode("utf-8")


def extend_chain(previous: str, message: Message) -> str | None:
    """The chain hash after ``message``, given the hash before it (``""`` at the start); ``None`` when
    the message takes no place in the chain (:func:`message_key`)."""
    key = message_key(message)
    if key is None:
        return None
    return hashlib.sha256(previous.encode("ascii") + key).hexdigest()


def chain(messages: Iterable[Message], start: str = "") -> list[str]:
    """The chain hash after each of ``messages`` that takes a place in it."""
    out: list[str] = []
    current = start
    for message in messages:
        extended = extend_chain(current, message)
        if extended is not None:
            current = extended
            out.append(current)
    return out


def longest_known(hashes: Sequence[str], known: Any) -> int:
    """How many leading messages of a request (``hashes``: its chain) end on a hash in ``known``."""
    for n in range(len(hashes), 0, -1):
        if hashes[n - 1] in known:
            return n
    return 0
