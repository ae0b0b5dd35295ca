"""The Engine owning the loop: it compiles, sends, runs your tools, folds and recovers.

Runs offline against the in-process local provider (16,000-token window, calling the tools it is
offered); for a real provider, pass ``contextwindow.AnthropicProvider()`` or ``OpenAIProvider()``.

    python examples/engine_with_tools.py
"""

from __future__ import annotations

import asyncio

from contextwindow import Engine, Message, Policy, Summarizer, ToolResult, ToolUse, get_profile, open_store
from contextwindow.engine import EngineCompiler
from contextwindow.testing import LocalModel, LocalProvider, LocalSettings

TOOLS = [
    {
        "name": "lookup",
        "description": "Look a word up.",
        "input_schema": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    }
]


async def lookup(use: ToolUse) -> ToolResult:
    word = str(use.input.get("word", ""))
    return ToolResult(tool_use_id=use.id, content=f"{word}: " + "a long definition. " * 300)


async def run(turns: int = 10) -> list[str]:
    model = LocalModel(LocalSettings(window=16_000, call_tools=True))
    profile = get_profile("claude-haiku-4-5").with_(context_window=16_000)
    with open_store() as store:
        session = store.session("engine-example")
        engine = Engine(
            session,
            LocalProvider(model),
            profile,
            compiler=EngineCompiler(Policy(output_reserve=1024), system="You define words.", tools=TOOLS),
            tool_runner=lookup,
            summarizer=Summarizer(LocalProvider(model, session="summarizer"), profile),
        )
        ended = []
        for turn in range(turns):
            async for event in engine.run_turn(Message.user(f"Define word number {turn}.")):
                if event.type == "turn_ended":
                    ended.append(event.stop_reason)
        return ended


def main() -> None:
    print(asyncio.run(run()))


if __name__ == "__main__":
    main()
