"""Agents with the habits real agents have, guarded in process and through ``contextwindow proxy``.

Each agent is written here the way others write theirs, with the official ``anthropic`` and ``openai``
clients, against the local provider run as its own process (``python -m benchmarks.habits --provider``),
which serves 16,000 tokens while the model's profile says 200,000 (20,000 for the ``max_tokens``
habit), so only its own rejections tell the guard the real window. Each turn the agent asks a
question of about 400 words; the model answers in prose (about 150 words). The habits:

- ``plain``: keeps its whole history and resends it (the baseline);
- ``edited replies``: adds a line of its own to every assistant message it sends back;
- ``clears old results``: replaces the text of its user messages older than six turns with
  ``[cleared]`` (as Claude Code and Anthropic's context editing clear old tool results);
- ``thinking removed``: asks for extended thinking and sends back only the latest reply's thinking,
  stripped from the older ones (Chat Completions carries no thinking: there it is the plain agent);
- ``new client per call``: a new SDK client (and in process a new guard) on the same ledger for every
  call (a stateless request handler);
- ``platform id``: the Bedrock id ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` (the OpenAI agent:
  ``openai/gpt-4o``, a LiteLLM-style route), with nothing else given;
- ``rewinds``: every fifth turn drops its last two exchanges and asks something else (a branch);
- ``pydantic-ai max_tokens``: ``max_tokens=64000`` on every request (pydantic-ai's Anthropic model's
  default), against a 20,000-token window.

Each habit runs guarded in process (``contextwindow.guard(client)``), guarded through
``contextwindow proxy`` (a process, its ledger a new SQLite file, the SDK's ``base_url`` pointed at
it) and on the bare client (no guard, the peer: it stops at its first error), interleaved per habit.
Figures per row: turns done of ``TURNS``; errors that reached the agent; upstream requests per agent
call (the provider's own count, the summariser's calls left out and counted apart, target at most
1.25); how many it refused; summary calls; ledger entries at the end and their ratio to the plain
guarded agent's in the same mode (target at most 1.5×); sessions in the ledger; and ``task lost``:
agent requests the provider accepted that no longer held the agent's first request (verbatim, or in
a summary), which the ``clears old results`` agent removes itself.

``python -m benchmarks.habits [--quick]``: ``--quick`` runs 16 turns instead of 40. Prints a markdown
table and writes ``benchmarks/results/habits.md``.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._paths import RESULTS, ROOT
from benchmarks.proxy import _answers, _free_port

TURNS = 40
QUICK_TURNS = 16
WINDOW = 16_000
MAX_TOKENS_WINDOW = 20_000
CLAUDE = "claude-sonnet-4-6"
GPT = "gpt-4o"
PLATFORM = {"anthropic": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "openai": "openai/gpt-4o"}
MAX_TOKENS = 1024
PYDANTIC_AI_MAX_TOKENS = 64_000
"""pydantic-ai's ``AnthropicModel`` asks for this many output tokens when the agent sets none."""
THINKING = {"type": "enabled", "budget_tokens": 1024}
HABITS = (
    "plain",
    "edited replies",
    "clears old results",
    "thinking removed",
    "new client per call",
    "platform id",
    "rewinds",
    "pydantic-ai max_tokens",
)
MODES = ("in process", "proxy", "bare")
FIRST = "Turn 0: word0_0 word0_1"
"""The opening of every agent's first request (the local summariser's Goal keeps it)."""


def _words(turn: int, n: int = 400) -> str:
    return " ".join(f"word{turn}_{i}" for i in range(n))


# -- the provider, a process of its own --------------------------------------------------------------


def _provider_main(port: int, window: int, counts: str, thinking: bool) -> None:
    """``--provider``: the local provider on ``port``, refusing above ``window``; one line per call
    in ``counts`` (summary, refused, first request lost), a Thinking block on replies if ``thinking``."""
    from contextwindow.content import Message, Text, Thinking
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings
    from contextwindow.testing.model import LocalReply, Rejection

    lock = threading.Lock()
    model = LocalModel(LocalSettings(effective_window=window, any_model=True))
    handle = model.handle

    def counted(request: Any, *args: Any, **kwargs: Any) -> Any:
        answer = handle(request, *args, **kwargs)
        texts = " ".join(b.text for m in request.messages for b in m.content if isinstance(b, Text))
        summary = "<transcript>" in texts
        refused = isinstance(answer, Rejection)
        lost = not summary and not refused and FIRST not in texts
        if thinking and not summary and isinstance(answer, LocalReply):
            said = Thinking(thinking="Let me think about what was asked.", signature="sig-local")
            message = Message(role="assistant", content=(said, *answer.message.content))
            answer = dataclasses.replace(answer, message=message)
        with lock, open(counts, "a", encoding="utf-8") as out:
            out.write(f"{int(summary)}{int(refused)}{int(lost)}\n")
        return answer

    model.handle = counted  # type: ignore[method-assign]
    with LocalServer(model, port=port):
        while True:
            time.sleep(3600)


def _env() -> dict[str, str]:
    """The processes run the ``contextwindow`` this one imported (a run on another tree's ``src``
    measures that tree through the proxy too)."""
    import contextwindow

    env = os.environ.copy()
    src = Path(contextwindow.__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join([str(src), str(ROOT), env.get("PYTHONPATH", "")])
    return env


@contextmanager
def _process(command: list[str], port: int, log: Path) -> Iterator[None]:
    with log.open("w+b") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out, env=_env(), cwd=tempfile.gettempdir())
        try:
            deadline = time.monotonic() + 60
            while not _answers(port, "/"):
                if process.poll() is not None or time.monotonic() > deadline:
                    out.seek(0)
                    raise RuntimeError(f"{command[2:4]} did not start: {out.read().decode()[-2000:]}")
                time.sleep(0.2)
            yield
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class _Provider:
    """A running provider process and its call counts (read from the file it appends to)."""

    def __init__(self, url: str, counts: Path) -> None:
        self.url = url
        self.counts = counts

    def read(self) -> list[str]:
        return self.counts.read_text(encoding="utf-8").splitlines() if self.counts.exists() else []


@contextmanager
def _provider(folder: Path, window: int, thinking: bool) -> Iterator[_Provider]:
    port = _free_port()
    counts = folder / f"counts-{port}.txt"
    command = [sys.executable, "-m", "benchmarks.habits", "--provider", str(port), str(window), str(counts)]
    with _process([*command, *(["--thinking"] if thinking else [])], port, folder / f"provider-{port}.log"):
        yield _Provider(f"http://127.0.0.1:{port}", counts)


@contextmanager
def _proxy(upstream: str, store: Path, folder: Path) -> Iterator[str]:
    port = _free_port()
    command = [sys.executable, "-m", "contextwindow", "proxy", "--upstream", upstream, "--port", str(port)]
    with _process([*command, "--store", str(store), "--quiet"], port, folder / f"proxy-{port}.log"):
        yield f"http://127.0.0.1:{port}"


# -- the agent ---------------------------------------------------------------------------------------


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


def _send(sdk: str, habit: str, client: Any, model: str, history: list[dict[str, Any]]) -> Any:
    """The reply's content as the agent keeps it: text, or (thinking) the blocks as dicts."""
    max_tokens = PYDANTIC_AI_MAX_TOKENS if habit == "pydantic-ai max_tokens" else MAX_TOKENS
    if sdk == "anthropic":
        if habit == "thinking removed":
            response = client.messages.create(
                model=model, max_tokens=2 * MAX_TOKENS, messages=history, thinking=THINKING
            )
            return [b.model_dump(exclude_none=True) for b in response.content]
        # A timeout of its own, as pydantic-ai passes one: else the SDK itself refuses to send a
        # non-streamed request that may take over ten minutes (64,000 tokens of output).
        response = client.messages.create(model=model, max_tokens=max_tokens, messages=history, timeout=120)
        return "".join(b.text for b in response.content if b.type == "text")
    response = client.chat.completions.create(model=model, max_tokens=max_tokens, messages=history)
    return response.choices[0].message.content or ""


def _shown(habit: str, history: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
    if habit == "thinking removed":
        last = max((i for i, m in enumerate(history) if m["role"] == "assistant"), default=-1)
        return [
            {**m, "content": [b for b in m["content"] if b.get("type") != "thinking"]}
            if m["role"] == "assistant" and i != last and isinstance(m["content"], list)
            else m
            for i, m in enumerate(history)
        ]
    return history


def _agent(sdk: str, habit: str, url: str, guarded: bool, store: str, turns: int) -> dict[str, Any]:
    """Run the agent ``turns`` turns (or to its first error) against ``url``."""
    model = PLATFORM[sdk] if habit == "platform id" else (CLAUDE if sdk == "anthropic" else GPT)
    history: list[dict[str, Any]] = []
    done, errors, first_error, calls = 0, 0, "", 0
    client, close = _client(sdk, url, guarded, store)
    try:
        for turn in range(turns):
            if habit == "rewinds" and turn % 5 == 4 and len(history) >= 4:
                del history[-4:]  # back two exchanges: the rest is a branch
            history.append({"role": "user", "content": f"Turn {turn}: {_words(turn)}"})
            if habit == "new client per call":
                close()
                client, close = _client(sdk, url, guarded, store)
            calls += 1
            try:
                content = _send(sdk, habit, client, model, _shown(habit, history))
            except Exception as exc:  # what reaches the agent
                errors += 1
                first_error = f"turn {turn}: {type(exc).__name__}"
                break
            history.append({"role": "assistant", "content": content})
            done += 1
    finally:
        close()
    return {"turns": done, "errors": errors, "first_error": first_error, "calls": calls}


def _ledger(store: Path) -> tuple[int, int]:
    import contextwindow

    if not store.exists():
        return 0, 0
    ledger = contextwindow.open_store(str(store))
    ids = ledger.sessions()
    entries = ledger.size().entries  # what the sessions store themselves: a branch's shared prefix once
    ledger.close()
    return entries, len(ids)


def _run(provider: _Provider, sdk: str, habit: str, mode: str, turns: int, folder: Path) -> dict[str, Any]:
    store = folder / f"ledger-{sdk}-{HABITS.index(habit)}-{MODES.index(mode)}.db"
    before = len(provider.read())
    if mode == "proxy":
        with _proxy(provider.url, store, folder) as url:
            row = _agent(sdk, habit, url, False, "", turns)
    else:
        row = _agent(sdk, habit, provider.url, mode == "in process", str(store), turns)
    lines = provider.read()[before:]
    summaries = sum(line[0] == "1" for line in lines)
    entries, sessions = _ledger(store) if mode != "bare" else (0, 0)
    return {
        **row,
        "sdk": sdk,
        "habit": habit,
        "mode": mode,
        "per_call": (len(lines) - summaries) / row["calls"] if row["calls"] else 0.0,
        "summaries": summaries,
        "refused": sum(line[1] == "1" for line in lines),
        "lost": sum(line[2] == "1" for line in lines),
        "entries": entries,
        "sessions": sessions,
    }


def _table(rows: list[dict[str, Any]], turns: int) -> str:
    plain = {(r["sdk"], r["mode"]): r["entries"] for r in rows if r["habit"] == "plain"}
    lines = [
        f"Agents with real habits, {turns} turns; the provider serves {WINDOW:,} tokens "
        f"({MAX_TOKENS_WINDOW:,} for pydantic-ai max_tokens), the profiles say 200,000.",
        "",
        "| sdk | habit | client | turns done | errors to agent | upstream requests per call | refused "
        "| summary calls | ledger entries (× plain) | sessions | task lost |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for row in rows:
        errors = f"{row['errors']}" + (f" ({row['first_error']})" if row["first_error"] else "")
        if row["mode"] != "bare":
            base = plain.get((row["sdk"], row["mode"])) or 1
            ledger = f"{row['entries']} ({row['entries'] / base:.2f}×)"
            sessions = str(row["sessions"])
        else:
            ledger, sessions = "—", "—"
        client = {"in process": "guard", "proxy": "proxy", "bare": "bare"}[row["mode"]]
        lines.append(
            f"| {row['sdk']} | {row['habit']} | {client} | {row['turns']} | {errors} | {row['per_call']:.2f} "
            f"| {row['refused']} | {row['summaries']} | {ledger} | {sessions} | {row['lost']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--provider"]:
        _provider_main(int(args[1]), int(args[2]), args[3], "--thinking" in args)
        return
    turns = QUICK_TURNS if "--quick" in args else TURNS
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="habits-") as tmp:
        folder = Path(tmp)
        configs = {(WINDOW, False): ["plain", "edited replies", "clears old results", "new client per call"]}
        configs[(WINDOW, False)] += ["platform id", "rewinds"]
        configs[(WINDOW, True)] = ["thinking removed"]
        configs[(MAX_TOKENS_WINDOW, False)] = ["pydantic-ai max_tokens"]
        for (window, thinking), habits in configs.items():
            with _provider(folder, window, thinking) as provider:
                for sdk in ("anthropic", "openai"):
                    for habit in habits:
                        rows += [_run(provider, sdk, habit, mode, turns, folder) for mode in MODES]
    rows.sort(key=lambda r: (r["sdk"], HABITS.index(r["habit"]), MODES.index(r["mode"])))
    table = _table(rows, turns)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "habits.md").write_text("# habits\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
