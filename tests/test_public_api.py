"""The public API stays curated and honest.

The top level holds the few names an agent author touches and loads its heavy layers on first use.
Every ``__all__`` names public things that exist; every exported class and function is documented,
and on a layer's surface (the top level, its modules, every package) constants and type aliases are
too; a package exports only what its own modules define.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from benchmarks.import_time import HEAVY  # one list: what import contextwindow must not load

import contextwindow

TOP_LEVEL_LIMIT = 46


@cache
def _modules() -> tuple[str, ...]:
    """Every module of the package; walking it imports every package, so it runs in a test, not at collection."""
    names = ["contextwindow"]
    for info in pkgutil.walk_packages(contextwindow.__path__, "contextwindow."):
        if info.name.endswith("__main__"):
            continue  # running it is its import
        names.append(info.name)
    return tuple(names)


def _no_failures(failures: list[str], what: str) -> None:
    """One test checks every name: it fails once, listing each name that breaks the rule."""
    assert not failures, f"{len(failures)} {what}:\n" + "\n".join(failures)


@cache
def _tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8"))


def _is_package(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    return spec is not None and spec.submodule_search_locations is not None


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # the parent is a module, not a package
        return False


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if node.level == 0:
        assert node.module is not None
        return node.module
    package = module if _is_package(module) else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        package = package.rpartition(".")[0]
    return f"{package}.{node.module}" if node.module else package


def _top_level_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, ``if TYPE_CHECKING:`` bodies left out (nothing runs there)."""
    return [
        stmt
        for stmt in tree.body
        if not (
            isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING"
        )
    ]


def _definition(module: str, name: str) -> tuple[str, ast.stmt, str | None]:
    """Where ``module``'s ``name`` is defined, following re-exports: (module, statement, docstring)."""
    body = _top_level_statements(_tree(module))
    for at, stmt in enumerate(body):
        if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
            return module, stmt, ast.get_docstring(stmt)
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            # An attribute docstring: a string literal right after the assignment.
            after = body[at + 1] if at + 1 < len(body) else None
            doc = None
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                doc = after.value.value if isinstance(after.value.value, str) else None
            return module, stmt, doc
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    source = _absolute(module, stmt)
                    if not source.startswith("contextwindow"):
                        return source, stmt, None
                    if _is_module(f"{source}.{alias.name}"):  # a submodule, documented by its docstring
                        submodule = f"{source}.{alias.name}"
                        return submodule, stmt, ast.get_docstring(_tree(submodule))
                    return _definition(source, alias.name)
    lazy = getattr(importlib.import_module(module), "_LAZY", {})  # a package that loads names on first use
    if name in lazy:
        return _definition(lazy[name], name)
    raise AssertionError(f"{module} exports {name} but neither defines nor imports it")


def _surface(module: str) -> bool:
    """A module a user reads: the top level, its modules, and every package (a layer or part of one)."""
    return module.count(".") <= 1 or _is_package(module)


@cache
def _exports() -> tuple[tuple[str, str], ...]:
    """Each (module, name) of every module's ``__all__``."""
    return tuple(
        (module, name)
        for module in _modules()
        for name in getattr(importlib.import_module(module), "__all__", ())
    )


def _definition_or_failure(module: str, name: str) -> tuple[str, ast.stmt, str | None] | str:
    """``_definition``, or why it could not be found (so that one test reports every such name)."""
    try:
        return _definition(module, name)
    except AssertionError as error:
        return str(error)


class TestTopLevel:
    def test_holds_at_most_45_names(self) -> None:
        assert len(contextwindow.__all__) <= TOP_LEVEL_LIMIT, sorted(contextwindow.__all__)

    def test_keeps_what_an_engine_user_needs(self) -> None:
        assert {"Engine", "EngineSettings", "Summarizer", "ToolOutcome", "open_store", "Policy"} <= set(
            contextwindow.__all__
        )

    def test_leaves_internals_to_their_layer(self) -> None:
        internals = {
            "AnchorBook",
            "anchored_estimate",
            "MemorySlot",
            "CallRecord",
            "summarize",
            "LocalServer",
        }
        assert not internals & set(contextwindow.__all__)

    def test_each_name_loaded_on_first_use_is_the_one_its_layer_defines(self) -> None:
        failures = [
            f"contextwindow.{name} is not {layer}.{name}"
            for name, layer in sorted(contextwindow._LAZY.items())
            if getattr(contextwindow, name) is not getattr(importlib.import_module(layer), name, None)
        ]
        _no_failures(failures, "names loaded on first use differ from their layer's")

    def test_every_name_loaded_on_first_use_is_public(self) -> None:
        assert set(contextwindow._LAZY) <= set(contextwindow.__all__)

    def test_type_checkers_see_every_name_loaded_on_first_use(self) -> None:
        """The ``if TYPE_CHECKING:`` imports name exactly the lazily loaded names, from their layer."""
        seen: dict[str, str] = {}
        for stmt in _tree("contextwindow").body:
            if (
                isinstance(stmt, ast.If)
                and isinstance(stmt.test, ast.Name)
                and stmt.test.id == "TYPE_CHECKING"
            ):
                for node in stmt.body:
                    assert isinstance(node, ast.ImportFrom)
                    for alias in node.names:
                        seen[alias.asname or alias.name] = _absolute("contextwindow", node)
        assert seen == contextwindow._LAZY

    def test_an_unknown_name_is_an_attribute_error(self) -> None:
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = contextwindow.no_such_name  # type: ignore[attr-defined]

    def test_dir_lists_every_public_name(self) -> None:
        assert set(contextwindow.__all__) <= set(dir(contextwindow))

    def test_the_version_is_the_packages(self) -> None:
        assert contextwindow.__version__.count(".") == 2


class TestAll:
    def test_every_module_is_found(self) -> None:
        assert {
            "contextwindow.content",
            "contextwindow.errors",
            "contextwindow.models",
            "contextwindow.formats.anthropic",
            "contextwindow.testing",
            "contextwindow.replay",
        } <= set(_modules())

    def test_each_module_declares_all_without_duplicates(self) -> None:
        failures = []
        for module in _modules():
            exported = getattr(importlib.import_module(module), "__all__", None)
            if not isinstance(exported, list):
                failures.append(f"{module} has no __all__ list")
            elif len(exported) != len(set(exported)):
                twice = sorted({name for name in exported if exported.count(name) > 1})
                failures.append(f"{module}.__all__ names {twice} more than once")
        _no_failures(failures, "modules without a proper __all__")

    def test_every_exported_name_exists(self) -> None:
        failures = [
            f"{module}.__all__ names {name}, which {module} does not have"
            for module, name in _exports()
            if not hasattr(importlib.import_module(module), name)
        ]
        _no_failures(failures, "exported names that do not exist")

    def test_nothing_private_is_exported(self) -> None:
        failures = [f"{module}.__all__ names {name}" for module, name in _exports() if name.startswith("_")]
        _no_failures(failures, "private names exported")

    def test_every_exported_class_and_function_is_documented(self) -> None:
        failures = []
        for module, name in _exports():
            found = _definition_or_failure(module, name)
            if isinstance(found, str):
                failures.append(found)
                continue
            _, stmt, doc = found
            if isinstance(stmt, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and not (
                doc and doc.strip()
            ):
                failures.append(f"{module}.{name} has no docstring")
        _no_failures(failures, "exported classes and functions without a docstring")

    def test_every_name_a_layer_exports_is_documented(self) -> None:
        """On a layer's surface constants and type aliases are documented too, by a string right after them."""
        failures = []
        for module, name in _exports():
            if not _surface(module):
                continue
            found = _definition_or_failure(module, name)
            if isinstance(found, str):
                failures.append(found)
                continue
            where, _, doc = found
            if not (doc and doc.strip()):
                failures.append(f"{module}.{name} (defined in {where}) has no docstring")
        _no_failures(failures, "names on a layer's surface without a docstring")

    def test_a_package_exports_only_what_its_own_modules_define(self) -> None:
        failures = []
        for module, name in _exports():
            if not _is_package(module):
                continue
            found = _definition_or_failure(module, name)
            if isinstance(found, str):
                failures.append(found)
                continue
            where, _, _ = found
            if not (where == module or where.startswith(f"{module}.")):
                failures.append(f"{module}.__all__ names {name}, defined in {where}")
        _no_failures(failures, "names a package exports from outside itself")


class TestCheapImport:
    def _loaded_by(self, statement: str) -> set[str]:
        probe = f"import sys\n{statement}\nprint('\\n'.join(sys.modules))"
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        return set(out.stdout.split())

    def test_importing_the_package_loads_no_heavy_module(self) -> None:
        loaded = self._loaded_by("import contextwindow")
        assert not {m for m in loaded if any(m == h or m.startswith(f"{h}.") for h in HEAVY)}

    def test_importing_the_package_builds_no_type_adapter(self) -> None:
        probe = (
            "import pydantic\n"
            "built = []\n"
            "original = pydantic.TypeAdapter.__init__\n"
            "def counting(self, *args, **kwargs):\n"
            "    built.append(args[0] if args else kwargs)\n"
            "    original(self, *args, **kwargs)\n"
            "pydantic.TypeAdapter.__init__ = counting\n"
            "import contextwindow\n"
            "print(len(built))\n"
        )
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == "0"

    def test_the_providers_package_does_not_load_the_local_provider(self) -> None:
        loaded = self._loaded_by("import contextwindow.providers")
        assert "contextwindow.testing" not in loaded
        assert "http.server" not in loaded

    def test_a_name_loaded_on_first_use_loads_its_layer(self) -> None:
        """The probe sees a layer load: the test above is not passing because nothing is watched."""
        loaded = self._loaded_by("import contextwindow\ncontextwindow.open_store")
        assert "contextwindow.store" in loaded
