"""Test support for replays: the small coding-agent scenario the replay tests run.

Each turn asks for an audit, reads ``reads`` parts of a file (long tool results), optionally takes a
screenshot, and ends with a short reply: enough history to fill a small window in a few turns.
"""

from __future__ import annotations

from contextwindow.content import Image, Message, ToolResult, ToolSpec, ToolUse
from contextwindow.replay import synthetic_media
from contextwindow.replay.scenario import Scenario, ScenarioBuilder


def coding_scenario(turns: int = 3, *, reads: int = 4, result: str, screenshots: bool = False) -> Scenario:
    """The script: ``turns`` turns of ``reads`` reads whose results are ``result``, each with a screenshot."""
    b = ScenarioBuilder(name="small")
    b.system("You are a careful coding agent.")
    tools = [ToolSpec(name="read", description="read a file")]
    if screenshots:
        tools.append(ToolSpec(name="screenshot", description="look"))
    b.tools(tools)
    for t in range(turns):
        b.user(Message.user(f"Turn {t}: audit the module and report."))
        for r in range(reads):
            call = f"t{t}r{r}"
            b.assistant(
                Message.assistant(f"Reading part {r}.", ToolUse(id=call, name="read", input={"part": r}))
            )
            b.tool_result(ToolResult(tool_use_id=call, content=f"part {r} of turn {t}\n" + result))
        if screenshots:
            shot = b.add_generated(lambda t=t: synthetic_media.screenshot(320, 200, seed=t), "image/png")
            b.assistant(Message.assistant("Looking.", ToolUse(id=f"t{t}s", name="screenshot", input={})))
            b.tool_result(ToolResult(tool_use_id=f"t{t}s", content=(Image(ref=shot),)))
        b.assistant(Message.assistant(f"Turn {t} done."))
    return b.build()
