"""One definition of each public name: two packages may export the same name only when it is the same
object (a package re-exporting its module's name), never two different things. Modules of one package
may (``formats.anthropic.render_request`` and ``formats.openai.render_request`` are one interface)."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections import defaultdict
from functools import cache

import contextwindow


def public_modules() -> list[str]:
    """``contextwindow`` and every module under it with no private part in its dotted name."""
    names = ["contextwindow"]
    for info in pkgutil.walk_packages(contextwindow.__path__, "contextwindow."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


@cache
def exports() -> dict[str, dict[int, list[str]]]:
    """Each exported name: the distinct objects exported under it, each with the modules exporting it."""
    found: dict[str, dict[int, list[str]]] = defaultdict(lambda: defaultdict(list))
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            found[name][id(getattr(module, name))].append(module_name)
    return found


def package_of(module: str) -> str:
    """The package a public module belongs to: itself for a package, else its parent."""
    spec = importlib.util.find_spec(module)
    assert spec is not None
    return module if spec.submodule_search_locations is not None else module.rpartition(".")[0]


def clashes(found: dict[str, dict[int, list[str]]]) -> dict[str, list[list[str]]]:
    """The names exported as different objects by different packages."""
    out = {}
    for name, objects in found.items():
        packages = [{package_of(m) for m in modules} for modules in objects.values()]
        if len(objects) > 1 and len(set.union(*packages)) > 1:
            out[name] = sorted(sorted(modules) for modules in objects.values())
    return out


class TestOneDefinitionOfEachPublicName:
    def test_no_two_packages_export_different_objects_under_one_name(self) -> None:
        assert clashes(exports()) == {}

    def test_the_walk_sees_the_layers_and_their_re_exports(self) -> None:
        found = exports()
        assert [set(m) >= {"contextwindow", "contextwindow.content"} for m in found["Message"].values()] == [
            True
        ]
        assert "contextwindow.testing" in next(iter(found["FunctionProvider"].values()))

    def test_two_objects_under_one_name_is_a_clash(self) -> None:
        found = {
            "Reply": {
                1: ["contextwindow.testing"],
                2: ["contextwindow.guard.replies", "contextwindow.guard"],
            },
            "Message": {3: ["contextwindow", "contextwindow.content"]},
            "render_request": {4: ["contextwindow.formats.anthropic"], 5: ["contextwindow.formats.openai"]},
        }
        assert clashes(found) == {
            "Reply": [["contextwindow.guard", "contextwindow.guard.replies"], ["contextwindow.testing"]]
        }
