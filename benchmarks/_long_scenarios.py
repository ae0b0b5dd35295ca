"""Long agent scenarios for ``benchmarks/sessions.py``: the bundled demo, extended, and generated runs.

Each scenario has at least 200 scripted provider calls and mixes what long agent runs carry: real
source files read in chunks (the interpreter's standard library), JSON tool results, screenshots as
tool-result images, photos sent mid-turn (``ScenarioBuilder.inject``), user photos, and turns asked
and answered in Chinese. Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from contextwindow.content import Image, Message, Text, ToolResult, ToolUse
from contextwindow.replay import synthetic_media
from contextwindow.replay.demo import SYSTEM, TOOLS, build_demo, stdlib_sources
from contextwindow.replay.scenario import AssistantStep, InjectStep, Scenario, ScenarioBuilder, ToolResultStep

__all__ = ["MIN_CALLS", "extended_demo", "long_scenario", "scenario_at", "scenarios"]

MIN_CALLS = 200
_CHUNK_LINES = 80
_CJK_ASKS = (
    "请检查这个模块的错误处理，并用中文列出所有可能抛出异常的地方。",
    "这些函数的时间复杂度是多少？请逐一说明，并指出可以优化的地方。",
    "請比較這兩個實作的差異，並說明哪一個更適合在受限的執行環境中使用。",
)
_CJK_NOTES = (
    "补充一下：第二个显示器上的渲染结果也不对，请一起看看。",
    "另外，请不要修改公共接口，只改内部实现。",
)


class _Gen:
    def __init__(self, builder: ScenarioBuilder, seed: int, files: list[Path], prefix: str) -> None:
        self.b = builder
        self.rng = random.Random(seed)
        self.files = files
        self.prefix = prefix
        self.ids = 0
        self.calls = 0

    def tool_id(self) -> str:
        self.ids += 1
        return f"toolu_{self.prefix}_{self.ids:04d}"

    def reply(self, text: str, use: ToolUse | None = None) -> None:
        self.calls += 1
        content: tuple[Text | ToolUse, ...] = (Text(text=text),) + ((use,) if use else ())
        self.b.assistant(Message(role="assistant", content=content))

    def read(self, path: Path, chunks: int) -> None:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for start in range(0, min(len(lines), chunks * _CHUNK_LINES), _CHUNK_LINES):
            end = min(start + _CHUNK_LINES, len(lines))
            use = ToolUse(id=self.tool_id(), name="read_file", input={"path": path.name, "start": start + 1})
            self.reply(f"Reading {path.name} from line {start + 1}.", use)
            body = "\n".join(f"{n:6d}\t{line}" for n, line in enumerate(lines[start:end], start=start + 1))
            self.b.tool_result(ToolResult(tool_use_id=use.id, content=body))

    def tests(self, module: str) -> None:
        use = ToolUse(id=self.tool_id(), name="run_tests", input={"module": module})
        self.reply(f"Running the tests of {module}.", use)
        report = {
            "module": module,
            "passed": self.rng.randrange(10, 300),
            "failed": self.rng.randrange(3),
            "cases": [
                {"name": f"test_{module}_{i}", "ok": self.rng.random() > 0.1, "ms": self.rng.randrange(900)}
                for i in range(self.rng.randrange(10, 60))
            ],
        }
        self.b.tool_result(ToolResult(tool_use_id=use.id, content=json.dumps(report, indent=1)))

    def screenshot(self, view: str, scale: float) -> None:
        use = ToolUse(id=self.tool_id(), name="screenshot", input={"view": view})
        self.reply(f"Taking a screenshot of {view}.", use)
        w, h = max(1, round(1280 * scale)), max(1, round(800 * scale))
        seed = self.rng.randrange(1 << 30)
        ref = self.b.add_generated(
            lambda: synthetic_media.screenshot(w, h, seed=seed, caption=view), "image/png"
        )
        self.b.tool_result(
            ToolResult(tool_use_id=use.id, content=(Text(text=f"{view} ({w}×{h})"), Image(ref=ref)))
        )

    def photo(self, text: str, scale: float) -> Message:
        w, h = max(1, round(1024 * scale)), max(1, round(768 * scale))
        seed = self.rng.randrange(1 << 30)
        ref = self.b.add_generated(lambda: synthetic_media.photo(w, h, seed=seed), "image/jpeg")
        return Message(role="user", content=(Text(text=text), Image(ref=ref)))

    def turn(self, index: int, calls: int, scale: float) -> None:
        cjk = index % 3 == 2
        ask = (
            _CJK_ASKS[index % len(_CJK_ASKS)]
            if cjk
            else f"Task {index}: audit these modules and fix what breaks."
        )
        if index % 4 == 1:
            self.b.user(self.photo(ask + " Here is what I see.", scale))
        else:
            self.b.user(Message.user(ask))
        start = self.calls
        while self.calls - start < calls:
            kind = self.rng.random()
            if kind < 0.55:
                self.read(self.files[self.rng.randrange(len(self.files))], chunks=self.rng.randrange(1, 4))
            elif kind < 0.75:
                self.tests(self.files[self.rng.randrange(len(self.files))].stem)
            else:
                self.screenshot(self.rng.choice(("settings", "editor", "terminal", "diff")), scale)
            if self.rng.random() < 0.08:
                note = self.rng.choice(_CJK_NOTES) if cjk else "Also: keep the public API unchanged."
                self.b.inject(self.photo(note, scale) if self.rng.random() < 0.6 else Message.user(note))
        final = "结论：已完成检查，详见上面的说明。" if cjk else "Done: " + "the audit is complete. " * 20
        self.reply(final)


def long_scenario(seed: int, *, image_scale: float = 0.5, files: list[Path] | None = None) -> Scenario:
    """A generated scenario of ≥ 200 calls in about 8 turns."""
    files = files or stdlib_sources()
    builder = ScenarioBuilder(name=f"long-{seed}", model="claude-sonnet-4-5")
    builder.system(SYSTEM)
    builder.tools(list(TOOLS))
    gen = _Gen(builder, seed, files, f"long{seed}")
    index = 0
    while gen.calls < MIN_CALLS:
        gen.turn(index, calls=gen.rng.randrange(18, 40), scale=image_scale)
        index += 1
    return builder.build()


def extended_demo(seed: int, *, image_scale: float = 0.5, files: list[Path] | None = None) -> Scenario:
    """The bundled demo for ``seed``, replayed into a builder and extended past 200 calls."""
    files = files or stdlib_sources()
    demo = build_demo(seed, image_scale=image_scale)
    builder = ScenarioBuilder(name=f"demo-{seed}+", model=demo.model)
    for text in demo.system:
        builder.system(text.text)
    builder.tools(list(demo.tools))
    for ref in demo.attachment_refs():
        builder.add_bytes(demo.load_attachment(ref), ref.media_type)
    for turn in demo.turns:
        builder.user(turn.user)
        for step in turn.steps:
            if isinstance(step, AssistantStep):
                builder.assistant(step.message)
            elif isinstance(step, ToolResultStep):
                builder.tool_result(step.result)
            elif isinstance(step, InjectStep):
                builder.inject(step.message, round=step.round)
    gen = _Gen(builder, seed + 1000, files, f"ext{seed}")
    gen.calls = demo.calls
    index = len(demo.turns)
    while gen.calls < MIN_CALLS:
        gen.turn(index, calls=gen.rng.randrange(15, 30), scale=image_scale)
        index += 1
    return builder.build()


def scenarios(count: int = 20, *, image_scale: float = 0.5) -> list[Scenario]:
    """``count`` scenarios: even ones the extended demo, odd ones generated."""
    files = stdlib_sources()
    return [
        extended_demo(i // 2, image_scale=image_scale, files=files)
        if i % 2 == 0
        else long_scenario(i, image_scale=image_scale, files=files)
        for i in range(count)
    ]


def scenario_at(index: int, *, image_scale: float = 0.5) -> Scenario:
    """Scenario ``index`` of :func:`scenarios`, built alone."""
    if index % 2 == 0:
        return extended_demo(index // 2, image_scale=image_scale)
    return long_scenario(index, image_scale=image_scale)
