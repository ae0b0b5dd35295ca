"""Fit the default text rule against the real tokenizers (offline, by hand).

Usage, from the repo root::

    PYTHONPATH=src TIKTOKEN_CACHE_DIR=/work/shared/tokenizers python -m benchmarks.fit_text_rule

For each tiktoken family (``o200k_base``, ``cl100k_base``) it:

1. writes the family's vocabulary, every token of the tokenizer (``Encoding.token_byte_values``),
   as ``vocabulary-<family>`` (``contextwindow.pricing._vocabulary``): this is generated, not
   fitted, and it is what prices a word of a language or script the corpus lacks;
2. cuts chunks of every kind and language from the ``fit`` half of the corpus
   (``benchmarks/_corpus.py``, ``benchmarks/_languages.py``; lengths log-uniform from 20 to 6,000
   characters, so short blocks are priced well too), prices each with the unscaled rule
   (``_text.rule_tokens``), counts it exactly with tiktoken, and fits the one scale per family
   that minimises the relative error (``nnls_relative``), written as ``textrule``.

The tables go under ``src/contextwindow/pricing/data/`` (gzipped JSON with a format version and a
checksum, read by ``contextwindow.pricing._tables``). The Claude part of ``coefficients`` comes from
``benchmarks/fit_claude_rule.py`` and is not touched here. Held-out text is never read here.

numpy is needed here only (it comes with matplotlib); the runtime rule is plain Python.
"""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _corpus, _languages

DATA = Path(__file__).resolve().parent.parent / "src" / "contextwindow" / "pricing" / "data"
"""Where the generated tables go, as ``<name>.json.gz`` (``contextwindow.pricing._tables``)."""
FAMILIES = {"o200k": "o200k_base", "cl100k": "cl100k_base"}


def fit_chunks(per_kind: int = 500, per_language: int = 150, seed: int = 11) -> list[_corpus.Chunk]:
    """Fit chunks with log-uniform lengths, 20 to 6,000 characters: every kind of ``_corpus`` and
    every language of ``_languages`` (their fit sources only)."""
    rng = random.Random(seed)
    base = _corpus.chunks("fit", per_kind=per_kind, seed=seed)
    base += _languages.chunks("fit", per_language=per_language, seed=seed)
    out = []
    for chunk in base:
        size = int(math.exp(rng.uniform(math.log(20), math.log(6000))))
        size = min(size, len(chunk.text))
        start = rng.randint(0, len(chunk.text) - size)
        out.append(_corpus.Chunk(chunk.kind, chunk.source, chunk.text[start : start + size]))
    return [c for c in out if c.text]


def nnls_relative(
    x: np.ndarray, y: np.ndarray, iterations: int = 30, sample_weight: np.ndarray | None = None
) -> np.ndarray:
    """Non-negative coefficients minimising relative error, by projected IRLS (no scipy needed).

    ``sample_weight`` scales each row's weight in the fit (the piecewise rule weights its own
    piece's chunks up and every other chunk down, so it stays sane on text of other kinds).
    Each reweighting solves the weighted normal equations (a features × features system) with an
    active set: the same coefficients as a least-squares solve on the weighted rows, ~50× faster
    (seconds instead of minutes for the whole fit).
    """
    k = x.shape[1]
    sw = np.ones(len(y)) if sample_weight is None else np.sqrt(sample_weight)
    weights = sw / np.maximum(y, 1.0)
    active = np.ones(k, dtype=bool)
    beta = np.zeros(k)
    for _ in range(iterations):
        xw = x * weights[:, None]
        gram = xw.T @ xw
        rhs = xw.T @ (y * weights)
        for _ in range(k):
            idx = np.flatnonzero(active)
            sol, *_ = np.linalg.lstsq(gram[np.ix_(idx, idx)], rhs[idx], rcond=None)
            if (sol >= 0).all():
                break
            active[idx[np.argmin(sol)]] = False
        beta = np.zeros(k)
        beta[active] = sol
        residual = np.abs(x @ beta - y) / np.maximum(y, 1.0)
        # Reweight towards an L1 fit of the relative error (robust to outlier chunks).
        weights = sw / np.maximum(y, 1.0) / np.sqrt(np.maximum(residual, 0.01))
        active[:] = True
    return beta


def write_table(name: str, payload: Any) -> None:
    """Write one generated table as the package reads it (format, version, checksum: ``_tables``)."""
    from contextwindow.pricing import _tables

    path = DATA / f"{name}.json.gz"
    DATA.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_tables.encode(name, payload))
    _tables.table.cache_clear()
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


def vocabulary_table(enc: Any) -> dict[str, Any]:
    """Every token of ``enc`` grouped by its length in bytes, each group one Latin-1 string, and
    for every first two bytes of a token the lengths of the tokens starting with them, longest
    first (``contextwindow.pricing._vocabulary``)."""
    by_length: dict[int, list[bytes]] = {}
    lengths: dict[bytes, set[int]] = {}
    for token in enc.token_byte_values():
        by_length.setdefault(len(token), []).append(token)
        lengths.setdefault(token[:2], set()).add(len(token))
    return {
        "tokens": {str(n): b"".join(sorted(ts)).decode("latin-1") for n, ts in sorted(by_length.items())},
        "lengths": {k.decode("latin-1"): sorted(v, reverse=True) for k, v in sorted(lengths.items())},
    }


def main() -> None:
    import tiktoken

    from contextwindow.pricing import _text, _vocabulary

    encodings = {family: tiktoken.get_encoding(name) for family, name in FAMILIES.items()}
    for family, enc in encodings.items():
        write_table(f"vocabulary-{family}", vocabulary_table(enc))
    reload_rule()
    chunks = fit_chunks()
    print(f"{len(chunks)} fit chunks, {sum(len(c.text) for c in chunks):,} characters")
    kinds = np.array([c.kind for c in chunks])
    scales: dict[str, float] = {}
    for family, enc in encodings.items():
        vocab = _vocabulary.vocabulary(family)
        x = np.array([_text.rule_tokens(c.text.encode("utf-8", "surrogatepass"), vocab) for c in chunks])
        y = np.array([len(enc.encode(c.text, disallowed_special=())) for c in chunks], dtype=float)
        scale = float(nnls_relative(x[:, None], y)[0])
        scales[family] = round(scale, 4)
        rel = (x * scale - y) / np.maximum(y, 1.0)
        print(f"\n{family}: scale {scale:.4f}; in-sample relative error by kind (signed median / |p95|)")
        for kind in (*_corpus.KINDS, *_languages.LANGUAGES):
            m = kinds == kind
            if m.any():
                print(f"  {kind:13s} {np.median(rel[m]):+7.3f} {np.percentile(np.abs(rel[m]), 95):6.3f}")
    write_table("textrule", {"scale": scales})


def reload_rule() -> None:
    """Forget every table and rule the runtime cached, so the next price reads the new tables."""
    from contextwindow.pricing import _tables, _text, _vocabulary

    _tables.table.cache_clear()
    _vocabulary._load.cache_clear()
    _text._scales.cache_clear()
    _text.fitted_rule.cache_clear()
    _text.structure_for.cache_clear()


if __name__ == "__main__":
    main()
