"""The framework adapters are optional: importing contextwindow loads no framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

FRAMEWORKS = ("langchain", "langchain_core", "langgraph", "pydantic_ai", "agents", "litellm")
"""Also in ``benchmarks.import_time.HEAVY``, which ``tests/test_public_api.py`` checks for ``import contextwindow``."""


def _loaded_by(statement: str) -> set[str]:
    probe = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


class TestOptionalFrameworks:
    def test_importing_contextwindow_and_its_integrations_package_loads_no_framework(self) -> None:
        loaded = _loaded_by("import contextwindow, contextwindow.integrations, contextwindow.guard")
        assert not {m for m in loaded if any(m == f or m.startswith(f"{f}.") for f in FRAMEWORKS)}

    @pytest.mark.parametrize(
        ("adapter", "framework"),
        [
            ("langchain", "langchain"),
            ("pydantic_ai", "pydantic_ai"),
            ("openai_agents", "agents"),
            ("litellm", "litellm"),
        ],
    )
    def test_an_adapter_loads_its_own_framework_and_no_other(self, adapter: str, framework: str) -> None:
        loaded = _loaded_by(f"import contextwindow.integrations.{adapter}")
        assert framework in loaded
        others = {"langchain", "pydantic_ai", "agents", "litellm"} - {framework}
        assert not {m for m in loaded if m.split(".")[0] in others}
