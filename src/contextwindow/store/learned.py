"""What providers taught about an endpoint and model, kept once for the whole store.

A rejection for size names the window a model really serves; the provider's counts calibrate the
estimate. Both are facts about the endpoint and the model, not about one conversation, so they live
in a store's own session, :data:`LEARNED_SESSION` (``/tenant`` after it for a tenant's), where every
session, guard, process and worker on the store finds them: a new conversation starts from what any
other one learned.

- :class:`LearnedWindows`: per wire format and model, the window learned (``note`` entries). A
  smaller window is news; a request the provider accepted above it (counted by its usage: a
  larger-context beta header, a model upgrade behind the same name) withdraws the lesson, so the
  window is the declared one again until a rejection teaches another.
- :class:`SharedSlot`: a calibration record read from the session's own ledger first and, for a
  session that has none, from the store's (per wire format, model and connection); written to both.
- :func:`lessons`: everything a store learned, for ``contextwindow inspect``.

Lessons are appended, never rewritten: the newest entry per key decides, the older stay to be read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._ledger import STORE_SESSIONS, Session, Store
from .slots import LedgerSlot, StateSlot

__all__ = [
    "LEARNED_SESSION",
    "REFRESH_SECONDS",
    "SHARED_SAVE_MOVE",
    "LearnedWindows",
    "Lesson",
    "SharedSlot",
    "lessons",
]

LEARNED_SESSION = STORE_SESSIONS + "learned"
"""The ledger session that keeps what providers taught (``/tenant`` after it for a tenant's). A
store's own session: :meth:`~contextwindow.store.Store.sessions` does not list it."""

REFRESH_SECONDS = 1.0
"""How old a window lesson read from the store may be before :meth:`LearnedWindows.get` reads it
again: at most one indexed read a second per model, and a withdrawal elsewhere is seen that soon."""

SHARED_SAVE_MOVE = 0.01
"""A session's calibration multiplier is written to the store's record when it has moved this much
since the store's record was last read or written: every session learns from its own calls, and the
store's record, read by every new session, follows without an entry per call."""


class LearnedWindows:
    """The window each model really serves, as rejections for size taught it, on one wire format.

    ``get(model)`` is the window learned for ``model`` (``None``: nothing learned, or the lesson was
    withdrawn); ``windows[model] = n`` records a lesson (only a smaller window is news);
    :meth:`accepted` withdraws it when the provider accepted more. A model nothing was learned of is
    read from the store again on each ``get``, so a window another process learned meanwhile is found;
    a model's lesson is read again once it is :data:`REFRESH_SECONDS` old, so a lesson another
    process withdrew (or a smaller window it learned) reaches this one within that time."""

    def __init__(
        self,
        store: Store,
        wire: str,
        *,
        tenant: str | None = None,
        declared: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = store.session(LEARNED_SESSION if tenant is None else f"{LEARNED_SESSION}/{tenant}")
        self.wire = wire
        self.route = wire if declared is None else f"{wire}@{declared}"
        """What the window lessons are kept for: the wire format, and the window the guard was told
        (``declared``: a larger-context beta asked for is another endpoint, with lessons of its own).
        Calibration is the wire format's, whatever the window."""
        self._clock = clock
        self._known: dict[str, tuple[int, float]] = {}
        """Per model, the window learned and when it was read from the store (``clock()``)."""

    def _slot(self, model: str) -> LedgerSlot:
        return LedgerSlot(
            self.session, "note", match={"learned": "window", "wire": self.route, "model": model}
        )

    def get(self, model: str, default: int | None = None) -> int | None:
        now = self._clock()
        cached = self._known.get(model)
        if cached is None or now - cached[1] >= REFRESH_SECONDS:
            record = self._slot(model).load()
            window = record.get("window") if record is not None else None
            if not isinstance(window, int) or window <= 0:
                self._known.pop(model, None)
                return default
            cached = self._known[model] = (window, now)
        known = cached[0]
        return known if default is None else min(known, default)

    def __setitem__(self, model: str, window: int) -> None:
        known = self.get(model)
        if known is not None and known <= window:
            return
        self._known[model] = (window, self._clock())
        self._slot(model).save({"window": window})

    def accepted(self, model: str, prompt: int) -> bool:
        """The provider accepted a request of ``model`` it counted at ``prompt`` input tokens: when
        that is more than the window learned, the lesson is out of date (the endpoint serves more
        now) and is withdrawn. Returns whether it was."""
        known = self.get(model)
        if known is None or prompt <= known:
            return False
        self._known.pop(model, None)
        self._slot(model).save({"window": None, "withdrawn": known, "accepted": prompt})
        return True

    def calibration(
        self,
        own: StateSlot,
        *,
        model: str,
        connection: str,
        usable: Callable[[Mapping[str, Any]], bool] = lambda record: True,
    ) -> SharedSlot:
        """The calibration slot of a session's engine: ``own`` (the session's record) first, the
        store's for this wire format, ``model`` and ``connection`` when the session has none and
        ``usable`` takes it (:class:`SharedSlot`)."""
        shared = LedgerSlot(
            self.session,
            "calibration",
            match={"wire": self.wire, "model": model, "connection": connection},
        )
        return SharedSlot(own, shared, usable=usable)


class SharedSlot:
    """A :class:`~contextwindow.store.StateSlot` kept in two places: the session's own record
    (``own``) decides when there is one; a session without one starts from ``shared`` (the store's,
    when ``usable`` says it is: a record from other pricing rules is not). Every save goes to
    ``own``; to ``shared`` when its ``multiplier`` moved :data:`SHARED_SAVE_MOVE` from the shared
    record's, or on the first save."""

    def __init__(
        self,
        own: StateSlot,
        shared: StateSlot,
        *,
        usable: Callable[[Mapping[str, Any]], bool] = lambda record: True,
    ) -> None:
        self.own = own
        self.shared = shared
        self.usable = usable
        self._shared_at: float | None = None
        """The shared record's multiplier as last read or written (``None``: none yet)."""

    def load(self) -> Mapping[str, Any] | None:
        shared = self.shared.load()
        if shared is not None:
            self._shared_at = _multiplier(shared)
        own = self.own.load()
        if own is not None:
            return own
        return shared if shared is not None and self.usable(shared) else None

    def save(self, record: Mapping[str, Any]) -> None:
        self.own.save(record)
        multiplier = _multiplier(record)
        if multiplier is None:
            return
        if self._shared_at is None or abs(multiplier - self._shared_at) >= SHARED_SAVE_MOVE:
            self.shared.save(record)
            self._shared_at = multiplier


def _multiplier(record: Mapping[str, Any]) -> float | None:
    value = record.get("multiplier")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Lesson:
    """One thing a store learned: ``what`` is ``"window"`` (``value``: tokens; ``None`` when the
    lesson was withdrawn) or ``"calibration"`` (``value``: the multiplier, per ``connection``)."""

    what: str
    wire: str
    model: str
    value: float | int | None
    connection: str | None = None
    tenant: str | None = None


def lessons(store: Store) -> list[Lesson]:
    """Every lesson the store keeps, the newest per key, by tenant (``None``: the store's own)."""
    found: list[Lesson] = []
    for sid in store.sessions(prefix=LEARNED_SESSION):
        tenant = sid[len(LEARNED_SESSION) + 1 :] or None
        found += _session_lessons(store.session(sid), tenant)
    return found


def _session_lessons(session: Session, tenant: str | None) -> list[Lesson]:
    newest: dict[tuple[str, ...], Lesson] = {}
    for entry in session.entries(["note", "calibration"]):
        key = entry.payload.get("slot")
        if not isinstance(key, Mapping):
            continue
        wire, model = str(key.get("wire", "")), str(key.get("model", ""))
        if entry.kind == "note" and key.get("learned") == "window":
            window = entry.payload.get("window")
            value = window if isinstance(window, int) and window > 0 else None
            newest[("window", wire, model)] = Lesson(
                what="window", wire=wire, model=model, value=value, tenant=tenant
            )
        elif entry.kind == "calibration":
            connection = str(key.get("connection", ""))
            newest[("calibration", wire, model, connection)] = Lesson(
                what="calibration",
                wire=wire,
                model=model,
                value=_multiplier(entry.payload),
                connection=connection,
                tenant=tenant,
            )
    return list(newest.values())
