"""Fit the default text rule's coefficients against the real tokenizers (offline, by hand).

Usage, from the repo root::

    PYTHONPATH=src TIKTOKEN_CACHE_DIR=/work/shared/tokenizers python -m benchmarks.fit_text_rule

For each tiktoken family (``o200k_base``, ``cl100k_base``) it cuts chunks of every kind from the
``fit`` half of the corpus (``benchmarks/_corpus.py``; lengths log-uniform from 20 to 6,000
characters, so short blocks are priced well too) and:

1. measures every non-ASCII character's mean token share in those chunks (a token's count spread
   over its bytes) and writes the per-character class table ``chartable`` (script group ×
   cost bucket, uppercase apart);
2. computes the feature vector and piece the runtime computes (``_features.features``), counts
   the chunk exactly with tiktoken, and fits one non-negative coefficient vector per piece,
   minimising the *relative* error (iteratively reweighted towards an L1 fit, so a few odd chunks
   do not pull the rule), the piece's own chunks weighted 10× the rest; characters outside the
   table and astral ones are priced at their standalone cost, not fitted.

It writes the tables under ``src/contextwindow/pricing/data/`` (``wordtable``, ``latinwords-<family>``,
``chartable``, ``coefficients``; gzipped JSON with a format version and a checksum, read by
``contextwindow.pricing._tables``); the Claude part of ``coefficients`` comes from
``benchmarks/fit_claude_rule.py`` and is kept when this script rewrites it. Held-out text is never
read here.

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


# Cost buckets of the character table: upper edges of mean tokens per character in real text.
BUCKET_EDGES = (0.25, 0.35, 0.45, 0.55, 0.7, 0.85, 1.0, 1.2, 1.5, 1.9, 2.4, 2.9)
MIN_OCCURRENCES = 3  # a character seen fewer times in the fit half is left to the unknown class
IN_PIECE_WEIGHT = 10.0  # a piece's own chunks weigh this much more than the rest in its fit


def script_group(ch: str) -> int:
    """0 CJK (Han, kana, Hangul, CJK punctuation, full-width forms), 1 Cyrillic, 3 accented Latin
    (U+00C0–U+027F, U+1E00–U+1EFF), 2 anything else (``_features.GROUPS``)."""
    c = ord(ch)
    if 0x00C0 <= c <= 0x027F or 0x1E00 <= c <= 0x1EFF:
        return 3
    if (
        0x1100 <= c <= 0x11FF
        or 0x2E80 <= c <= 0x9FFF
        or 0xAC00 <= c <= 0xD7AF
        or 0xF900 <= c <= 0xFAFF
        or 0xFF00 <= c <= 0xFFEF
    ):
        return 0
    if 0x0400 <= c <= 0x052F:
        return 1
    return 2


def char_shares(enc: Any, texts: list[str]) -> dict[str, tuple[int, float]]:
    """For every non-ASCII character: (occurrences, mean token share) in ``texts``.

    A token's cost is spread evenly over its bytes; a character's share is the sum over its bytes.
    """
    seen: dict[str, list[float]] = {}
    for text in texts:
        per_byte: list[float] = []
        for piece in enc.decode_tokens_bytes(enc.encode(text, disallowed_special=())):
            per_byte.extend([1.0 / len(piece)] * len(piece))
        i = 0
        for ch in text:
            n = len(ch.encode("utf-8", "surrogatepass"))
            if n > 1:
                slot = seen.setdefault(ch, [0, 0.0])
                slot[0] += 1
                slot[1] += sum(per_byte[i : i + n])
            i += n
    return {ch: (int(v[0]), v[1] / v[0]) for ch, v in seen.items()}


def char_classes(
    shares: dict[str, tuple[int, float]], inferred: dict[str, float] | None = None
) -> dict[str, str]:
    """Class letter -> the characters in it, for the generated ``chartable`` table: the characters
    seen in the fit corpus by their measured share, then the others ``inferred`` from the
    tokenizer's vocabulary (``vocabulary_shares``)."""
    from contextwindow.pricing._features import char_class

    measured = {ch: mean for ch, (n, mean) in shares.items() if n >= MIN_OCCURRENCES}
    out: dict[str, list[str]] = {}
    for ch, mean in sorted({**(inferred or {}), **measured}.items()):
        if ord(ch) >= 0x10000:
            continue
        bucket = len(BUCKET_EDGES) + 1 if ch.isupper() else sum(mean > e for e in BUCKET_EDGES)
        out.setdefault(char_class(script_group(ch), bucket), []).append(ch)
    return {k: "".join(v) for k, v in sorted(out.items())}


INFERRED_QUANTILE = 0.75
"""The share given to a character the corpus lacks: this quantile of the measured shares of the
characters as present in the vocabulary (errs high, by a little)."""


def vocabulary_shares(enc: Any, shares: dict[str, tuple[int, float]]) -> dict[str, float]:
    """The running-text share of every BMP letter or mark the fit corpus lacks, inferred from the
    tokenizer's own vocabulary: a character that many tokens contain merges into words (Malayalam
    and Kannada in o200k), one that none contains falls back to bytes. The characters of the corpus
    are binned by how many tokens contain them (log2) within their script group; an unseen
    character gets the :data:`INFERRED_QUANTILE` of the measured shares of its bin. So a script
    the corpus has never seen is priced by how the tokenizer treats it, not at a flat figure."""
    import unicodedata
    from collections import Counter

    containing: Counter[str] = Counter()
    for piece in enc.token_byte_values():
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError:
            continue
        containing.update(ch for ch in set(text) if ord(ch) >= 0x80)

    def bin_of(ch: str) -> int:
        return int(math.log2(containing.get(ch, 0) + 1))

    measured: dict[tuple[int, int], list[float]] = {}
    for ch, (n, mean) in shares.items():
        if n >= MIN_OCCURRENCES and ord(ch) < 0x10000:
            measured.setdefault((script_group(ch), bin_of(ch)), []).append(mean)
            measured.setdefault((-1, bin_of(ch)), []).append(mean)
    quantile = {
        key: sorted(v)[int(INFERRED_QUANTILE * len(v))] for key, v in measured.items() if len(v) >= 20
    }
    out: dict[str, float] = {}
    for code in range(0x80, 0x10000):
        ch = chr(code)
        if ch in shares and shares[ch][0] >= MIN_OCCURRENCES:
            continue
        if unicodedata.category(ch)[0] not in "LM":
            continue
        b = bin_of(ch)
        for group in (script_group(ch), -1):
            bins = [k[1] for k in quantile if k[0] == group]
            if bins:
                nearest = min(bins, key=lambda x: (abs(x - b), -x))
                out[ch] = quantile[(group, nearest)]
                break
    return out


def _non_latin_word(word: str) -> bool:
    """A run of letters (and combining marks) of a non-Latin script: what ``_features`` splits out
    of text as a word (every ASCII byte separates words; accented Latin would be cut at its ASCII
    letters, so Latin is left out)."""
    import unicodedata

    return bool(word) and all(
        not ch.isascii()
        and unicodedata.category(ch)[0] in "LM"
        and not unicodedata.name(ch, "LATIN").startswith("LATIN")
        for ch in word
    )


def vocabulary_words(enc: Any) -> list[str]:
    """Every non-Latin word that is one token of ``enc``, alone or after a space.

    Read from the tokenizer's own vocabulary (not from any corpus), so the table is as general as
    the tokenizer: a Russian, Arabic or Japanese word the tokenizer learned as a unit costs one
    token wherever it appears.
    """
    words = set()
    for piece in enc.token_byte_values():
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError:
            continue
        word = text[1:] if text.startswith(" ") else text
        if _non_latin_word(word):
            words.add(word)
    return sorted(words)


def write_table(name: str, payload: Any) -> None:
    """Write one generated table as the package reads it (format, version, checksum: ``_tables``)."""
    from contextwindow.pricing import _tables

    path = DATA / f"{name}.json.gz"
    DATA.mkdir(parents=True, exist_ok=True)
    path.write_bytes(_tables.encode(name, payload))
    _tables.table.cache_clear()
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


def write_wordtable(tables: dict[str, list[str]]) -> None:
    """Every non-Latin word that is one token of each family (``vocabulary_words``), space-separated."""
    write_table("wordtable", {family: " ".join(words) for family, words in tables.items()})


def latin_words(enc: Any) -> list[str]:
    """Every run of ASCII letters that is one token of ``enc``, alone or after a space.

    Read from the tokenizer's own vocabulary (``Encoding.token_byte_values``), not from a corpus:
    ``_features`` counts such a run of a text's ASCII part as one token and prices only the other
    runs by their letters. The case is kept (" The" and " the" are different tokens).
    """
    words = set()
    for piece in enc.token_byte_values():
        word = piece[1:] if piece[:1] == b" " else piece
        if word.isalpha() and word.isascii():
            words.add(word.decode("ascii"))
    return sorted(words)


def write_latinwords(family: str, words: list[str]) -> None:
    """Every ASCII letter run that is one token of ``family`` (``latin_words``), space-separated."""
    write_table(f"latinwords-{family}", " ".join(words))


FIXED = ("unknown_bmp", "astral")
"""Features priced at their standalone cost rather than fitted: too rare in the corpus to fit, and a
fitted value would differ between pieces (a concatenation could then cost far more than its parts)."""


def standalone_costs(enc: Any, table: dict[str, str]) -> dict[str, float]:
    """Mean tokens of one character standing alone: every printable BMP character outside the
    table, and the astral blocks agents meet (emoji, symbols, CJK extension B)."""
    import unicodedata

    known = {ch for chars in table.values() for ch in chars}

    def mean(points: Any) -> float:
        chars = [chr(c) for c in points if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co", "Cc")]
        chars = [c for c in chars if c not in known]
        return sum(len(enc.encode(c, disallowed_special=())) for c in chars) / max(1, len(chars))

    astral = [*range(0x1F300, 0x1FAFF), *range(0x20000, 0x21000)]
    return {"unknown_bmp": mean(range(0x80, 0x10000)), "astral": mean(astral)}


UNSEEN_SCRIPT_LANGUAGES = (
    "greek", "armenian", "georgian", "arabic", "hebrew", "persian", "hindi", "bengali", "tamil",
    "telugu", "thai", "khmer",
)  # fmt: skip


def unseen_script_cost(enc: Any, chunks: list[_corpus.Chunk]) -> float:
    """The price of a character outside the table: the highest mean token share of a non-ASCII
    character in running text over the alphabetic and Brahmic scripts of the fit corpus. A script
    the fit has never seen is then priced like the costliest script it has seen: it errs high by a
    little, not by the standalone cost of a lone character (two or three tokens, six times the
    running-text cost of Armenian or Tamil)."""
    worst = 0.0
    for language in UNSEEN_SCRIPT_LANGUAGES:
        shares = char_shares(enc, [c.text for c in chunks if c.kind == language])
        total = sum(n for n, _ in shares.values())
        if total:
            worst = max(worst, sum(n * mean for n, mean in shares.values()) / total)
    return worst


def main() -> None:
    import tiktoken

    chunks = fit_chunks()
    print(f"{len(chunks)} fit chunks, {sum(len(c.text) for c in chunks):,} characters")
    encodings = {family: tiktoken.get_encoding(name) for family, name in FAMILIES.items()}
    write_wordtable({f: vocabulary_words(enc) for f, enc in encodings.items()})
    for f, enc in encodings.items():
        write_latinwords(f, latin_words(enc))
    tables = {}
    for f, enc in encodings.items():
        shares = char_shares(enc, [c.text for c in chunks])
        tables[f] = char_classes(shares, vocabulary_shares(enc, shares))
    write_chartable(tables)
    reload_rule()
    from contextwindow.pricing import _features

    kinds = np.array([c.kind for c in chunks])
    fitted: dict[str, dict[str, list[float]]] = {}
    for family, enc in encodings.items():
        feats = [_features.features(c.text, family) for c in chunks]
        x = np.array([f for _, f in feats])
        pieces = np.array([p for p, _ in feats])
        y = np.array([len(enc.encode(c.text, disallowed_special=())) for c in chunks], dtype=float)
        fitted[family] = {}
        pred = np.zeros(len(y))
        fixed = standalone_costs(enc, tables[family])
        fixed["unknown_bmp"] = unseen_script_cost(enc, chunks)
        print(f"{family}: fixed costs {fixed}")
        cols = [_features.FEATURE_NAMES.index(name) for name in FIXED]
        free = [i for i in range(x.shape[1]) if i not in cols]
        y_free = y - x[:, cols] @ np.array([fixed[n] for n in FIXED])
        for index, piece in enumerate(_features.PIECES):
            mine = pieces == index
            weight = np.where(mine, IN_PIECE_WEIGHT, 1.0)
            beta = np.zeros(x.shape[1])
            beta[free] = nnls_relative(x[:, free], y_free, sample_weight=weight)
            beta[cols] = [fixed[n] for n in FIXED]
            fitted[family][piece] = [float(b) for b in beta]
            pred[mine] = x[mine] @ beta
        rel = np.abs(pred - y) / np.maximum(y, 1.0)
        print(f"\n{family}: in-sample relative error by kind (median / p95); pieces chosen")
        for kind in (*_corpus.KINDS, *_languages.LANGUAGES):
            m = kinds == kind
            if m.any():
                chosen = {p: int((pieces[m] == i).sum()) for i, p in enumerate(_features.PIECES)}
                print(
                    f"  {kind:13s} {np.median(rel[m]):6.3f} {np.percentile(rel[m], 95):6.3f}  "
                    + " ".join(f"{p}={n}" for p, n in chosen.items() if n)
                )
    write(fitted)


def write_chartable(tables: dict[str, dict[str, str]]) -> None:
    """The per-character cost classes of each family: every non-ASCII BMP character seen at least
    ``MIN_OCCURRENCES`` times in the fit half, by script group and by its mean token share
    (``BUCKET_EDGES``), uppercase letters apart (``_features.char_class`` names the classes)."""
    from contextwindow.pricing._features import N_BUCKETS

    if len(BUCKET_EDGES) + 1 != N_BUCKETS:
        raise SystemExit(f"{len(BUCKET_EDGES) + 1} buckets: set _features.N_BUCKETS to match")
    write_table("chartable", {"n_buckets": N_BUCKETS, "classes": tables})


def write(fitted: dict[str, dict[str, list[float]]]) -> None:
    """The coefficients table; the Claude part (``fit_claude_rule.py``) is kept as it was."""
    from contextwindow.pricing._features import FEATURE_NAMES
    from contextwindow.pricing._tables import table

    try:
        old = table("coefficients")
    except Exception:  # no table yet, or a damaged one: the Claude part must be refitted
        old = {"claude_ratio": {}, "claude_structure": {}}
    write_table(
        "coefficients",
        {
            "features": list(FEATURE_NAMES),
            "text": fitted,
            "claude_ratio": old["claude_ratio"],
            "claude_structure": old["claude_structure"],
        },
    )


def reload_rule() -> None:
    """Forget every table and rule the runtime cached, so the next price reads the new tables."""
    from contextwindow.pricing import _features, _tables, _text

    _tables.table.cache_clear()
    for cached in (_features._translation, _features._vocabulary, _features._latin_vocabulary):
        cached.cache_clear()
    _text.fitted_rule.cache_clear()
    _text.structure_for.cache_clear()


if __name__ == "__main__":
    main()
