"""Hypothesis strategies for canonical messages (media by URL: attachments need a session)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from contextwindow.content import (
    Document,
    Image,
    Message,
    RedactedThinking,
    Text,
    Thinking,
    ToolResult,
    ToolUse,
)

text = st.text(max_size=60)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
)
json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)

blocks = st.one_of(
    st.builds(Text, text=text),
    st.builds(
        ToolUse,
        id=st.text(min_size=1, max_size=12),
        name=st.text(min_size=1, max_size=12),
        input=json_objects,
    ),
    st.builds(
        ToolResult,
        tool_use_id=st.text(min_size=1, max_size=12),
        content=text | st.lists(st.builds(Text, text=text), max_size=3).map(tuple),
        is_error=st.booleans(),
    ),
    st.builds(Thinking, thinking=text, signature=st.none() | st.text(min_size=1, max_size=20)),
    st.builds(RedactedThinking, data=text),
    st.builds(Image, url=st.just("https://example.com/a.png")),
    st.builds(Document, url=st.just("https://example.com/a.pdf"), title=st.none() | text),
)

messages = st.builds(
    Message,
    role=st.sampled_from(["user", "assistant"]),
    content=st.lists(blocks, min_size=1, max_size=4).map(tuple),
    created_at=st.none()
    | st.datetimes(timezones=st.just(UTC), min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)),
    metadata=json_objects,
)
