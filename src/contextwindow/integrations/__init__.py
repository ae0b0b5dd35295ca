"""Framework adapters over the guard core, one module each and each an optional extra.

- :mod:`contextwindow.integrations.langchain` — ``ContextWindowMiddleware`` for LangChain v1's
  ``create_agent`` (``pip install 'contextwindow[langchain]'``);
- :mod:`contextwindow.integrations.pydantic_ai` — a pydantic-ai capability (``[pydantic-ai]``);
- :mod:`contextwindow.integrations.openai_agents` — a ``call_model_input_filter`` and a ``Session`` on
  the ledger for the OpenAI Agents SDK (``[openai-agents]``);
- :mod:`contextwindow.integrations.litellm` — guarded ``completion``/``acompletion`` (``[litellm]``).

Importing this package imports no framework; each module imports its own.
"""

from __future__ import annotations

__all__: list[str] = []
