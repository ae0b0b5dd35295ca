"""ASCII byte classes and pairs of them: counted one by one for the fit, summed by weight for the rule.

Most ASCII features of the text rule are either a count of bytes of some classes (letters, digits,
spaces, punctuation, quotes, ...) or a count of adjacent byte pairs of some classes (a letter run
starts where a letter follows a non-letter; a space before punctuation; ``0x``). One
``bytes.translate`` maps each byte to a 4-bit class code (:data:`CODES`), and one big-integer
shift-and-or puts the previous byte's code in the high nibble of every byte, so each byte of
``pairs`` names a (previous, current) class pair. Every such feature is then a set of codes
(singles) or of pair bytes (pairs).

The fitting script needs each feature's count (:func:`counts`). The rule needs only their
weighted sum with its fitted coefficients, and that is what makes it fast: :class:`Weights` turns
a piece's coefficients into two 256-entry translate tables per kind (a coarse and a fine part of
each byte's weight, 0–63 each), and ``zlib.adler32``, whose low half is the plain sum of the bytes
modulo 65,521, adds them up in C. For ASCII text (single and pair counts scale alike) one table
indexed by pair byte holds both, so two translates and two checksums replace ~15 counting passes
(each ~1.3 µs a KB on the build machine); other text takes four of each. The two parts of a weight keep it to 1/4,000 of the
largest weight, so the sum differs from the exact dot product by far less than a token
(``tests/test_pricing_bytepairs.py`` checks both against each other).
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "CODES",
    "PAIR_FEATURES",
    "SINGLE_FEATURES",
    "Weights",
    "class_codes",
    "counts",
    "pair_codes",
]

CODES: tuple[str, ...] = (
    "control",  # 0: tabs and other control characters; also the "previous" of the first byte
    "lower",  # 1: a-z except x
    "x",  # 2: x (hex literals)
    "upper",  # 3
    "zero",  # 4: 0
    "digit",  # 5: 1-9
    "space",  # 6
    "newline",  # 7: \n and \r
    "punct",  # 8: ASCII punctuation other than " and \
    "quote",  # 9: "
    "backslash",  # 10: \
    "twobyte",  # 11: a UTF-8 byte 0x80-0xDF (continuation, or the lead of a two-byte letter)
    "wide",  # 12: the lead byte of a three- or four-byte character (CJK, emoji)
)
_C = {name: i for i, name in enumerate(CODES)}
_LETTER = frozenset((_C["lower"], _C["x"], _C["upper"], _C["twobyte"]))
_DIGIT = frozenset((_C["zero"], _C["digit"]))
_PUNCT = frozenset((_C["punct"], _C["quote"], _C["backslash"]))
_NONASCII = frozenset((_C["twobyte"], _C["wide"]))


def _code_of(byte: int) -> int:
    ch = chr(byte)
    if byte >= 0xE0:
        return _C["wide"]
    if byte >= 0x80:
        return _C["twobyte"]
    if ch == "x":
        return _C["x"]
    if ch.islower():
        return _C["lower"]
    if ch.isupper():
        return _C["upper"]
    if ch == "0":
        return _C["zero"]
    if ch.isdigit():
        return _C["digit"]
    if ch == " ":
        return _C["space"]
    if ch in "\n\r":
        return _C["newline"]
    if ch == '"':
        return _C["quote"]
    if ch == "\\":
        return _C["backslash"]
    if ch.isprintable():
        return _C["punct"]
    return _C["control"]


_CODE_TABLE = bytes(_code_of(b) for b in range(256))

SINGLE_FEATURES: dict[str, frozenset[int]] = {
    "lower": frozenset((_C["lower"], _C["x"])),
    "upper": frozenset((_C["upper"],)),
    "digit": _DIGIT,
    "space": frozenset((_C["space"],)),
    "newline": frozenset((_C["newline"],)),
    "tab": frozenset((_C["control"],)),
    "punct": _PUNCT,
    "quote": frozenset((_C["quote"],)),
    "backslash": frozenset((_C["backslash"],)),
}
"""Features that count bytes whose class is in the set (ASCII classes only)."""

PAIR_FEATURES: dict[str, Callable[[int, int], bool]] = {
    # a run of letters (ASCII or two-byte scripts) starts: every run is about one pre-token
    "word_runs": lambda p, c: c in _LETTER and p not in _LETTER,
    "camel": lambda p, c: p in (_C["lower"], _C["x"]) and c == _C["upper"],
    "digit_runs": lambda p, c: c in _DIGIT and p not in _DIGIT,
    "punct_runs": lambda p, c: c in _PUNCT and p not in _PUNCT,
    "indented_lines": lambda p, c: p == _C["newline"] and c == _C["space"],
    "space_punct": lambda p, c: p == _C["space"] and c in _PUNCT,
    "hex_prefix": lambda p, c: p == _C["zero"] and c == _C["x"],
    "space_nonascii": lambda p, c: p == _C["space"] and c in _NONASCII,
}
"""Features that count adjacent (previous, current) class pairs. The first byte's previous is
``control``, so a run at the very start counts."""

_PAIR_SETS: dict[str, frozenset[int]] = {
    name: frozenset(p << 4 | c for p in range(16) for c in range(16) if test(p, c))
    for name, test in PAIR_FEATURES.items()
}


def class_codes(data: bytes) -> bytes:
    """One class code (:data:`CODES`) per byte of ``data``."""
    return data.translate(_CODE_TABLE)


def pair_codes(codes: bytes) -> bytes:
    """``(previous << 4) | current`` per byte of ``class_codes`` output (one big-integer shift and
    or: ``x << 12`` moves each byte's code into the next byte's high nibble)."""
    x = int.from_bytes(codes, "little")
    n = len(codes)
    return (x | x << 12).to_bytes(n + 2, "little")[:n]


def counts(codes: bytes, pairs: bytes) -> tuple[list[int], list[int]]:
    """The count of every single feature and every pair feature, in the order of
    :data:`SINGLE_FEATURES` and :data:`PAIR_FEATURES` (for the fit and for tests)."""
    singles = Counter(codes)
    both = Counter(pairs)
    return (
        [sum(singles[c] for c in codeset) for codeset in SINGLE_FEATURES.values()],
        [sum(both[b] for b in byteset) for byteset in _PAIR_SETS.values()],
    )


_LEVELS = 63
"""Largest byte value of a weight table: 63 × 1,040 bytes stays under adler32's modulus 65,521."""
_BLOCK = 1040


@dataclass(frozen=True, slots=True)
class _Table:
    coarse: bytes
    fine: bytes
    quantum: float  # tokens per unit of the coarse table
    offset: float  # subtracted per byte (tables hold weight + offset, never negative)

    def total(self, data: bytes) -> float:
        """Sum over the bytes of ``data`` of their weight (C passes only)."""
        coarse = fine = 0
        # one block for any sample the rule takes (1 KB); longer data (the fit's tests) in blocks
        blocks = (
            (data,) if len(data) <= _BLOCK else (data[at : at + _BLOCK] for at in range(0, len(data), _BLOCK))
        )
        for block in blocks:
            coarse += zlib.adler32(block.translate(self.coarse), 0) & 0xFFFF
            fine += zlib.adler32(block.translate(self.fine), 0) & 0xFFFF
        return (coarse + fine / _LEVELS) * self.quantum - self.offset * len(data)


def _table(weights: Sequence[float]) -> _Table:
    offset = max(0.0, -min(weights))
    shifted = [w + offset for w in weights]
    top = max(shifted)
    quantum = top / _LEVELS if top > 0 else 1.0
    coarse, fine = bytearray(256), bytearray(256)
    for i, w in enumerate(shifted):
        units = w / quantum
        whole = min(_LEVELS, int(units))  # units ≤ 63 up to rounding: the top weight is 63 units
        coarse[i], fine[i] = whole, round((units - whole) * _LEVELS)  # (units - whole) < 1: ≤ 63
    return _Table(bytes(coarse), bytes(fine), quantum, offset)


@dataclass(frozen=True, slots=True)
class Weights:
    """A piece's coefficients of the single and pair features as translate tables."""

    singles: _Table
    pairs: _Table
    both: _Table
    """Indexed by pair byte: its pair weight plus the single weight of its current class, for
    texts whose single and pair counts scale alike (ASCII text: both scale by the byte length)."""

    @classmethod
    def of(cls, single: Sequence[float], pair: Sequence[float]) -> Weights:
        """``single`` and ``pair`` are coefficients in the order of :data:`SINGLE_FEATURES` and
        :data:`PAIR_FEATURES`."""
        by_code = [0.0] * 256
        for coefficient, codeset in zip(single, SINGLE_FEATURES.values(), strict=True):
            for c in codeset:
                by_code[c] += coefficient
        by_pair = [0.0] * 256
        for coefficient, byteset in zip(pair, _PAIR_SETS.values(), strict=True):
            for b in byteset:
                by_pair[b] += coefficient
        by_both = [by_pair[b] + by_code[b & 0x0F] for b in range(256)]
        return cls(_table(by_code), _table(by_pair), _table(by_both))

    def total(self, codes: bytes, single_scale: float, pair_scale: float) -> float:
        """``single_scale`` × the weighted sum of the single features plus ``pair_scale`` × that of
        the pair features, over ``codes`` (``class_codes`` output)."""
        pairs = pair_codes(codes)
        if single_scale == pair_scale:
            return self.both.total(pairs) * pair_scale
        return self.singles.total(codes) * single_scale + self.pairs.total(pairs) * pair_scale
