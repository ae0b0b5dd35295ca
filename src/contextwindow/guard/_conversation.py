"""Recognising the conversation: which ledger session an agent's request continues.

An agent's history only grows, so a request is matched to a stored session by its prefix
(:mod:`._match`): the longest prefix of the request that ends where a stored session ends is that
session, and the rest of the request is appended to it. A request that diverges from what was stored
(an agent that edited, cleared or dropped earlier messages) becomes a **branch**: a new session, named
after its root with a ``.N`` suffix, that shares the stored session's entries
(:meth:`~contextwindow.store.Session.branch_from`: nothing is copied) and stores only what is new. A
history that is the stored one with some messages replaced, message for message (a cleared tool
result, a removed thinking block, a reply sent back edited), shares all of it and stores the replaced
messages as edits; one that stops matching and goes another way (a rewind) shares it up to the first
message that differs. What was learned of the shared prefix stays: its checkpoints (and the newest one
recorded later that covers only shared messages), the calibration, the windows a rejection taught.
A history that shares no message with any stored one is a new session. The root is the ``session``
id given to the guard, or ``guard-`` and the chain hash of the first message, so a new process finds
the sessions an earlier one stored.

Several processes may serve one store at once: on each call the session's length in the store says
whether another one appended since (then what it appended is read first), and a call's new messages
are appended in one transaction only if nobody did meanwhile
(:meth:`~contextwindow.store.Session.extend` with ``expect``), else the request is matched again.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..content import MEDIA_TYPES, Block, Message, ToolResult
from ..engine.compiler import EngineCompiler
from ..engine.loop import Engine
from ..errors import SessionMoved, StoreBusy
from ..store import Entry, Session, Store
from ..store.learned import LEARNED_SESSION, LearnedWindows
from ._asked import AskedPrices
from ._bounded import Bound
from ._match import extend_chain, longest_known, message_key
from ._own_calls import own_ids
from ._wire import WireMemo

__all__ = ["LEARNED_SESSION", "SYNC_ATTEMPTS", "Conversation", "Conversations", "LearnedWindows"]

SYNC_ATTEMPTS = 4
"""How many times one call re-reads a session other processes keep appending to before it gives up
(:class:`~contextwindow.errors.StoreBusy`): each attempt follows a real append by another writer."""


class Conversation:
    """One ledger session the guard keeps: its messages' chain and the engine that runs it.

    Other processes may serve the same session (several proxy workers on one store), so what this
    one holds is a view of the ledger as of :attr:`synced`: the session's length then, and the
    handle's own appends since (:attr:`Session.appended`) are the only entries it expects to find
    beyond. :meth:`moved` asks the store (one indexed read) whether anyone else appended;
    :meth:`sync` then reads what they appended."""

    def __init__(self, session: Session, root: str, learned: LearnedWindows | None = None) -> None:
        self.session = session
        self.root = root
        self.learned = learned
        """The windows learned on the whole store (``None``: only what this conversation learned)."""
        self.chain: list[str] = []
        self.ids: list[str | None] = []
        """The ledger id of the message at each place of :attr:`chain` (where a branch forks)."""
        self.turn_start: str | None = None
        """The id of the message that opened the current turn: the newest user message that is
        not only tool results (folds never cover it)."""
        self.compiler = EngineCompiler()
        self.wire_memo = WireMemo()
        """The wire items of the messages last sent (:class:`~._wire.WireMemo`)."""
        self.asked = AskedPrices()
        """The prices of the agent's messages as written (:class:`~._asked.AskedPrices`)."""
        self.engines: dict[str, Engine] = {}
        self.last: Message | None = None
        """The newest stored message (its metadata may name calls of the guard's still unanswered)."""
        self.windows: dict[str, int] = {}
        """Per model, the window its engines learned (kept when :meth:`sync` drops them)."""
        self.synced = 0
        """The session's length when this view last matched the store."""
        self._appended_at_sync = session.appended
        self._messages_at_sync = 0
        self._turn_start_at_sync: str | None = None
        self._last_at_sync: Message | None = None

    def window_for(self, model: str, default: int) -> int:
        """The window to guard ``model`` at: ``default`` unless a smaller one was learned."""
        known = min(self.windows.get(model, default), default)
        if self.learned is None:
            return known
        return self.learned.get(model, known) or known

    def learned_from(self, engine: Engine) -> None:
        """Keep what a rejection taught ``engine`` of the window, for every conversation on the store;
        its summariser is fitted to it from now on."""
        window = engine.window
        if window is None:
            return
        summarizer = engine.summarizer
        if summarizer is not None and summarizer.profile.context_window > window:
            # The summariser's requests go to the same provider: fitted to what it serves, too.
            summarizer.profile = summarizer.profile.with_(
                context_window=window, max_output_tokens=min(summarizer.profile.max_output_tokens, window)
            )
            summarizer.max_output_tokens = min(summarizer.max_output_tokens, window)
        for model, held in self.engines.items():
            if held is engine:
                self.windows[model] = min(window, self.windows.get(model, window))
                if self.learned is not None:
                    self.learned[model] = window

    def accepted(self, engine: Engine, prompt: int) -> None:
        """The provider accepted a request of ``engine`` it counted at ``prompt`` input tokens: a
        window learned below that is out of date (the endpoint serves more now) and is withdrawn for
        the whole store; the engine is rebuilt at the declared window on the next call."""
        if self.learned is None:
            return
        for model, held in self.engines.items():
            if held is engine and self.learned.accepted(model, prompt):
                self.windows.pop(model, None)
                del self.engines[model]
                return

    def took(self, message: Message) -> None:
        """``message`` (stored, with its id) is now the newest of the session."""
        self.last = message
        extended = extend_chain(self.chain[-1] if self.chain else "", message)
        if extended is None:
            return  # the guard's own calls alone: the agent never sees them
        self.chain.append(extended)
        self.ids.append(message.id)
        if message.role == "user" and not all(isinstance(b, ToolResult) for b in message.content):
            self.turn_start = message.id

    def expected(self) -> int:
        """The session's length if nobody but this handle appended since :attr:`synced`."""
        return self.synced + self.session.appended - self._appended_at_sync

    def moved(self) -> int | None:
        """The session's length in the store when another writer appended to it since the last sync;
        ``None`` when this view is current."""
        length = self.session.length()
        if length == self.expected():
            self._mark(length)
            return None
        return length

    def sync(self, length: int | None = None) -> int:
        """Bring the view up to the store: the messages appended since the last sync, by anyone, in
        the ledger's order. What the engines held in memory of the session is dropped with them
        (they are rebuilt from the ledger, as a new process would build them). Returns how many
        leading messages of the chain were kept as they were."""
        length = self.session.length() if length is None else length
        kept = self._messages_at_sync
        del self.chain[kept:]
        del self.ids[kept:]
        self.turn_start = self._turn_start_at_sync
        self.last = self._last_at_sync
        for stored in self.session.messages(after=self.synced - 1 if self.synced else None):
            if stored.position < length:
                self.took(stored.message)
        self._mark(length)
        if self.engines:
            for model, engine in self.engines.items():
                # What a rejection taught of the window is kept (and on the store: learned_from).
                if engine.window is not None:
                    self.windows[model] = engine.window
            self.engines.clear()
            self.compiler = EngineCompiler()
        return kept

    def _mark(self, length: int) -> None:
        self.synced = length
        self._appended_at_sync = self.session.appended
        self._messages_at_sync = len(self.chain)
        self._turn_start_at_sync = self.turn_start
        self._last_at_sync = self.last


class Conversations:
    """The conversations one guard core keeps, by session id, and every chain hash they hold, by root.

    ``root`` is the session id the guard was given (``None``: each conversation's own, from its first
    message); ``tenant`` prefixes every root (``tenant/root``), so that no two tenants share one, nor
    what was learned of the windows (:class:`LearnedWindows`, per ``wire`` format and ``declared`` window). ``capacity`` bounds
    the bytes they hold in memory (:mod:`._bounded`; ``None``: no bound): the least recently used are
    forgotten, and read back from the ledger when a request continues them."""

    def __init__(
        self,
        store: Store,
        root: str | None,
        *,
        tenant: str | None = None,
        wire: str = "",
        capacity: int | None = None,
        declared: int | None = None,
    ) -> None:
        self.store = store
        self.bound: Bound[Conversation] = Bound(capacity)
        self.root = root
        self.tenant = tenant
        self.learned = LearnedWindows(store, wire, tenant=tenant, declared=declared)
        """The windows providers taught, on the whole store (per ``wire`` format and model)."""
        self._conversations: dict[str, Conversation] = {}
        self._hashes: dict[str, dict[str, tuple[Conversation, int]]] = {}
        """Per root, every stored chain hash: the conversation and how many messages it covers."""
        self._roots: set[str] = set()

    def took(self, conversation: Conversation, message: Message) -> None:
        """``message`` (stored) is now the newest of ``conversation``; its chain hash is learnt."""
        conversation.took(message)
        if self._conversations.get(conversation.session.id) is not conversation:
            return  # forgotten while its call was under way (a stream): its next request reads it back
        if conversation.chain:
            self.learn(conversation, len(conversation.chain) - 1)
        self.grew(conversation, (message,))

    def grew(self, conversation: Conversation, messages: Sequence[Message]) -> None:
        """``conversation`` was used and holds ``messages`` more: the least recently used others are
        forgotten while the bound is passed."""
        if self._conversations.get(conversation.session.id) is conversation:
            for forgotten in self.bound.grew(conversation, messages):
                self._forget(forgotten)

    def _forget(self, conversation: Conversation) -> None:
        """Drop ``conversation`` from memory: its session, chain hashes and engines (the ledger keeps
        all of it; a request that continues it finds it there again)."""
        if self._conversations.get(conversation.session.id) is conversation:
            del self._conversations[conversation.session.id]
        known = self._hashes.get(conversation.root, {})
        for h in conversation.chain:
            if h in known and known[h][0] is conversation:
                del known[h]

    def _load_root(self, root: str, *, again: bool = False) -> None:
        """Read the sessions of ``root`` from the store: once, or ``again`` to find those another
        process started or moved since."""
        if root in self._roots and not again:
            return
        self._roots.add(root)
        for sid in self.store.sessions(prefix=root):
            if not (sid == root or (sid.startswith(root + ".") and sid[len(root) + 1 :].isdigit())):
                continue
            conversation = self._conversations.get(sid)
            if conversation is None:
                conversation = self._conversations[sid] = Conversation(
                    self.store.session(sid), root, self.learned
                )
                self.learn(conversation, conversation.sync())
            elif (length := conversation.moved()) is not None:
                self.learn(conversation, conversation.sync(length))

    def learn(self, conversation: Conversation, start: int = 0) -> None:
        """Remember the chain hashes of ``conversation`` from its message ``start`` on."""
        known = self._hashes.setdefault(conversation.root, {})
        for n, h in enumerate(conversation.chain[start:], start=start + 1):
            known.setdefault(h, (conversation, n))

    def _free_id(self, root: str) -> str:
        sid, n = root, 0
        while sid in self._conversations or self.store.session(sid).length() > 0:
            n += 1
            sid = f"{root}.{n}"
        return sid

    def _new_conversation(self, root: str) -> Conversation:
        sid = self._free_id(root)
        conversation = Conversation(self.store.session(sid), root, self.learned)
        self._conversations[sid] = conversation
        return conversation

    def _branch(
        self,
        root: str,
        parent: Conversation,
        count: int,
        request: tuple[Sequence[str], Sequence[Message]] | None = None,
    ) -> tuple[Conversation, int] | None:
        """A new session that shares ``parent``'s entries, and how many of the request's messages it
        holds. When the request (``request``: its chain and its messages) is ``parent``'s history with some messages replaced
        (:func:`_edits`), the branch is forked at ``parent``'s whole length with those as edits: it
        stores them and nothing else, and holds the request up to ``parent``'s end. Otherwise it
        shares them up to its ``count``-th message of the chain (exclusive of the first one that
        differs), with what was learned of them: the newest checkpoint recorded after the fork that
        covers only shared messages, and the newest calibration records, are carried over (a few
        entries; the prefix itself is not copied).
        :class:`~contextwindow.errors.SessionMoved` when another process took the id meanwhile;
        ``None`` when the ledger holds no such message of ``parent``'s."""
        at = _fork_position(parent, count)
        if at is None:
            return None  # nothing to share that the ledger can point at
        edits = None if request is None else _edits(parent, count, at, request[1])
        session = self.store.session(self._free_id(root))
        with self.store.batch():
            if edits:
                session.branch_from(parent.session, parent.synced, edits=edits)
            else:
                session.branch_from(parent.session, at)
                for entry in _carried(parent.session, at):
                    session.record(entry.kind, entry.payload)
        conversation = Conversation(session, root, self.learned)
        conversation.windows = dict(parent.windows)
        self._conversations[session.id] = conversation
        self.learn(conversation, conversation.sync())
        if not edits:
            return conversation, count
        held = len(conversation.chain)
        if request is not None and list(request[0][:held]) == conversation.chain:
            return conversation, held
        # Stored, the edits read back otherwise than the request says them: a plain branch instead.
        return self._branch(root, parent, count)

    def match(
        self, hashes: Sequence[str], messages: Sequence[Message] | None = None
    ) -> tuple[Conversation, int]:
        """The conversation a history continues (``hashes``: its chain, :mod:`._match`; ``messages``:
        the history itself, to tell edits of a stored one), and how many of the history's leading
        messages it already has (the rest is new to it).

        The ledger decides, not this process's memory of it: the conversation found is first
        brought up to what other processes appended to it (one indexed read when nobody did), and
        a history that continues none of the sessions known here looks again for sessions another
        process started.
        """
        root = self.root or f"guard-{hashes[0][:20]}"
        if self.tenant is not None:
            root = f"{self.tenant}/{root}"
        fresh = root not in self._roots
        self._load_root(root)
        reloaded = fresh
        for _ in range(SYNC_ATTEMPTS):
            known = self._hashes.setdefault(root, {})
            n = longest_known(hashes, known)
            diverged: tuple[Conversation, int] | None = None
            if n > 0:
                conversation, count = known[hashes[n - 1]]
                if count <= len(conversation.chain) and conversation.chain[count - 1] == hashes[n - 1]:
                    length = conversation.moved()
                    if length is not None:
                        self.learn(conversation, conversation.sync(length))
                        continue  # what another process appended may hold more of this history
                    if count == len(conversation.chain):
                        return conversation, n
                    diverged = (conversation, count)
            if reloaded:
                if diverged is None:
                    return self._new_conversation(root), 0
                try:
                    branch = self._branch(root, *diverged, None if messages is None else (hashes, messages))
                except SessionMoved:
                    branch = None  # another process made a session of that id meanwhile: look again
                else:
                    if branch is None:
                        return self._new_conversation(root), 0
                if branch is not None:
                    return branch
            reloaded = True
            self._load_root(root, again=True)  # sessions another process started since
        raise StoreBusy(f"the sessions of {root!r} kept moving under other writers; try the call again")


_CARRIED = ("checkpoint", "calibration")


def _fork_position(parent: Conversation, count: int) -> int | None:
    """The ledger position of the message at place ``count`` of ``parent``'s chain (the first one a
    diverging history does not share), or ``None``. Replies are taken without their ledger ids, so
    it is read from the nearest earlier message whose id is known (an indexed read, then the
    messages after it)."""
    if count < len(parent.ids) and parent.ids[count] is not None:
        return parent.session.position_of(str(parent.ids[count]))
    known = next((j for j in range(count - 1, -1, -1) if parent.ids[j] is not None), None)
    after = None if known is None else parent.session.position_of(str(parent.ids[known]))
    if known is not None and after is None:
        return None
    previous = "" if known is None else parent.chain[known]
    place = 0 if known is None else known + 1
    for stored in parent.session.messages(after=after):
        extended = extend_chain(previous, stored.message)
        if extended is None:
            continue
        if place == count:
            return stored.position
        previous, place = extended, place + 1
    return None


def _edits(
    parent: Conversation, count: int, at: int, messages: Sequence[Message]
) -> dict[int, Message] | None:
    """The ledger positions and new messages where ``messages`` (a request that differs from
    ``parent``'s chain first at place ``count``, ledger position ``at``) replaces messages of
    ``parent``'s history, when it is that history with some messages replaced: at least as long,
    role for role. ``None`` when it is not, or when a replaced message carries media or stood
    beside the guard's own calls (a plain branch keeps those whole)."""
    places = len(parent.chain)
    if len(messages) < places:
        return None
    edits: dict[int, Message] = {}
    place = count
    for stored in parent.session.messages(after=at - 1):
        if place == places:
            break
        old = stored.message
        key = message_key(old)
        if key is None:
            continue  # the guard's own calls alone: no place in the chain
        new = messages[place]
        if message_key(new) != key:
            if new.role != old.role or own_ids(old) or _has_media(new.content) or _has_media(old.content):
                return None
            edits[stored.position] = new
        place += 1
    return edits if place == places else None


def _has_media(blocks: Sequence[Block]) -> bool:
    """Whether ``blocks`` (a message's content, or a tool result's) hold a medium."""
    return any(
        isinstance(block, MEDIA_TYPES)
        or (
            isinstance(block, ToolResult) and not isinstance(block.content, str) and _has_media(block.content)
        )
        for block in blocks
    )


def _carried(parent: Session, at: int) -> list[Entry]:
    """What ``parent`` learned after position ``at`` that still holds for a branch forked there: its
    newest checkpoint that covers only messages before ``at``, and its newest calibration record of
    each slot (calibration is of the model and connection, not of the messages)."""
    checkpoint: Entry | None = None
    calibrations: dict[str, Entry] = {}
    for entry in parent.entries(_CARRIED, after=at - 1):
        if entry.kind == "calibration":
            calibrations[repr(entry.payload.get("slot"))] = entry
            continue
        last = parent.position_of(str(entry.payload.get("last_id")))
        if last is not None and last < at:
            checkpoint = entry
    carried = sorted(calibrations.values(), key=lambda entry: entry.position)
    return [*carried, checkpoint] if checkpoint is not None else carried
