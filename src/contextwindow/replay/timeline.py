"""A session's provider calls as its ledger recorded them (:func:`read_timeline`), for the session page.

Read from the records the engine writes (so the guard, the adapters and the proxy too), never from a
compile: each ``request_sent`` note opens a call (the tokens sent, the window as known then, the
output bound); the ``usage`` note of the call gives its usage and, where it was priced, its cost;
the notes between two calls (folds, archived results, evicted attachments, restarts, windows
learned, recoveries, failed folds, host notes) are what was done for the next one, a fold with the
text of the summary its checkpoint holds. A call with no usage after which the engine recovered
from a rejection for size was refused. A user message that is not only tool results starts a turn;
an assistant message calling ``read_archived`` is a re-read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import cost as dollars
from ..compile.reread import READ_ARCHIVED
from ..store import Entry, Session
from ..usage.tracker import Usage

__all__ = ["Action", "TimelineCall", "read_timeline"]

_PREVIEW = 300
"""Characters of each message shown beside a call (the page is the user's own, read locally)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """One thing done before a call: its ``kind`` (the event's type) and what it says, in words."""

    kind: str
    detail: str
    text: str = ""
    """A fold's summary text."""


@dataclass(kw_only=True, slots=True)
class TimelineCall:
    """One provider call of a session, as the ledger recorded it."""

    index: int
    turn: int
    """The user turn it belongs to (from 1; 0 before the first user message)."""
    turn_start: bool = False
    """The first call of its turn."""
    sent_tokens: int
    counted: bool
    window: int | None
    max_tokens: int
    usage: Usage | None = None
    cost: float | None = None
    """Dollars, input with cache reads and writes, and output (``None``: not priced)."""
    refused: bool = False
    actions: list[Action] = field(default_factory=list)
    new_messages: list[dict[str, str]] = field(default_factory=list)
    """The messages appended since the call before: ``role`` and a preview of their text."""

    def as_dict(self) -> dict[str, Any]:
        usage = self.usage
        return {
            "index": self.index,
            "turn": self.turn,
            "turn_start": self.turn_start,
            "sent": self.sent_tokens,
            "counted": self.counted,
            "window": self.window,
            "max_tokens": self.max_tokens,
            "usage": None
            if usage is None
            else {
                "fresh_input": usage.fresh_input,
                "cache_read": usage.cache_read,
                "cache_write": usage.cache_write,
                "output": usage.output,
                "input": usage.prompt,
            },
            "cost": self.cost,
            "refused": self.refused,
            "actions": [{"kind": a.kind, "detail": a.detail, "text": a.text} for a in self.actions],
            "messages": self.new_messages,
        }


class _Reader:
    """Walks a session's entries in order, building its calls."""

    def __init__(self, model: str | None) -> None:
        self.model = model
        self.calls: list[TimelineCall] = []
        self.pending: list[Action] = []
        self.messages: list[dict[str, str]] = []
        self.summaries: list[str] = []
        self.turn = 0
        self.turn_open = False
        self.reported = False

    def entry(self, entry: Entry) -> None:
        payload = entry.payload
        if entry.kind == "message":
            self._message(payload.get("message"))
        elif entry.kind == "checkpoint" and isinstance(payload.get("summary"), str):
            self.summaries.append(payload["summary"])
        elif entry.kind == "note" and isinstance(payload.get("event"), Mapping):
            self._event(payload["event"])

    def _message(self, message: Any) -> None:
        if not isinstance(message, Mapping):
            return
        role, blocks = message.get("role"), message.get("content") or []
        if role == "user" and any(isinstance(b, Mapping) and b.get("type") == "text" for b in blocks):
            self.turn += 1
            self.turn_open = True
        if role == "assistant":
            reads = [b for b in blocks if isinstance(b, Mapping) and b.get("name") == READ_ARCHIVED]
            for read in reads:
                wanted = read.get("input", {}).get("id", "") if isinstance(read.get("input"), Mapping) else ""
                self.pending.append(Action(kind="reread", detail=f"re-read archived {wanted}".strip()))
        self.messages.append({"role": str(role), "text": _preview(blocks)})

    def _event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "request_sent":
            self._sent(event)
        elif kind == "usage":
            self._usage(event)
        elif kind in ("overflow_recovered", "window_learned") and self.calls and not self.reported:
            self.calls[-1].refused = True
        if kind not in ("request_sent", "usage", "turn_ended", "tool_result"):
            action = _action(event, self.summaries)
            if action is not None:
                self.pending.append(action)

    def _sent(self, event: Mapping[str, Any]) -> None:
        self.calls.append(
            TimelineCall(
                index=len(self.calls) + 1,
                turn=self.turn,
                turn_start=self.turn_open,
                sent_tokens=int(event.get("estimated_tokens") or 0),
                counted=bool(event.get("counted")),
                window=event.get("window") if isinstance(event.get("window"), int) else None,
                max_tokens=int(event.get("max_tokens") or 0),
                actions=self.pending,
                new_messages=self.messages,
            )
        )
        self.pending, self.messages, self.turn_open, self.reported = [], [], False, False

    def _usage(self, event: Mapping[str, Any]) -> None:
        if not self.calls:
            return
        call, self.reported = self.calls[-1], True
        fields = event.get("usage")
        if not event.get("reported") or not isinstance(fields, Mapping):
            return
        keys = ("fresh_input", "cache_read", "cache_write", "output")
        call.usage = Usage(**{k: int(fields.get(k) or 0) for k in keys})
        priced = event.get("cost")
        if isinstance(priced, Mapping):
            call.cost = float(priced.get("input", 0)) + float(priced.get("output", 0))
        elif self.model is not None and dollars.available():
            # Recorded before calls carried their cost: priced now, at today's prices.
            spent = dollars.price(call.usage, self.model)
            call.cost = None if spent is None else float(spent.total)


def _action(event: Mapping[str, Any], summaries: list[str]) -> Action | None:
    """An event between calls in words (``None``: nothing to show)."""
    kind = str(event.get("type"))
    match kind:
        case "compacted":
            covered = len(event.get("covered_ids") or [])
            text = summaries[-1] if summaries else ""
            return Action(
                kind="folded",
                detail=f"folded {covered} messages ({event.get('phase')}): {event.get('tokens_freed', 0):,} "
                f"tokens freed, summary {event.get('summary_tokens', 0):,} tokens",
                text=text,
            )
        case "tool_results_archived":
            ids = event.get("tool_use_ids") or []
            return Action(
                kind="archived", detail=f"archived {len(ids)} tool results: {', '.join(map(str, ids))}"
            )
        case "attachments_evicted":
            ids = event.get("attachment_ids") or []
            return Action(
                kind="evicted", detail=f"evicted {len(ids)} attachments: {', '.join(map(str, ids))}"
            )
        case "stream_restarted":
            return Action(
                kind="restarted",
                detail=f"stream restarted ({event.get('reason')}): {event.get('input_tokens', 0):,} "
                f"against {event.get('budget', 0):,}",
            )
        case "window_learned":
            return Action(kind="window_learned", detail=f"window learned: {event.get('window', 0):,}")
        case "overflow_recovered":
            return Action(kind="retried", detail=f"refused for size (limit {event.get('limit')}): retried")
        case "compaction_failed":
            return Action(
                kind="fold_failed", detail=f"fold failed open ({event.get('phase')}): {event.get('reason')}"
            )
        case "note":
            return Action(kind="note", detail=f"note {event.get('kind')}")
        case _:
            return None


def _preview(blocks: Sequence[Any]) -> str:
    parts: list[str] = []
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif block.get("type") == "tool_use":
            parts.append(f"[tool call {block.get('name')}]")
        elif block.get("type") == "tool_result":
            content = block.get("content")
            parts.append("[tool result] " + (content if isinstance(content, str) else ""))
        else:
            parts.append(f"[{block.get('type')}]")
    text = " ".join(parts)
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def read_timeline(session: Session, *, model: str | None = None) -> list[TimelineCall]:
    """``session``'s provider calls in order (see the module docstring); ``model`` prices calls
    recorded without their cost."""
    reader = _Reader(model)
    for entry in session.entries():
        reader.entry(entry)
    return reader.calls
