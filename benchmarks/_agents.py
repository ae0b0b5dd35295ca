"""What the framework agents of the integrations benchmark and tests share: a local provider that
keeps a log of what it answered, and the task's material (a search tool's long answer, a real PNG)."""

from __future__ import annotations

import base64
import io
import re
from dataclasses import dataclass
from typing import Any

from PIL import Image as PILImage

from contextwindow.content import Message, Text, ToolResult, ToolUse
from contextwindow.testing import LocalModel, LocalSettings
from contextwindow.testing.model import Rejection

__all__ = ["TURNS", "WINDOW", "Call", "ObservedModel", "RereadingModel", "notes", "png", "png_data_url"]

WINDOW = 16_000
TURNS = 42


@dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """One call the provider answered: its input count, or the rejection it sent."""

    input_tokens: int | None
    status: int | None = None
    message: str = ""


class ObservedModel(LocalModel):
    """The local provider, recording each call it answers (thread-safe, like the model)."""

    def __init__(self, settings: LocalSettings | None = None) -> None:
        super().__init__(settings or LocalSettings(window=WINDOW, call_tools=True))
        self.calls: list[Call] = []

    def handle(self, request: Any, **kwargs: Any) -> Any:
        answer = super().handle(request, **kwargs)
        with self._lock:
            if isinstance(answer, Rejection):
                self.calls.append(Call(input_tokens=None, status=answer.status, message=answer.message))
            else:
                self.calls.append(Call(input_tokens=answer.input_tokens))
        return answer

    @property
    def rejections(self) -> list[Call]:
        return [c for c in self.calls if c.status is not None]

    @property
    def largest(self) -> int:
        return max(c.input_tokens or 0 for c in self.calls)


_ARCHIVED = re.compile(r"tool-result-archive-[0-9a-f]+")


class RereadingModel(ObservedModel):
    """The observed provider, as a model that reads an archived result again when it can: offered
    ``read_archived`` beside a placeholder naming an archive id, it calls the tool with that id (once
    per request that is not already its answer), else it answers as the local model does."""

    def __init__(self, settings: LocalSettings | None = None) -> None:
        super().__init__(settings)
        self.rereads: list[str] = []
        """The ids it asked to read again, in order."""

    def handle(self, request: Any, **kwargs: Any) -> Any:
        offered = any(t.name == "read_archived" for t in request.tools)
        answered = (
            request.messages
            and any(isinstance(b, ToolResult) for b in request.messages[-1].content)
            and _reread_last(request.messages)
        )
        ids = _ARCHIVED.findall(_texts(request.messages)) if offered and not answered else []
        if ids:
            with self._lock:
                self.rereads.append(ids[-1])
            call = ToolUse(
                id=f"toolu_reread_{len(self.rereads):04d}", name="read_archived", input={"id": ids[-1]}
            )
            self.enqueue(Message(role="assistant", content=(call,)))
        answer = super().handle(request, **kwargs)
        if ids and isinstance(answer, Rejection):
            self.discard_script(0)  # refused: the re-read was not asked
        return answer


def _reread_last(messages: Any) -> bool:
    """Whether the request's newest results answer a ``read_archived`` call."""
    for message in reversed(messages[:-1]):
        if message.role == "assistant":
            return any(isinstance(b, ToolUse) and b.name == "read_archived" for b in message.content)
    return False


def _texts(messages: Any) -> str:
    out: list[str] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, Text):
                out.append(block.text)
            elif isinstance(block, ToolResult):
                content = block.content
                out.extend(
                    [content]
                    if isinstance(content, str)
                    else [b.text for b in content if isinstance(b, Text)]
                )
    return "\n".join(out)


def notes(query: str, n: int = 150) -> str:
    """A search tool's long answer: about 2,000 tokens."""
    return " ".join(f"note on {query} {i}: a long paragraph about the topic." for i in range(n))


def png(width: int = 800, height: int = 600) -> bytes:
    """A real PNG of the given size."""
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), (40, 90, 160)).save(out, format="PNG")
    return out.getvalue()


def png_data_url(width: int = 800, height: int = 600) -> str:
    return "data:image/png;base64," + base64.b64encode(png(width, height)).decode("ascii")
