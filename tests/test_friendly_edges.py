"""What a new user tries first works: a smaller window, string system prompts, wire tool dicts, a
mistyped session id."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from contextwindow import Message, ToolSpec, get_profile, open_store
from contextwindow.cli import app
from contextwindow.compile import compile_session
from contextwindow.engine import EngineCompiler
from contextwindow.engine.compiler import CompileContext
from contextwindow.errors import InvalidInput
from contextwindow.formats import tool_specs

ANTHROPIC_TOOL = {
    "name": "read",
    "description": "Read.",
    "input_schema": {"type": "object", "properties": {}},
}
OPENAI_TOOL = {
    "type": "function",
    "function": {"name": "read", "description": "Read.", "parameters": {"type": "object", "properties": {}}},
}


class TestSmallerWindow:
    def test_a_window_below_the_output_cap_lowers_the_cap(self) -> None:
        profile = get_profile("claude-sonnet-4-6").with_(context_window=16_000)
        assert profile.context_window == 16_000 and profile.max_output_tokens == 16_000

    def test_an_explicit_cap_is_still_checked(self) -> None:
        with pytest.raises(InvalidInput):
            get_profile("claude-sonnet-4-6").with_(context_window=16_000, max_output_tokens=20_000)


class TestToolsAndSystemAsWritten:
    def test_anthropic_and_openai_tool_dicts_read_as_the_same_spec(self) -> None:
        assert (
            tool_specs([ANTHROPIC_TOOL])
            == tool_specs([OPENAI_TOOL])
            == (
                ToolSpec(name="read", description="Read.", input_schema={"type": "object", "properties": {}}),
            )
        )

    def test_anything_else_names_its_place(self) -> None:
        with pytest.raises(InvalidInput) as raised:
            tool_specs([ANTHROPIC_TOOL, 3])
        assert raised.value.path == "tools[1]"

    def test_compile_session_takes_a_string_and_wire_tools(self) -> None:
        session = open_store().session("s")
        session.append(Message.user("hi"))
        compiled = compile_session(
            session, model="claude-sonnet-4-6", system="Be brief.", tools=[OPENAI_TOOL]
        )
        assert compiled.system[0].text == "Be brief." and compiled.tools[0].name == "read"

    def test_the_engine_compiler_takes_a_string_and_wire_tools(self) -> None:
        compiler = EngineCompiler(system="Be brief.", tools=[ANTHROPIC_TOOL])
        session = open_store().session("s")
        session.append(Message.user("hi"))
        compiled = compiler(CompileContext(session=session, profile=get_profile("claude-sonnet-4-6")))
        assert compiled.system[0].text == "Be brief." and compiled.tools[0].name == "read"


class TestInspectUnknownSession:
    def test_says_so_and_exits_non_zero(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        with open_store(path) as store:
            store.session("real-one").append(Message.user("hi"))
        result = CliRunner().invoke(app, ["inspect", str(path), "real-on"])
        assert result.exit_code != 0
        said = " ".join(result.output.split())
        assert "no session 'real-on'" in said and "real-one" in said
