"""Text features for the fitted rule: counts a C-speed scan can take, and the piece a text belongs to.

The default text rule prices a string as a linear function of these counts (``_text.py``), with
one coefficient vector per *piece* (prose, code, CJK, Cyrillic, other scripts, JSON) chosen by
:func:`piece_of`, a cheap deterministic classifier over the same counts. The same functions are
used by the fitting script (``benchmarks/fit_text_rule.py``), so the coefficients are fitted on
exactly what runtime computes.

ASCII features follow how BPE pre-tokenizers split text: each letter run, digit group and
punctuation run is about one pre-token, and a letter run is one token when the family's vocabulary
has it (``data/latinwords-<family>.json.gz``, generated from the tokenizer's own vocabulary: " the",
"self", "Error"), several when it does not (rare words, identifiers: priced by their letters);
escape sequences (``\\xNN``) and hex literals (``0x``) split into short pieces, which is what made
the stdlib codec tables cost 25–30% more than the rule said. The single-class and class-pair
counts come from ``_bytepairs`` (the rule sums them by weight there, without counting them one by
one); they and the Latin word counts are exact up to :data:`ASCII_SAMPLE_ABOVE` bytes and taken on
eight fixed windows of a longer text and scaled (the numbers of ASCII and non-ASCII characters stay
exact). Every C pass costs ~1.5 ns a byte on the build machine and tiktoken ~80–180 ns a byte, so
the number of passes is what decides the speed target (≥ 5× tiktoken).

Non-ASCII characters are priced per character: ``data/chartable.json.gz`` (generated offline from the
tokenizers) puts every character seen in the fitting corpus into a cost bucket by its mean token
share in real text (a common Han character that merges into word tokens costs ~0.5, a rare one
that falls back to bytes ~2–3), split by script group (CJK, Cyrillic, other) and with uppercase
letters apart (proper nouns split more). One ``str.translate`` maps the text onto those class
letters, after the ASCII bytes are deleted in C. Texts with more than :data:`SAMPLE_ABOVE`
non-ASCII characters translate eight fixed windows of them and scale the bucket counts to the exact
number of non-ASCII characters (deterministic sampling).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from functools import cache
from itertools import filterfalse
from typing import NamedTuple

from . import _bytepairs
from ._tables import table

__all__ = [
    "ASCII_FEATURES",
    "ASCII_SAMPLE_ABOVE",
    "FEATURE_NAMES",
    "LATIN_FEATURES",
    "N_BUCKETS",
    "N_FEATURES",
    "PAIR_FEATURES",
    "PIECES",
    "SAMPLE_ABOVE",
    "SINGLE_FEATURES",
    "WORD_SAMPLE_ABOVE",
    "ZERO_TAIL",
    "Measure",
    "char_class",
    "features",
    "measure",
    "piece_of",
]

SINGLE_FEATURES: tuple[str, ...] = tuple(_bytepairs.SINGLE_FEATURES)
"""Counts of ASCII bytes by class: lower, upper, digit, space, newline, tab (other control
characters), punct, quote (JSON keys and strings; also picks the JSON piece), backslash (escape
sequences split into several tokens). Scaled to the exact number of ASCII characters."""
PAIR_FEATURES: tuple[str, ...] = tuple(_bytepairs.PAIR_FEATURES)
"""Counts of adjacent byte-class pairs: word_runs (a letter run starts), camel (lower→upper),
digit_runs (a number costs ~1 token per run + 1 per 3 more digits), punct_runs (a punctuation run
often merges into one token), indented_lines ("\n "), space_punct (" =", " (", " {"),
hex_prefix ("0x"), space_nonascii (a space before a non-ASCII character does not merge into it).
Scaled to the byte length."""
LATIN_FEATURES: tuple[str, ...] = (
    "latin_vocab",  # ASCII letter runs that are one token of the family (``data/latinwords-*``)
    "latin_other",  # the other ASCII letter runs (rare words, identifiers): several tokens each
    "latin_other_letters",  # the letters of those other runs
)
ASCII_FEATURES: tuple[str, ...] = ("bias", *SINGLE_FEATURES, *PAIR_FEATURES, *LATIN_FEATURES)
"""``bias`` is 1 for non-empty text: the first piece always costs a token."""
N_BUCKETS = 13
"""Cost buckets of the character table (``data/chartable.json.gz`` says how many it was made with;
the fitting script's bucket edges decide it)."""
GROUPS = ("cjk", "cyrillic", "other", "latin")
"""Script groups of non-ASCII characters: "latin" is the accented Latin letters (U+00C0–U+027F and
U+1E00–U+1EFF: French, German, Polish, Turkish, Vietnamese, ...)."""
FEATURE_NAMES: tuple[str, ...] = (
    ASCII_FEATURES
    + tuple(f"bucket_{i}" for i in range(N_BUCKETS))
    + ("upper_nonascii",)
    + tuple(f"group_{g}" for g in GROUPS)
    + ("unknown_bmp", "astral")
    + ("vocab_words", "other_words")
)
N_FEATURES = len(FEATURE_NAMES)
PIECES: tuple[str, ...] = ("prose", "code", "cjk", "cyrillic", "script", "json", "latin")
"""Pieces of the piecewise rule, in the order ``piece_of`` returns their index."""

SAMPLE_ABOVE = 256
"""Texts with more non-ASCII characters outside the word table than this translate eight windows of
:data:`_WINDOW` of them (``str.translate`` costs ~70 ns a character, a C pass ~1.5 ns a byte). With
the word table pricing the common words, 256 characters of the rest keep the held-out accuracy and
make the rule ~1.5× faster on Russian than 512 did (measured)."""
_WINDOW = 32
_WINDOWS = 8
WORD_SAMPLE_ABOVE = 1024
"""UTF-8 bytes above which the non-ASCII words are taken on eight windows of 128 bytes (about 400
characters of Cyrillic or CJK text in all: the word split and the vocabulary lookups are C calls,
the per-character ``str.translate`` of the words outside the vocabulary is what costs)."""
_WORD_TAIL = 64  # bytes past a window's end that complete the last word starting in it
ASCII_SAMPLE_ABOVE = 1024
"""Texts of more UTF-8 bytes than this take every ASCII count on eight windows of 128 bytes (each
count is a C pass of ~1.5 ns a byte; ~20 of them over the whole text made the rule only ~3.5×
tiktoken on prose, measured)."""
ASCII_WINDOWS = 8
"""Windows the ASCII sample is cut into. 16 or 32 narrower windows of the same 1 KB traded prose
and markdown accuracy for code and mixed accuracy on the held-out text (measured; the runs cut at
window edges cost about what the wider spread gains), so eight stay."""
# Classifier thresholds (chosen on the fit half; see fit_text_rule.py's confusion printout).
_JSON_QUOTES = 0.3  # double quotes above this share of the ASCII punctuation: the JSON piece
_SCRIPT_SHARE = 0.25  # non-ASCII characters above this share of the text: a script piece
_CODE_PUNCT = 0.075  # ASCII punctuation above this share of the text: the code piece
_LATIN_SHARE = 0.01  # accented Latin letters above this share of a prose text: the Latin piece

_NOT_PUNCT = bytes(b for b in range(256) if chr(b) not in string.punctuation)
# ASCII letters stay, every other byte becomes a space: ``split()`` then yields the letter runs.
_LATIN_TABLE = bytes(b if chr(b) in string.ascii_letters else 0x20 for b in range(256))

# Class letters of the character table: group g, bucket b -> chr(_BASE + g * _STRIDE + b); the
# uppercase class of a group is bucket N_BUCKETS. "?" marks a BMP character not in the table.
_ASCII = bytes(range(128))
_BASE = 0x41
_STRIDE = N_BUCKETS + 1
_UNKNOWN = "?"
_CLASS_INDEX: dict[str, tuple[int, int]] = {
    chr(_BASE + g * _STRIDE + b): (g, b) for g in range(len(GROUPS)) for b in range(_STRIDE)
}
_COUNTED = frozenset((*_CLASS_INDEX, _UNKNOWN))
# Words of the non-ASCII part: every ASCII byte becomes a space, non-ASCII bytes stay; deleting
# ASCII and continuation bytes leaves one byte per character.
_SEPARATORS = bytes(b if b >= 0x80 else 0x20 for b in range(256))
_NOT_LEAD = bytes(range(0xC0))
# Lead bytes of each script group: CJK U+3000–U+DFFF (E3–ED: CJK, kana, Hangul) and U+F000–U+FFFF
# (EF: compatibility and full-width forms); Cyrillic U+0400–U+04FF (D0–D3); accented Latin
# U+00C0–U+027F (C3–C9); every other two- and three-byte character. The Latin Extended Additional
# block (U+1E00–U+1EFF, Vietnamese) shares its lead byte E1 with other scripts: it is moved from
# "other" to "latin" by its two-byte prefixes (:data:`_LATIN_ADDITIONAL`). Four-byte (astral)
# characters are in no group, as in the character table.
_GROUP_LEADS = (
    bytes([*range(0xE3, 0xEE), 0xEF]),
    bytes(range(0xD0, 0xD4)),
    bytes([0xC2, *range(0xCA, 0xD0), *range(0xD4, 0xE3), 0xEE]),
    bytes(range(0xC3, 0xCA)),
)
_LATIN_ADDITIONAL = (b"\xe1\xb8", b"\xe1\xb9", b"\xe1\xba", b"\xe1\xbb")
_GROUP_DROPS = tuple(bytes(b for b in range(256) if b not in leads) for leads in _GROUP_LEADS)


_ONE_TOKEN_BUCKET = 6
"""The cost bucket of a mean share of one token a character (the fitting script's edges put 1.0 in
bucket 6: (0.85, 1.0])."""
_GROUP_OF_LEAD = {lead: g for g, leads in enumerate(_GROUP_LEADS) for lead in leads}


def char_class(group: int, bucket: int) -> str:
    """The class letter of a (script group, cost bucket); ``bucket == N_BUCKETS`` is uppercase."""
    return chr(_BASE + group * _STRIDE + bucket)


@cache
def _translation(family: str) -> list[str]:
    """A 65,536-entry ``str.translate`` table: ASCII deleted, known characters to their class,
    other BMP characters to ``?``; astral characters fall outside and stay as they are.

    A character outside the table that is a token of the family on its own (a one-character entry
    of the word table: "µ", "ß") is priced as one token a character (:data:`_ONE_TOKEN_BUCKET`),
    not at the unknown price: "µµ" is two tokens, and pricing it at six made a text cost far more
    than its parts."""
    out = ["" if c < 128 else _UNKNOWN for c in range(0x10000)]
    for word in _vocabulary(family):
        if len(word) <= 3:  # one BMP character is at most three UTF-8 bytes
            chars = word.decode("utf-8")
            if len(chars) == 1:
                group = _GROUP_OF_LEAD.get(word[0], 2)
                out[ord(chars)] = char_class(group, N_BUCKETS if chars.isupper() else _ONE_TOKEN_BUCKET)
    chartable = table("chartable")
    if chartable["n_buckets"] != N_BUCKETS:
        from ..errors import DamagedData

        raise DamagedData(
            f"the character table has {chartable['n_buckets']} cost buckets, the rule reads {N_BUCKETS}: "
            "refit with benchmarks/fit_text_rule.py"
        )
    classes: dict[str, dict[str, str]] = chartable["classes"]
    for cls, chars in classes.get(family, classes["o200k"]).items():
        for ch in chars:
            if ord(ch) < 0x10000:
                out[ord(ch)] = cls
    return out


def _class_counts(chars: str, family: str) -> tuple[dict[str, int], int, float]:
    """Class letter (or ``?``, unknown) -> count in ``chars``, on eight windows of :data:`_WINDOW`
    characters when it has more than :data:`SAMPLE_ABOVE`; the sample's length; the factor that
    scales the sample to ``chars``."""
    n = len(chars)
    if n > SAMPLE_ABOVE:
        step = (n - _WINDOW) // (_WINDOWS - 1)
        chars = "".join(chars[i * step : i * step + _WINDOW] for i in range(_WINDOWS))
    sample = chars.translate(_translation(family))
    count = sample.count
    present = _COUNTED & set(sample)  # count only the classes present (a handful)
    return {cls: count(cls) for cls in present}, len(sample), n / max(1, len(sample))


@cache
def _vocabulary(family: str) -> frozenset[bytes]:
    """The UTF-8 of every non-Latin word that is one token of the family (``data/wordtable``)."""
    words: dict[str, str] = table("wordtable")
    return frozenset(words.get(family, words["o200k"]).encode("utf-8").split())


_LOOKUP_ALL = 8
_LOOKUP_STRIDE = 2
"""Every this many letter runs (of the text, or of its ASCII sample) is looked up in the family's
vocabulary and the counts scaled (a lookup costs ~50–90 ns, a C pass over the sample ~1.5 µs);
a text of at most :data:`_LOOKUP_ALL` runs looks up every one. 2 kept the held-out accuracy of
looking up every run within noise; 3 was ~0.5 point worse on prose and numbered code and no
faster (the split, not the lookups, is most of the cost; measured)."""


@cache
def _latin_vocabulary(family: str) -> frozenset[bytes]:
    """Every ASCII letter run that is one token of the family (``data/latinwords-<family>``,
    generated from the tokenizer's vocabulary); families without a table use o200k's."""
    name = family if family in ("o200k", "cl100k") else "o200k"
    words: str = table(f"latinwords-{name}")
    return frozenset(words.encode("ascii").split())


def _words(data: bytes, nonascii: int) -> tuple[list[bytes], int]:
    """The non-ASCII words of ``data`` (maximal runs of non-ASCII bytes: any ASCII byte separates
    them) and the number of characters in them, on eight windows of :data:`WORD_SAMPLE_ABOVE`
    bytes in all when ``data`` is longer.

    A window keeps the words that *start* in it, completed past its end by up to
    :data:`_WORD_TAIL` bytes, so long words are not under-sampled; windows that hold fewer than
    ``min(nonascii, 64)`` non-ASCII characters (a mostly ASCII text) give way to every word of
    the text (C passes only: a translate and a split).
    """
    if len(data) > WORD_SAMPLE_ABOVE:
        width = WORD_SAMPLE_ABOVE // _WINDOWS
        step = (len(data) - width) // (_WINDOWS - 1)
        words: list[bytes] = []
        for i in range(_WINDOWS):
            at = i * step
            piece = data[at : at + width + _WORD_TAIL].translate(_SEPARATORS)
            mine = piece.split()[: len(piece[:width].split())]
            if at and mine and data[at - 1] >= 0x80 and piece[0] != 0x20:
                mine = mine[1:]  # the first word started before the window
            words += mine
        seen = len(b"".join(words).translate(None, _NOT_LEAD))
        if seen >= min(nonascii, 64):
            return words, seen
    return data.translate(_SEPARATORS).split(), nonascii


def _nonascii(data: bytes, family: str, nonascii: int) -> list[float]:
    """Bucket counts, uppercase, group totals, unknown and astral counts, then the numbers of
    vocabulary and other words, of the non-ASCII part of ``data`` (a text's UTF-8).

    Its non-ASCII words (``_words``) that are one token of the family (``data/wordtable``) count as
    ``vocab_words``; only the characters of the other words go to the cost buckets (a
    ``str.translate``, a Python-level lookup per character, on at most :data:`SAMPLE_ABOVE` of
    them). The group totals count every non-ASCII character (they pick the piece). Every count
    is scaled to the exact number of non-ASCII characters.
    """
    words, seen = _words(data, nonascii)
    misses = list(filterfalse(_vocabulary(family).__contains__, words))
    buckets = [0.0] * N_BUCKETS
    upper = unknown = astral = 0.0
    if misses:
        counts, sampled, k = _class_counts(b"".join(misses).decode("utf-8", "ignore"), family)
        for cls, n in counts.items():
            if cls == _UNKNOWN:
                continue
            b = _CLASS_INDEX[cls][1]
            if b == N_BUCKETS:
                upper += n * k
            else:
                buckets[b] += n * k
        unknown = counts.get(_UNKNOWN, 0) * k
        astral = (sampled - sum(counts.values())) * k
    # Group totals of every word's characters by their UTF-8 lead byte (three C passes, no
    # per-character lookup): the same script groups as the fitting script's ``script_group``,
    # to within rare blocks.
    joined = b"".join(words)
    groups = [len(joined.translate(None, drop)) for drop in _GROUP_DROPS]
    additional = sum(map(joined.count, _LATIN_ADDITIONAL))
    groups[2] -= additional
    groups[3] += additional
    scale = nonascii / seen if seen else 0.0
    hits = len(words) - len(misses)
    return [x * scale for x in (*buckets, upper, *groups, unknown, astral, hits, len(misses))]


_WINDOW_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _windows(data: bytes, budget: int) -> bytes:
    """:data:`ASCII_WINDOWS` fixed, evenly spread windows of ``data`` totalling ``budget`` bytes
    (deterministic), the even-numbered windows first: the sample's first half is itself spread
    over the whole text."""
    width = budget // ASCII_WINDOWS
    step = (len(data) - width) // (ASCII_WINDOWS - 1)
    return b"".join([data[i * step : i * step + width] for i in _WINDOW_ORDER])


_HIGH = bytes(range(0x80, 0x100))
ZERO_TAIL: tuple[float, ...] = (0.0,) * (N_FEATURES - len(ASCII_FEATURES))


class Measure(NamedTuple):
    """What the rule reads of a text: its piece, the bytes its ASCII class counts are taken on,
    the factors that scale those counts to the whole text, its Latin word counts and its
    non-ASCII tail (in the order of :data:`FEATURE_NAMES`)."""

    piece: int
    sample: bytes
    """The UTF-8 the single and pair counts are taken on: the text, or eight windows of it."""
    single_scale: float
    """Scales single-class counts of ``sample`` to the text's exact number of ASCII characters."""
    pair_scale: float
    """Scales pair counts of ``sample`` to the text's byte length."""
    latin: tuple[float, float, float]
    tail: tuple[float, ...]
    """The non-ASCII features; :data:`ZERO_TAIL` (the same object) for an ASCII text."""


def measure(text: str, family: str = "o200k") -> Measure | None:
    """The :class:`Measure` of a non-empty ``text`` for a tokenizer family (``None`` if empty).

    Up to :data:`ASCII_SAMPLE_ABOVE` UTF-8 bytes every count is exact. A longer text is read
    whole only by the encode and (if it is not ASCII) one deleting ``bytes.translate`` that
    yields its non-ASCII bytes and so the exact numbers of ASCII and non-ASCII characters; every
    ASCII count is taken on eight fixed windows of :data:`ASCII_SAMPLE_ABOVE` bytes in all and
    scaled (class counts to the exact number of ASCII characters, so they sum to it; pair counts
    to the byte length). The non-ASCII characters are priced by ``_nonascii`` on at most
    :data:`SAMPLE_ABOVE` of them. Deterministic: fixed windows, no randomness.
    """
    if not text:
        return None
    raw = encoded = text.encode("utf-8", "surrogatepass")
    n = len(text)
    size = len(raw)
    is_ascii = text.isascii()  # O(1) in CPython: the string knows it is ASCII
    high = b"" if is_ascii else raw.translate(None, _ASCII)
    ascii_total = size - len(high)  # ASCII characters: one byte each
    nonascii = n - ascii_total
    scale = 1.0
    in_sample = ascii_total
    if size > ASCII_SAMPLE_ABOVE:
        sample = _windows(raw, ASCII_SAMPLE_ABOVE)
        seen = len(sample) if is_ascii else len(sample.translate(None, _HIGH))
        if seen or not ascii_total:
            raw, in_sample = sample, seen
            scale = size / len(sample)
        # else the windows fell on non-ASCII text only: count the ASCII exactly
    k = ascii_total / in_sample if in_sample else 0.0
    punct = len(raw.translate(None, _NOT_PUNCT)) * k
    quote = raw.count(b'"') * k
    # Letter runs: one token each when the family's vocabulary has the run (``data/latinwords-*``);
    # the lookups (~90 ns each, the costliest step) are made on every other run and scaled.
    runs = raw.translate(_LATIN_TABLE).split()
    looked = runs[::_LOOKUP_STRIDE] if len(runs) > _LOOKUP_ALL else runs
    misses = list(filterfalse(_latin_vocabulary(family).__contains__, looked))
    k_runs = scale * len(runs) / len(looked) if looked else 0.0
    latin = (
        (len(looked) - len(misses)) * k_runs,
        len(misses) * k_runs,
        len(b"".join(misses)) * k_runs,
    )
    tail = tuple(_nonascii(encoded, family, nonascii)) if nonascii else ZERO_TAIL
    return Measure(piece_of(n, punct, quote, nonascii, tail), raw, k, scale, latin, tail)


def features(text: str, family: str = "o200k") -> tuple[int, list[float]]:
    """``(piece, vector)`` of ``text`` for a tokenizer family, in the order of :data:`FEATURE_NAMES`
    (for the fitting script and diagnostics; the rule itself sums the single and pair features by
    weight, ``_bytepairs.Weights``, without counting them one by one)."""
    m = measure(text, family)
    if m is None:
        return 0, [0.0] * N_FEATURES
    codes = _bytepairs.class_codes(m.sample)
    singles, pairs = _bytepairs.counts(codes, _bytepairs.pair_codes(codes))
    return m.piece, [
        1.0,
        *(c * m.single_scale for c in singles),
        *(c * m.pair_scale for c in pairs),
        *m.latin,
        *m.tail,
    ]


_GROUP_AT = len(ASCII_FEATURES) + N_BUCKETS + 1  # index of group_cjk within the non-ASCII tail


def piece_of(length: int, punct: float, quote: float, nonascii: int, tail: Sequence[float]) -> int:
    """Index into :data:`PIECES`: a script piece when non-ASCII characters are more than a quarter
    of the text (the largest script group decides), else code or JSON when ASCII punctuation is
    dense (JSON when double quotes are a large share of it), else the Latin piece when accented
    Latin letters are more than :data:`_LATIN_SHARE` of the text (French, Polish, Vietnamese
    prose: their words split where English words do not), else prose."""
    g = _GROUP_AT - len(ASCII_FEATURES)
    if nonascii > _SCRIPT_SHARE * length:
        cjk, cyr, other, latin = tail[g], tail[g + 1], tail[g + 2], tail[g + 3]
        if cjk >= cyr and cjk >= other and cjk >= latin:
            return 2
        if cyr >= other and cyr >= latin:
            return 3
        return 6 if latin >= other else 4
    if punct > _CODE_PUNCT * length:
        return 5 if quote > _JSON_QUOTES * punct else 1
    if nonascii and tail[g + 3] > _LATIN_SHARE * length:
        return 6
    return 0
