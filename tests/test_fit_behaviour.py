"""How the engine fits history into the window on long sessions: archives, folds, reserves, estimates."""

from __future__ import annotations

import io

from contextwindow.content import Message, ToolResult, ToolSpec, ToolUse
from contextwindow.replay.scenario import Scenario, ScenarioBuilder
from contextwindow.replay.simulate import simulate_sync

PROSE = "The agent reads a file, thinks about it and writes down what it found. " * 40


def _session(turns: int, *, big_first: bool = True, reads: int = 3) -> Scenario:
    """Turns of tool calls; the first turn reads one large file (a stale result once later turns come)."""
    b = ScenarioBuilder(name="fit")
    b.system("You are a careful coding agent.")
    b.tools([ToolSpec(name="read", description="read a file")])
    for t in range(turns):
        b.user(Message.user(f"Turn {t}: audit module {t} and report."))
        for r in range(reads):
            call = f"t{t}r{r}"
            b.assistant(
                Message.assistant(f"Reading part {r}.", ToolUse(id=call, name="read", input={"part": r}))
            )
            body = PROSE * (6 if big_first and t == 0 and r == 0 else 1)
            b.tool_result(ToolResult(tool_use_id=call, content=f"part {r} of turn {t}\n{body}"))
        b.assistant(Message.assistant(f"Turn {t} done."))
    return b.build()


class TestArchiveUnderPressure:
    def test_stale_results_stay_whole_while_the_history_fits(self) -> None:
        sink = io.StringIO()
        result = simulate_sync(_session(5), model="gpt-4o", window=64_000, record=sink)
        assert not any("compacted" in r.events for r in result.records)
        last = sink.getvalue().splitlines()[-1]
        assert last.count(PROSE.strip()) >= 6 + 14  # the first turn's large result went out whole

    def test_stale_results_are_archived_when_the_request_needs_the_room(self) -> None:
        result = simulate_sync(_session(5), model="gpt-4o", window=9_000, reserve=1_000)
        assert result.summary["rejections"] == 0
        assert any("archived" in r.events or "compacted" in r.events for r in result.records)
