"""The scenario format: loading, validation errors with line and field, replay helpers, round trip."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import pytest

from contextwindow.content import Audio, Document, Image, Message, Text, ToolResult, ToolUse
from contextwindow.errors import InvalidInput, UsageError
from contextwindow.replay import synthetic_media
from contextwindow.replay.scenario import ScenarioBuilder, ScenarioError
from contextwindow.replay.scenario_file import dumps_scenario, load_scenario, loads_scenario

TOOLS = {"type": "tools", "tools": [{"name": "read_file", "input_schema": {"type": "object"}}]}


def lines(*events: dict[str, object]) -> str:
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)


def use(i: str) -> dict[str, object]:
    return {"type": "tool_use", "id": i, "name": "read_file", "input": {"path": "a.py"}}


GOOD = (
    {"type": "meta", "name": "tiny", "window": 16000, "model": "claude-sonnet-4-5"},
    {"type": "system", "text": "You are a coding agent."},
    TOOLS,
    {
        "type": "user",
        "content": [
            {"type": "text", "text": "Look"},
            {"type": "image", "generate": "screenshot", "width": 320, "height": 200},
        ],
    },
    {"type": "assistant", "content": [{"type": "text", "text": "reading"}, use("t1"), use("t2")]},
    {"type": "tool_result", "tool_use_id": "t1", "content": "print(1)"},
    {
        "type": "inject",
        "content": [{"type": "image", "generate": "photo", "width": 64, "height": 48, "seed": 3}],
    },
    {
        "type": "tool_result",
        "tool_use_id": "t2",
        "content": [{"type": "text", "text": "spec"}, {"type": "document", "generate": "pdf", "pages": 2}],
    },
    {"type": "assistant", "content": "done"},
    {
        "type": "user",
        "content": [{"type": "audio", "generate": "tone", "seconds": 0.5}, {"type": "text", "text": "你好"}],
    },
    {"type": "assistant", "content": "好的"},
)


class TestLoading:
    def test_reads_system_tools_turns_and_meta(self) -> None:
        s = loads_scenario(lines(*GOOD))
        assert (s.name, s.window, s.model) == ("tiny", 16000, "claude-sonnet-4-5")
        assert s.system == (Text(text="You are a coding agent."),)
        assert [t.name for t in s.tools] == ["read_file"]
        assert len(s.turns) == 2 and s.calls == 3

    def test_scripted_replies_are_every_assistant_message_in_order(self) -> None:
        replies = loads_scenario(lines(*GOOD)).scripted_replies()
        assert [r.content[0] for r in replies] == [Text(text="reading"), Text(text="done"), Text(text="好的")]

    def test_mid_turn_message_defaults_to_the_next_round(self) -> None:
        turn = loads_scenario(lines(*GOOD)).turns[0]
        (injection,) = turn.injections
        assert injection.round == 1
        assert isinstance(injection.message.content[0], Image)

    def test_tool_runner_answers_with_the_scripted_result(self) -> None:
        s = loads_scenario(lines(*GOOD))
        run = s.tool_runner()
        result = asyncio.run(run(ToolUse(id="t1", name="read_file", input={})))
        assert result == ToolResult(tool_use_id="t1", content="print(1)")
        with pytest.raises(UsageError, match="no scripted result"):
            asyncio.run(run(ToolUse(id="nope", name="read_file", input={})))

    def test_generated_media_are_measured_and_loadable(self) -> None:
        s = loads_scenario(lines(*GOOD))
        refs = {r.media_type: r for r in s.attachment_refs()}
        assert (refs["image/png"].width, refs["image/png"].height) == (320, 200)
        assert refs["application/pdf"].pages == 2
        assert refs["audio/wav"].duration_seconds == pytest.approx(0.5)
        for ref in refs.values():
            assert len(s.load_attachment(ref)) == ref.size_bytes

    def test_inline_and_file_media(self, tmp_path: Path) -> None:
        png = synthetic_media.photo(40, 30, seed=1, fmt="png")
        (tmp_path / "shots").mkdir()
        (tmp_path / "shots" / "a.png").write_bytes(png)
        data = base64.b64encode(png).decode()
        (tmp_path / "s.jsonl").write_text(
            lines(
                {
                    "type": "user",
                    "content": [
                        {"type": "image", "path": "shots/a.png"},
                        {"type": "image", "data": data, "media_type": "image/png"},
                        {"type": "image", "url": "https://example.com/x.png"},
                    ],
                },
                {"type": "assistant", "content": "seen"},
            )
        )
        s = load_scenario(tmp_path / "s.jsonl")
        blocks = s.turns[0].user.content
        assert isinstance(blocks[0], Image) and isinstance(blocks[1], Image)
        assert blocks[0].ref == blocks[1].ref  # same bytes, same attachment
        assert blocks[0].ref is not None and blocks[0].ref.width == 40
        assert isinstance(blocks[2], Image) and blocks[2].url == "https://example.com/x.png"
        assert s.load_attachment(blocks[0].ref) == png

    def test_a_file_changed_after_loading_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "a.png").write_bytes(synthetic_media.photo(40, 30, seed=1, fmt="png"))
        (tmp_path / "s.jsonl").write_text(
            lines(
                {"type": "user", "content": [{"type": "image", "path": "a.png"}]},
                {"type": "assistant", "content": "ok"},
            )
        )
        s = load_scenario(tmp_path / "s.jsonl")
        (tmp_path / "a.png").write_bytes(synthetic_media.photo(40, 30, seed=2, fmt="png"))
        with pytest.raises(InvalidInput, match="changed since"):
            s.load_attachment(s.attachment_refs()[0])


class TestRoundTrip:
    def test_dump_then_load_gives_the_same_script(self) -> None:
        s = loads_scenario(lines(*GOOD))
        again = loads_scenario(dumps_scenario(s))
        assert again.turns == s.turns
        assert (again.system, again.tools, again.window) == (s.system, s.tools, s.window)


BAD = [
    pytest.param(
        [
            {
                "type": "user",
                "content": [
                    {"type": "text", "text": "x"},
                    {"type": "image", "generate": "screenshot", "width": 0, "height": 8},
                ],
            }
        ],
        "s.jsonl:1: content[1].width: must be between 1 and 8192 pixels",
        id="zero-width",
    ),
    pytest.param(
        [
            {"type": "user", "content": "hi"},
            {"type": "assistant", "content": [{"type": "tool_use", "id": "t", "name": ""}]},
        ],
        "s.jsonl:2: content[0].name:",
        id="empty-tool-name",
    ),
    pytest.param([{"type": "usr", "content": "hi"}], "s.jsonl:1: unknown type 'usr'", id="unknown-event"),
    pytest.param(
        [{"type": "user", "content": "hi", "colour": 1}], "s.jsonl:1: colour: Extra inputs", id="extra-field"
    ),
    pytest.param(
        [{"type": "user", "content": [{"type": "image", "path": "a.png", "url": "https://x"}]}],
        "s.jsonl:1: content[0]: give exactly one of data, path, url or generate",
        id="two-sources",
    ),
    pytest.param(
        [{"type": "user", "content": [{"type": "image", "path": "missing.png"}]}],
        "s.jsonl:1: content[0].path: no such file: missing.png",
        id="missing-file",
    ),
    pytest.param(
        [{"type": "user", "content": [{"type": "image", "data": "@@@", "media_type": "image/png"}]}],
        "s.jsonl:1: content[0].data: not valid base64",
        id="bad-base64",
    ),
    pytest.param(
        [{"type": "assistant", "content": "hi"}], "s.jsonl:1: this needs a turn", id="reply-before-user"
    ),
    pytest.param(
        [
            {"type": "user", "content": "a"},
            {"type": "assistant", "content": [use("t1")]},
            {"type": "assistant", "content": "b"},
        ],
        "s.jsonl:3: tool use 't1' (asked at s.jsonl:2) has no tool_result before this reply",
        id="missing-result",
    ),
    pytest.param(
        [
            {"type": "user", "content": "a"},
            {"type": "assistant", "content": "b"},
            {"type": "tool_result", "tool_use_id": "zz"},
        ],
        "s.jsonl:3: tool_use_id: tool use 'zz' was not asked for",
        id="orphan-result",
    ),
    pytest.param(
        [
            {"type": "user", "content": "a"},
            {"type": "assistant", "content": [use("t1")]},
            {"type": "tool_result", "tool_use_id": "t1"},
        ],
        "the turn ends on a reply that asks for tools",
        id="turn-ends-on-tools",
    ),
    pytest.param(
        [
            {"type": "user", "content": "a"},
            {"type": "assistant", "content": [use("t1")]},
            {"type": "tool_result", "tool_use_id": "t1"},
            {"type": "assistant", "content": [use("t1")]},
        ],
        "s.jsonl:4: content[0].id: tool use id 't1' is used twice",
        id="duplicate-id",
    ),
    pytest.param(
        [
            {"type": "user", "content": "a"},
            {"type": "inject", "round": 5, "content": "b"},
            {"type": "assistant", "content": "c"},
        ],
        "s.jsonl:2: round: round 5 does not exist",
        id="inject-round-out-of-range",
    ),
    pytest.param(
        [
            {"type": "user", "content": "a"},
            {"type": "assistant", "content": "b"},
            {"type": "system", "text": "late"},
        ],
        "s.jsonl:3: the system prompt must come before",
        id="late-system",
    ),
    pytest.param(
        [{"type": "user", "content": "a"}], "the turn has no scripted assistant reply", id="no-reply"
    ),
    pytest.param(
        [{"type": "user", "content": [{"type": "audio", "generate": "tone", "seconds": -1}]}],
        "s.jsonl:1: content[0].seconds: must be a number of seconds",
        id="negative-seconds",
    ),
    pytest.param(
        [{"type": "user", "content": [{"type": "image", "generate": "photo", "width": 10}]}],
        "s.jsonl:1: content[0]: a generated image needs width and height",
        id="generated-without-height",
    ),
]


class TestValidation:
    @pytest.mark.parametrize(("events", "expected"), BAD)
    def test_names_line_and_field(
        self, tmp_path: Path, events: list[dict[str, object]], expected: str
    ) -> None:
        path = tmp_path / "s.jsonl"
        path.write_text(lines(*events))
        with pytest.raises(ScenarioError) as caught:
            load_scenario(path)
        assert expected in str(caught.value).replace(f"{tmp_path}/", "")

    def test_bad_json_names_the_line(self) -> None:
        with pytest.raises(ScenarioError, match=r"^x.jsonl:2: not valid JSON"):
            loads_scenario('{"type": "user", "content": "a"}\n{"type": \n', name="x.jsonl")

    def test_blank_lines_are_skipped_and_numbering_kept(self) -> None:
        with pytest.raises(ScenarioError, match=r"^x.jsonl:3: "):
            loads_scenario('{"type": "user", "content": "a"}\n\n{"type": "nope"}\n', name="x.jsonl")

    def test_is_invalid_input(self) -> None:
        with pytest.raises(InvalidInput):
            loads_scenario("[]")

    def test_ten_thousand_tiny_blocks_load(self) -> None:
        content = [{"type": "text", "text": "x"}] * 10_000
        s = loads_scenario(
            lines({"type": "user", "content": content}, {"type": "assistant", "content": "ok"})
        )
        assert len(s.turns[0].user.content) == 10_000


class TestBuilder:
    def test_a_turn_built_in_code_replays(self) -> None:
        b = ScenarioBuilder(name="code")
        ref = b.add_generated(lambda: synthetic_media.wav(0.1), "audio/wav")
        b.user(Message.user("hi", Audio(ref=ref)))
        b.assistant(Message.assistant("ok"))
        s = b.build()
        assert s.load_attachment(ref.id).startswith(b"RIFF")

    def test_generated_bytes_can_be_regenerated_on_demand(self) -> None:
        b = ScenarioBuilder()
        ref = b.add_generated(lambda: synthetic_media.pdf(1), "application/pdf", keep=False)
        b.user(Message.user(Document(ref=ref)))
        b.assistant(Message.assistant("ok"))
        assert b.build().load_attachment(ref) == synthetic_media.pdf(1)


class TestSyntheticMedia:
    @pytest.mark.parametrize(
        "make",
        [
            pytest.param(lambda seed: synthetic_media.screenshot(200, 120, seed=seed), id="screenshot"),
            pytest.param(lambda seed: synthetic_media.photo(200, 120, seed=seed), id="photo"),
            pytest.param(lambda seed: synthetic_media.pdf(2, seed=seed), id="pdf"),
            pytest.param(lambda seed: synthetic_media.wav(0.2, seed=seed), id="wav"),
        ],
    )
    def test_same_seed_same_bytes_other_seed_other_bytes(self, make: object) -> None:
        assert callable(make)
        assert make(1) == make(1)
        assert make(1) != make(2)

    @pytest.mark.parametrize("size", [(0, 10), (10, -1), (10, 9000)])
    def test_refuses_impossible_sizes(self, size: tuple[int, int]) -> None:
        with pytest.raises(InvalidInput):
            synthetic_media.screenshot(*size)
