"""``contextwindow.guard(client)``: the entry point, cheap to import (the guard loads on first use)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ._options import GuardOptions

__all__ = ["guard"]


def guard(client: Any, options: GuardOptions | None = None, /, **fields: Any) -> Any:
    """``client`` (``anthropic.Anthropic``/``AsyncAnthropic``, ``openai.OpenAI``/``AsyncOpenAI``)
    guarded: every call that sends a conversation is fitted to the window, and a rejection for size is
    recovered once; everything else is the client's own (:mod:`contextwindow.guard`).

    The options are a :class:`GuardOptions` or its fields as keywords (``store``, ``session``,
    ``summarizer``, ``summary_model``, ``context_window``, ``policy``, ``settings``, ``reread``);
    keywords given with ``options`` replace those fields of it. An unknown keyword raises
    ``TypeError``.
    """
    from ._clients import wrap

    if options is None:
        options = GuardOptions(**fields)
    elif fields:
        options = dataclasses.replace(options, **fields)
    return wrap(client, options)
