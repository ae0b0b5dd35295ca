"""docs/concepts.md names only code that exists.

Every backticked span that reads as contextwindow code is resolved against the package: a dotted name
(``Class.attr``, ``module.func``, ``Engine.run_turn(...)``) whose first part is a contextwindow module
or a name contextwindow defines; a bare ``snake_case`` name or a call ``name()`` (a function, field, setting,
parameter, or a string the code uses, such as a note kind); a path under ``src/contextwindow`` or the
repository. Spans that name other projects' code (``Math.round``, ``selectSafeCompactionPrefix``),
formulas and prose are not code-looking and are left alone.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from functools import cache
from pathlib import Path

import pytest

import contextwindow

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(contextwindow.__file__).resolve().parent
CONCEPTS = ROOT / "docs" / "concepts.md"

IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = re.compile(rf"{IDENTIFIER}(?:\.{IDENTIFIER})+")
SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)+")
PATH = re.compile(r"[a-z_]+(?:/[a-z_*.\-0-9]+)*(?:\.py|/)")


def spans(text: str) -> list[str]:
    """The backticked spans of ``text``, outside fenced code blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.findall(r"`([^`\n]+)`", prose)


def code_part(span: str) -> str:
    """The name a span is about: ``Engine.run_turn`` of ``Engine.run_turn(...)``, ``count_before_send``
    of ``count_before_send="auto"``."""
    return re.split(r"[(=\s\[]", span, maxsplit=1)[0]


@cache
def modules() -> dict[str, list[str]]:
    """Each contextwindow module by its last dotted part (``loop`` → ``contextwindow.engine.loop``)."""
    out: dict[str, list[str]] = {"contextwindow": ["contextwindow"]}
    for info in pkgutil.walk_packages(contextwindow.__path__, "contextwindow."):
        if not info.name.endswith("__main__"):
            out.setdefault(info.name.rpartition(".")[2], []).append(info.name)
    return out


@cache
def defined() -> dict[str, list[object]]:
    """Every name a contextwindow module defines or imports at its top level, with its objects."""
    out: dict[str, list[object]] = {}
    for names in modules().values():
        for name in names:
            module = importlib.import_module(name)
            for attr, value in vars(module).items():
                if not attr.startswith("__"):
                    out.setdefault(attr, []).append(value)
    return out


@cache
def source_words() -> frozenset[str]:
    """Every identifier in the source (names, attributes, parameters, keywords) and every identifier-like
    string literal (note kinds, settings values, wire fields)."""
    words: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name):
                words.add(node.id)
            elif isinstance(node, ast.Attribute):
                words.add(node.attr)
            elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
                words.add(node.arg)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                words.add(node.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                words.update(re.findall(IDENTIFIER, node.value))
    return frozenset(words)


def instance_attributes(cls: type) -> set[str]:
    """What instances of ``cls`` (or its bases) carry without the class holding it: ``self.x = ...``
    in a method, an annotation in the class body."""
    out: set[str] = set()
    for klass in cls.__mro__:
        if not getattr(klass, "__module__", "").startswith("contextwindow"):
            continue
        try:
            tree = ast.parse(inspect.getsource(klass))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
            ):
                out.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
    return out


def has(value: object, attr: str) -> bool:
    if hasattr(value, attr):
        return True
    return isinstance(value, type) and attr in instance_attributes(value)


def resolve_dotted(name: str) -> str | None:
    """Why ``name`` does not resolve, or ``None`` when it does or is not contextwindow's to resolve."""
    first, *rest = name.split(".")
    if first == "contextwindow":
        first, *rest = rest or ["contextwindow"]
    starts: list[object] = [importlib.import_module(m) for m in modules().get(first, [])]
    starts += [v for v in defined().get(first, []) if inspect.isclass(v) or inspect.ismodule(v)]
    starts = [v for v in starts if not inspect.ismodule(v) or v.__name__.startswith("contextwindow")]
    if not starts:
        if SNAKE.fullmatch(first):  # named as one of our modules would be, but there is none
            return f"no module or name {first!r} in contextwindow"
        return None  # another project's name (Math.round), or an instance (self.anchors)
    for start in starts:
        value, missing = start, None
        for part in rest:
            if inspect.ismodule(value) and not hasattr(value, part):
                submodule = f"{value.__name__}.{part}"
                if importlib.util.find_spec(submodule) is not None:
                    value = importlib.import_module(submodule)
                    continue
            if not has(value, part):
                missing = part
                break
            value = getattr(value, part, None)
        if missing is None:
            return None
    return f"{first} has no {'.'.join(rest)}"


def resolve_bare(name: str) -> str | None:
    if name in source_words() or name in modules():
        return None
    return f"nothing in contextwindow is named {name!r}"


def resolve_path(path: str) -> str | None:
    """A path names a file of the repository or of the package (``engine/loop.py``, ``pricing/data/``)."""
    if "*" in path:
        return None if any(PACKAGE.glob(path)) else f"no file matches {path}"
    candidates = [ROOT / path, PACKAGE / path]
    return None if any(c.exists() for c in candidates) else f"no file or directory {path}"


def bare_code(span: str, part: str) -> bool:
    """A bare name reads as code when it is ``snake_case`` (alone, called or assigned) or is called."""
    if SNAKE.fullmatch(part) and (span == part or span[len(part)] in "(="):
        return True
    return re.fullmatch(IDENTIFIER, part) is not None and span[len(part) :].startswith("(")


def unresolved(text: str) -> list[str]:
    out = []
    for span in dict.fromkeys(spans(text)):
        part = code_part(span)
        if PATH.fullmatch(span):
            problem = resolve_path(span)
        elif DOTTED.fullmatch(part):
            problem = resolve_dotted(part)
        elif bare_code(span, part):
            problem = resolve_bare(part)
        else:
            problem = None
        if problem is not None:
            out.append(f"`{span}`: {problem}")
    return out


class TestConceptsNamesExist:
    def test_every_code_name_in_concepts_md_exists(self) -> None:
        assert unresolved(CONCEPTS.read_text(encoding="utf-8")) == []

    @pytest.mark.parametrize(
        "span",
        [
            "Engine.reported_window",
            "Engine._prepare",
            "fold_rules.flue_reserve",
            "flue_should_compact",
            "Policy.no_such_field",
            "engine/no_such_module.py",
            "pricing.no_such_function()",
            "nosuchfunction()",
        ],
    )
    def test_a_name_that_does_not_exist_is_flagged(self, span: str) -> None:
        assert len(unresolved(f"see `{span}` here")) == 1

    @pytest.mark.parametrize(
        "span",
        [
            "Engine.run_turn",
            "EngineSettings.count_before_send",
            "Policy.output_reserve",
            "Usage.prompt",
            "content.valid_stamp",
            "errors.OverBudget",
            "Calibrator(retain_older=...)",
            'count_before_send="auto"',
            "context_compacted",
            "projection()",
            "engine/loop.py",
            "Math.round",
            "self.anchors",
            "selectSafeCompactionPrefix",
            "tokens > window − reserve",
        ],
    )
    def test_names_that_exist_and_names_that_are_not_ours_pass(self, span: str) -> None:
        assert unresolved(f"see `{span}` here") == []
