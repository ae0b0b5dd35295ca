"""Real tokenizers load offline from tiktoken's cache and are never downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from _shared import TOKENIZERS, require
from contextwindow.pricing.tokenizers import cache_dir, load_encoding


@pytest.fixture(autouse=True)
def _fresh() -> None:
    load_encoding.cache_clear()
    yield
    load_encoding.cache_clear()


class TestLoadEncoding:
    def test_loads_from_the_shared_cache(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(require(TOKENIZERS, "the shared tokenizers")))
        encoding = load_encoding("o200k_base")
        assert encoding is not None and len(encoding.encode("hello world")) == 2

    def test_an_empty_cache_gives_none_without_touching_the_network(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
        import tiktoken.load

        def no_network(*args: object, **kwargs: object) -> bytes:
            raise AssertionError("tried to download")

        monkeypatch.setattr(tiktoken.load, "read_file", no_network)
        assert load_encoding("o200k_base") is None

    def test_the_cache_dir_follows_tiktokens_rule(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
        monkeypatch.setenv("DATA_GYM_CACHE_DIR", "/somewhere")
        assert cache_dir() == Path("/somewhere")

    def test_an_unknown_encoding_is_none(self) -> None:
        assert load_encoding("p50k_edit") is None
