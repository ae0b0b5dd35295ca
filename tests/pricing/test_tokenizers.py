"""Real tokenizers load offline (tiktoken's cache, Hugging Face tokenizer.json files), never downloaded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from _shared import TOKENIZERS, require
from contextwindow.errors import InvalidInput, UsageError
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator
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


DEEPSEEK_TEXT = "DeepSeek counts this exactly: «très bien», Привет, 世界! def f(x): return x ** 2\n" * 4


def _deepseek_truth(text: str) -> int:
    from tokenizers import Tokenizer

    path = require(TOKENIZERS / "deepseek" / "tokenizer.json", "DeepSeek's tokenizer.json")
    return len(Tokenizer.from_file(str(path)).encode(text, add_special_tokens=False).ids)


class TestTokenizerFiles:
    def test_deepseek_counts_with_its_tokenizer_json_by_default(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("CONTEXTWINDOW_TOKENIZER_DIR", str(require(TOKENIZERS, "the shared tokenizers")))
        est = Estimator("deepseek-chat")
        assert est.exact
        assert est.text(DEEPSEEK_TEXT) == _deepseek_truth(DEEPSEEK_TEXT)
        assert est.text("lone \udcff surrogate") >= 3  # counted as U+FFFD, not raised

    def test_a_profile_can_name_a_tokenizer_json(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        source = require(TOKENIZERS / "deepseek" / "tokenizer.json", "DeepSeek's tokenizer.json")
        monkeypatch.setenv("CONTEXTWINDOW_TOKENIZER_DIR", str(tmp_path))  # not found by family
        mine = tmp_path / "my-model.json"
        shutil.copy(source, mine)
        profile = get_profile("gemini-2.5-pro").with_(name="my-open-model", tokenizer_file=str(mine))
        assert Estimator(profile, exact=True).text(DEEPSEEK_TEXT) == _deepseek_truth(DEEPSEEK_TEXT)
        assert not Estimator("gemini-2.5-pro").exact

    def test_without_the_file_none_is_the_rule_and_true_says_where_to_put_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("CONTEXTWINDOW_TOKENIZER_DIR", str(tmp_path))
        assert not Estimator("deepseek-chat").exact
        with pytest.raises(UsageError, match="CONTEXTWINDOW_TOKENIZER_DIR") as err:
            Estimator("deepseek-chat", exact=True)
        assert str(tmp_path / "deepseek" / "tokenizer.json") in str(err.value)

    def test_a_damaged_file_is_refused_with_a_clear_error(self, tmp_path: Path) -> None:
        broken = tmp_path / "tokenizer.json"
        broken.write_text('{"not": "a tokenizer"}')
        profile = get_profile("deepseek-chat").with_(tokenizer_file=str(broken))
        with pytest.raises(UsageError, match="could not be read"):
            Estimator(profile, exact=True)
        assert not Estimator(profile).exact

    def test_an_empty_path_is_bad_input(self) -> None:
        with pytest.raises(InvalidInput):
            get_profile("deepseek-chat").with_(tokenizer_file="")
