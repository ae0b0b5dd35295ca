"""Text features for the fitted rule: counts a byte-level scan can take at C speed.

The default text rule prices a string as a linear function of these counts (``_text.py``). They are
chosen to track how BPE tokenizers split text: each letter run, digit group and punctuation run is
about one pre-token, long runs cost more, and scripts differ widely in characters per token (CJK
about 1, Cyrillic about 3, English prose about 4.5). Every feature is a ``bytes.translate`` into a
class alphabet followed by ``bytes.count``, so the scan runs at hundreds of MB/s with no Python loop
per character; the same function is used by the fitting script (``benchmarks/fit_text_rule.py``),
so the coefficients are fitted on exactly what runtime computes.

UTF-8 lead bytes stand in for scripts: ``D0``-``D4`` Cyrillic, ``D5``-``DF`` Hebrew/Arabic/other
two-byte scripts, ``C2``-``CF`` Latin-1, Latin extended and Greek, ``E0``-``E1`` Indic, Thai and
other three-byte alphabets, ``E2`` punctuation and symbols, ``E3`` kana and CJK punctuation,
``E4``-``E9`` Han ideographs, ``EA``-``ED`` Hangul, ``EE``-``EF`` private use and full-width forms,
``F0``-``F4`` emoji and other astral characters.
"""

from __future__ import annotations

import string

__all__ = ["FEATURE_NAMES", "N_FEATURES", "features"]

FEATURE_NAMES: tuple[str, ...] = (
    "bias",  # 1 for non-empty text: the first piece always costs a token
    "lower",  # ASCII lowercase letters
    "upper",  # ASCII uppercase letters
    "digit",  # ASCII digits
    "space",  # ASCII spaces
    "newline",  # \n and \r
    "tab",  # tabs and other ASCII control characters
    "punct",  # ASCII punctuation
    "word_runs",  # runs of letters (ASCII and two-byte scripts) after a non-letter
    "camel",  # lower→upper transitions (camelCase splits)
    "digit_runs",  # runs of digits: a number costs ~1 token per run + 1 per 3 more digits
    "punct_runs",  # runs of ASCII punctuation: a run often merges into one token
    "indented_lines",  # "\n " : an indentation run is a token of its own
    "blank_lines",  # "\n\n"
    "long_letters",  # non-overlapping 8-letter stretches: rare long words split into pieces
    "script_runs",  # runs of two-byte-script letters (Cyrillic, Greek, Arabic words), + 1 per wider char
    "latin_ext",  # C2-CF lead bytes: accented Latin, Greek
    "cyrillic",  # D0-D4
    "rtl_other2",  # D5-DF: Hebrew, Arabic, Syriac, ...
    "indic",  # E0-E1: Devanagari, Thai, Georgian, Hangul jamo, Latin extended additional
    "symbols",  # E2: general punctuation, arrows, box drawing, math
    "kana",  # E3: hiragana, katakana, CJK punctuation
    "han",  # E4-E9: CJK unified ideographs
    "hangul",  # EA-ED: Hangul syllables
    "fullwidth",  # EE-EF: private use, full-width forms, specials
    "astral",  # F0-F4: emoji and other four-byte characters
)
N_FEATURES = len(FEATURE_NAMES)

# Class alphabet, one byte per class.
_CLASSES: dict[bytes, bytes] = {
    string.ascii_lowercase.encode(): b"a",
    string.ascii_uppercase.encode(): b"A",
    string.digits.encode(): b"0",
    b" ": b" ",
    b"\n\r": b"\n",
    bytes(c for c in range(32) if c not in (10, 13)) + b"\x7f": b"\t",
    string.punctuation.encode(): b"p",
    bytes(range(0x80, 0xC0)): b"c",  # continuation bytes
    bytes(range(0xC0, 0xD0)): b"L",
    bytes(range(0xD0, 0xD5)): b"C",
    bytes(range(0xD5, 0xE0)): b"R",
    bytes(range(0xE0, 0xE2)): b"I",
    b"\xe2": b"S",
    b"\xe3": b"K",
    bytes(range(0xE4, 0xEA)): b"H",
    bytes(range(0xEA, 0xEE)): b"G",
    bytes(range(0xEE, 0xF0)): b"F",
    bytes(range(0xF0, 0x100)): b"E",
}


def _table(mapping: dict[bytes, bytes], default: bytes) -> bytes:
    out = bytearray(default * 256)
    for sources, target in mapping.items():
        for byte in sources:
            out[byte] = target[0]
    return bytes(out)


_CLASS_TABLE = _table(_CLASSES, b"?")
# Letter runs: ASCII letters, continuation bytes and two-byte leads are "letter"; a three- or
# four-byte character therefore starts its own run (each CJK character is about one piece).
_WORD_TABLE = _table(
    {
        (string.ascii_letters).encode(): b"a",
        bytes(range(0x80, 0xE0)): b"a",
    },
    b" ",
)
_DIGIT_TABLE = _table({string.digits.encode(): b"0"}, b" ")
_PUNCT_TABLE = _table({string.punctuation.encode(): b"p"}, b" ")
_SCRIPT_TABLE = _table({bytes(range(0x80, 0xE0)): b"a"}, b" ")
_NON_ASCII_CLASSES = (b"L", b"C", b"R", b"I", b"S", b"K", b"H", b"G", b"F", b"E")


def features(text: str) -> list[float]:
    """The feature vector of ``text``, in the order of :data:`FEATURE_NAMES`.

    Cost: one UTF-8 encode, two ``translate`` passes and ~15 ``count`` passes (10 more for
    non-ASCII text), all in C.
    """
    if not text:
        return [0.0] * N_FEATURES
    raw = text.encode("utf-8", "surrogatepass")
    cls = raw.translate(_CLASS_TABLE)
    count = cls.count
    words = b" " + raw.translate(_WORD_TABLE)
    head = [
        1.0,
        float(count(b"a")),
        float(count(b"A")),
        float(count(b"0")),
        float(count(b" ")),
        float(count(b"\n")),
        float(count(b"\t")),
        float(count(b"p")),
        float(words.count(b" a")),
        float(count(b"aA")),
        float((b" " + raw.translate(_DIGIT_TABLE)).count(b" 0")),
        float((b" " + raw.translate(_PUNCT_TABLE)).count(b" p")),
        float(count(b"\n ")),
        float(count(b"\n\n")),
        float(words.count(b"aaaaaaaa")),
    ]
    if text.isascii():
        return head + [0.0] * (len(_NON_ASCII_CLASSES) + 1)
    head.append(float((b" " + raw.translate(_SCRIPT_TABLE)).count(b" a")))
    return head + [float(count(c)) for c in _NON_ASCII_CLASSES]
