"""A tokenizer family's vocabulary as data, and the number of its tokens a piece of text needs.

``data/vocabulary-<family>.json.gz`` holds every token of the family's tokenizer (generated
offline from tiktoken's own files by ``benchmarks/fit_text_rule.py``; no tokenizer is needed at
run time). A piece of text (one pre-token: a word with its leading space, a number of up to three
digits, a punctuation run, a whitespace run) is priced by a greedy longest-match split against
that vocabulary: the longest token the piece starts with, then the longest token the rest starts
with, and so on. Byte-pair encoding does not always find the longest token first, but on real text
in 41 languages and agent content the two counts differ by a few percent
(``benchmarks/pricing_accuracy.py``), against the 20–70% a rule without the vocabulary erred by on
languages it had not been fitted on: the vocabulary is what knows that " contraseña" is one token
and a Georgian word three.

Every byte is a token of both families, so a piece always splits; a piece that is a token costs 1
without a split. The splits of pieces that are not tokens are cached (bounded: the cache is
emptied when it holds :data:`CACHE_LIMIT` pieces), which changes the speed, never a price.
"""

from __future__ import annotations

from functools import cache

from ._tables import table

__all__ = ["CACHE_LIMIT", "FAMILIES", "Vocabulary", "vocabulary"]

FAMILIES = ("o200k", "cl100k")
"""Families whose vocabulary ships as data; every other family is priced with o200k's."""
CACHE_LIMIT = 1 << 16
"""Pieces whose split is remembered before the cache is emptied (a few MB at most)."""


class Vocabulary:
    """The tokens of one family and the greedy split of a piece against them."""

    __slots__ = ("_lengths", "_splits", "tokens")

    tokens: frozenset[bytes]
    """Every token, as bytes."""

    def __init__(self, tokens: frozenset[bytes], lengths: dict[bytes, tuple[int, ...]]) -> None:
        """``lengths``: for every first two bytes of a token, the lengths of the tokens that start
        with them, longest first (the split tries only those, not every length down from the
        longest token)."""
        self.tokens = tokens
        self._lengths = lengths
        self._splits: dict[bytes, int] = {}

    def count(self, pieces: list[bytes]) -> int:
        """Tokens of every piece of ``pieces`` (the cached splits are read in C; only pieces not
        seen before are split)."""
        got = list(map(self._splits.get, pieces))
        if None in got:
            split = self.split
            got = [split(p) if n is None else n for p, n in zip(pieces, got, strict=True)]
        return sum(got)  # type: ignore[arg-type]

    def split(self, piece: bytes) -> int:
        """Tokens of the greedy longest-match split of ``piece`` (1 when it is a token)."""
        known = self._splits.get(piece)
        if known is not None:
            return known
        tokens, lengths, single = self.tokens, self._lengths, (1,)
        n = at = 0
        end = len(piece)
        while at < end:
            step = 1
            for size in lengths.get(piece[at : at + 2], single):
                if size == 1 or (size <= end - at and piece[at : at + size] in tokens):
                    step = size
                    break
            n += 1
            at += step
        if len(self._splits) >= CACHE_LIMIT:
            self._splits.clear()
        self._splits[piece] = n
        return n


def vocabulary(family: str) -> Vocabulary:
    """The vocabulary of ``family`` (o200k's, the same object, for a family without its own)."""
    return _load(family if family in FAMILIES else "o200k")


@cache
def _load(name: str) -> Vocabulary:
    """The vocabulary table ``name``, read once and checked.

    The table holds, per token length in bytes, the concatenation of every token of that length
    as a Latin-1 string (one character per byte), so it is cut back into tokens without separators,
    and the ``lengths`` of :class:`Vocabulary` (generated with it: building them here cost more
    than the rest of the load).
    """
    data = table(f"vocabulary-{name}")
    tokens: list[bytes] = []
    for size, joined in data["tokens"].items():
        raw, step = joined.encode("latin-1"), int(size)
        tokens += [raw[at : at + step] for at in range(0, len(raw), step)]
    lengths = {key.encode("latin-1"): tuple(sizes) for key, sizes in data["lengths"].items()}
    return Vocabulary(frozenset(tokens), lengths)
