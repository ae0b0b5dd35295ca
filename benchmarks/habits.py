"""Agents with the habits real agents have, through ``contextwindow.guard(client)``.

Each agent is written here the way others write theirs, with the official ``anthropic`` and ``openai``
clients, against the local provider over HTTP. The provider enforces a 16,000-token window while the
model's profile says 200,000, so only its own rejections tell the guard the real window. Each turn the
agent asks a question of about 400 words; the model answers in prose (about 150 words). The habits:

- ``plain``: keeps its whole history and resends it (the baseline);
- ``edited replies``: adds a line of its own to every assistant message it sends back;
- ``clears old results``: replaces the text of its user messages older than six turns with
  ``[cleared]`` (as Claude Code and Anthropic's context editing clear old tool results);
- ``new client per call``: a new SDK client and a new guard on the same ledger file for every call
  (a stateless request handler);
- ``platform id``: the Bedrock id ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` (the OpenAI agent:
  Azure-style ``openai/gpt-4o`` through a LiteLLM route), with nothing else given;
- ``rewinds``: every fifth turn drops its last two exchanges and asks something else (a branch).

The peer is the same agent on the bare client (no guard): it stops at its first error. Figures per
row: turns done of ``TURNS``, errors that reached the agent, upstream requests per agent call (the
provider's own count, the summariser's calls left out and counted apart) and how many it refused, ledger entries at the end and their ratio to the
plain guarded agent's, and the sessions the ledger holds. Rows run interleaved (one habit, guarded
then bare, for each SDK), in one process.

``python -m benchmarks.habits [--quick]``: ``--quick`` runs 16 turns instead of 40. Prints a markdown
table and writes ``benchmarks/results/habits.md``.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._paths import RESULTS

TURNS = 40
QUICK_TURNS = 16
WINDOW = 16_000
CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-4o"
PLATFORM = {"anthropic": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "openai": "openai/gpt-4o"}
MAX_TOKENS = 1024
HABITS = ("plain", "edited replies", "clears old results", "new client per call", "platform id", "rewinds")


def _words(turn: int, n: int = 400) -> str:
    return " ".join(f"word{turn}_{i}" for i in range(n))


class _Counted:
    """The local provider with a count of the calls it answered or refused."""

    def __init__(self) -> None:
        from contextwindow.testing import LocalModel, LocalSettings
        from contextwindow.testing.model import Rejection

        self.calls = 0
        self.refused = 0
        self.summaries = 0
        self._lock = threading.Lock()
        model = LocalModel(LocalSettings(effective_window=WINDOW, any_model=True))
        handle = model.handle

        def counted(request: Any, *args: Any, **kwargs: Any) -> Any:
            answer = handle(request, *args, **kwargs)
            last = request.messages[-1] if request.messages else None
            summary = last is not None and any("<transcript>" in getattr(b, "text", "") for b in last.content)
            with self._lock:
                self.calls += 1
                self.summaries += summary
                self.refused += isinstance(answer, Rejection)
            return answer

        model.handle = counted  # type: ignore[method-assign]
        self.model = model


def _client(sdk: str, url: str, guarded: bool, store: str) -> tuple[Any, Callable[[], None]]:
    import anthropic
    import openai

    import contextwindow

    raw: Any = (
        anthropic.Anthropic(api_key="local", base_url=url, max_retries=0)
        if sdk == "anthropic"
        else openai.OpenAI(api_key="local", base_url=url + "/v1", max_retries=0)
    )
    if not guarded:
        return raw, raw.close
    client = contextwindow.guard(raw, store=store)

    def close() -> None:
        client.store.close()
        raw.close()

    return client, close


def _send(sdk: str, client: Any, model: str, history: list[dict[str, Any]]) -> str:
    if sdk == "anthropic":
        response = client.messages.create(model=model, max_tokens=MAX_TOKENS, messages=history)
        return "".join(b.text for b in response.content if b.type == "text")
    response = client.chat.completions.create(model=model, max_tokens=MAX_TOKENS, messages=history)
    return response.choices[0].message.content or ""


def _shown(sdk: str, habit: str, history: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """The history the agent sends this turn, with its habit applied."""
    if habit == "edited replies":
        return [
            {**m, "content": f"{m['content']}\n[agent note: reply {i // 2} checked]"}
            if m["role"] == "assistant"
            else m
            for i, m in enumerate(history)
        ]
    if habit == "clears old results":
        cutoff = len(history) - 12
        return [
            {**m, "content": "[cleared]"} if m["role"] == "user" and i < cutoff else m
            for i, m in enumerate(history)
        ]
    return history


def _run(sdk: str, habit: str, guarded: bool, turns: int) -> dict[str, Any]:
    import contextwindow
    from contextwindow.testing import LocalServer

    provider = _Counted()
    folder = tempfile.mkdtemp(prefix="habits-")
    store = str(Path(folder) / "ledger.db")
    model = PLATFORM[sdk] if habit == "platform id" else (CLAUDE if sdk == "anthropic" else GPT)
    history: list[dict[str, Any]] = []
    done, errors, first_error, calls = 0, 0, "", 0
    with LocalServer(provider.model) as server:
        client, close = _client(sdk, server.url, guarded, store)
        try:
            for turn in range(turns):
                if habit == "rewinds" and turn % 5 == 4 and len(history) >= 4:
                    del history[-4:]  # back two exchanges: the rest is a branch
                history.append({"role": "user", "content": f"Turn {turn}: {_words(turn)}"})
                if habit == "new client per call":
                    close()
                    client, close = _client(sdk, server.url, guarded, store)
                calls += 1
                try:
                    text = _send(sdk, client, model, _shown(sdk, habit, history, turn))
                except Exception as exc:  # what reaches the agent
                    errors += 1
                    first_error = first_error or f"turn {turn}: {type(exc).__name__}"
                    break
                history.append({"role": "assistant", "content": text})
                done += 1
        finally:
            close()
    entries, sessions = 0, 0
    if guarded:
        ledger = contextwindow.open_store(store)
        ids = ledger.sessions()
        sessions = len(ids)
        entries = sum(len(ledger.session(sid).entries()) for sid in ids)
        ledger.close()
    return {
        "sdk": sdk,
        "habit": habit,
        "guarded": guarded,
        "turns": done,
        "errors": errors,
        "first_error": first_error,
        "per_call": (provider.calls - provider.summaries) / calls if calls else 0.0,
        "summaries": provider.summaries,
        "refused": provider.refused,
        "entries": entries,
        "sessions": sessions,
    }


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    turns = QUICK_TURNS if "--quick" in args else TURNS
    rows = [
        _run(sdk, habit, guarded, turns)
        for sdk in ("anthropic", "openai")
        for habit in HABITS
        for guarded in (True, False)
    ]
    plain = {r["sdk"]: r["entries"] for r in rows if r["habit"] == "plain" and r["guarded"]}
    lines = [
        f"Agents with real habits, {turns} turns, provider window {WINDOW:,} tokens, profiles say 200,000.",
        "",
        "| sdk | habit | client | turns done | errors to agent | upstream requests per call | refused | summary calls "
        "| ledger entries (× plain) | sessions |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for row in rows:
        errors = f"{row['errors']}" + (f" ({row['first_error']})" if row["first_error"] else "")
        if row["guarded"]:
            base = plain.get(row["sdk"]) or 1
            ledger = f"{row['entries']} ({row['entries'] / base:.2f}×)"
            sessions = str(row["sessions"])
        else:
            ledger, sessions = "—", "—"
        lines.append(
            f"| {row['sdk']} | {row['habit']} | {'guard' if row['guarded'] else 'bare'} | {row['turns']} | "
            f"{errors} | {row['per_call']:.2f} | {row['refused']} | {row['summaries']} | {ledger} | {sessions} |"
        )
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "habits.md").write_text("# habits\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
