"""Pricing accuracy on text and Claude rounds NOT used for fitting, against peers in the same run.

Run from the repo root::

    PYTHONPATH=src TIKTOKEN_CACHE_DIR=/work/shared/tokenizers python -m benchmarks.pricing_accuracy

Text: ``holdout`` chunks (300–6,000 characters) of every kind from ``benchmarks/_corpus.py``;
median and p95 absolute relative error against ``o200k_base`` and ``cl100k_base`` for the default
rule, ``chars/4``, the seed-store rates and LangChain's ``count_tokens_approximately``.
Claude: the held-out sessions' appended rounds of ≥ 500 tokens, priced with ``Estimator.messages``
against Anthropic's real prompt delta; median and p90 relative error, ``chars/4`` beside it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path

from benchmarks import _claude_sessions as sessions
from benchmarks import _corpus
from contextwindow.pricing import Estimator, seed_estimate_text

RESULTS = Path(__file__).resolve().parent / "results" / "pricing_accuracy.md"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _langchain() -> Callable[[str], float] | None:
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


def text_table() -> str:
    import tiktoken

    chunks = _corpus.chunks("holdout", per_kind=200)
    rules: dict[str, Callable[[str], float]] = {
        "default rule": lambda t: 0.0,  # per family below
        "chars/4": lambda t: len(t) / 4,
        "seed-store": lambda t: float(seed_estimate_text(t)),
    }
    lc = _langchain()
    if lc is not None:
        rules["langchain approx"] = lc
    lines = [
        "### Text: held-out chunks, |relative error| median / p95",
        "",
        f"{len(chunks)} chunks, {sum(len(c.text) for c in chunks):,} characters, none used for fitting.",
        "",
    ]
    for family, encoding in (("o200k", "o200k_base"), ("cl100k", "cl100k_base")):
        enc = tiktoken.get_encoding(encoding)
        model = "gpt-4o" if family == "o200k" else "gpt-4"
        est = Estimator(model)
        rules["default rule"] = est.raw_text
        truth = [len(enc.encode(c.text, disallowed_special=())) for c in chunks]
        lines += [
            f"**{encoding}**",
            "",
            "| kind | " + " | ".join(rules) + " |",
            "|---" * (len(rules) + 1) + "|",
        ]
        for kind in _corpus.KINDS:
            idx = [i for i, c in enumerate(chunks) if c.kind == kind]
            cells = []
            for rule in rules.values():
                errs = [abs(rule(chunks[i].text) - truth[i]) / truth[i] for i in idx if truth[i]]
                cells.append(f"{statistics.median(errs):.1%} / {_pct(errs, 0.95):.1%}" if errs else "–")
            lines.append(f"| {kind} ({len(idx)}) | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def claude_table() -> str:
    held = [r for r in sessions.rounds("holdout") if r.delta >= 500]
    lo, hi = sessions.EXPLAINED_CHARS_PER_TOKEN
    injected = {reason: sum(reason in r.injected for r in held) for reason in sessions.INJECTIONS}
    band = sum(not r.injected and not sessions.explained(r) for r in held)
    rebuilt = sum("todo reminder" in r.added for r in held)
    lines = [
        "### Claude: held-out appended rounds ≥ 500 tokens, |relative error| median / p90 (signed median)",
        "",
        "*all*: every held-out round. *explained*: the same rounds for every method, minus those where the"
        " log shows Claude Code injected content it does not record ("
        + ", ".join(f"{reason}: {n}" for reason, n in injected.items())
        + f") and those whose logged characters per real token lie outside ({lo}, {hi}) ({band});"
        " see ``_claude_sessions.explained``. Claude Code's unlogged TodoWrite reminder is rebuilt by its"
        f" rule (``_claude_todo``, chosen on the fit half) in {rebuilt} of these rounds.",
        "",
        "| generation | rounds | default rule | chars/4 | seed-store |",
        "|---|---|---|---|---|",
    ]
    for family, subset in (
        ("claude", "all"),
        ("claude", "explained"),
        ("claude-2026", "all"),
        ("claude-2026", "explained"),
        ("all generations", "all"),
        ("all generations", "explained"),
    ):
        found = [
            r
            for r in held
            if family in ("all generations", sessions.generation(r.model))
            and (subset == "all" or sessions.explained(r))
        ]
        if not found:
            continue
        cells = []
        for name in ("default", "chars4", "seed"):
            errs, signed = [], []
            for r in found:
                if name == "default":
                    price = float(Estimator(r.model).messages(r.messages))
                elif name == "seed":
                    price = float(Estimator(r.model, preset="seed-store").messages(r.messages))
                else:
                    price = r.chars / 4
                signed.append((price - r.delta) / r.delta)
                errs.append(abs(signed[-1]))
            cells.append(
                f"{statistics.median(errs):.1%} / {_pct(errs, 0.90):.1%} ({statistics.median(signed):+.1%})"
            )
        lines.append(f"| {family}, {subset} | {len(found)} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    table = "## Pricing accuracy\n\n" + text_table() + "\n" + claude_table()
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table)


if __name__ == "__main__":
    main()
