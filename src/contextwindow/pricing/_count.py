"""``count_tokens``: the one-call convenience (as litellm's ``token_counter``) over the Estimator."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast, get_args

from ..content import BLOCK_TAGS, Block, Message, Request, parse_block
from ..errors import InvalidInput, UsageError
from ..limits import MAX_DOCUMENT_DEPTH, check_depth, shown
from ..models import ModelProfile
from ._estimator import Estimator

__all__ = ["count_tokens"]

_BLOCK_TYPES: tuple[type, ...] = tuple(get_args(get_args(Block)[0]))


def count_tokens(obj: Any, *, model: str | ModelProfile | None = None) -> int:
    """Tokens of ``obj`` under the default rule of ``model``.

    ``obj`` is a string, a block, a ``Message``, a list of messages, a canonical ``Request``, or a
    whole request (dict) or message list in Anthropic or OpenAI wire format, detected by
    ``contextwindow.formats.parse_any``; a wire request's own ``model`` is used when ``model`` is
    not given. Media inside wire payloads are priced by the media rules, never as base64 text.
    """
    check_depth(obj, path="obj", limit=MAX_DOCUMENT_DEPTH)  # before any walk of it
    if isinstance(obj, Mapping) and "type" in obj and "role" not in obj and "messages" not in obj:
        if (
            isinstance(obj["type"], str) and obj["type"] in BLOCK_TAGS
        ):  # a canonical block as plain data: its own errors, its paths
            obj = parse_block(obj, path="obj")
        else:
            raise InvalidInput(
                f"unknown block type {shown(obj['type'])}; one of {', '.join(sorted(BLOCK_TAGS))}",
                path="obj.type",
            )
    if isinstance(obj, Mapping) or (
        isinstance(obj, Sequence)
        and not isinstance(obj, str)
        and not all(isinstance(m, Message) for m in obj)
    ):
        from ..formats import parse_any

        parsed = parse_any(obj)
        obj = parsed.request
    if model is None:
        if isinstance(obj, Request) and obj.model:
            model = obj.model
        else:
            raise UsageError("count_tokens needs model=... (a model name or a ModelProfile)")
    estimator = Estimator(model)
    if isinstance(obj, str):
        return estimator.text(obj)
    if isinstance(obj, Message):
        return estimator.message(obj)
    if isinstance(obj, Request):
        return estimator.request(obj)
    if isinstance(obj, _BLOCK_TYPES):
        return estimator.block(cast(Block, obj))
    if isinstance(obj, Sequence):
        return estimator.messages(obj)
    raise InvalidInput(
        f"cannot count a {type(obj).__name__}: pass a string, block, message, list of messages or request",
        path="obj",
    )
