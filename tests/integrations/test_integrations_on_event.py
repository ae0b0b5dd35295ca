"""Every adapter takes ``on_event`` and hands it to the guard core it runs (``GuardOptions.on_event``)."""

from __future__ import annotations

from typing import Any

import pytest

from contextwindow.engine.events import Event


def _adapter(name: str, hook: Any) -> Any:
    if name == "langchain":
        pytest.importorskip("langchain")
        from contextwindow.integrations.langchain import ContextWindowMiddleware

        return ContextWindowMiddleware(model="gpt-4o", store=":memory:", on_event=hook)
    if name == "litellm":
        pytest.importorskip("litellm")
        from contextwindow.integrations.litellm import GuardedLiteLLM

        return GuardedLiteLLM(model="gpt-4o", store=":memory:", on_event=hook)
    if name == "openai_agents":
        pytest.importorskip("agents")
        from contextwindow.integrations.openai_agents import ContextWindowFilter

        return ContextWindowFilter(model="gpt-4o", store=":memory:", on_event=hook)
    pytest.importorskip("pydantic_ai")
    from contextwindow.integrations.pydantic_ai import ContextWindow

    return ContextWindow(store=":memory:", on_guard_event=hook)


@pytest.mark.parametrize("name", ["langchain", "litellm", "openai_agents", "pydantic_ai"])
def test_the_adapter_passes_on_event_to_its_guard(name: str) -> None:
    seen: list[Event] = []
    adapter = _adapter(name, seen.append)
    assert adapter.bridge.core.options.on_event == seen.append
    adapter.bridge.store.close()
