"""Byte classes and pairs: the counts the fit sees and the weighted sums the rule computes agree."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextwindow.pricing._bytepairs import (
    PAIR_FEATURES,
    SINGLE_FEATURES,
    Weights,
    class_codes,
    counts,
    pair_codes,
)
from contextwindow.pricing._features import FEATURE_NAMES, PIECES, features
from contextwindow.pricing._tables import table
from contextwindow.pricing._text import fitted_rule


def _counts(text: str) -> dict[str, int]:
    codes = class_codes(text.encode("utf-8"))
    singles, pairs = counts(codes, pair_codes(codes))
    return dict(zip((*SINGLE_FEATURES, *PAIR_FEATURES), (*singles, *pairs), strict=True))


class TestCounts:
    @pytest.mark.parametrize(
        ("text", "name", "expected"),
        [
            pytest.param("hello world", "word_runs", 2, id="two-words"),
            pytest.param("x", "word_runs", 1, id="a-run-at-the-very-start"),
            pytest.param("getValueOf", "camel", 2, id="camel-case"),
            pytest.param("0x1F 0xff", "hex_prefix", 2, id="hex-literals"),
            pytest.param("12 345 6", "digit_runs", 3, id="numbers"),
            pytest.param("a == b; c(d)", "punct_runs", 4, id="punctuation-runs"),
            pytest.param("a == b; c(d)", "space_punct", 1, id="space-before-an-operator"),
            pytest.param("def f():\n    pass\n  x", "indented_lines", 2, id="indentation"),
            pytest.param("DTD 文件 Окно", "space_nonascii", 2, id="space-before-non-ascii"),
            pytest.param('{"a": "b"}', "quote", 4, id="quotes"),
            pytest.param('{"a": "b"}', "punct", 7, id="punct-includes-quotes"),
            pytest.param("a\\nb\\x00", "backslash", 2, id="backslashes"),
            pytest.param("tab\there\x07", "tab", 2, id="control-characters"),
            pytest.param("line\r\nnext\n", "newline", 3, id="newlines"),
            pytest.param("xXx", "lower", 2, id="x-is-lowercase"),
        ],
    )
    def test_each_feature_counts_what_it_names(self, text: str, name: str, expected: int) -> None:
        assert _counts(text)[name] == expected

    def test_pair_codes_hold_the_previous_class_in_the_high_nibble(self) -> None:
        codes = class_codes(b"ab")
        pairs = pair_codes(codes)
        assert len(pairs) == 2
        assert pairs[0] == codes[0]  # the first byte's previous is class 0
        assert pairs[1] == (codes[0] << 4) | codes[1]


def _text_strategy() -> st.SearchStrategy[str]:
    alphabet = st.sampled_from([*'abcxyzXYZ019 \n\t"\\(){}=;:,.', "é", "文", "Ж", "😀"])
    return st.lists(alphabet, min_size=1, max_size=3000).map("".join)


class TestWeightedSums:
    @settings(max_examples=60, deadline=None)
    @given(
        text=_text_strategy(),
        single=st.lists(st.floats(0, 3), min_size=len(SINGLE_FEATURES), max_size=len(SINGLE_FEATURES)),
        pair=st.lists(st.floats(-1, 3), min_size=len(PAIR_FEATURES), max_size=len(PAIR_FEATURES)),
    )
    def test_the_weighted_sum_equals_the_dot_product_of_the_counts(
        self, text: str, single: list[float], pair: list[float]
    ) -> None:
        codes = class_codes(text.encode("utf-8"))
        singles, pairs = counts(codes, pair_codes(codes))
        exact_s = sum(c * w for c, w in zip(singles, single, strict=True))
        exact_p = sum(c * w for c, w in zip(pairs, pair, strict=True))
        weights = Weights.of(single, pair)
        tolerance = 1e-3 * (len(codes) + 1) * (max(map(abs, (*single, *pair)), default=0) + 1e-9)
        for s_scale, p_scale in ((1.0, 1.0), (1.3, 0.7)):
            got = weights.total(codes, s_scale, p_scale)
            assert got == pytest.approx(exact_s * s_scale + exact_p * p_scale, abs=tolerance)

    @pytest.mark.parametrize("family", ["o200k", "cl100k", "claude"])
    def test_the_rule_equals_the_fitted_dot_product_of_the_features(self, family: str) -> None:
        # The rule never builds the feature vector; it must still price exactly what was fitted.
        rng = random.Random(7)
        base = "o200k" if family == "claude" else family
        ratio = table("coefficients")["claude_ratio"]["claude"] if family == "claude" else 1.0
        rule = fitted_rule(family)  # type: ignore[arg-type]
        words = ["def", "value", "0x1F", "文件", "Окно", '"key":', "\\n", "  ", "\n", "(", "GetX", "12345"]
        for _ in range(40):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 900)))
            piece, vector = features(text, base)
            coefficients = table("coefficients")["text"][base][PIECES[piece]]
            dot = sum(c * f for c, f in zip(coefficients, vector, strict=True)) * ratio
            assert rule(text) == pytest.approx(max(dot, ratio), rel=2e-3, abs=0.05)
            assert len(vector) == len(FEATURE_NAMES)
