"""Pricing accuracy on text and Claude rounds NOT used for fitting, against peers in the same run.

Run from the repo root (``pip install '.[bench]'`` first: the language corpus and litellm)::

    PYTHONPATH=src TIKTOKEN_CACHE_DIR=/work/shared/tokenizers python -m benchmarks.pricing_accuracy

Text: ``holdout`` chunks (300–6,000 characters) of every kind of ``benchmarks/_corpus.py`` and of
every language of ``benchmarks/_languages.py`` (held-out sources only; four scripts never fitted);
median and p95 absolute relative error against ``o200k_base``, ``cl100k_base`` and DeepSeek-V3's
``tokenizer.json`` for: the default (exact where the tokenizer is available, so 0 here), the rule
(``exact=False``: what Claude and Gemini are priced with), the previous rule (the commit in
``_previous.BASE``), ``chars/4``, LangChain's ``count_tokens_approximately`` and litellm's
``token_counter``.
Claude: the appended rounds of ≥ 500 tokens of the half of the sessions the Claude fit never read,
of the half it read, and of all of them, priced with ``Estimator.messages`` against Anthropic's real
prompt delta; p50 / p90 / p95 / max relative error, with main's rule before this fit (``BEFORE``), the
previous rule, ``chars/4``, the seed-store rates and litellm beside it. Then each assistant message
alone against the ``output_tokens`` Anthropic reported for it. ``--claude`` prints only the Claude
tables (``results/pricing_accuracy_claude.md``)::

    PYTHONPATH=src python -m benchmarks.pricing_accuracy --claude
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks import _claude_sessions as sessions
from benchmarks import _corpus, _languages, _previous, fit_claude_rule
from benchmarks._paths import TOKENIZERS
from contextwindow.content import Message, Text, ToolResult, ToolUse
from contextwindow.pricing import Estimator, seed_estimate_text

RESULTS = Path(__file__).resolve().parent / "results" / "pricing_accuracy.md"
os.environ.setdefault("CONTEXTWINDOW_TOKENIZER_DIR", str(TOKENIZERS))  # DeepSeek's tokenizer.json
Counter = Callable[[str], float]


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _langchain() -> Counter | None:
    try:
        from langchain_core.messages import HumanMessage
        from langchain_core.messages.utils import count_tokens_approximately
    except ImportError:
        return None

    def count(text: str) -> float:
        # One message's content only: subtract the framing LangChain adds to an empty message.
        return float(
            count_tokens_approximately([HumanMessage(content=text)])
            - count_tokens_approximately([HumanMessage(content="")])
        )

    return count


def _litellm(model: str) -> Counter | None:
    """litellm's ``token_counter`` for ``model`` (its bundled model map: no download)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    cache = os.environ.get("TIKTOKEN_CACHE_DIR")
    try:
        import litellm
    except ImportError:
        return None
    finally:  # litellm points tiktoken at its own bundled files; keep ours
        if cache is not None:
            os.environ["TIKTOKEN_CACHE_DIR"] = cache

    def count(text: str) -> float:
        saved = os.environ.get("TIKTOKEN_CACHE_DIR")
        try:
            return float(litellm.token_counter(model=model, text=text))
        finally:  # litellm re-points tiktoken at its bundled files when it counts
            if saved is not None:
                os.environ["TIKTOKEN_CACHE_DIR"] = saved

    return count


def _truths() -> dict[str, tuple[str, Counter]]:
    """family -> (the model priced, the real tokenizer's count)."""
    import tiktoken

    out: dict[str, tuple[str, Counter]] = {}
    for family, encoding, model in (("o200k", "o200k_base", "gpt-4o"), ("cl100k", "cl100k_base", "gpt-4")):
        enc = tiktoken.get_encoding(encoding)
        out[family] = (model, lambda t, enc=enc: float(len(enc.encode(t, disallowed_special=()))))
    path = TOKENIZERS / "deepseek" / "tokenizer.json"
    if path.is_file():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        out["deepseek"] = (
            "deepseek-chat",
            lambda t: float(len(tok.encode(t, add_special_tokens=False).ids)),
        )
    return out


_LITELLM_NAMES = {"gpt-4o": "gpt-4o", "gpt-4": "gpt-4", "deepseek-chat": "deepseek/deepseek-chat"}


def _cell(errors: list[float]) -> str:
    return f"{statistics.median(errors):.1%} / {_pct(errors, 0.95):.1%}" if errors else "–"


def text_tables() -> str:
    corpus = _corpus.chunks("holdout", per_kind=200)
    languages = _languages.chunks("holdout", per_language=60)
    texts = [c.text for c in corpus] + [c.text for c in languages]
    lines = [
        "### Text: held-out chunks, |relative error| median / p95",
        "",
        f"{len(corpus)} chunks of agent-like kinds and {len(languages)} in {len(_languages.LANGUAGES)} languages"
        f" ({sum(len(t) for t in texts):,} characters), none used for fitting; the languages' sources"
        f" ({', '.join(sorted(_languages.HOLDOUT_SOURCES))}) were never read by the fit, and"
        f" {', '.join(sorted(_languages.UNSEEN))} are scripts it has never seen.",
        "",
    ]
    truths = _truths()
    previous = _previous.prices([("text", model, texts) for model, _ in truths.values()])
    lc = _langchain()
    for index, (family, (model, truth_of)) in enumerate(truths.items()):
        truth = [truth_of(t) for t in texts]
        columns: dict[str, list[float]] = {
            "default": [float(Estimator(model).raw_text(t)) for t in texts],
            "rule (exact=False)": [Estimator(model, exact=False).raw_text(t) for t in texts],
        }
        if previous is not None and previous[index] is not None:
            columns["previous rule"] = previous[index]  # type: ignore[assignment]
        columns["chars/4"] = [len(t) / 4 for t in texts]
        if family != "deepseek":
            columns["seed-store"] = [float(seed_estimate_text(t)) for t in texts]
        if lc is not None:
            columns["langchain approx"] = [lc(t) for t in texts]
        ll = _litellm(_LITELLM_NAMES[model])
        if ll is not None:
            columns["litellm token_counter"] = [ll(t) for t in texts]
        errors = {
            name: [abs(p - y) / y if y else 0.0 for p, y in zip(prices, truth, strict=True)]
            for name, prices in columns.items()
        }
        header = "| text | " + " | ".join(columns) + " |"
        lines += [f"**{family}** (`{model}`)", "", header, "|---" * (len(columns) + 1) + "|"]
        kinds = [c.kind for c in corpus] + [f"lang:{c.kind}" for c in languages]
        rows: list[tuple[str, list[int]]] = [
            (k, [i for i, kk in enumerate(kinds) if kk == k]) for k in _corpus.KINDS
        ]
        for group, members in _languages.GROUPS.items():
            idx = [
                i
                for i, kk in enumerate(kinds)
                if kk.removeprefix("lang:") in members and kk.startswith("lang:")
            ]
            rows.append((f"**{group}** (all)", idx))
            if len(members) > 1:
                rows += [(f"  {m}", [i for i, kk in enumerate(kinds) if kk == f"lang:{m}"]) for m in members]
        for name, idx in rows:
            if not idx:
                continue
            cells = [_cell([errors[c][i] for i in idx]) for c in columns]
            lines.append(f"| {name} ({len(idx)}) | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _round_text(r: sessions.Round) -> str:
    parts: list[str] = []
    for message in r.messages:
        for block in message.content:
            if isinstance(block, Text):
                parts.append(block.text)
            elif isinstance(block, ToolUse):
                parts += [block.name, json.dumps(dict(block.input))]
            elif isinstance(block, ToolResult):
                if isinstance(block.content, str):
                    parts.append(block.content)
                else:
                    parts += [b.text for b in block.content if isinstance(b, Text)]
    return "\n".join(parts)


BEFORE = "4072772"
"""The commit whose Claude rule is "main before": the rule this fit replaced (compact JSON tool
inputs with one per-call figure, no punctuation term)."""
HALVES = ("fit", "holdout", "all")


def _quantiles(signed: list[float]) -> str:
    errs = [abs(s) for s in signed]
    return (
        f"{statistics.median(errs):.1%} / {_pct(errs, 0.90):.1%} / {_pct(errs, 0.95):.1%} /"
        f" {max(errs):.1%} ({statistics.median(signed):+.1%})"
    )


def claude_table() -> str:
    every = fit_claude_rule.HELD_OUT_EVERY
    halves = {h: [r for r in sessions.rounds(h, held_out_every=every) if r.delta >= 500] for h in HALVES}
    held = halves["all"]
    lo, hi = sessions.EXPLAINED_CHARS_PER_TOKEN
    injected = {reason: sum(reason in r.injected for r in held) for reason in sessions.INJECTIONS}
    band = sum(not r.injected and not sessions.explained(r) for r in held)
    rebuilt = sum("todo reminder" in r.added for r in held)
    before = _previous.prices([("messages", r.model, [r.messages]) for r in held], rev=BEFORE)
    previous = _previous.prices([("messages", r.model, [r.messages]) for r in held])
    ll = _litellm("claude-sonnet-4-5")
    methods: dict[str, Callable[[int, sessions.Round], float]] = {
        "default rule": lambda i, r: float(Estimator(r.model).messages(r.messages)),
    }
    if before is not None:
        methods[f"main {BEFORE}"] = lambda i, r: (before[i] or [float("nan")])[0]
    if previous is not None:
        methods["previous rule"] = lambda i, r: (previous[i] or [float("nan")])[0]
    methods["chars/4"] = lambda i, r: r.chars / 4
    methods["seed-store"] = lambda i, r: float(Estimator(r.model, preset="seed-store").messages(r.messages))
    if ll is not None:
        methods["litellm token_counter"] = lambda i, r: ll(_round_text(r))
    prices = {name: [fn(i, r) for i, r in enumerate(held)] for name, fn in methods.items()}
    index = {(r.source, r.lines): i for i, r in enumerate(held)}
    lines = [
        "### Claude: appended rounds ≥ 500 tokens, |relative error| p50 / p90 / p95 / max (signed median)",
        "",
        f"Session files split per generation, one in {every} held out of the Claude fit"
        " (``fit_claude_rule.py``): *fit* is the half the coefficients were fitted on, *holdout* the"
        " half they never saw, *all* every session. *all rounds*: every round; *explained*: the same"
        " rounds for every method, minus those where the log shows Claude Code injected content it"
        " does not record ("
        + ", ".join(f"{reason}: {n}" for reason, n in injected.items())
        + f") and those whose logged characters per real token lie outside ({lo}, {hi}) ({band});"
        " see ``_claude_sessions.explained``. Claude Code's unlogged TodoWrite reminder is rebuilt by its"
        f" rule (``_claude_todo``) in {rebuilt} rounds.",
        "",
        "| half | rounds | kind | " + " | ".join(methods) + " |",
        "|---|---|---|" + "---|" * len(methods),
    ]
    for half in HALVES:
        for generation in ("claude", "claude-2026", "all generations"):
            for subset in ("all rounds", "explained"):
                found = [
                    index[r.source, r.lines]
                    for r in halves[half]
                    if generation in ("all generations", sessions.generation(r.model))
                    and (subset == "all rounds" or sessions.explained(r))
                ]
                if not found:
                    continue
                cells = [
                    _quantiles([(prices[name][i] - held[i].delta) / held[i].delta for i in found])
                    for name in methods
                ]
                lines.append(
                    f"| {half} | {len(found)} | {generation}, {subset} | " + " | ".join(cells) + " |"
                )
    tail = sorted((abs(prices["default rule"][i] - r.delta) / r.delta, i) for i, r in enumerate(held))[
        int(0.9 * len(held)) :
    ]
    flagged = sum(1 for _, i in tail if held[i].injected or not sessions.explained(held[i]))
    lines += [
        "",
        f"Of the {len(tail)} rounds in the default rule's worst 10% (all sessions), {flagged} are rounds"
        " where the log shows unlogged injected content or whose logged characters per real token are"
        " outside the band.",
        "",
        output_table(),
    ]
    return "\n".join(lines)


def output_table() -> str:
    """The assistant message alone against the ``output_tokens`` Anthropic reported for it."""
    every = fit_claude_rule.HELD_OUT_EVERY
    lines = [
        "### Claude: the assistant message against its own output count, |relative error| p50 / p90 /"
        " p95 / max (signed median)",
        "",
        "Calls whose last logged line carries a real ``output_tokens`` (``fit_claude_rule.real_output``):"
        " the text and tool calls the model generated, priced as they are sent back, less the"
        " per-message framing (an output count has none).",
        "",
        f"| half | calls | default rule | main {BEFORE} |",
        "|---|---|---|---|",
    ]
    empty = (Message(role="assistant", content=()),)
    for half in HALVES:
        found = [r for r in sessions.rounds(half, held_out_every=every) if fit_claude_rule.real_output(r)]
        if not found:
            continue
        now = [
            (Estimator(r.model).messages(r.messages[:1]) - Estimator(r.model).messages(empty) - r.output)
            / r.output
            for r in found
        ]
        cells = [_quantiles(now)]
        before = _previous.prices([("messages", r.model, [r.messages[:1], empty]) for r in found], rev=BEFORE)
        if before is not None:
            cells.append(
                _quantiles(
                    [
                        (p[0] - p[1] - r.output) / r.output if p else float("nan")
                        for p, r in zip(before, found, strict=True)
                    ]
                )
            )
        lines.append(f"| {half} | {len(found)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    """``--claude``: the Claude tables only (about a minute; the text tables take longer)."""
    import sys

    claude_only = "--claude" in (sys.argv[1:] if argv is None else argv)
    table = "## Pricing accuracy\n\n" + ("" if claude_only else text_tables() + "\n") + claude_table()
    print(table)
    out = RESULTS.with_name("pricing_accuracy_claude.md") if claude_only else RESULTS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table)


if __name__ == "__main__":
    main()
