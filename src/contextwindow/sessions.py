"""What a ledger says of each session: model, times, messages, folds, learned window, last request, cost.

Read from the records the engine (and so the guard, the adapters and the proxy) writes into every
session, never from a compile: ``anchor`` records name the model, ``usage`` records each call's own
tokens, the ``request_sent`` notes the estimate of each request and the window it was measured
against, ``checkpoint`` entries the folds. The window a session *learned* is the one its latest
request was measured against when that is not the one its first request was (a provider that
refused above a smaller window than the profile declared). ::

    from contextwindow.sessions import list_sessions

    with open_store("agent.db", read_only=True) as store:
        for row in list_sessions(store, model="claude-sonnet-4-6"):
            print(row.id, row.learned_window, row.cost)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from . import cost as _cost
from .store import Entry, SessionInfo, Store
from .usage.tracker import Usage

__all__ = ["SessionSummary", "list_sessions", "summarize_session"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionSummary:
    """One session as its ledger records describe it (``None``: nothing recorded says)."""

    id: str
    """The full session id."""
    model: str | None
    """The model its newest anchor (a call the provider accepted and counted) was made for."""
    created_at: datetime
    """When its first entry was written."""
    last_call_at: datetime | None
    """When its newest call's usage was recorded."""
    messages: int
    calls: int
    """Calls with a usage record."""
    folds: int
    """Compaction checkpoints: how many times history was folded into a summary."""
    window: int | None
    """The window its latest request was measured against."""
    learned_window: int | None
    """That window, when it differs from the one the first request was measured against."""
    last_request_tokens: int | None
    """The latest request's input: the provider's count when it reported one, else the estimate."""
    max_tokens: int | None
    """The ``max_tokens`` the latest request was sent with (the output it reserved)."""
    head_tokens: dict[str, int] | None = None
    """What the latest request's ``system`` prompt and ``tools`` were estimated at (the ledger holds
    the messages, not the system prompt and tools); ``None`` when its ledger does not say."""
    usage: Usage
    """Every call's usage, summed."""
    cost: Decimal | None
    """Dollars, from genai-prices; ``None`` for a model it does not know or when it is not installed."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, times in ISO 8601 and the cost as a number of dollars."""
        return {
            "id": self.id,
            "model": self.model,
            "created_at": self.created_at.isoformat(),
            "last_call_at": None if self.last_call_at is None else self.last_call_at.isoformat(),
            "messages": self.messages,
            "calls": self.calls,
            "folds": self.folds,
            "window": self.window,
            "learned_window": self.learned_window,
            "last_request_tokens": self.last_request_tokens,
            "max_tokens": self.max_tokens,
            "head_tokens": self.head_tokens,
            "usage": {
                "fresh_input": self.usage.fresh_input,
                "cache_read": self.usage.cache_read,
                "cache_write": self.usage.cache_write,
                "output": self.usage.output,
            },
            "cost_usd": None if self.cost is None else float(round(self.cost, 6)),
        }


def list_sessions(
    store: Store, *, model: str | None = None, since: datetime | None = None
) -> list[SessionSummary]:
    """Every session, oldest first by its newest entry; with ``model``, only those whose model is
    that one; with ``since`` (an aware datetime), only those written to since then."""
    infos = store.session_infos()
    if since is not None:
        infos = [info for info in infos if info.last_at >= since]
    rows = [summarize_session(store, info) for info in sorted(infos, key=lambda i: (i.last_at, i.id))]
    return rows if model is None else [row for row in rows if row.model == model]


def summarize_session(store: Store, info: SessionInfo) -> SessionSummary:
    """One session's summary from its records (its messages are counted, never read)."""
    session = store.session(info.id)
    anchor = session.latest("anchor")
    model = _anchor_model(anchor)
    calls: list[Usage] = []
    last_call_at = None
    last_reported: int | None = None
    windows: list[int] = []
    last_estimate: int | None = None
    max_tokens: int | None = None
    head: dict[str, int] | None = None
    for entry in session.entries(["usage", "note"]):
        if entry.kind == "usage":
            usage = _usage(entry.payload)
            if usage is None:
                continue
            calls.append(usage)
            last_call_at = entry.created_at
            last_reported = usage.prompt if entry.payload.get("reported", True) and usage.prompt else None
            continue
        event = entry.payload.get("event")
        if isinstance(event, Mapping) and event.get("type") == "request_sent":
            window, estimate = event.get("window"), event.get("estimated_tokens")
            if isinstance(window, int):
                windows.append(window)
            if isinstance(estimate, int):
                last_estimate, last_reported = estimate, None
            if isinstance(event.get("max_tokens"), int):
                max_tokens = event["max_tokens"]
            if isinstance(event.get("system_tokens"), int) and isinstance(event.get("tools_tokens"), int):
                head = {"system": event["system_tokens"], "tools": event["tools_tokens"]}
    total = sum(calls, Usage())
    return SessionSummary(
        id=info.id,
        model=model,
        created_at=info.created_at,
        last_call_at=last_call_at,
        messages=info.messages,
        calls=len(calls),
        folds=info.kinds.get("checkpoint", 0),
        window=windows[-1] if windows else None,
        learned_window=windows[-1] if windows and windows[-1] != windows[0] else None,
        last_request_tokens=last_reported if last_reported is not None else last_estimate,
        max_tokens=max_tokens,
        head_tokens=head,
        usage=total,
        cost=_priced(calls, model),
    )


def _anchor_model(anchor: Entry | None) -> str | None:
    if anchor is None:
        return None
    inner = anchor.payload.get("anchor")
    name = inner.get("model") if isinstance(inner, Mapping) else None
    return name if isinstance(name, str) and name else None


def _usage(payload: Mapping[str, Any]) -> Usage | None:
    """A usage record as the engine writes it; a record of another shape (a host's own) is skipped."""
    fields = ("fresh_input", "cache_read", "cache_write", "output")
    if not any(key in payload for key in fields):
        return None
    try:
        return Usage(**{key: payload.get(key, 0) for key in fields})
    except (TypeError, ValueError):
        return None


def _priced(calls: list[Usage], model: str | None) -> Decimal | None:
    if model is None or not _cost.available():
        return None
    spent = _cost.price_all(calls, model)
    return None if spent is None else spent.total
