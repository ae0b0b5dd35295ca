"""The request after a tool result ends with the tool results, on every wire.

An agent sends its history right after running tools; a framework (LangChain, the OpenAI Agents SDK)
reads the model's reply as the answer to those tool calls only when the request ends with them. So
what the compiler writes (the ``<attachments>`` manifest, placeholders) goes inside a tool result's
text or before it, never as a message after it. For any agent history the compiler keeps (images
moved out, old turns left out, results cut), rendered on Anthropic Messages, Chat Completions and
Responses: every tool call is followed by its results in the agent's order, the calls that are kept
are in the agent's order with the newest ones last, and a history ending in tool results renders
ending in them. (Media inline in a tool result are another matter: Chat Completions carries them
only in a user message after the tool messages, so the histories here hold photos in prompts.)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextwindow.compile import CompileState, Policy, PricedMessage, compile
from contextwindow.content import AttachmentRef, Block, Image, Message, Text, ToolResult, ToolUse
from contextwindow.formats import anthropic, openai, responses
from contextwindow.models import ModelProfile
from contextwindow.pricing import Estimator

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de0000000c4944415408d763f8cfc0"
    "00000301010018dd8db00000000049454e44ae426082"
)
PROSE = "The quick brown fox jumps over the lazy dog. "


def _ref(n: int) -> AttachmentRef:
    sha = hashlib.sha256(str(n).encode()).hexdigest()
    return AttachmentRef(id=f"att_{sha[:32]}", sha256=sha, media_type="image/png", size_bytes=len(PNG))


def _load(ref: AttachmentRef) -> bytes:
    return PNG


@dataclass(frozen=True)
class History:
    messages: tuple[Message, ...]
    calls: tuple[str, ...]
    """Every tool call id, in the agent's order."""
    last: tuple[str, ...]
    """The ids the last message answers (the history ends in their results)."""
    window: int


def _result(text: str, as_blocks: bool) -> str | tuple[Text, ...]:
    return (Text(text="output:"), Text(text=text)) if as_blocks else text


@st.composite
def histories(draw: st.DrawFn) -> History:
    """An agent's history: prompts (some with a photo), rounds of tool calls and their results, and
    answers, ending in the results of the last round of calls."""
    turns = draw(st.integers(min_value=1, max_value=6))
    messages: list[Message] = []
    calls: list[str] = []
    last: tuple[str, ...] = ()
    photo = 0
    for turn in range(turns):
        prompt: list[Block] = [Text(text=f"turn {turn}: " + PROSE * draw(st.integers(0, 20)))]
        if draw(st.booleans()):
            photo += 1
            prompt.append(Image(ref=_ref(photo)))
        messages.append(Message(role="user", content=tuple(prompt)))
        rounds = draw(st.integers(min_value=1 if turn == turns - 1 else 0, max_value=3))
        for r in range(rounds):
            ids = tuple(f"call_{turn}_{r}_{k}" for k in range(draw(st.integers(1, 3))))
            said = [Text(text="Let me look.")] if draw(st.booleans()) else []
            uses = [ToolUse(id=i, name="read_file", input={"path": f"{i}.py"}) for i in ids]
            messages.append(Message(role="assistant", content=(*said, *uses)))
            results = tuple(
                ToolResult(
                    tool_use_id=i, content=_result(PROSE * draw(st.integers(1, 60)), draw(st.booleans()))
                )
                for i in ids
            )
            messages.append(Message(role="user", content=results))
            calls.extend(ids)
            last = ids
        if turn < turns - 1:
            messages.append(Message(role="assistant", content=(Text(text=f"answer {turn}"),)))
    window = draw(st.sampled_from([3_000, 6_000, 40_000]))
    return History(tuple(messages), tuple(calls), last, window)


def _one_round(*results: str | tuple[Text, ...], window: int) -> History:
    """A prompt, one round of calls and their ``results``: a history that ends in them."""
    ids = tuple(f"call_0_0_{k}" for k in range(len(results)))
    messages = (
        Message(role="user", content=(Text(text="turn 0: "),)),
        Message(
            role="assistant",
            content=tuple(ToolUse(id=i, name="read_file", input={"path": f"{i}.py"}) for i in ids),
        ),
        Message(
            role="user",
            content=tuple(ToolResult(tool_use_id=i, content=c) for i, c in zip(ids, results, strict=True)),
        ),
    )
    return History(messages, ids, ids, window)


def _compiled(history: History) -> tuple[Message, ...]:
    profile = ModelProfile(
        name="test-model",
        provider="other",
        context_window=history.window,
        max_output_tokens=200,
        tokenizer="unknown",
    )
    state = CompileState(messages=tuple(PricedMessage(message=m) for m in history.messages))
    policy = Policy(max_inline_images=1)  # every photo but the newest is moved out: a manifest
    out = compile(state, profile, policy, estimator=Estimator(profile, 1.0, preset="seed-store"))
    return tuple(out.messages)


def _pairs_chat(wire: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(the call ids in order, the ids the trailing tool messages answer); asserts every call is
    followed by exactly its results, in order, and no result stands elsewhere."""
    seen: list[str] = []
    i = 0
    while i < len(wire):
        message = wire[i]
        assert message["role"] != "tool", f"a tool result with no call right before it: {message}"
        i += 1
        if message["role"] == "assistant" and message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            answered = [m["tool_call_id"] for m in wire[i : i + len(ids)] if m["role"] == "tool"]
            assert answered == ids, f"calls {ids} answered by {answered}"
            seen.extend(ids)
            i += len(ids)
    trailing = []
    for message in reversed(wire):
        if message["role"] != "tool":
            break
        trailing.insert(0, message["tool_call_id"])
    return seen, trailing


def _pairs_responses(items: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    seen: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        assert item.get("type") != "function_call_output", f"an output with no call right before it: {item}"
        if item.get("type") != "function_call":
            i += 1
            continue
        ids = []
        while i < len(items) and items[i].get("type") == "function_call":
            ids.append(items[i]["call_id"])
            i += 1
        answered = [o["call_id"] for o in items[i : i + len(ids)] if o.get("type") == "function_call_output"]
        assert answered == ids, f"calls {ids} answered by {answered}"
        seen.extend(ids)
        i += len(ids)
    trailing = []
    for item in reversed(items):
        if item.get("type") != "function_call_output":
            break
        trailing.insert(0, item["call_id"])
    return seen, trailing


def _pairs_anthropic(wire: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    seen: list[str] = []
    for n, message in enumerate(wire):
        blocks = message["content"]
        if message["role"] == "user":
            for k, b in enumerate(blocks):
                if b["type"] == "tool_result":
                    assert n > 0 and all(x["type"] == "tool_result" for x in blocks[:k]), (
                        f"a tool result not at the head of the message after its call: {message}"
                    )
            continue
        ids = [b["id"] for b in blocks if b["type"] == "tool_use"]
        if ids:
            answer = wire[n + 1]["content"] if n + 1 < len(wire) else []
            answered = [b["tool_use_id"] for b in answer if b["type"] == "tool_result"]
            assert answered == ids, f"calls {ids} answered by {answered}"
            seen.extend(ids)
    final = wire[-1]["content"]
    trailing = [b["tool_use_id"] for b in final] if all(b["type"] == "tool_result" for b in final) else []
    return seen, trailing


def _in_order(kept: list[str], calls: tuple[str, ...]) -> bool:
    at = iter(calls)
    return all(any(c == k for c in at) for k in kept)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
# Newest results over the budget, one of them a list of blocks: the per-message cap counted only the
# string results (1,159 of a 1,400 cap), so nothing was cut and compile raised OverBudget (2,858 > 2,800).
@example(_one_round(PROSE * 43, PROSE * 60, (Text(text="output:"), Text(text=PROSE * 48)), window=3_000))
def test_a_history_ending_in_tool_results_renders_ending_in_them_on_every_wire(history: History) -> None:
    messages = _compiled(history)
    rendered = {
        "chat": _pairs_chat(openai.render_messages(messages, _load)),
        "responses": _pairs_responses(responses.render_items(messages, _load)),
        "anthropic": _pairs_anthropic(anthropic.render_messages(messages, _load)),
    }
    for wire, (kept, trailing) in rendered.items():
        assert _in_order(kept, history.calls), f"{wire}: calls out of the agent's order: {kept}"
        assert kept[-len(history.last) :] == list(history.last), f"{wire}: the newest calls are not last"
        assert trailing == list(history.last), f"{wire}: the request ends with {trailing}, not the results"


def test_the_manifest_is_inside_the_last_tool_result() -> None:
    """The ``<attachments>`` manifest goes in the tool result's text, so no wire renders it after."""
    history = (
        Message.user("look", Image(ref=_ref(1))),
        Message(role="assistant", content=(Text(text="ok"),)),
        Message.user("and this", Image(ref=_ref(2))),
        Message(role="assistant", content=(ToolUse(id="c1", name="read_file", input={}),)),
        Message(role="user", content=(ToolResult(tool_use_id="c1", content="print(1)"),)),
    )
    messages = _compiled(History(history, ("c1",), ("c1",), 40_000))
    [result] = messages[-1].content
    assert isinstance(result, ToolResult) and isinstance(result.content, str)
    code, manifest = result.content.split("\n\n", 1)
    assert code == "print(1)" and manifest.startswith("<attachments>") and _ref(1).id in manifest
