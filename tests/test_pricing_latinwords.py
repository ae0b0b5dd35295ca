"""The Latin word vocabulary: ASCII letter runs that are one token of a family count as one token."""

from __future__ import annotations

import pytest

from _shared import encoding
from contextwindow.pricing import _features
from contextwindow.pricing._features import FEATURE_NAMES, features


def _feature(vector: list[float], name: str) -> float:
    return vector[FEATURE_NAMES.index(name)]


class TestLatinVocabulary:
    @pytest.mark.parametrize("family", ["o200k", "cl100k"])
    def test_every_family_has_a_table_of_ascii_letter_runs(self, family: str) -> None:
        words = _features._latin_vocabulary(family)
        assert len(words) > 20_000
        assert all(w.isascii() and w.isalpha() for w in words)

    @pytest.mark.parametrize("family", ["o200k", "cl100k"])
    def test_common_words_and_identifiers_are_in_it_with_their_case(self, family: str) -> None:
        words = _features._latin_vocabulary(family)
        for word in (b"the", b"The", b"self", b"return", b"Error", b"function"):
            assert word in words, word

    def test_a_family_without_a_table_uses_o200k(self) -> None:
        assert _features._latin_vocabulary("claude") == _features._latin_vocabulary("o200k")

    @pytest.mark.parametrize(("family", "name"), [("o200k", "o200k_base"), ("cl100k", "cl100k_base")])
    def test_every_word_of_the_table_is_one_token_alone_or_after_a_space(
        self, family: str, name: str
    ) -> None:
        enc = encoding(name)
        words = sorted(_features._latin_vocabulary(family))
        for word in words[:: max(1, len(words) // 300)]:  # an even sample of the table
            text = word.decode()
            alone = len(enc.encode(text, disallowed_special=()))
            spaced = len(enc.encode(" " + text, disallowed_special=()))
            assert min(alone, spaced) == 1, text


class TestLatinFeatures:
    def test_common_words_count_as_vocabulary_words(self) -> None:
        _, vector = features("the cat sat on the mat")
        assert _feature(vector, "latin_vocab") + _feature(vector, "latin_other") == 6
        assert _feature(vector, "latin_other") == 0

    def test_a_rare_run_counts_as_another_word_with_its_letters(self) -> None:
        _, vector = features("xqzvbkwpfj")
        assert _feature(vector, "latin_vocab") == 0
        assert _feature(vector, "latin_other") == 1
        assert _feature(vector, "latin_other_letters") == 10

    def test_snake_case_and_digits_split_runs(self) -> None:
        _, vector = features("max_size = 42; utf8")
        assert _feature(vector, "latin_vocab") + _feature(vector, "latin_other") == 3  # max, size, utf

    def test_a_short_text_looks_up_every_run(self) -> None:
        _, vector = features("the xqzvbkwpfj")
        assert (_feature(vector, "latin_vocab"), _feature(vector, "latin_other")) == (1, 1)

    def test_a_text_of_rare_identifiers_costs_more_than_one_of_common_words(self) -> None:
        from contextwindow.pricing import Estimator

        est = Estimator("gpt-4o", exact=False)
        assert est.raw_text("qxzvj wkfpq zjxqv " * 20) > est.raw_text("the one and all " * 20)
