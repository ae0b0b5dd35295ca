"""The text corpus for fitting and measuring the text rule: real text found on this machine.

Nothing is synthesised. Sources, by kind:

- ``prose``: licences (``/usr/share/common-licenses``, ``LICENSE*`` files in site-packages) and the
  prose paragraphs of package ``METADATA`` descriptions;
- ``code``: the Python standard library and C sources under the Python install;
- ``json``: ``.json`` files in site-packages and the Python install;
- ``markdown``: ``.md`` files (Node.js API docs, Rust and pyenv docs, package READMEs);
- ``chinese``, ``japanese``, ``korean``, ``russian``, ``other-script`` (Arabic, Hindi, Greek,
  Hebrew, Thai, Ukrainian): translated strings from the gettext catalogs under
  ``/usr/share/locale`` plus CPython's ``test/cjkencodings`` UTF-8 texts;
- ``numbered-code``: the same code files as an agent's file-reading tool returns them, every line
  prefixed with its number (``cat -n``'s ``%6d\t``, or Claude Code's Read format ``%6d→``); tool
  results of this shape are most of a coding agent's context;
- ``mixed``: held-out pieces of different kinds joined (markdown + code + CJK), as agent content is.

Every source file is assigned to ``fit`` or ``holdout`` by a hash of its *content*, so the accuracy
benchmark never sees text the coefficients were fitted on, even where the same file is installed
under two paths (``iso_639-5.mo`` and ``iso_639_5.mo`` are one catalogue). Chunks are cut at random
offsets with lengths from 300 to 6,000 characters, seeded, so runs are reproducible.

Deduplication, the same rule for both halves: a file whose content was already seen in the kind is
skipped, and a chunk whose text was already drawn in the split is drawn again (up to
:data:`_REDRAWS` times, then left out). Without it a short file, taken whole every time it is drawn,
filled a kind's sample with copies of itself (one 2,215-character Russian catalogue was 9 of 200
held-out chunks), and its error counted nine times in the p95.
"""

from __future__ import annotations

import gettext
import glob
import hashlib
import json
import os
import random
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["KINDS", "Chunk", "chunks"]

KINDS = (
    "prose",
    "code",
    "numbered-code",
    "json",
    "markdown",
    "chinese",
    "japanese",
    "korean",
    "russian",
    "other-script",
    "mixed",
)

_STDLIB = Path(sysconfig.get_paths()["stdlib"])
_SITE = Path(sysconfig.get_paths()["purelib"])
_LOCALE = Path("/usr/share/locale")
_MAX_FILES_PER_KIND = 400
_MAX_BYTES = 2_000_000
_REDRAWS = 20


@dataclass(frozen=True)
class Chunk:
    kind: str
    source: str
    text: str


def _split(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return "holdout" if digest[0] % 3 == 0 else "fit"


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return None
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _catalog(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            catalog = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    except (OSError, UnicodeDecodeError, Exception):
        return None
    values = [v for k, v in catalog.items() if k and isinstance(v, str)]
    return "\n".join(values) if values else None


def _locale_files(langs: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for lang in langs:
        out.extend(sorted(glob.glob(str(_LOCALE / lang / "LC_MESSAGES" / "*.mo"))))
    return out


def _sources(kind: str) -> Iterator[tuple[str, str]]:
    """(path, text) for every source file of a kind."""
    files: list[str]
    loader = _read
    if kind == "prose":
        files = sorted(glob.glob("/usr/share/common-licenses/*"))
        files += sorted(glob.glob(str(_SITE / "*.dist-info" / "LICENSE*")))
        files += sorted(glob.glob(str(_SITE / "*.dist-info" / "licenses" / "*")))
        files += sorted(glob.glob("/usr/share/doc/*/copyright"))
    elif kind == "code":
        files = sorted(glob.glob(str(_STDLIB / "*.py")))
        files += sorted(glob.glob(str(_STDLIB / "*" / "*.py")))
        files += sorted(glob.glob(str(Path(sys.base_prefix) / "include" / "**" / "*.h"), recursive=True))
    elif kind == "json":
        files = sorted(glob.glob(str(_SITE / "**" / "*.json"), recursive=True))
        files += sorted(glob.glob(str(_STDLIB / "**" / "*.json"), recursive=True))
    elif kind == "markdown":
        files = sorted(glob.glob("/usr/share/doc/nodejs/api/*.md"))
        files += sorted(glob.glob("/root/.pyenv/**/*.md", recursive=True))
        files += sorted(glob.glob("/root/.rustup/toolchains/stable-*/share/doc/**/*.md", recursive=True))
        files += sorted(glob.glob(str(_SITE / "**" / "*.md"), recursive=True))
    elif kind == "chinese":
        files = _locale_files(("zh_CN", "zh_TW", "zh_HK"))
        loader = _catalog
        yield from _cjk_tests(("gb2312", "gbk", "gb18030", "big5", "hz"))
    elif kind == "japanese":
        files = _locale_files(("ja",))
        loader = _catalog
        yield from _cjk_tests(("euc_jp", "shift_jis", "iso2022_jp", "euc_jisx0213"))
    elif kind == "korean":
        files = _locale_files(("ko",))
        loader = _catalog
        yield from _cjk_tests(("euc_kr", "johab", "iso2022_kr", "cp949"))
    elif kind == "russian":
        files = _locale_files(("ru",))
        loader = _catalog
    elif kind == "other-script":
        files = _locale_files(("ar", "hi", "el", "he", "th", "uk", "fa", "bn"))
        loader = _catalog
    else:
        raise ValueError(kind)
    for path in files[: _MAX_FILES_PER_KIND * 3]:
        text = loader(path)
        if text and len(text) >= 300:
            yield path, text


def _cjk_tests(prefixes: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    root = _STDLIB / "test" / "cjkencodings"
    for prefix in prefixes:
        path = root / f"{prefix}-utf8.txt"
        text = _read(str(path))
        if text and len(text) >= 300:  # the same floor as every other source (chunks are ≥ 300)
            yield str(path), text


def _unique(sources: Iterator[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """The first path of every distinct content (the same catalogue is installed under two names)."""
    seen: set[str] = set()
    for path, text in sources:
        if text not in seen:
            seen.add(text)
            yield path, text


def _cut(rng: random.Random, text: str, lo: int = 300, hi: int = 6000) -> str:
    size = min(len(text), rng.randint(lo, hi))
    start = rng.randint(0, len(text) - size)
    return text[start : start + size]


def chunks(split: str, *, per_kind: int = 300, seed: int = 7) -> list[Chunk]:
    """``per_kind`` chunks of every kind from the files assigned to ``split`` (``fit`` or ``holdout``)."""
    rng = random.Random(f"{seed}:{split}")
    out: list[Chunk] = []
    pools: dict[str, list[tuple[str, str]]] = {}
    drawn: set[str] = set()
    for kind in KINDS:
        if kind in ("mixed", "numbered-code"):
            continue
        pool = [(p, t) for p, t in _unique(_sources(kind)) if _split(t) == split]
        if kind == "json":
            pool = [(p, t) for p, t in pool if _is_json(t)]
        pools[kind] = pool[:_MAX_FILES_PER_KIND]
        if not pool:
            continue
        for _ in range(per_kind):
            for _ in range(_REDRAWS):
                path, text = pool[rng.randrange(len(pool))]
                piece = _cut(rng, text)
                if piece not in drawn:
                    drawn.add(piece)
                    out.append(Chunk(kind, path, piece))
                    break
    parts = ("markdown", "code", "chinese", "prose", "json", "japanese", "russian")
    for _ in range(per_kind):
        pieces = []
        for kind in rng.sample(parts, 3):
            if pools.get(kind):
                path, text = pools[kind][rng.randrange(len(pools[kind]))]
                pieces.append(_cut(rng, text, 100, 2000))
        out.append(Chunk("mixed", "+".join(parts), "\n\n".join(pieces)))
    # Numbered code draws from its own generator, so adding it left every other kind's chunks as they were.
    numbered = random.Random(f"{seed}:{split}:numbered")
    for _ in range(per_kind if pools.get("code") else 0):
        path, text = pools["code"][numbered.randrange(len(pools["code"]))]
        out.append(Chunk("numbered-code", path, _numbered(numbered, text, _cut(numbered, text))))
    return out


def _numbered(rng: random.Random, text: str, piece: str) -> str:
    """``piece`` of ``text`` with each line prefixed by its line number in ``text``, as ``cat -n``
    (``%6d\t``) or Claude Code's Read tool (``%6d→``) return a file."""
    first = text.count("\n", 0, text.find(piece)) + 1
    arrow = rng.random() < 0.5
    return "\n".join(
        f"{first + i:6d}{'→' if arrow else chr(9)}{line}" for i, line in enumerate(piece.split("\n"))
    )


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
