"""The error tree: the drawing in ``errors.py`` is the hierarchy, and every error carries its facts."""

from __future__ import annotations

import re

import pytest

from contextwindow import errors
from contextwindow.errors import (
    ContextOverflow,
    ContextWindowError,
    InvalidInput,
    OverBudget,
    ProviderError,
    SchemaTooNew,
    UnknownModel,
    UsageError,
)

_NODE = re.compile(r"^(?P<indent>[ │├└─]*)(?P<name>[A-Z][A-Za-z]+)\b")


def drawn_tree() -> dict[str, str | None]:
    """Class name → parent name, read from the ASCII tree in the module docstring."""
    doc = errors.__doc__ or ""
    block = doc.split("::", 1)[1].split("\n\n", 2)[1]
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        match = _NODE.match(line.strip("\n")[4:] if line.startswith("    ") else line)
        if not match:
            continue
        depth = len(match.group("indent"))
        while stack and stack[-1][0] >= depth:
            stack.pop()
        parents[match.group("name")] = stack[-1][1] if stack else None
        stack.append((depth, match.group("name")))
    return parents


class TestTheDrawnTree:
    def test_the_drawing_lists_every_error_in_the_module(self) -> None:
        assert set(drawn_tree()) == set(errors.__all__)

    def test_each_class_subclasses_its_parent_in_the_drawing(self) -> None:
        tree = drawn_tree()
        assert tree["ContextWindowError"] is None
        for name, parent in tree.items():
            cls = getattr(errors, name)
            if parent is None:
                assert cls.__bases__ == (Exception,)
                continue
            library_bases = [b for b in cls.__bases__ if issubclass(b, ContextWindowError)]
            assert library_bases == [getattr(errors, parent)], name

    def test_the_drawing_is_the_one_in_conventions(self) -> None:
        tree = drawn_tree()
        assert tree["InvalidInput"] == tree["UsageError"] == tree["StoreError"] == "ContextWindowError"
        assert tree["StoreBusy"] == tree["SchemaTooNew"] == "StoreError"
        assert tree["ContextOverflow"] == "ProviderError"


class TestErrorsCarryTheirFacts:
    def test_invalid_input_names_the_path(self) -> None:
        err = InvalidInput("not valid base64", path="messages[3].content[1].source.data")
        assert err.path == "messages[3].content[1].source.data"
        assert err.reason == "not valid base64"
        assert str(err) == "messages[3].content[1].source.data: not valid base64"
        assert isinstance(err, ValueError)

    def test_invalid_input_without_a_path(self) -> None:
        assert str(InvalidInput("bad")) == "bad"
        assert InvalidInput("bad").path is None

    def test_unknown_model_says_how_to_declare_one(self) -> None:
        err = UnknownModel("my-model", known=["gpt-4o", "gpt-4.1"])
        assert isinstance(err, UsageError) and isinstance(err, LookupError)
        assert "register(ModelProfile(" in str(err) and "profile=ModelProfile" in str(err)
        assert "gpt-4o" in str(err)
        assert err.name == "my-model"

    def test_context_overflow_keeps_the_providers_numbers_and_body(self) -> None:
        body = {"error": {"message": "prompt is too long: 213462 tokens > 200000 maximum"}}
        err = ContextOverflow(
            "prompt is too long",
            requested=213_462,
            limit=200_000,
            status=400,
            body=body,
            provider="anthropic",
        )
        assert isinstance(err, ProviderError)
        assert (err.requested, err.limit, err.kind, err.status, err.body) == (
            213_462,
            200_000,
            "tokens",
            400,
            body,
        )

    def test_provider_error_copies_headers(self) -> None:
        headers = {"retry-after": "3"}
        err = ProviderError("overloaded", status=529, headers=headers)
        headers["retry-after"] = "9"
        assert err.headers == {"retry-after": "3"}

    def test_over_budget_reports_required_and_budget(self) -> None:
        err = OverBudget("head does not fit", budget=100, required=150, makeup={"system": 150})
        assert (err.budget, err.required, err.makeup) == (100, 150, {"system": 150})
        assert "150 > budget 100" in str(err)

    def test_schema_too_new_says_what_to_do(self) -> None:
        err = SchemaTooNew(found=7, supported=3)
        assert (err.found, err.supported) == (7, 3) and "upgrade" in str(err)

    @pytest.mark.parametrize("name", errors.__all__)
    def test_every_error_is_a_context_window_error(self, name: str) -> None:
        assert issubclass(getattr(errors, name), ContextWindowError)
