"""Fit the Claude text ratio and framing per tokenizer generation against real Claude usage.

Usage, from the repo root::

    PYTHONPATH=src python -m benchmarks.fit_claude_rule

For every explained appended round (``_claude_sessions.explained``: the logged content can be
what the delta paid for) of the ``fit`` half of the Claude Code sessions
(``benchmarks/_claude_sessions.py``, with Claude Code's unlogged TodoWrite reminder rebuilt where its
rule says it was sent), the real price is the prompt delta Anthropic reported. The
model is ``delta ≈ r · o200k_rule(text) + m · messages + b · text blocks + u · tool uses + t · tool
results``, where ``text`` is every string the round appends (text, tool names and compact JSON of
tool inputs, tool-result content) and ``o200k_rule`` is the fitted o200k rule the runtime uses. The
fit is non-negative and minimises relative error, as ``fit_text_rule.py`` does. It rewrites the
Claude part (``claude_ratio``, ``claude_structure``) of the ``coefficients`` table in
``src/contextwindow/pricing/data/``.
"""

from __future__ import annotations

import numpy as np

from benchmarks import _claude_sessions as sessions
from benchmarks.fit_text_rule import nnls_relative, write_table
from contextwindow.content import Text, ToolResult, ToolUse
from contextwindow.pricing._seed_store import js_json
from contextwindow.pricing._text import fitted_rule

NAMES = ("ratio", "message", "text_block", "tool_use", "tool_result")


def design(round_: sessions.Round) -> list[float]:
    o200k = fitted_rule("o200k")
    text = 0.0
    counts = {"message": 0, "text_block": 0, "tool_use": 0, "tool_result": 0}
    for message in round_.messages:
        counts["message"] += 1
        for block in message.content:
            if isinstance(block, Text):
                text += o200k(block.text)
                counts["text_block"] += 1
            elif isinstance(block, ToolUse):
                text += o200k(js_json(dict(block.input))) + o200k(block.name)
                counts["tool_use"] += 1
            elif isinstance(block, ToolResult):
                if isinstance(block.content, str):
                    text += o200k(block.content)
                else:
                    text += sum(o200k(b.text) for b in block.content if isinstance(b, Text))
                counts["tool_result"] += 1
    return [text, counts["message"], counts["text_block"], counts["tool_use"], counts["tool_result"]]


def main() -> None:
    fitted: dict[str, dict[str, float]] = {}
    for family in ("claude", "claude-2026"):
        found = [
            r
            for r in sessions.rounds("fit")
            if sessions.generation(r.model) == family and sessions.explained(r)
        ]
        x = np.array([design(r) for r in found])
        y = np.array([float(r.delta) for r in found])
        beta = nnls_relative(x, y)
        rel = np.abs(x @ beta - y) / y
        big = y >= 500
        print(
            f"{family}: {len(found)} rounds; in-sample median {np.median(rel):.3f}, rounds ≥500 median "
            f"{np.median(rel[big]):.3f} p90 {np.percentile(rel[big], 90):.3f}"
        )
        print("  " + ", ".join(f"{n}={v:.3f}" for n, v in zip(NAMES, beta, strict=True)))
        fitted[family] = dict(zip(NAMES, (float(b) for b in beta), strict=True))
    write(fitted)


def write(fitted: dict[str, dict[str, float]]) -> None:
    """Rewrite the Claude part of the coefficients table."""
    from contextwindow.pricing._tables import table

    data = dict(table("coefficients"))
    data["claude_ratio"] = {f: round(c["ratio"], 4) for f, c in fitted.items()}
    data["claude_structure"] = {f: {k: round(c[k], 2) for k in NAMES[1:]} for f, c in fitted.items()}
    write_table("coefficients", data)


if __name__ == "__main__":
    main()
