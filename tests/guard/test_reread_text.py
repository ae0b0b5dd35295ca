"""Where no re-read tool is offered, no placeholder tells the model to call one: it still names what
was left out (what, its size, its id). Where the tool is offered, the wording names it."""

from __future__ import annotations

from typing import Any

import pytest

import contextwindow
from contextwindow.guard import GuardCore, GuardOptions
from contextwindow.guard.replies import openai_reply
from reread_support import POLICY, WINDOW, sent_through, told

CALL = "call read_archived with"


def _core(**options: Any) -> GuardCore:
    options = {"context_window": WINDOW, "summarizer": False, "policy": POLICY, **options}
    return GuardCore(
        contextwindow.open_store(),
        "openai",
        overflow=lambda exc: None,
        options=GuardOptions(**options),
        reply_of=openai_reply,
    )


class TestGuardRereadText:
    def test_with_reread_on_the_placeholders_name_the_tool_it_offers(self) -> None:
        text, tools = told(sent_through(_core()))
        assert CALL in text and "read_archived" in tools

    @pytest.mark.parametrize("how", ["reread=False", "a stream"])
    def test_where_no_tool_is_offered_no_text_names_one(self, how: str) -> None:
        stream = how == "a stream"
        text, tools = told(sent_through(_core(reread=stream), stream=stream))
        assert "read_archived" not in text and "read_archived" not in tools
        assert "call " not in text  # no other tool is named in its place
        assert "output of about" in text and "bytes" in text  # what was left out, and its size

    def test_a_policy_can_say_so_itself(self) -> None:
        text, _ = told(sent_through(_core(policy=POLICY.with_(reread_tool=False))))
        assert "read_archived" not in text
