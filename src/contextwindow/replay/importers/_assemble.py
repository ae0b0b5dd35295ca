"""Turning a recorded conversation (canonical messages in order) into a replayable scenario.

A real transcript is messier than a script: the user writes twice before the model answers, a tool
call is interrupted and never gets a result, the user types while tools run, the recording stops in
the middle of a tool call. :class:`Assembler` reads the messages in order and decides, for each:

- user text or media when no reply is in progress → the user message of a new turn (consecutive
  ones are merged into one message, as the provider would have received them);
- user text or media after a reply that asked for tools → a mid-turn message for the next round;
- tool results → the scripted results of the latest reply (a result for a tool use that was never
  asked for, or asked for earlier, is kept as text in a mid-turn message so no content is lost);
- a reply while tool uses still wait for results → those get an error result saying none was
  recorded; a transcript that ends on tool uses, or on a user message, gets a closing reply saying
  the transcript ends there. Such invented content is marked ``metadata["imported"] = "placeholder"``.
"""

from __future__ import annotations

from collections.abc import Mapping

from ...content import Block, Message, Text, ToolResult, ToolSpec, ToolUse, media_refs
from ..scenario import Scenario, ScenarioBuilder

__all__ = ["PLACEHOLDER", "Assembler"]

PLACEHOLDER = {"imported": "placeholder"}
NO_RESULT = "(no result was recorded in the transcript for this tool call)"
ENDS_HERE = "(the transcript ends here)"


class Assembler:
    """Feeds canonical messages to a :class:`ScenarioBuilder`, repairing what a transcript leaves out."""

    def __init__(self, *, name: str, model: str | None = None, description: str = "") -> None:
        self.builder = ScenarioBuilder(name=name, model=model, description=description)
        self._user: list[Block] = []
        self._user_where = ""
        self._reply_asked_tools = False

    def system(self, texts: list[str], *, where: str = "") -> None:
        for text in texts:
            self.builder.system(text, where=where)

    def tools(self, specs: list[ToolSpec], *, where: str = "") -> None:
        self.builder.tools(specs, where=where)

    def message(
        self, message: Message, *, attachments: Mapping[str, bytes] | None = None, where: str = ""
    ) -> None:
        """One recorded message, in transcript order, with the bytes its media point at (by id)."""
        for ref in media_refs(message.content):
            if attachments is not None and ref.id in attachments:
                self.builder.add_bytes(attachments[ref.id], ref.media_type, where=where)
        if message.role == "assistant":
            self._assistant(message, where)
            return
        results = [b for b in message.content if isinstance(b, ToolResult)]
        others: list[Block] = [b for b in message.content if not isinstance(b, ToolResult | ToolUse)]
        stray: list[Block] = []
        kept: list[Block] = list(others)
        for result in results:
            if result.tool_use_id in self.builder.pending_tool_uses:
                self.builder.tool_result(result, where=where)
            else:
                stray.append(
                    Text(
                        text=f"[tool result for {result.tool_use_id}, not matched to a call]\n{_text_of(result)}"
                    )
                )
        others = stray + kept
        if not others:
            return
        if self.builder.in_turn and self._reply_asked_tools:
            self.builder.inject(Message(role="user", content=tuple(others)), where=where)
        else:
            if not self._user:
                self._user_where = where
            self._user.extend(others)

    def build(self, *, where: str = "end") -> Scenario:
        """The scenario, with the transcript's loose ends tied off."""
        if self._user:
            self._flush_user()
            self._reply_asked_tools = True  # the new turn has no reply yet: close it like a cut-off one
        if self.builder.in_turn and self._reply_asked_tools:
            self._fill_missing_results(where)
            self.builder.assistant(
                Message(role="assistant", content=(Text(text=ENDS_HERE),), metadata=PLACEHOLDER), where=where
            )
        return self.builder.build(where=where)

    def _assistant(self, message: Message, where: str) -> None:
        if self._user:
            self._flush_user()
        elif not self.builder.in_turn:
            self.builder.user(
                Message(
                    role="user", content=(Text(text="(the transcript starts here)"),), metadata=PLACEHOLDER
                ),
                where=where,
            )
        self._fill_missing_results(where)
        self.builder.assistant(message, where=where)
        self._reply_asked_tools = any(isinstance(b, ToolUse) for b in message.content)

    def _flush_user(self) -> None:
        # Only reached when no reply is in progress: user input during tool calls is injected at once.
        self.builder.user(Message(role="user", content=tuple(self._user)), where=self._user_where)
        self._user = []
        self._reply_asked_tools = False

    def _fill_missing_results(self, where: str) -> None:
        for tool_use_id in self.builder.pending_tool_uses:
            self.builder.tool_result(
                ToolResult(tool_use_id=tool_use_id, content=NO_RESULT, is_error=True), where=where
            )


def _text_of(result: ToolResult) -> str:
    if isinstance(result.content, str):
        return result.content
    return "\n".join(b.text for b in result.content if isinstance(b, Text))
