"""Responses the provider holds: ``previous_response_id`` mapped to the ledger session it continues.

With OpenAI Responses an agent may send only its new input and name the response it follows
(``previous_response_id``): the provider holds the history
(https://platform.openai.com/docs/guides/conversation-state). The guard records each reply, so it
knows, for each response id it has seen, the session and how many of its messages end there, and
what the provider counted for that response (its prompt and output). The next request is that
conversation plus the new input:

- when it fits (the provider's count of the response it follows, plus the new input, plus the
  output reserve, within the window as known), the agent's request goes out as written, naming the
  response: the provider's prompt cache and stored reasoning keep working, and the ledger follows;
- when it would not fit, or the response was made with ``store: false`` (the provider holds nothing),
  the guard sends the compiled history from the ledger instead (folded and evicted as any request)
  without ``previous_response_id``; the next request can name the response that answers it;
- a response named from earlier in the conversation branches it (a session of its own, as an edited
  history does); an id the guard never recorded (another process, before a restart) goes out as
  written, as the provider would treat it.

The map is this process's, bounded by count, least recently used out.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_RESPONSE_IDS", "RecordedResponse", "ResponseIds"]

MAX_RESPONSE_IDS = 10_000
"""Response ids remembered per guard core."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordedResponse:
    """A response the guard recorded: where it ends in the ledger, and what the provider counted."""

    conversation: Any
    """The guard's conversation (its ledger session) the response belongs to."""
    count: int
    """How many of the conversation's messages end with this response's reply."""
    tokens: int | None
    """The provider's prompt plus output for the response; ``None`` when it reported no usage."""
    stored: bool
    """Whether the provider stores it (the request did not say ``store: false``)."""


class ResponseIds:
    """Response id → :class:`RecordedResponse`, at most :data:`MAX_RESPONSE_IDS`, least recently used
    out."""

    def __init__(self, limit: int = MAX_RESPONSE_IDS) -> None:
        self.limit = limit
        self._recorded: OrderedDict[str, RecordedResponse] = OrderedDict()

    def get(self, response_id: str) -> RecordedResponse | None:
        """The response recorded under ``response_id`` (now the most recently used), or ``None``."""
        recorded = self._recorded.get(response_id)
        if recorded is not None:
            self._recorded.move_to_end(response_id)
        return recorded

    def put(self, response_id: str, recorded: RecordedResponse) -> None:
        """Record ``response_id``; the least recently used past :attr:`limit` is forgotten."""
        self._recorded[response_id] = recorded
        self._recorded.move_to_end(response_id)
        while len(self._recorded) > self.limit:
            self._recorded.popitem(last=False)
