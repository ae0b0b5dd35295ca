"""Fit the Claude text rule and framing per tokenizer generation against real Claude usage.

Usage, from the repo root::

    PYTHONPATH=src python -m benchmarks.fit_claude_rule

The fit reads only the ``fit`` half of the Claude Code sessions (``benchmarks/_claude_sessions.py``,
split with ``held_out_every=`` :data:`HELD_OUT_EVERY`: half the session files of each generation;
``pricing_accuracy.py`` reports the other half). Two kinds of real counts, both Anthropic's:

- every explained appended round (``_claude_sessions.explained``: the logged content can be what
  the delta paid for, with Claude Code's unlogged TodoWrite reminder rebuilt where its rule says it
  was sent): the prompt delta prices the whole round;
- every call whose last logged line carries a real ``output_tokens`` (not Claude Code's 1–3
  placeholder: within a factor of two of the current price): what the assistant message cost to
  generate prices that message alone, which separates the tool-call framing from the tool results'.

The model is ``count ≈ r · o200k_rule(text) + p · punctuation + m · messages + b · text blocks + u ·
tool uses + q · tool-use parameters + t · tool results``, where ``text`` is every string the round
appends (text, tool names, each tool-use parameter's name and value: a string as it is, any other
value as compact JSON; tool-result content), ``punctuation`` its ASCII punctuation bytes and
``o200k_rule`` the fitted o200k rule the runtime uses. Claude renders a tool call as its parameters,
not as the JSON of its input: the output counts show about 15 tokens per parameter beyond its name
and value, which a per-call figure on compact JSON cannot carry (it priced calls with several
parameters 20% low). The fit is non-negative and minimises relative error, as ``fit_text_rule.py``
does. The same fit without the punctuation term gives the ratio the share of a text that is not ASCII is
priced at (``claude_other_ratio``: the sessions hold almost none of it, so it keeps the whole-content
ratio rather than the lower one the punctuation term leaves). It rewrites the Claude part
(``claude_ratio``, ``claude_punctuation``, ``claude_other_ratio``, ``claude_structure``) of the
``coefficients`` table in ``src/contextwindow/pricing/data/``.
"""

from __future__ import annotations

import numpy as np

from benchmarks import _claude_sessions as sessions
from benchmarks.fit_text_rule import nnls_relative, write_table
from contextwindow.content import Message, Text, ToolResult, ToolUse
from contextwindow.pricing._seed_store import js_json
from contextwindow.pricing._text import fitted_rule, punctuation_bytes

NAMES = ("ratio", "punctuation", "message", "text_block", "tool_use", "tool_param", "tool_result")
HELD_OUT_EVERY = 2
"""Half the session files of each generation are held out of the fit."""
SCALED = {"claude-2026": "claude"}
"""A generation priced as the older one's rule times a fitted scale for text and another for the
framing: the newer tokenizer yields "approximately 30% more tokens" for the same text
(https://platform.claude.com/docs/en/build-with-claude/token-counting), and its fit half holds about
30 counts, too few for seven figures of its own."""


def design(messages: tuple[Message, ...], framed: bool = True) -> list[float]:
    """The features of ``messages`` in :data:`NAMES` order (``framed=False``: no per-message
    framing, as an assistant message's own output count has none)."""
    o200k = fitted_rule("o200k")
    f = dict.fromkeys(NAMES, 0.0)

    def text(value: str) -> None:
        f["ratio"] += o200k(value)
        f["punctuation"] += punctuation_bytes(value.encode("utf-8", "surrogatepass"))

    for message in messages:
        f["message"] += framed
        for block in message.content:
            if isinstance(block, Text):
                text(block.text)
                f["text_block"] += 1
            elif isinstance(block, ToolUse):
                text(block.name)
                for name, value in block.input.items():
                    text(str(name))
                    text(value if isinstance(value, str) else js_json(value))
                    f["tool_param"] += 1
                f["tool_use"] += 1
            elif isinstance(block, ToolResult):
                if isinstance(block.content, str):
                    text(block.content)
                else:
                    for nested in block.content:
                        if isinstance(nested, Text):
                            text(nested.text)
                f["tool_result"] += 1
    return [f[name] for name in NAMES]


_ROUGH = dict.fromkeys(NAMES, 0.0) | {"ratio": 1.13, "tool_use": 34.5}
"""A rough price of an assistant message (the rule before the parameters were priced), only to tell
a real output count from a placeholder: it is never fitted to."""


def real_output(round_: sessions.Round) -> bool:
    """The round's logged ``output_tokens`` is a real count, not Claude Code's 1–3 placeholder."""
    rough = sum(v * _ROUGH[n] for n, v in zip(NAMES, design(round_.messages[:1], False), strict=True))
    return round_.output >= 30 and rough / 2 <= round_.output <= 2 * rough


def rows(found: list[sessions.Round]) -> tuple[np.ndarray, np.ndarray]:
    """The design rows and real counts: every explained round's delta, every real output count."""
    x: list[list[float]] = []
    y: list[float] = []
    for r in found:
        if sessions.explained(r):
            x.append(design(r.messages))
            y.append(float(r.delta))
        if real_output(r):
            x.append(design(r.messages[:1], framed=False))
            y.append(float(r.output))
    return np.array(x), np.array(y)


def main() -> None:
    fitted: dict[str, dict[str, float]] = {}
    fit = sessions.rounds("fit", held_out_every=HELD_OUT_EVERY)
    for family in ("claude", "claude-2026"):
        x, y = rows([r for r in fit if sessions.generation(r.model) == family])
        if family in SCALED:
            # too few counts for seven figures: the older generation's text rule times one scale,
            # its framing times another
            older = np.array([fitted[SCALED[family]][n] for n in NAMES])
            text, framing = older.copy(), older.copy()
            text[2:], framing[:2] = 0, 0
            scales = nnls_relative(np.column_stack([x @ text, x @ framing]), y)
            beta = scales[0] * text + scales[1] * framing
            print(f"  {family}: text ×{scales[0]:.3f}, framing ×{scales[1]:.3f} of {SCALED[family]}")
        else:
            beta = nnls_relative(x, y)
        rel = np.abs(x @ beta - y) / y
        print(
            f"{family}: {len(y)} counts; in-sample median {np.median(rel):.3f} p90 {np.percentile(rel, 90):.3f}"
        )
        print("  " + ", ".join(f"{n}={v:.3f}" for n, v in zip(NAMES, beta, strict=True)))
        fitted[family] = dict(zip(NAMES, (float(b) for b in beta), strict=True))
        # the ratio without the punctuation term: what text the fit holds almost none of (not ASCII) keeps
        if family in SCALED:
            other = scales[0] * fitted[SCALED[family]]["other"]
        else:
            keep = [i for i, n in enumerate(NAMES) if n != "punctuation"]
            other = float(nnls_relative(x[:, keep], y)[0])
        fitted[family]["other"] = other
        print(f"  ratio without the punctuation term (text that is not ASCII): {other:.3f}")
    write(fitted)


def write(fitted: dict[str, dict[str, float]]) -> None:
    """Rewrite the Claude part of the coefficients table."""
    from contextwindow.pricing._tables import table

    data = dict(table("coefficients"))
    data["claude_ratio"] = {f: round(c["ratio"], 4) for f, c in fitted.items()}
    data["claude_punctuation"] = {f: round(c["punctuation"], 4) for f, c in fitted.items()}
    data["claude_other_ratio"] = {f: round(c["other"], 4) for f, c in fitted.items()}
    data["claude_structure"] = {f: {k: round(c[k], 2) for k in NAMES[2:]} for f, c in fitted.items()}
    write_table("coefficients", data)


if __name__ == "__main__":
    main()
