"""Text in the world's major languages and scripts, from what installed PyPI packages ship.

Nothing is downloaded or synthesised at fit time: the builder reads packages installed by the
``bench`` extra (``pip install '.[bench]'``):

- **Django** (``django``): gettext catalogues (``.mo``) of the framework and its eleven contrib
  apps in about a hundred languages; the English of every catalogue is its message ids;
- **Babel** (``babel``): the Unicode CLDR data of every locale: the names of languages,
  territories, scripts, currencies and units in the locale's own language;
- **Faker** (``faker``): per-locale word lists (``faker/providers/lorem/<locale>``), drawn into
  sentences with a fixed seed.

**Split by source**: a source is one catalogue or one data set (``django:admin``,
``babel:territories``, ``faker:lorem``), the same for every language; :data:`HOLDOUT_SOURCES` are
never read for fitting. So the held-out figures are on text of sources the rule never saw, in
every language. Chunks are cut as ``_corpus`` cuts them (300–6,000 characters, seeded).
"""

from __future__ import annotations

import gettext
import hashlib
import random
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from benchmarks._corpus import Chunk

__all__ = ["GROUPS", "HOLDOUT_SOURCES", "LANGUAGES", "UNSEEN", "chunks", "fingerprint", "group_of"]

LANGUAGES: dict[str, tuple[str, ...]] = {
    # Latin script, English and European languages with diacritics
    "english": ("en",),
    "french": ("fr",),
    "german": ("de",),
    "spanish": ("es",),
    "italian": ("it",),
    "portuguese": ("pt_BR", "pt"),
    "dutch": ("nl",),
    "polish": ("pl",),
    "czech": ("cs",),
    "swedish": ("sv",),
    "romanian": ("ro",),
    "hungarian": ("hu",),
    "turkish": ("tr",),
    "vietnamese": ("vi",),
    "indonesian": ("id",),
    # Greek and Cyrillic
    "greek": ("el",),
    "russian": ("ru",),
    "ukrainian": ("uk",),
    "bulgarian": ("bg",),
    # other alphabets and abjads
    "armenian": ("hy",),
    "georgian": ("ka",),
    "arabic": ("ar",),
    "hebrew": ("he",),
    "persian": ("fa",),
    # Brahmic scripts
    "hindi": ("hi",),
    "bengali": ("bn",),
    "tamil": ("ta",),
    "telugu": ("te",),
    "thai": ("th",),
    "khmer": ("km",),
    # CJK
    "chinese": ("zh_Hans", "zh_CN"),
    "japanese": ("ja",),
    "korean": ("ko",),
    # never fitted: scripts the rule has not seen (held out in every source)
    "malayalam": ("ml",),
    "kannada": ("kn",),
    "burmese": ("my",),
    "punjabi": ("pa",),
}
UNSEEN = frozenset({"malayalam", "kannada", "burmese", "punjabi"})
"""Languages whose scripts are in no fit source: how the rule prices a script it has never seen."""
GROUPS: dict[str, tuple[str, ...]] = {
    "english": ("english",),
    "latin-european": (
        "french", "german", "spanish", "italian", "portuguese", "dutch", "polish", "czech",
        "swedish", "romanian", "hungarian", "turkish",
    ),
    "latin-other": ("vietnamese", "indonesian"),
    "greek": ("greek",),
    "cyrillic": ("russian", "ukrainian", "bulgarian"),
    "cjk": ("chinese", "japanese", "korean"),
    "other-scripts": (
        "armenian", "georgian", "arabic", "hebrew", "persian", "hindi", "bengali", "tamil", "telugu",
        "thai", "khmer",
    ),
    "unseen-scripts": tuple(sorted(UNSEEN)),
}  # fmt: skip
"""Report groups; the accuracy targets name English, the Latin-script European languages, CJK and
Cyrillic (≤ 12% p95) and every script (≤ 25%)."""

DJANGO_APPS = (
    "conf", "admin", "admindocs", "auth", "contenttypes", "flatpages", "gis", "humanize", "postgres",
    "redirects", "sessions", "sites",
)  # fmt: skip
HOLDOUT_SOURCES = frozenset({"django:admin", "django:auth", "babel:territories"})
"""Sources never read for fitting: the two largest contrib apps' catalogues and the territory names
of CLDR. The fit has the framework's own catalogue (validators, dates, sentences), the other
apps, the language, script, currency and unit names, and the word lists."""
_BABEL_PARTS = ("languages", "territories", "scripts", "currency_names", "unit_display_names")


@dataclass(frozen=True)
class _Source:
    name: str
    language: str
    text: str


def group_of(language: str) -> str:
    for group, members in GROUPS.items():
        if language in members:
            return group
    raise KeyError(language)


def _catalog(path: Path, *, ids: bool) -> str | None:
    try:
        with open(path, "rb") as handle:
            catalog = gettext.GNUTranslations(handle)._catalog  # type: ignore[attr-defined]
    except Exception:
        return None
    pieces: list[str] = []
    for key, value in catalog.items():
        if not key or not isinstance(value, str):
            continue
        text = key[1] if isinstance(key, tuple) else key  # plural forms are (msgid, n)
        if ids:
            if isinstance(key, tuple) and key[1] != 0:
                continue
            pieces.append(str(text).split("\x00")[0])
        else:
            pieces.append(value)
    return "\n".join(dict.fromkeys(pieces)) or None


def _django() -> Iterator[_Source]:
    try:
        import django
    except ImportError:
        return
    root = Path(django.__file__).parent
    for app in DJANGO_APPS:
        base = root / "conf" / "locale" if app == "conf" else root / "contrib" / app / "locale"
        english_done = False
        for language, codes in LANGUAGES.items():
            for code in codes:
                path = base / code / "LC_MESSAGES" / "django.mo"
                if language == "english" or not path.is_file():
                    continue
                text = _catalog(path, ids=False)
                if text:
                    yield _Source(f"django:{app}", language, text)
                    if not english_done:  # the English of the catalogue: its message ids
                        ids = _catalog(path, ids=True)
                        if ids:
                            yield _Source(f"django:{app}", "english", ids)
                        english_done = True
                    break


def _babel() -> Iterator[_Source]:
    try:
        from babel.localedata import load
    except ImportError:
        return
    for language, codes in LANGUAGES.items():
        code = "en" if language == "english" else codes[-1].replace("zh_CN", "zh_Hans")
        try:
            data = load(code)
        except Exception:
            continue
        for part in _BABEL_PARTS:
            values = data.get(part)
            if not values:
                continue
            strings = [v for v in _strings(values) if v]
            if strings:
                yield _Source(f"babel:{part}", language, "\n".join(dict.fromkeys(strings)))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


_FAKER_LOCALES = {
    "english": "en_US", "french": "fr_FR", "german": "de_DE", "spanish": "es_ES", "italian": "it_IT",
    "dutch": "nl_NL", "polish": "pl_PL", "czech": "cs_CZ", "vietnamese": "vi_VN", "greek": "el_GR",
    "russian": "ru_RU", "ukrainian": "uk_UA", "armenian": "hy_AM", "arabic": "ar_AA", "hebrew": "he_IL",
    "persian": "fa_IR", "bengali": "bn_BD", "thai": "th_TH", "chinese": "zh_CN", "japanese": "ja_JP",
}  # fmt: skip


def _faker() -> Iterator[_Source]:
    try:
        from faker import Faker
    except ImportError:
        return
    for language, locale in _FAKER_LOCALES.items():
        fake = Faker(locale)
        fake.seed_instance(1234)
        text = "\n".join(fake.paragraph(nb_sentences=8) for _ in range(60))
        yield _Source("faker:lorem", language, text)


@cache
def _sources() -> tuple[_Source, ...]:
    return (*_django(), *_babel(), *_faker())


def chunks(split: str, *, per_language: int = 60, seed: int = 7) -> list[Chunk]:
    """``per_language`` chunks of every language from the sources of ``split`` (``fit``: every
    source but :data:`HOLDOUT_SOURCES`, and no language of :data:`UNSEEN`; ``holdout``: only those
    sources, every language). ``Chunk.kind`` is the language and
    ``Chunk.source`` the source's name."""
    rng = random.Random(f"{seed}:{split}:languages")
    out: list[Chunk] = []
    for language in LANGUAGES:
        if split == "fit" and language in UNSEEN:
            continue
        pool = [
            s
            for s in _sources()
            if s.language == language and (s.name in HOLDOUT_SOURCES) == (split == "holdout")
        ]
        if not pool:
            continue
        drawn: set[str] = set()
        for _ in range(per_language):
            for _ in range(20):
                source = pool[rng.randrange(len(pool))]
                size = min(len(source.text), rng.randint(300, 6000))
                start = rng.randint(0, len(source.text) - size)
                piece = source.text[start : start + size]
                if piece not in drawn:
                    drawn.add(piece)
                    out.append(Chunk(language, source.name, piece))
                    break
    return out


def fingerprint() -> str:
    """A digest of every source's text: two machines with the same packages build the same corpus."""
    digest = hashlib.sha256()
    for s in _sources():
        digest.update(f"{s.name}\0{s.language}\0".encode())
        digest.update(s.text.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]
