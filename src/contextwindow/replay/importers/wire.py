"""Chat transcripts in a provider's wire format as scenarios: OpenAI Chat Completions or Anthropic
Messages, as a request object (``{"model", "messages", "tools", …}``) or a bare message list.

The parse is the library's own (:func:`contextwindow.formats.parse_any`), so media, tool calls and
system prompts read exactly as they do when a request is priced. The assistant messages of the list
become the scripted replies; ``tool`` messages (Chat Completions) or ``tool_result`` blocks
(Messages) become the scripted tool results.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import InvalidInput
from ...formats import parse_any
from .._json_text import json_at, read_text
from ..scenario import Scenario, ScenarioError
from ._assemble import Assembler

__all__ = ["import_chat", "import_chat_file"]


def import_chat(data: Mapping[str, Any] | Sequence[Any], *, name: str = "chat", where: str = "") -> Scenario:
    """A wire-format request or message list as a scenario; errors name the field (``messages[3]…``)."""
    try:
        parsed = parse_any(data)
    except InvalidInput as err:
        raise ScenarioError(err.reason, where=where, field=err.path or "") from None
    request = parsed.request
    assembler = Assembler(name=name, model=request.model, description=f"{parsed.format} chat transcript")
    assembler.system([t.text for t in request.system], where=where)
    assembler.tools(list(request.tools), where=where)
    for i, message in enumerate(request.messages):
        assembler.message(message, attachments=parsed.attachments, where=_at(where, i))
    return assembler.build(where=_at(where, "end"))


def _at(where: str, index: int | str) -> str:
    # Canonical messages, not wire ones: consecutive tool messages are one canonical message.
    place = f"message {index + 1}" if isinstance(index, int) else index
    return f"{where}: {place}" if where else place


def import_chat_file(path: str | Path) -> Scenario:
    """:func:`import_chat` on a JSON file."""
    path = Path(path)
    data = json_at(read_text(path), where=str(path))
    return import_chat(data, name=path.stem, where=str(path))
