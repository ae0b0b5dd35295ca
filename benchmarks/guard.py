"""A naive agent through ``contextwindow.guard(client)``: does it keep going, and what does it cost?

The agent is the simplest loop there is: it keeps its whole history and resends all of it on every
call. Each turn it asks for a file; the model (the local provider, scripted) calls ``read_file``; the
agent answers with the file's text (real standard-library source, about 1,800 tokens) and, every
third turn, a screenshot; the model then replies in prose. The provider enforces a 16,000-token window
while the model's profile says 200,000 (``claude-haiku-4-5``, ``o4-mini``), so nothing but the
provider's own rejections tells the guard the real window.

Eight rows from one run, each over real SDK clients and HTTP: ``anthropic`` (Messages), ``openai``
(Chat Completions), ``responses`` (OpenAI Responses, resending its whole history) and ``responses
chained`` (OpenAI Responses sending only its new input with ``previous_response_id``), each wrapped by
``guard`` (one changed line), and the same four unwrapped (the peers: the bare clients), which stop
at their first error. Figures:

- turns completed of ``TURNS``, and errors that reached the agent;
- window use once full: the provider's input count over the window, for calls after the history first
  passed the window (mean and minimum);
- folds (summary checkpoints written) per 100 calls;
- the guard's own time per call (median, p95): the call's wall time less the time inside the SDK's
  HTTP calls (the agent's call and any summariser call), beside the bare client's time per call;
- the same as CPU time of the agent's thread (median): steadier than wall time on a busy machine,
  since the local provider serves on threads of its own.

Prints a markdown table and writes ``benchmarks/results/guard.md``. Never fails on a timing.
"""

from __future__ import annotations

import base64
import statistics
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._paths import RESULTS

TURNS = 45
WINDOW = 16_000
SCREENSHOT_EVERY = 3
CLAUDE = "claude-haiku-4-5"
GPT = "o4-mini"
MAX_TOKENS = 1024
SYSTEM = "You are a coding agent. Read the files you are asked about and describe them briefly."
FILE_CHARS = 7_000


def _sources() -> list[str]:
    """Real text for the tool results: the standard library's own source files, in a fixed order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    names = ["argparse.py", "ast.py", "calendar.py", "csv.py", "difflib.py", "fractions.py", "gzip.py"]
    names += [
        "heapq.py",
        "inspect.py",
        "json/decoder.py",
        "pathlib.py",
        "pprint.py",
        "shlex.py",
        "textwrap.py",
    ]
    out = []
    for name in names:
        text = (stdlib / name).read_text(encoding="utf-8")
        out.extend(text[i : i + FILE_CHARS] for i in range(0, min(len(text), 4 * FILE_CHARS), FILE_CHARS))
    return out


class _Timed:
    """Wraps an SDK resource's ``create`` to add up the time spent inside it (the provider's side)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu = 0.0

    def wrap(self, resource: Any) -> None:
        inner = resource.create

        def create(**kwargs: Any) -> Any:
            started, cpu = time.perf_counter(), time.thread_time()
            try:
                return inner(**kwargs)
            finally:
                self.seconds += time.perf_counter() - started
                self.cpu += time.thread_time() - cpu

        resource.create = create


_SCREENSHOTS: dict[int, str] = {}


def _png_b64(turn: int) -> str:
    """The agent's screenshot of a turn, made before the run (its making is not the guard's time)."""
    if turn not in _SCREENSHOTS:
        from contextwindow.replay.synthetic_media import screenshot

        _SCREENSHOTS[turn] = base64.b64encode(
            screenshot(1280, 800, seed=turn, caption=f"step {turn}")
        ).decode()
    return _SCREENSHOTS[turn]


def _script(model: Any, turn: int, path: str) -> None:
    from contextwindow import Message, ToolUse

    model.enqueue(
        Message.assistant(ToolUse(id=f"toolu_{turn:03d}", name="read_file", input={"path": path})),
        Message.assistant(f"{path} defines helpers; nothing to change in step {turn}."),
    )


def _anthropic_turn(client: Any, history: list[Any], turn: int, text: str, path: str) -> list[int]:
    """One turn of the naive Anthropic agent; the provider's input count of each call."""
    tools = [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    history.append({"role": "user", "content": f"Step {turn}: read {path} and tell me what it does."})
    counts = []
    while True:
        response = client.messages.create(
            model=CLAUDE, max_tokens=MAX_TOKENS, system=SYSTEM, tools=tools, messages=history
        )
        counts.append(response.usage.input_tokens)
        history.append({"role": "assistant", "content": response.content})
        uses = [b for b in response.content if b.type == "tool_use"]
        if not uses:
            return counts
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if turn % SCREENSHOT_EVERY == 0:
            content.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": _png_b64(turn)},
                }
            )
        history.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": content}],
            }
        )


def _openai_turn(client: Any, history: list[Any], turn: int, text: str, path: str) -> list[int]:
    """One turn of the naive OpenAI agent; the provider's input count of each call."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
        }
    ]
    if not history:
        history.append({"role": "system", "content": SYSTEM})
    history.append({"role": "user", "content": f"Step {turn}: read {path} and tell me what it does."})
    counts = []
    while True:
        completion = client.chat.completions.create(
            model=GPT, max_completion_tokens=MAX_TOKENS, tools=tools, messages=history
        )
        counts.append(completion.usage.prompt_tokens)
        message = completion.choices[0].message
        history.append(message)
        if not message.tool_calls:
            return counts
        history.append({"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": text})
        if turn % SCREENSHOT_EVERY == 0:
            url = "data:image/png;base64," + _png_b64(turn)
            history.append(
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": url, "detail": "low"}}],
                }
            )


_RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]


def _responses_turn(client: Any, history: list[Any], turn: int, text: str, path: str) -> list[int]:
    """One turn of the naive Responses agent (its whole history every call); the provider's counts."""
    history.append({"role": "user", "content": f"Step {turn}: read {path} and tell me what it does."})
    counts = []
    while True:
        response = client.responses.create(
            model=GPT,
            instructions=SYSTEM,
            max_output_tokens=MAX_TOKENS,
            tools=_RESPONSES_TOOLS,
            input=history,
        )
        counts.append(response.usage.input_tokens)
        history += [item.model_dump(exclude_none=True) for item in response.output]
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return counts
        history += _responses_results(calls[0].call_id, turn, text)


def _responses_results(call_id: str, turn: int, text: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"type": "function_call_output", "call_id": call_id, "output": text}]
    if turn % SCREENSHOT_EVERY == 0:
        url = "data:image/png;base64," + _png_b64(turn)
        items.append(
            {"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "low"}]}
        )
    return items


def _chained_turn(client: Any, history: list[Any], turn: int, text: str, path: str) -> list[int]:
    """One turn of a Responses agent that sends only its new input, naming the previous response
    (``history`` holds that response's id, and how many calls the guard sent as written)."""
    new: list[Any] = [{"role": "user", "content": f"Step {turn}: read {path} and tell me what it does."}]
    counts = []
    while True:
        previous = {"previous_response_id": history[0]} if history else {}
        response = client.responses.create(
            model=GPT,
            instructions=SYSTEM,
            max_output_tokens=MAX_TOKENS,
            tools=_RESPONSES_TOOLS,
            input=new,
            **previous,
        )
        exchange = getattr(client, "last_exchange", None)
        written = int(exchange is not None and "previous_response_id" in exchange.body)
        history[:] = [response.id, (history[1] if history else 0) + written]
        counts.append(response.usage.input_tokens)
        calls = [item for item in response.output if item.type == "function_call"]
        if not calls:
            return counts
        new = _responses_results(calls[0].call_id, turn, text)


_KINDS = ("anthropic", "openai", "responses", "responses chained")


def _run(kind: str, guarded: bool) -> dict[str, Any]:
    import anthropic
    import openai

    import contextwindow
    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    model = LocalModel(LocalSettings(window=WINDOW))
    sources = _sources()
    for turn in range(0, TURNS, SCREENSHOT_EVERY):
        _png_b64(turn)
    timed = _Timed()
    with LocalServer(model) as server:
        if kind == "anthropic":
            raw: Any = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
            timed.wrap(raw.messages)
            turn_of: Callable[..., list[int]] = _anthropic_turn
        elif kind == "openai":
            raw = openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0)
            timed.wrap(raw.chat.completions)
            turn_of = _openai_turn
        else:
            raw = openai.OpenAI(api_key="local", base_url=server.url + "/v1", max_retries=0)
            timed.wrap(raw.responses)
            turn_of = _responses_turn if kind == "responses" else _chained_turn
        client = contextwindow.guard(raw, store=":memory:") if guarded else raw
        history: list[Any] = []
        counts: list[int] = []
        own: list[float] = []
        own_cpu: list[float] = []
        errors, turns = 0, 0
        try:
            for turn in range(TURNS):
                path = f"src/module_{turn:02d}.py"
                _script(model, turn, path)
                timed.seconds = timed.cpu = 0.0
                started, cpu = time.perf_counter(), time.thread_time()
                try:
                    got = turn_of(client, history, turn, sources[turn % len(sources)], path)
                except Exception as exc:  # the bare client's first rejection ends its run
                    errors += 1
                    first_error = f"{type(exc).__name__} at turn {turn}"
                    break
                elapsed = time.perf_counter() - started
                own.append((elapsed - timed.seconds) / len(got))
                own_cpu.append((time.thread_time() - cpu - timed.cpu) / len(got))
                counts.extend(got)
                turns += 1
            else:
                first_error = ""
            folds = 0
            if guarded:
                store = client.store
                for sid in store.sessions():
                    folds += sum(
                        1
                        for e in store.session(sid).entries(["checkpoint"])
                        if e.payload.get("phase") != "hard_cut"
                    )
            provider_seconds = timed.seconds
        finally:
            raw.close()
    del provider_seconds
    full_at = next((i for i, c in enumerate(counts) if c > 0.8 * WINDOW), None)
    after = counts[full_at:] if full_at is not None else []
    return {
        "written": history[1] if kind == "responses chained" and guarded and history else None,
        "client": kind,
        "guarded": guarded,
        "turns": turns,
        "calls": len(counts),
        "errors": errors,
        "first_error": first_error,
        "use_mean": statistics.fmean(after) / WINDOW if after else None,
        "use_min": min(after) / WINDOW if after else None,
        "folds_per_100": 100 * folds / len(counts) if counts and guarded else None,
        "own_median_ms": 1000 * statistics.median(own) if own else None,
        "own_p95_ms": 1000 * sorted(own)[int(0.95 * (len(own) - 1))] if own else None,
        "own_cpu_median_ms": 1000 * statistics.median(own_cpu) if own_cpu else None,
    }


def _bare_call_times(kind: str) -> tuple[float, float]:
    """The bare client's time per call on the same provider (a short history, all inside the SDK)."""
    import anthropic
    import openai

    from contextwindow.testing import LocalModel, LocalServer, LocalSettings

    times = []
    with LocalServer(LocalModel(LocalSettings(window=WINDOW))) as server:
        if kind == "anthropic":
            with anthropic.Anthropic(api_key="local", base_url=server.url) as raw:
                for i in range(40):
                    started = time.perf_counter()
                    raw.messages.create(
                        model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": f"hi {i}"}]
                    )
                    times.append(time.perf_counter() - started)
        elif kind == "openai":
            with openai.OpenAI(api_key="local", base_url=server.url + "/v1") as raw:
                for i in range(40):
                    started = time.perf_counter()
                    raw.chat.completions.create(model=GPT, messages=[{"role": "user", "content": f"hi {i}"}])
                    times.append(time.perf_counter() - started)
        else:
            with openai.OpenAI(api_key="local", base_url=server.url + "/v1") as raw:
                for i in range(40):
                    started = time.perf_counter()
                    raw.responses.create(model=GPT, input=f"hi {i}")
                    times.append(time.perf_counter() - started)
    times.sort()
    return 1000 * statistics.median(times), 1000 * times[int(0.95 * (len(times) - 1))]


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def main() -> None:
    rows = [_run(kind, guarded) for kind in _KINDS for guarded in (True, False)]
    bare = {kind: _bare_call_times(kind) for kind in ("anthropic", "openai", "responses")}
    lines = [
        f"Naive agent, {TURNS} turns (2 calls each), provider window {WINDOW:,} tokens, profiles say 200,000.",
        "",
        "| client | turns done | calls | errors to agent | window use once full (mean / min) "
        "| folds per 100 calls | guard's own time per call, median / p95 (ms) | guard's own CPU per call, median (ms) "
        "| bare SDK call, median / p95 (ms) |",
        "| --- | ---: | ---: | ---: | --- | ---: | --- | ---: | --- |",
    ]
    for row in rows:
        name = f"{row['client']} {'+ guard' if row['guarded'] else '(bare)'}"
        use = (
            f"{_fmt(row['use_mean'], '.0%')} / {_fmt(row['use_min'], '.0%')}"
            if row["use_mean"] is not None
            else "—"
        )
        own = (
            f"{_fmt(row['own_median_ms'], '.1f')} / {_fmt(row['own_p95_ms'], '.1f')}"
            if row["guarded"]
            else "—"
        )
        cpu = _fmt(row["own_cpu_median_ms"], ".1f") if row["guarded"] else "—"
        errors = f"{row['errors']}" + (f" ({row['first_error']})" if row["first_error"] else "")
        median, p95 = bare["responses" if row["client"].startswith("responses") else row["client"]]
        lines.append(
            f"| {name} | {row['turns']} | {row['calls']} | {errors} | {use} | "
            f"{_fmt(row['folds_per_100'], '.1f')} | {own} | {cpu} | {median:.1f} / {p95:.1f} |"
        )
    chained = next(r for r in rows if r["client"] == "responses chained" and r["guarded"])
    lines += [
        "",
        f"responses chained + guard: {chained['written']} of {chained['calls']} calls went out as the agent wrote "
        "them (only the new input, naming `previous_response_id`); the rest carried the compiled history.",
        "Lines changed in the agent: 1 (`client = contextwindow.guard(client)`).",
        "Window use counts calls after the provider's input first passed 80% of the window. The guard's own",
        "time excludes the SDK's HTTP calls (the agent's and the summariser's); the bare SDK call is a short",
        "request on the same local provider, for scale.",
    ]
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "guard.md").write_text("# guard\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
