"""Real tokenizers, offline only: tiktoken encodings and Hugging Face ``tokenizer.json`` files.

contextwindow may not fetch models or data when it runs.

- tiktoken downloads an encoding's BPE file the first time it is asked for one, so
  :func:`load_encoding` first looks for the file in tiktoken's own cache (``TIKTOKEN_CACHE_DIR``,
  then ``DATA_GYM_CACHE_DIR``, then ``<tmp>/data-gym-cache``), named by the SHA-1 of its public
  address as tiktoken names it, and loads it only when it is there (tiktoken then checks its
  SHA-256).
- A Hugging Face ``tokenizer.json`` (open-weight models such as DeepSeek's) is read from the path a
  profile names (``ModelProfile.tokenizer_file``), else from ``<dir>/<family>/tokenizer.json`` in
  :func:`tokenizer_dir` (``CONTEXTWINDOW_TOKENIZER_DIR``, else tiktoken's cache folder), with the
  ``tokenizers`` package.

Without the file (or the package) the answer is ``None`` and the caller falls back, saying so.
:func:`exact_source` names the exact counter a profile can have; :func:`missing_reason` says, when
there is none, how to get one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models import ModelProfile

__all__ = [
    "ENCODING_URLS",
    "FAMILY_ENCODINGS",
    "FILE_FAMILIES",
    "ExactTokenizer",
    "cache_dir",
    "exact_source",
    "load_encoding",
    "load_tokenizer_file",
    "missing_reason",
    "tokenizer_dir",
]

# The addresses tiktoken's own registry loads each encoding from (tiktoken_ext/openai_public.py).
ENCODING_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
FAMILY_ENCODINGS: dict[str, str] = {"o200k": "o200k_base", "cl100k": "cl100k_base"}
"""Tokenizer families tiktoken counts exactly, and the encoding of each."""
FILE_FAMILIES: frozenset[str] = frozenset({"deepseek"})
"""Families whose tokenizer is a public Hugging Face ``tokenizer.json``
(DeepSeek-V3: https://huggingface.co/deepseek-ai/DeepSeek-V3, MIT licence)."""


def cache_dir() -> Path:
    """Where tiktoken keeps its files, by its own rule."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        value = os.environ.get(variable)
        if value:
            return Path(value)
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def tokenizer_dir() -> Path:
    """Where ``<family>/tokenizer.json`` files are looked for: ``CONTEXTWINDOW_TOKENIZER_DIR``, else
    tiktoken's cache folder (so one folder can hold every offline tokenizer)."""
    value = os.environ.get("CONTEXTWINDOW_TOKENIZER_DIR")
    return Path(value) if value else cache_dir()


@cache
def load_encoding(name: str) -> Any | None:
    """The tiktoken encoding ``name`` if tiktoken is installed and its file is cached; never downloads."""
    url = ENCODING_URLS.get(name)
    if url is None:
        return None
    if not (cache_dir() / hashlib.sha1(url.encode()).hexdigest()).is_file():
        return None
    try:
        import tiktoken

        return tiktoken.get_encoding(name)
    except Exception:  # tiktoken missing, or a damaged cache file (its hash check fails)
        return None


@cache
def load_tokenizer_file(path: str) -> Any | None:
    """A Hugging Face ``tokenizers.Tokenizer`` read from ``path``; ``None`` when the file or the
    package is missing or the file is not a tokenizer (never downloads)."""
    if not Path(path).is_file():
        return None
    try:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(path)
    except Exception:  # tokenizers missing, or a file that is not a tokenizer.json
        return None


@dataclass(frozen=True, slots=True)
class ExactTokenizer:
    """A real tokenizer that counts a string's tokens exactly."""

    name: str
    """``tiktoken:o200k_base`` or ``tokenizer.json:<path>``."""
    count: Callable[[str], int]


def _file_for(profile: ModelProfile) -> str | None:
    if profile.tokenizer_file:
        return str(Path(profile.tokenizer_file).expanduser())
    if profile.tokenizer in FILE_FAMILIES:
        return str(tokenizer_dir() / profile.tokenizer / "tokenizer.json")
    return None


def _sanitized(text: str) -> str:
    # A lone surrogate is not UTF-8: Rust tokenizers refuse it, so it is counted as U+FFFD.
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


@cache  # one counter per encoding, so what counts with it is remembered across estimators
def _tiktoken_counter(encoding: Any) -> Callable[[str], int]:
    encode = encoding.encode_ordinary  # special-token text is counted as text

    def count(text: str) -> int:
        return len(encode(text)) if text else 0

    return count


def _file_counter(tokenizer: Any) -> Callable[[str], int]:
    def count(text: str) -> int:
        if not text:
            return 0
        try:
            return len(tokenizer.encode(text, add_special_tokens=False).ids)
        except (TypeError, ValueError, UnicodeError):
            return len(tokenizer.encode(_sanitized(text), add_special_tokens=False).ids)

    return count


def exact_source(profile: ModelProfile) -> ExactTokenizer | None:
    """The exact tokenizer of ``profile`` when it is available offline, else ``None``.

    A profile's own ``tokenizer_file`` wins; then tiktoken for the OpenAI families; then a family's
    ``tokenizer.json`` in :func:`tokenizer_dir`.
    """
    path = _file_for(profile)
    if profile.tokenizer_file and path is not None:
        return _file_source(path)
    encoding_name = FAMILY_ENCODINGS.get(profile.tokenizer)
    if encoding_name is not None:
        encoding = load_encoding(encoding_name)
        if encoding is None:
            return None
        return ExactTokenizer(name=f"tiktoken:{encoding_name}", count=_tiktoken_counter(encoding))
    return _file_source(path) if path is not None else None


@cache
def _file_source(path: str) -> ExactTokenizer | None:
    tokenizer = load_tokenizer_file(path)
    if tokenizer is None:
        return None
    return ExactTokenizer(name=f"tokenizer.json:{path}", count=_file_counter(tokenizer))


def missing_reason(profile: ModelProfile) -> str:
    """Why ``profile`` has no exact tokenizer here, and how to get one (for ``exact=True``)."""
    path = _file_for(profile)
    if profile.tokenizer_file:
        return (
            f"the tokenizer file {path} of {profile.name!r} could not be read: it must exist and be a "
            "Hugging Face tokenizer.json, and the tokenizers package must be installed "
            "(pip install 'contextwindow[tokenizers]')"
        )
    encoding_name = FAMILY_ENCODINGS.get(profile.tokenizer)
    if encoding_name is not None:
        return (
            f"exact counting of {profile.name!r} needs tiktoken ({encoding_name}) installed and its file "
            f"cached offline: pip install 'contextwindow[tiktoken]' and set TIKTOKEN_CACHE_DIR (now "
            f"{cache_dir()}); contextwindow never downloads it"
        )
    if path is not None:
        return (
            f"exact counting of {profile.name!r} needs its tokenizer.json at {path} (set "
            "CONTEXTWINDOW_TOKENIZER_DIR, or name the file with ModelProfile.tokenizer_file) and the "
            "tokenizers package (pip install 'contextwindow[tokenizers]'); contextwindow never downloads it"
        )
    return (
        f"the {profile.tokenizer!r} tokenizer of {profile.name!r} is not public: count with the fitted "
        "rule (exact=None or False), or point the profile at a tokenizer.json "
        "(profile.with_(tokenizer_file=...)) if you have one; the provider's own count is exact for "
        "hosted models (contextwindow count FILE --provider anthropic, or count_input_tokens of "
        "contextwindow.providers.anthropic.AnthropicProvider)"
    )
