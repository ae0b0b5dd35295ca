"""The bundled demo: a long coding-agent run that exercises every mechanism on a small window.

:func:`build_demo` scripts a coding agent that reads REAL source files — the Python standard library
of the interpreter running it (``sysconfig.get_paths()["stdlib"]``) — in chunks, as agents do; takes
screenshots of an app (1280×800 PNGs); receives photos from the user mid-turn; answers a turn asked in
Chinese; reads a PDF; and gets JSON tool results (test reports, directory listings). About 200
provider calls: on a 16k–32k window that forces restarts, media eviction, tool-result archiving and
compaction many times over.

Deterministic: the same seed and the same standard library give the same scenario, byte for byte
(files are picked from a sorted listing; all randomness is ``random.Random(seed)``; media come from
:mod:`contextwindow.replay.synthetic_media`). Another Python version has other files and so another
scenario — with the same shape.
"""

from __future__ import annotations

import json
import os
import random
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from ..content import Document, Image, Message, Text, ToolResult, ToolSpec, ToolUse
from . import synthetic_media
from .scenario import Scenario, ScenarioBuilder

__all__ = ["DEMO_SERVED_SHARE", "DEMO_WINDOW", "build_demo", "stdlib_sources"]

DEMO_WINDOW = 24_000
"""The window the demo is meant to be replayed on: small enough that ~200 calls overflow it often."""

DEMO_SERVED_SHARE = 0.92
"""The share of the declared window the demo's provider really serves: a little less, as a provider
behind a proxy or with a smaller deployed context sometimes does, so the demo shows one rejection
recovered and the window learned from it."""

_MIN_BYTES, _MAX_BYTES = 3_000, 60_000
_CHUNK_LINES = 90

SYSTEM = (
    "You are a careful senior Python engineer working in a repository checkout. Read code before you "
    "change it, quote line numbers, keep the user's constraints, and say what you verified. Tools: "
    "read_file (a range of lines), grep, run_tests (JSON report), list_dir (JSON), screenshot (the app "
    "window as an image)."
)

TOOLS = (
    ToolSpec(
        name="read_file",
        description="Read lines [start, end) of a text file, numbered.",
        input_schema={
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "start": {"type": "integer"},
                "end": {"type": "integer"},
            },
            "required": ["path"],
        },
    ),
    ToolSpec(
        name="grep",
        description="Lines matching a regular expression in a file.",
        input_schema={
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern", "path"],
        },
    ),
    ToolSpec(
        name="run_tests",
        description="Run the test suite for a module; returns a JSON report.",
        input_schema={"type": "object", "properties": {"module": {"type": "string"}}, "required": ["module"]},
    ),
    ToolSpec(
        name="list_dir",
        description="List a directory as JSON (name, size, kind).",
        input_schema={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec(
        name="screenshot",
        description="Capture the application window; returns a PNG.",
        input_schema={"type": "object", "properties": {"view": {"type": "string"}}},
    ),
)


def stdlib_sources(root: Path | None = None) -> list[Path]:
    """The standard library's top-level ``.py`` files of a readable size, sorted by name."""
    base = Path(root or sysconfig.get_paths()["stdlib"])
    out = []
    for name in sorted(os.listdir(base)):
        path = base / name
        if name.endswith(".py") and not name.startswith("_") and path.is_file():
            size = path.stat().st_size
            if _MIN_BYTES <= size <= _MAX_BYTES:
                out.append(path)
    return out


@dataclass
class _Script:
    """The demo's running state: the builder, the seeded RNG and counters for ids and media seeds."""

    builder: ScenarioBuilder
    rng: random.Random
    files: list[Path]
    scale: float = 1.0
    calls: int = 0
    next_id: int = 0
    media: int = 0

    def tool_id(self) -> str:
        self.next_id += 1
        return f"toolu_demo_{self.next_id:04d}"

    def reply(self, text: str, *uses: ToolUse) -> None:
        self.calls += 1
        self.builder.assistant(Message(role="assistant", content=(Text(text=text), *uses)))

    def result(self, use: ToolUse, content: str | tuple[Text | Image | Document, ...]) -> None:
        self.builder.tool_result(ToolResult(tool_use_id=use.id, content=content))

    def read_chunks(self, path: Path, limit: int, lead: str) -> None:
        """Read a file chunk by chunk (at most ``limit`` chunks), one call each."""
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for start in range(0, min(len(lines), limit * _CHUNK_LINES), _CHUNK_LINES):
            end = min(start + _CHUNK_LINES, len(lines))
            use = ToolUse(
                id=self.tool_id(),
                name="read_file",
                input={"path": path.name, "start": start + 1, "end": end + 1},
            )
            self.reply(f"{lead} {path.name}, lines {start + 1}–{end}.", use)
            numbered = "\n".join(
                f"{n:6d}\t{line}" for n, line in enumerate(lines[start:end], start=start + 1)
            )
            self.result(use, numbered)

    def grep(self, path: Path, pattern: str) -> None:
        use = ToolUse(id=self.tool_id(), name="grep", input={"pattern": pattern, "path": path.name})
        self.reply(f"Looking for `{pattern}` in {path.name}.", use)
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        hits = [f"{n}:{line}" for n, line in enumerate(lines, start=1) if pattern in line][:40]
        self.result(use, "\n".join(hits) or "(no matches)")

    def screenshot(self, view: str) -> None:
        use = ToolUse(id=self.tool_id(), name="screenshot", input={"view": view})
        self.reply(f"Taking a screenshot of the {view} view.", use)
        self.media += 1
        seed, caption = self.rng.randrange(1 << 30), f"app - {view}"
        w, h = self.size(1280, 800)
        ref = self.builder.add_generated(
            lambda: synthetic_media.screenshot(w, h, seed=seed, caption=caption), "image/png"
        )
        self.result(use, (Text(text=f"Screenshot of {view} ({w}×{h})."), Image(ref=ref)))

    def photo(self, text: str) -> Message:
        self.media += 1
        seed = self.rng.randrange(1 << 30)
        w, h = self.size(1024, 768)
        ref = self.builder.add_generated(lambda: synthetic_media.photo(w, h, seed=seed), "image/jpeg")
        return Message(role="user", content=(Text(text=text), Image(ref=ref)))

    def json_tool(self, name: str, arguments: dict[str, object], payload: object) -> None:
        use = ToolUse(id=self.tool_id(), name=name, input=arguments)
        self.reply(f"Running {name} {json.dumps(arguments, ensure_ascii=False)}.", use)
        self.result(use, json.dumps(payload, indent=2, ensure_ascii=False))

    def size(self, width: int, height: int) -> tuple[int, int]:
        return max(1, round(width * self.scale)), max(1, round(height * self.scale))

    def pick(self, n: int) -> list[Path]:
        return [self.files[self.rng.randrange(len(self.files))] for _ in range(n)]


def build_demo(seed: int = 0, *, stdlib: Path | None = None, image_scale: float = 1.0) -> Scenario:
    """The demo scenario for ``seed`` (about 170 provider calls in 6 turns, ~30 images, one PDF).

    ``image_scale`` shrinks the screenshots and photos (1280×800 and 1024×768 at 1.0) for quick runs;
    the script is otherwise the same.
    """
    if not 0 < image_scale <= 4:
        raise ValueError("image_scale must be in (0, 4]")
    files = stdlib_sources(stdlib)
    if len(files) < 8:
        raise FileNotFoundError(
            f"too few standard-library sources under {stdlib or sysconfig.get_paths()['stdlib']}"
        )
    builder = ScenarioBuilder(
        name="demo",
        description="A coding agent reading the standard library, with screenshots, photos, a PDF and a turn in Chinese.",
        model="claude-sonnet-4-5",
        window=DEMO_WINDOW,
    )
    builder.system(SYSTEM)
    builder.tools(list(TOOLS))
    s = _Script(builder=builder, rng=random.Random(seed), files=files, scale=image_scale)
    _turn_audit(s)
    _turn_screenshots(s)
    _turn_chinese(s)
    _turn_tests(s)
    _turn_pdf(s)
    _turn_wrap_up(s)
    return builder.build()


def _turn_audit(s: _Script) -> None:
    targets = s.pick(8)
    s.builder.user(
        Message.user(
            "We are porting a few standard-library modules to a restricted runtime. Read these and list every "
            "place that touches the OS, threads or the import system: " + ", ".join(p.name for p in targets)
        )
    )
    s.json_tool(
        "list_dir",
        {"path": "Lib"},
        [{"name": p.name, "size": p.stat().st_size, "kind": "file"} for p in s.files[:60]],
    )
    for path in targets:
        s.read_chunks(path, limit=4, lead="Reading")
        s.grep(path, "import ")
    s.reply(
        "Summary of OS/thread/import touch points:\n"
        + "\n".join(f"- {p.name}: see the imports and the calls listed above" for p in targets)
    )


def _turn_screenshots(s: _Script) -> None:
    s.builder.user(
        Message.user(
            "The settings page renders wrong after the port. Take screenshots and compare the views."
        )
    )
    views = ["settings", "settings (dark)", "editor", "terminal", "preview", "diff", "search", "problems"]
    for i, view in enumerate(views * 3):
        s.screenshot(view)
        if i in (3, 9, 17):
            s.builder.inject(s.photo(f"Here is a photo of how it looks on my second monitor ({i})."))
        if i % 3 == 2:
            s.read_chunks(s.pick(1)[0], limit=1, lead="Checking the renderer in")
    s.reply(
        "The dark settings view loses its sidebar padding; the photos show the same clipping on the second monitor."
    )


def _turn_chinese(s: _Script) -> None:
    heapq = next((p for p in s.files if p.name == "heapq.py"), s.files[0])
    s.builder.user(
        Message.user(
            f"请阅读 {heapq.name} 的实现，解释堆的不变式是如何维护的，并指出与移植相关的注意事项。回答请用中文。"
        )
    )
    s.read_chunks(heapq, limit=6, lead="正在阅读")
    for path in s.pick(6):
        s.grep(path, "def ")
        s.read_chunks(path, limit=3, lead="对照阅读")
    s.reply(
        "结论：堆的不变式是 a[k] <= a[2*k+1] 且 a[k] <= a[2*k+2]。_siftdown 和 _siftup 在插入和弹出后恢复它；"
        "移植时需注意 C 加速模块（_heapq）可能不可用，需要回退到纯 Python 实现。"
    )


def _turn_tests(s: _Script) -> None:
    s.builder.user(Message.user("Run the tests for every module we touched and tell me what fails."))
    for path in s.pick(16):
        module = path.stem
        failures = [
            {
                "test": f"test_{module}.Test{module.title()}.test_case_{s.rng.randrange(100)}",
                "error": "AssertionError: 3 != 4",
            }
            for _ in range(s.rng.randrange(3))
        ]
        report = {
            "module": module,
            "passed": s.rng.randrange(20, 400),
            "failed": len(failures),
            "skipped": s.rng.randrange(5),
            "duration_s": round(s.rng.random() * 30, 2),
            "failures": failures,
        }
        s.json_tool("run_tests", {"module": module}, report)
        if failures:
            s.read_chunks(path, limit=2, lead="Reading the failing code in")
    s.reply("Failures are limited to modules that spawn threads; everything else passes.")


def _turn_pdf(s: _Script) -> None:
    ref = s.builder.add_generated(
        lambda: synthetic_media.pdf(4, seed=7, title="Runtime porting guide"), "application/pdf"
    )
    s.builder.user(
        Message.user(
            "Here is the porting guide of the runtime. Check our plan against it.",
            Document(ref=ref, title="Runtime porting guide", filename="porting-guide.pdf"),
        )
    )
    for path in s.pick(7):
        s.read_chunks(path, limit=3, lead="Re-reading")
    s.screenshot("settings (after fix)")
    s.builder.inject(s.photo("And this is the fixed screen on the second monitor."))
    s.screenshot("settings (dark, after fix)")
    s.reply(
        "The plan matches the guide except for the thread pool, which the guide forbids; I listed the two call sites."
    )


def _turn_wrap_up(s: _Script) -> None:
    s.builder.user(
        Message.user("Last thing: re-check the first module you read and write the final porting checklist.")
    )
    first = s.files[0]
    s.read_chunks(first, limit=3, lead="Re-checking")
    s.json_tool(
        "list_dir",
        {"path": "Lib/test"},
        [{"name": f"test_{p.stem}.py", "kind": "file"} for p in s.files[:40]],
    )
    s.reply(
        "Final checklist:\n1. Replace OS calls with the runtime's API.\n2. Drop thread usage.\n3. Keep pure-Python fallbacks."
    )
