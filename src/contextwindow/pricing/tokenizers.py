"""Real tokenizers, offline only: tiktoken encodings loaded from a local cache, never downloaded.

contextwindow may not fetch models or data when it runs. tiktoken downloads an encoding's BPE file
the first time it is asked for one, so :func:`load_encoding` first looks for the file in tiktoken's
own cache (``TIKTOKEN_CACHE_DIR``, then ``DATA_GYM_CACHE_DIR``, then ``<tmp>/data-gym-cache``), named
by the SHA-1 of its public address as tiktoken names it, and loads it only when it is there (tiktoken
then checks its SHA-256). Without it the answer is ``None`` and the caller falls back, saying so.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["ENCODING_URLS", "cache_dir", "load_encoding"]

# The addresses tiktoken's own registry loads each encoding from (tiktoken_ext/openai_public.py).
ENCODING_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}


def cache_dir() -> Path:
    """Where tiktoken keeps its files, by its own rule."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        value = os.environ.get(variable)
        if value:
            return Path(value)
    return Path(tempfile.gettempdir()) / "data-gym-cache"


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
