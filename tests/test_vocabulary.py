"""Code and docs cite only what a reader can open: the repository itself, or a public URL.

Comments, docstrings and documentation use the project's own words (``docs/concepts.md``). A reference
to a document that is not in the repository (a section sign, a numbered write-up, a private spec, an
issue or acceptance number of a tracker the reader cannot see) is a dead end for everyone who picks
the code up, so it fails here; and a module that names an upstream project it learned from cites
that project's public URL, in its own text or in the Sources section of ``docs/concepts.md`` (where
the source tree's links to other projects live).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FOREIGN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a section sign (a section of a document outside the repository)", re.compile("§")),
    ("the reference spec, which is not in the repository", re.compile(r"seed[- ]behaviou?rs?", re.I)),
    ("a numbered write-up, which is not in the repository", re.compile(r"\bseeds?[- ]?\d{3}\b", re.I)),
    ("the design notes, which are not in the repository", re.compile(r"\bDESIGN(?:\.md| principle)")),
    ("a reference file outside the repository", re.compile(r"\b(?:providers|peers)\.md\b")),
    ("the shared reference folder", re.compile(r"shared/(?:reference|seeds)\b")),
    ("an issue number without its URL", re.compile(r"\bissues? \d+", re.I)),
    ("an acceptance-test number", re.compile(r"\bacceptance(?: tests?)? \d+", re.I)),
    ("an issue or pull number without its URL", re.compile(r"(?<![\w/&#\"'])#(?![0-9a-fA-F]{6}\b)\d{2,}\b")),
    ("a numbered working session", re.compile(r"\bsession \d+\b")),
)

UPSTREAM: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\bmaka\b"), "github.com/apache/maka"),
    (re.compile(r"\bflue\b"), "github.com/withastro/flue"),
    (re.compile(r"\bagent-framework\b"), "github.com/anima-research/agent-framework"),
    (re.compile(r"\bcontext-manager\b"), "github.com/anima-research/context-manager"),
    (re.compile(r"\bconnectome-host\b"), "github.com/anima-research/connectome-host"),
    (re.compile(r"\bmembrane\b"), "github.com/antra-tess/membrane"),
    (re.compile(r"\bpi-mono\b"), "github.com/badlogic/pi-mono"),
)
"""An upstream project's name, and the public address a module naming it must cite."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Prose:
    """The human-readable text of one file: comments and string literals of Python, all of Markdown."""

    path: Path
    lines: tuple[tuple[int, str], ...]

    @property
    def text(self) -> str:
        return "\n".join(text for _, text in self.lines)


def _python_prose(path: Path) -> Prose:
    source = path.read_text(encoding="utf-8")
    lines: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            lines.append((token.start[0], token.string.lstrip("#")))
        elif token.type == tokenize.STRING:
            for offset, line in enumerate(token.string.splitlines()):
                lines.append((token.start[0] + offset, line))
    return Prose(path=path, lines=tuple(lines))


def _markdown_prose(path: Path) -> Prose:
    text = path.read_text(encoding="utf-8")
    return Prose(path=path, lines=tuple(enumerate(text.splitlines(), start=1)))


def _generated(path: Path) -> bool:
    """Generated data tables (word lists) are vocabulary data, not prose."""
    with path.open(encoding="utf-8") as handle:
        return "GENERATED" in handle.readline()


def _python_files(*folders: str) -> list[Path]:
    files = [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]
    return [p for p in files if not _generated(p)]


SOURCES = _python_files("src")
TESTS_AND_BENCHMARKS = [p for p in _python_files("tests", "benchmarks") if p != Path(__file__).resolve()]
"""Every test and benchmark module but this one, which spells the patterns out."""
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


def foreign_references(prose: Prose) -> list[str]:
    """Each line of ``prose`` that cites a document outside the repository, with the reason."""
    found = []
    for number, line in prose.lines:
        for why, pattern in FOREIGN:
            if pattern.search(line):
                found.append(f"{prose.path.relative_to(ROOT)}:{number}: {why}: {line.strip()}")
    return found


def _source_entries() -> list[str]:
    """The list entries of the Sources section of ``docs/concepts.md``, each as one string."""
    text = (ROOT / "docs" / "concepts.md").read_text(encoding="utf-8")
    section = text.split("\n## Sources", 1)[1].split("\n## ", 1)[0]
    entries: list[str] = []
    for line in section.splitlines():
        if line.startswith("- "):
            entries.append(line)
        elif line.startswith("  ") and entries:
            entries[-1] += " " + line.strip()
    return entries


def uncited_upstreams(prose: Prose, *, sources: Sequence[str] = ()) -> list[str]:
    """Each upstream project ``prose`` names without citing its public URL anywhere in the file, nor
    in an entry of ``sources`` (the Sources section of ``docs/concepts.md``) naming the file's path
    under ``src/contextwindow/``."""
    text = prose.text
    relative = (
        prose.path.relative_to(ROOT / "src" / "contextwindow").as_posix() if _in_src(prose.path) else None
    )
    missing = []
    for name, address in UPSTREAM:
        cited = relative is not None and any(f"`{relative}`" in e and address in e for e in sources)
        if name.search(text) and address not in text and not cited:
            where = next(n for n, line in prose.lines if name.search(line))
            missing.append(
                f"{prose.path.relative_to(ROOT)}:{where}: names {name.pattern} but never cites https://{address}"
            )
    return missing


def _in_src(path: Path) -> bool:
    return (ROOT / "src" / "contextwindow") in path.parents


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


class TestSourcesCiteOnlyWhatAReaderCanOpen:
    def test_the_source_tree_is_scanned(self) -> None:
        names = {p.relative_to(ROOT / "src" / "contextwindow").as_posix() for p in SOURCES}
        assert {"engine/loop.py", "usage/anchor.py", "compile/policy.py"} <= names

    @pytest.mark.parametrize("path", SOURCES, ids=_id)
    def test_a_module_cites_no_document_outside_the_repository(self, path: Path) -> None:
        assert foreign_references(_python_prose(path)) == []

    @pytest.mark.parametrize("path", SOURCES, ids=_id)
    def test_a_module_that_names_an_upstream_project_cites_its_url(self, path: Path) -> None:
        """In the module itself, or in an entry of concepts.md's Sources that names the module."""
        assert uncited_upstreams(_python_prose(path), sources=_source_entries()) == []


class TestTestsAndBenchmarksCiteOnlyWhatAReaderCanOpen:
    @pytest.mark.parametrize("path", TESTS_AND_BENCHMARKS, ids=_id)
    def test_a_test_or_benchmark_cites_no_document_outside_the_repository(self, path: Path) -> None:
        assert foreign_references(_python_prose(path)) == []

    @pytest.mark.parametrize("path", TESTS_AND_BENCHMARKS, ids=_id)
    def test_a_test_or_benchmark_that_names_an_upstream_project_cites_its_url(self, path: Path) -> None:
        assert uncited_upstreams(_python_prose(path)) == []


class TestDocsCiteOnlyWhatAReaderCanOpen:
    @pytest.mark.parametrize("path", DOCS, ids=_id)
    def test_a_document_cites_no_document_outside_the_repository(self, path: Path) -> None:
        assert foreign_references(_markdown_prose(path)) == []

    def test_the_glossary_names_its_public_sources_by_url(self) -> None:
        glossary = _markdown_prose(ROOT / "docs" / "concepts.md")
        assert uncited_upstreams(glossary) == []
        for _, address in UPSTREAM:
            assert address in glossary.text


class TestTheChecksCanFail:
    """Each rule, fed a line that breaks it, reports it (so a green run means something)."""

    @pytest.mark.parametrize(
        "line",
        [
            "priced as the store does (§1)",
            "see seed-behaviours.md for the vectors",
            "the final rule of seed 001",
            "as DESIGN.md says",
            "the windows in providers.md",
            "what peers.md lists",
            "from ../shared/reference/",
            "required by issue 8",
            "acceptance 30 keeps it",
            "maka #4486 anchored it",
            "measured in session 2",
        ],
    )
    def test_a_foreign_reference_is_reported(self, line: str) -> None:
        prose = Prose(path=ROOT / "x.py", lines=((1, line),))
        assert len(foreign_references(prose)) >= 1

    @pytest.mark.parametrize(
        "line",
        [
            "see https://github.com/apache/maka/pull/4486",
            "colour #000000 for the line",
            "a hash seed picks the order",
            "the seed-store preset",
        ],
    )
    def test_a_public_url_or_a_plain_word_is_not_reported(self, line: str) -> None:
        prose = Prose(path=ROOT / "x.py", lines=((1, line),))
        assert foreign_references(prose) == []

    def test_an_upstream_named_without_its_url_is_reported(self) -> None:
        prose = Prose(path=ROOT / "x.py", lines=((1, "as flue's compaction does"),))
        assert uncited_upstreams(prose) != []
        cited = Prose(
            path=ROOT / "x.py",
            lines=((1, "as flue's compaction does"), (2, "https://github.com/withastro/flue")),
        )
        assert uncited_upstreams(cited) == []

    def test_an_upstream_cited_for_the_module_in_the_sources_is_not_reported(self) -> None:
        module = ROOT / "src" / "contextwindow" / "engine" / "x.py"
        prose = Prose(path=module, lines=((1, "as flue's compaction does"),))
        ours = ["- withastro/flue <https://github.com/withastro/flue>: the cut (`engine/x.py`)."]
        other = ["- withastro/flue <https://github.com/withastro/flue>: the cut (`engine/y.py`)."]
        assert uncited_upstreams(prose, sources=ours) == []
        assert uncited_upstreams(prose, sources=other) != []

    def test_the_sources_section_is_read_entry_by_entry(self) -> None:
        entries = _source_entries()
        assert any("`engine/projection.py`" in e and "anima-research/agent-framework" in e for e in entries)

    def test_comments_and_strings_are_read_and_code_is_not(self, tmp_path: Path) -> None:
        module = tmp_path / "m.py"
        module.write_text('x = 1  # see §3\ny = "acceptance 30"\nissue = 8\n', encoding="utf-8")
        assert _python_prose(module).lines == ((1, " see §3"), (2, '"acceptance 30"'))
