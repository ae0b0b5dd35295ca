"""What a counted request holds (:class:`~contextwindow.engine.live.Held`): which messages of the next
compile it does not share, the same answer whether the next compile reuses its message objects (the
leading run compared by identity) or renders every message anew (looked up by id)."""

from __future__ import annotations

from contextwindow.content import Message, Text
from contextwindow.engine.live import Held, unshared


def _m(i: int, text: str | None = None, *, id: str | None = "") -> Message:
    return Message(
        role="user" if i % 2 == 0 else "assistant",
        content=(Text(text=text or f"message {i}"),),
        id=f"m{i}" if id == "" else id,
    )


def _ids(messages: list[Message]) -> list[str | None]:
    return [m.id for m in messages]


def _by_map(held: Held, messages: list[Message]) -> list[Message]:
    """The answer by a plain map of every message the request held (what ``Held`` stands for)."""
    plain = {m.id: m.content for m in held.compiled if m.id is not None}
    plain.update(held.appended)
    return unshared(plain, messages)


def test_a_history_that_only_grew_leaves_only_what_is_new_unshared() -> None:
    compiled = tuple(_m(i) for i in range(6))
    held = Held(compiled=compiled)
    reply = _m(6)
    held[reply.id or ""] = reply.content
    stored_reply = Message(role=reply.role, content=reply.content, id=reply.id)  # read back: a new object
    nxt = [*compiled, stored_reply, _m(7)]
    assert _ids(held.unshared(nxt)) == ["m7"]
    assert held.unshared(nxt) == _by_map(held, nxt)


def test_a_message_rendered_otherwise_after_the_shared_run_is_unshared() -> None:
    compiled = tuple(_m(i) for i in range(6))
    held = Held(compiled=compiled)
    capped = _m(4, "message 4 [capped]")
    nxt = [*compiled[:4], capped, compiled[5], _m(6)]
    assert _ids(held.unshared(nxt)) == ["m4", "m6"]
    assert held.unshared(nxt) == _by_map(held, nxt)


def test_a_compile_that_renders_every_message_anew_is_looked_up_by_id() -> None:
    compiled = tuple(_m(i) for i in range(6))
    held = Held(compiled=compiled)
    anew = [Message(role=m.role, content=tuple(m.content), id=m.id) for m in compiled]
    summary = _m(0, "a summary of 0-2", id="c1")
    nxt = [summary, *anew[3:], _m(6), _m(7, id=None)]
    assert _ids(held.unshared(nxt)) == ["c1", "m6", None]
    assert held.unshared(nxt) == _by_map(held, nxt)


def test_a_snapshot_keeps_what_was_held_while_the_request_grows() -> None:
    compiled = tuple(_m(i) for i in range(4))
    live = Held(compiled=compiled)
    anchored = live.snapshot()
    later = _m(4)
    live[later.id or ""] = later.content
    assert _ids(anchored.unshared([*compiled, later])) == ["m4"]
    assert _ids(live.unshared([*compiled, later])) == []
    assert anchored.get("m4") is None and live.get("m4") == later.content
