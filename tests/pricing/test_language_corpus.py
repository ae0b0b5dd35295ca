"""The language corpus the rule is fitted and measured on: built from installed packages, split by source."""

from __future__ import annotations

import os

import pytest
from benchmarks import _languages


def _require_packages() -> None:
    for name in ("django", "babel", "faker"):
        try:
            __import__(name)
        except ImportError:
            if os.environ.get("CI") == "true":
                raise
            pytest.skip(f"{name} is not installed (pip install '.[bench]')")


class TestLanguageCorpus:
    def test_every_language_has_held_out_text_and_every_fitted_one_has_fit_text(self) -> None:
        _require_packages()
        holdout = {c.kind for c in _languages.chunks("holdout", per_language=2)}
        fit = {c.kind for c in _languages.chunks("fit", per_language=2)}
        assert holdout == set(_languages.LANGUAGES)
        assert fit == set(_languages.LANGUAGES) - _languages.UNSEEN

    def test_the_split_is_by_source_and_the_unseen_scripts_are_never_fitted(self) -> None:
        _require_packages()
        fit = _languages.chunks("fit", per_language=20)
        held = _languages.chunks("holdout", per_language=20)
        assert {c.source for c in held} <= _languages.HOLDOUT_SOURCES
        assert not {c.source for c in fit} & _languages.HOLDOUT_SOURCES
        assert not {c.kind for c in fit} & _languages.UNSEEN

    def test_the_build_is_deterministic(self) -> None:
        _require_packages()
        first = [(c.kind, c.source, c.text) for c in _languages.chunks("holdout", per_language=3)]
        assert first == [(c.kind, c.source, c.text) for c in _languages.chunks("holdout", per_language=3)]

    def test_every_language_is_in_one_report_group(self) -> None:
        grouped = [m for members in _languages.GROUPS.values() for m in members]
        assert sorted(grouped) == sorted(_languages.LANGUAGES)
