"""Canonical JSON's fast test vouches only for what its field-naming walks accept, and the walks still
name the bad field whenever the fast test says no."""

from __future__ import annotations

import math
from collections import OrderedDict
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextwindow.errors import InvalidInput
from contextwindow.limits import MAX_DOCUMENT_DEPTH, check_depth
from contextwindow.store._kinds import _check_json, _plain, canonical_json


class _Small(IntEnum):
    ONE = 1


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.just(_Small.ONE),
    st.just(b"bytes"),
)
_KEYS = st.one_of(st.text(max_size=3), st.integers(), st.none(), st.booleans())
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(_KEYS, inner, max_size=3),
        st.dictionaries(st.text(max_size=3), inner, max_size=3).map(OrderedDict),
    ),
    max_leaves=12,
)


def _walks_accept(value: Any) -> bool:
    try:
        check_depth(value, limit=MAX_DOCUMENT_DEPTH)
        _check_json(value, "")
    except InvalidInput:
        return False
    return True


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


class TestTheFastTest:
    @given(_VALUES)
    def test_what_it_vouches_for_the_walks_accept(self, value: Any) -> None:
        if _plain(value, MAX_DOCUMENT_DEPTH):
            assert _walks_accept(value)

    @pytest.mark.parametrize(
        "value",
        [
            {"t": math.nan},
            [1, math.inf],
            {1: "int key"},
            {"a": {None: 1}},
            {"a": [b"bytes"]},
            _nested(MAX_DOCUMENT_DEPTH + 1),
        ],
        ids=["nan", "infinity", "int-key", "none-key-nested", "bytes", "too-deep"],
    )
    def test_it_never_vouches_for_what_the_walks_refuse(self, value: Any) -> None:
        assert not _plain(value, MAX_DOCUMENT_DEPTH)
        with pytest.raises(InvalidInput):
            canonical_json(value)

    def test_the_deepest_allowed_nesting_passes_both(self) -> None:
        value = _nested(MAX_DOCUMENT_DEPTH)
        assert _plain(value, MAX_DOCUMENT_DEPTH)
        assert _walks_accept(value)

    def test_a_value_that_contains_itself_is_refused_not_recursed_into(self) -> None:
        looped: list[Any] = []
        looped.append(looped)
        with pytest.raises(InvalidInput, match="deeper"):
            canonical_json(looped)


class TestWhatTheWalksStillDo:
    def test_a_bad_field_is_named(self) -> None:
        with pytest.raises(InvalidInput) as caught:
            canonical_json({"a": [1, {"b": math.nan}]}, path="meta")
        assert caught.value.path == "meta.a[1].b"

    def test_a_mapping_or_a_subclass_the_fast_test_skips_is_still_accepted(self) -> None:
        value = OrderedDict(b=_Small.ONE, a=(1, 2))
        assert not _plain(value, MAX_DOCUMENT_DEPTH)
        assert canonical_json(value) == '{"a":[1,2],"b":1}'
