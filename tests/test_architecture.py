"""The shape of the source tree: modules that are concepts, short functions, layers without cycles.

These are the limits ``docs/concepts.md`` ("How the code is laid out") promises a maintainer: no module
over 600 lines, no function over 60 lines and none with more than six positional parameters in the
packages that hold the decisions (``engine``, ``compile``, ``guard``), no import cycle, and no private
module (``_name.py``) imported from outside its own package. Imports under ``TYPE_CHECKING`` are not
imports at run time and do not count; imports inside functions do.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "contextwindow"
PACKAGE = "contextwindow"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_POSITIONAL = 6
DECISION_PACKAGES = ("engine", "compile", "guard")


def _modules(root: Path = SRC) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _positional(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = [*node.args.posonlyargs, *node.args.args]
    if args and args[0].arg in ("self", "cls"):
        args = args[1:]
    return len(args)


def _in_decision_package(module: str) -> bool:
    return any(module == f"{PACKAGE}.{p}" or module.startswith(f"{PACKAGE}.{p}.") for p in DECISION_PACKAGES)


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of import nodes under ``if TYPE_CHECKING:``."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                for sub in ast.walk(inner):
                    skipped.add(id(sub))
    return skipped


def _package_of(module: str, modules: dict[str, Path]) -> str:
    return module if modules[module].name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str, modules: dict[str, Path]) -> Iterator[str]:
    """The contextwindow modules ``module`` imports at run time (at the top or inside functions)."""
    tree = ast.parse(modules[module].read_text(encoding="utf-8"))
    skipped = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module, modules).split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            submodules = [f"{origin}.{alias.name}" for alias in node.names]
            # ``from . import sub`` needs the submodules only; a name defined in the package needs it.
            targets = submodules if all(s in modules for s in submodules) else [origin, *submodules]
        for target in targets:
            if not target.startswith(PACKAGE):
                continue
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != module:
                yield target


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    return {m: set(_imports(m, modules)) for m in modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


class TestModulesAreConcepts:
    def test_the_source_tree_is_read(self) -> None:
        assert f"{PACKAGE}.engine" in _modules(), f"no source tree at {SRC}"

    def test_no_module_is_over_600_lines(self) -> None:
        long = {
            m: n
            for m, p in _modules().items()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
        }
        assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


class TestFunctionsAreShort:
    def test_no_function_in_the_decision_packages_is_over_60_lines(self) -> None:
        long = {}
        for module, path in _modules().items():
            if not _in_decision_package(module):
                continue
            for node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{module}:{node.lineno} {node.name}"] = lines
        assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"

    def test_no_function_in_the_decision_packages_takes_more_than_6_positional_parameters(self) -> None:
        wide = {}
        for module, path in _modules().items():
            if not _in_decision_package(module):
                continue
            for node in _functions(ast.parse(path.read_text(encoding="utf-8"))):
                if (n := _positional(node)) > MAX_POSITIONAL:
                    wide[f"{module}:{node.lineno} {node.name}"] = n
        assert not wide, f"functions with more than {MAX_POSITIONAL} positional parameters: {wide}"


class TestLayers:
    def test_no_import_cycle(self) -> None:
        cycles = _cycles(_graph(_modules()))
        assert not cycles, f"import cycles: {cycles}"

    def test_no_private_module_is_imported_from_another_package(self) -> None:
        modules = _modules()
        crossings = []
        for module, targets in _graph(modules).items():
            own = _package_of(module, modules)
            for target in targets:
                name = target.rpartition(".")[2]
                if not name.startswith("_") or modules[target].name == "__init__.py":
                    continue
                home = target.rpartition(".")[0]
                if own != home and not own.startswith(home + "."):
                    crossings.append(f"{module} -> {target}")
        assert not crossings, f"private modules imported from another package: {sorted(crossings)}"


class TestTheChecksCanFail:
    """Each check above finds what it is for, on a small tree made for the purpose."""

    def test_a_cycle_through_a_function_level_import_is_found(self, tmp_path: Path) -> None:
        pkg = tmp_path / PACKAGE
        (pkg / "a").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "a" / "__init__.py").write_text("")
        (pkg / "a" / "one.py").write_text("from . import two\n")
        (pkg / "a" / "two.py").write_text("def f():\n    from .one import x\n")
        (pkg / "b.py").write_text(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import one\n"
        )
        (pkg / "a" / "three.py").write_text("from . import one\n")
        modules = _modules(pkg)
        assert _cycles(_graph(modules)) == [[f"{PACKAGE}.a.one", f"{PACKAGE}.a.two"]]

    def test_a_name_from_a_package_that_imports_its_modules_is_a_cycle(self, tmp_path: Path) -> None:
        pkg = tmp_path / PACKAGE
        pkg.mkdir()
        (pkg / "__init__.py").write_text("from . import cmd\napp = object()\n")
        (pkg / "cmd.py").write_text("from . import app\n")
        assert _cycles(_graph(_modules(pkg))) == [[PACKAGE, f"{PACKAGE}.cmd"]]

    def test_an_import_under_type_checking_is_not_a_cycle(self, tmp_path: Path) -> None:
        pkg = tmp_path / PACKAGE
        pkg.mkdir()
        (pkg / "__init__.py").write_text("")
        (pkg / "one.py").write_text("from . import two\n")
        (pkg / "two.py").write_text(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import one\n"
        )
        assert _cycles(_graph(_modules(pkg))) == []

    @pytest.mark.parametrize(
        ("source", "expected"),
        [("def f(self, a, b, c, d, e, f, g): pass", 7), ("def f(a, /, b, *, c, d): pass", 2)],
        ids=["self-is-not-counted", "keyword-only-is-not-counted"],
    )
    def test_positional_parameters_are_counted(self, source: str, expected: int) -> None:
        (node,) = _functions(ast.parse(source))
        assert _positional(node) == expected
