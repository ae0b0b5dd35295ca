"""The snippets of ``docs/integrations.md`` run as they are, offline, against the local provider."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from integrations_support import close_the_loop_left_open

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
_BLOCK = re.compile(r"^## (?P<title>.+?)\n(?P<body>.*?)(?=^## |\Z)", re.S | re.M)
_CODE = re.compile(r"^```python\n(?P<code>.*?)^```", re.S | re.M)
_NEEDS = {
    "LangChain": "langchain",
    "pydantic-ai": "pydantic_ai",
    "OpenAI Agents SDK": "agents",
    "litellm": "litellm",
    "The Anthropic SDK": "anthropic",
}


def _snippets() -> list[tuple[str, str, str]]:
    out = []
    for section in _BLOCK.finditer(DOC.read_text(encoding="utf-8")):
        title = section["title"]
        needs = next((m for key, m in _NEEDS.items() if title.startswith(key)), None)
        for code in _CODE.finditer(section["body"]):
            if needs is not None:
                out.append((title, needs, code["code"]))
    return out


SNIPPETS = _snippets()

close_the_loop = pytest.fixture(autouse=True)(close_the_loop_left_open)  # pydantic-ai's run_sync keeps one


def test_every_adapter_section_shows_a_snippet() -> None:
    assert {needs for _, needs, _ in SNIPPETS} == set(_NEEDS.values())


# A snippet leaves its clients to the garbage collector, as a short script does; their sockets' warnings
# may surface in a later snippet.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(("title", "needs", "code"), SNIPPETS, ids=[t for t, _, _ in SNIPPETS])
def test_the_snippet_runs_and_holds_its_twelve_turns(
    title: str, needs: str, code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if (
        importlib.util.find_spec(needs) is None
    ):  # not imported here: the snippet imports as a user's code would
        pytest.skip(f"{needs} is not installed")
    exec(compile(code, f"{DOC.name}: {title}", "exec"), {"__name__": "__main__"})
    line = capsys.readouterr().out.strip().splitlines()[-1]
    count = int(line.split()[0])
    assert count >= 12 * 3  # every turn's prompt, call and answer kept by the framework
