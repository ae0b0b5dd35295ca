"""The LangChain peers of ``benchmarks/real_sessions.py`` do what LangChain does, against the local provider.

``SummarizationMiddleware`` is called as the agent's graph calls it, its model a ``ChatOpenAI`` on the
local provider: past its trigger the history sent is its summary and the newest messages, and the
summary calls are billed.
"""

from __future__ import annotations

from contextwindow import Message, ToolResult, ToolSpec, ToolUse
from contextwindow.formats import render
from contextwindow.replay.scenario import Scenario, ScenarioBuilder

WINDOW = 8_000
RESERVE = 1_000
PROSE = "The parser reads one record per line and keeps the offsets of each field for the index. " * 12


def _session(turns: int) -> Scenario:
    b = ScenarioBuilder(name="peers")
    b.system("You are a careful coding agent.")
    b.tools([ToolSpec(name="read", description="read a file")])
    for t in range(turns):
        b.user(Message.user(f"Turn {t}: audit module {t} and report."))
        call = f"t{t}"
        b.assistant(Message.assistant("Reading it.", ToolUse(id=call, name="read", input={"part": t})))
        b.tool_result(ToolResult(tool_use_id=call, content=f"module {t}\n{PROSE}"))
        b.assistant(Message.assistant(f"Turn {t} done."))
    return b.build()


class TestSummarizationMiddlewarePeer:
    def test_past_its_trigger_it_sends_its_summary_and_the_newest_messages(self) -> None:
        from benchmarks._summarization_peer import run_summarization_peer

        scenario = _session(30)
        run = run_summarization_peer(
            scenario,
            model="claude-sonnet-4-5",
            window=WINDOW,
            reserve=RESERVE,
            served=None,
            load=scenario.load_attachment,
            render=lambda r: render(r, "anthropic", scenario.load_attachment),
        )
        assert sum(run.summarized_before) >= 2
        assert len(run.summaries) == sum(run.summarized_before)
        assert all(s.input_tokens > 0 and s.output_tokens > 0 for s in run.summaries)
        assert all(call.outcome == "ok" for call in run.calls)
        late = run.calls[-1]
        assert late.full + RESERVE > WINDOW  # the whole history no longer fits
        assert late.sent is not None and late.sent + RESERVE <= WINDOW
        first = run.summarized_before.index(True)
        assert run.calls[first].dropped > 0  # the summarised messages are not sent


class TestPeerHistory:
    def test_results_of_parallel_tools_are_sent_in_the_order_of_the_uses(self) -> None:
        from benchmarks._trim_peer import history_messages

        b = ScenarioBuilder(name="parallel")
        b.user(Message.user("Read both."))
        b.assistant(
            Message.assistant(
                "Reading.", ToolUse(id="a", name="read", input={}), ToolUse(id="b", name="read", input={})
            )
        )
        b.tool_result(ToolResult(tool_use_id="b", content="second finished first"))
        b.tool_result(ToolResult(tool_use_id="a", content="first"))
        b.assistant(Message.assistant("Done."))
        messages = [m for m, _ in history_messages(b.build())]
        results = messages[2].content
        assert [r.tool_use_id for r in results if isinstance(r, ToolResult)] == ["a", "b"]
