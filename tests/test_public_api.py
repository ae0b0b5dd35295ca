"""Every module's ``__all__`` is honest, and the package re-exports names that exist."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

import contextwindow


def _modules() -> list[str]:
    names = ["contextwindow"]
    for info in pkgutil.walk_packages(contextwindow.__path__, "contextwindow."):
        if info.name.endswith("__main__"):
            continue  # running it is its import
        names.append(info.name)
    return names


MODULES = _modules()


class TestAll:
    def test_every_module_is_found(self) -> None:
        assert {
            "contextwindow.content",
            "contextwindow.errors",
            "contextwindow.models",
            "contextwindow.formats.anthropic",
        } <= set(MODULES)

    @pytest.mark.parametrize("name", MODULES)
    def test_each_module_declares_all(self, name: str) -> None:
        module = importlib.import_module(name)
        assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"

    @pytest.mark.parametrize("name", MODULES)
    def test_every_name_in_all_exists(self, name: str) -> None:
        module = importlib.import_module(name)
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert not missing, f"{name}.__all__ names missing attributes: {missing}"

    @pytest.mark.parametrize("name", MODULES)
    def test_all_has_no_duplicates(self, name: str) -> None:
        exported = importlib.import_module(name).__all__
        assert len(exported) == len(set(exported))

    @pytest.mark.parametrize("name", MODULES)
    def test_every_public_definition_is_exported(self, name: str) -> None:
        """A public class or function defined in a module is in its ``__all__`` (nothing hidden by omission)."""
        module = importlib.import_module(name)
        defined = [
            attr
            for attr, value in vars(module).items()
            if not attr.startswith("_")
            and isinstance(value, type | types.FunctionType)
            and getattr(value, "__module__", None) == name
        ]
        assert not set(defined) - set(module.__all__)


class TestPackageExports:
    @pytest.mark.parametrize("name", contextwindow.__all__)
    def test_reexported_names_exist_and_come_from_a_submodule(self, name: str) -> None:
        value = getattr(contextwindow, name)
        if name == "__version__":
            assert isinstance(value, str)
            return
        owner = getattr(value, "__module__", None)
        if owner is None:  # a type alias (Block) has no module of its own
            return
        if owner.startswith("contextwindow."):
            assert name in importlib.import_module(owner).__all__, f"{name} is not in {owner}.__all__"

    def test_the_version_is_the_packages(self) -> None:
        assert contextwindow.__version__.count(".") == 2
