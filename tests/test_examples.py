"""Every script in ``examples/`` runs offline against the local provider, as a user would run it."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert {p.stem for p in EXAMPLES} >= {
        "anthropic_tool_loop",
        "openai_async_loop",
        "streaming",
        "engine_with_tools",
        "langchain_agent",
        "pydantic_ai_agent",
        "openai_agents_runner",
        "litellm_tool_loop",
        "openai_responses_loop",
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_the_example_runs_offline(
    path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    runpy.run_path(str(path), run_name="__main__")
    printed = capsys.readouterr().out.strip().splitlines()
    assert len(printed) >= 1 and all(line for line in printed)
