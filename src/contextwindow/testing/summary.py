"""The local provider's summariser mode: a deterministic, extractive, structured summary of a transcript.

A request asks for a summary by carrying the marker ``[[contextwindow:summarize]]`` in its system
prompt or in the text of its last user message, or by asking in the words of contextwindow's own
summariser (:data:`~contextwindow.engine.folding.summary_rules.DEFAULT_SUMMARY_PROMPT`, as any model would be
asked); ``[[contextwindow:summarize target_tokens=600]]``
asks for at most that many output tokens (default: :data:`DEFAULT_TARGET_TOKENS`; a target above the
call's ``max_tokens`` is cut at ``max_tokens`` and stops with ``max_tokens``, as a real model cut at its
output cap does). The sections are the ``## Heading`` lines of the *instructions* only (the system
prompt, and the part of that last user message after the transcript), in order; with none, ``## Goal``,
``## Progress`` and ``## Next Steps`` (the sections maka's checkpoint validator requires).

What is summarised is the transcript alone: the engine's summariser sends the span inside
``<transcript>…</transcript>`` and the summary it rolls forward inside
``<previous_summary>…</previous_summary>`` (``contextwindow.engine.folding.summarizer``); a request without
those tags is summarised from its conversation (every message but the last user one). The summary is
extractive — every line comes from the transcript — and each section is filled by what its heading
asks for:

- goal: the first user request (kept from the previous summary on a roll-forward);
- decisions / progress: the first sentence of each assistant message;
- files, artefacts, context: the files, paths, commands and identifiers the tool calls named;
- open work / next steps: the latest to-do list a tool call wrote, else the latest user request;
- latest state: the last assistant message and the last tool call with the head of its result.

A roll-forward merges the previous summary's sections with the new span (decisions and files
appended, the goal kept, open work and latest state from the newer span). What does not fit the target
is dropped oldest first; when there is room left, the latest state quotes the span's last lines. The
same request always gives the same summary; no body line can open a heading or a code fence, and the
summary ends with a full stop (a trailing colon reads as truncation to summary checks).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..content import Message, Request, Text, ToolResult, ToolUse
from ..engine.folding.summary_rules import DEFAULT_SUMMARY_PROMPT

__all__ = [
    "DEFAULT_SECTIONS",
    "DEFAULT_TARGET_TOKENS",
    "SUMMARY_MARKER",
    "SummaryAsk",
    "summary_ask",
    "write_summary",
]

SUMMARY_MARKER = "[[contextwindow:summarize"
"""Written in a system prompt or last user message, asks the local provider for a summary."""
DEFAULT_TARGET_TOKENS = 400
DEFAULT_SECTIONS = ("Goal", "Progress", "Next Steps")
_MARKER = re.compile(r"\[\[contextwindow:summarize(?:\s+target_tokens=(\d+))?\s*\]\]")
_HEADING = re.compile(r"^ {0,3}##\s+(.+?)\s*#*\s*$", re.MULTILINE)
_SUMMARISER_ASK = DEFAULT_SUMMARY_PROMPT.split(".", 1)[0]
"""The opening sentence of the summariser's own instruction."""
_TRANSCRIPT = re.compile(r"<transcript>\n?(.*)\n?</transcript>", re.DOTALL)
_PREVIOUS = re.compile(r"<previous_summary>\n?(.*?)\n?</previous_summary>", re.DOTALL)
_ENTRY = re.compile(r"^\[(user|assistant|tool call (\S+)|tool result (\S+))\] ?(.*)$")
_SENTENCE = re.compile(r"(.+?[.!?。！？])(?:\s|$)", re.DOTALL)
_PATH_KEYS = ("path", "file", "dir", "url", "pattern", "command", "cmd", "query", "module", "name", "view")
_LINE_CHARS = 200


class SummaryAsk:
    """What a summarise request asks for: a target length and the sections, in order."""

    __slots__ = ("sections", "target_tokens")

    def __init__(self, target_tokens: int, sections: tuple[str, ...]) -> None:
        self.target_tokens = target_tokens
        self.sections = sections


@dataclass(frozen=True, slots=True)
class _Entry:
    kind: str
    """``user``, ``assistant``, ``call`` or ``result``."""
    text: str
    ident: str = ""
    """The tool call id, for calls and results."""


def _texts(message: Message) -> list[str]:
    return [b.text for b in message.content if isinstance(b, Text)]


def _instructions(request: Request) -> str:
    """The system prompt and the last user message's text after its transcript (where the ask is)."""
    parts = [t.text for t in request.system]
    if request.messages and request.messages[-1].role == "user":
        last = "\n".join(_texts(request.messages[-1]))
        end = last.rfind("</transcript>")
        parts.append(last[end + len("</transcript>") :] if end >= 0 else last)
    return "\n".join(parts)


def summary_ask(request: Request) -> SummaryAsk | None:
    """The summary the request asks for, or ``None`` when it carries no marker."""
    joined = _instructions(request)
    match = _MARKER.search(joined)
    if match is None and _SUMMARISER_ASK not in joined:
        return None
    target = int(match.group(1)) if match is not None and match.group(1) else DEFAULT_TARGET_TOKENS
    sections = tuple(dict.fromkeys(_HEADING.findall(joined))) or DEFAULT_SECTIONS
    return SummaryAsk(target_tokens=max(target, 1), sections=sections)


# -- reading the span ------------------------------------------------------------------------------


def _parse_transcript(text: str) -> list[_Entry]:
    """Entries of a transcript as the engine's summariser renders it: ``[role] text`` lines, tool
    calls and results by id; a line without a prefix continues the entry before it."""
    entries: list[_Entry] = []
    for line in text.splitlines():
        match = _ENTRY.match(line)
        if match is None:
            if entries:
                last = entries[-1]
                entries[-1] = _Entry(last.kind, last.text + "\n" + line, last.ident)
            continue
        head, call, result, rest = match.groups()
        if call is not None:
            entries.append(_Entry("call", rest, call))
        elif result is not None:
            entries.append(_Entry("result", rest, result))
        else:
            entries.append(_Entry(head, rest))
    return entries


def _from_messages(messages: Sequence[Message]) -> list[_Entry]:
    entries: list[_Entry] = []
    for message in messages:
        for block in message.content:
            if isinstance(block, Text):
                entries.append(_Entry(message.role, block.text))
            elif isinstance(block, ToolUse):
                args = json.dumps(dict(block.input), ensure_ascii=False, separators=(",", ":"), default=str)
                entries.append(_Entry("call", f"{block.name}({args})", block.id))
            elif isinstance(block, ToolResult):
                body = block.content if isinstance(block.content, str) else " ".join(_texts_of(block))
                entries.append(_Entry("result", body, block.tool_use_id))
    return entries


def _texts_of(result: ToolResult) -> list[str]:
    return (
        [b.text for b in result.content if isinstance(b, Text)] if not isinstance(result.content, str) else []
    )


def _span(request: Request) -> tuple[list[_Entry], dict[str, list[str]]]:
    """The entries to summarise and the previous summary's sections (heading → body lines)."""
    if request.messages and request.messages[-1].role == "user":
        last = "\n".join(_texts(request.messages[-1]))
        transcript = _TRANSCRIPT.search(last)
        if transcript is not None:
            previous = _PREVIOUS.search(last[: transcript.start()])
            return _parse_transcript(transcript.group(1)), _sections_of(previous.group(1) if previous else "")
        history = request.messages[:-1]
    else:
        history = request.messages
    return _from_messages(history), {}


def _sections_of(summary: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in summary.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = out.setdefault(heading.group(1).strip().lower(), [])
        elif current is not None and line.strip() and line.strip().lower() not in ("none", "none."):
            current.append(line.strip().rstrip("."))  # the section's closing full stop is not content
    return out


# -- what each section holds -----------------------------------------------------------------------


def _clean(text: str, limit: int = _LINE_CHARS) -> str:
    """One line of a body: nothing that opens a heading, a fence or a marker; at most ``limit`` chars."""
    flat = " ".join(text.split())
    flat = flat.replace("```", "").replace("~~~", "").replace("[[", "[ [")
    flat = flat.lstrip("#>-* ").strip()
    if len(flat) > limit:
        cut = flat[:limit].rsplit(" ", 1)[0] or flat[:limit]
        flat = cut.rstrip(",;:") + " (cut)"
    return flat


def _first_sentence(text: str) -> str:
    """The first sentence that says something (four words or more: not "Perfect!"), else the text."""
    flat = " ".join(text.split())
    for match in _SENTENCE.finditer(flat):
        if len(match.group(1).split()) >= 4:
            return match.group(1)
    return flat


def _call_parts(entry: _Entry) -> tuple[str, dict[str, Any]]:
    name, _, rest = entry.text.partition("(")
    try:
        args = json.loads(rest[:-1]) if rest.endswith(")") else {}
    except json.JSONDecodeError:
        args = {}
    return name.strip(), args if isinstance(args, dict) else {}


def _identifiers(entries: Sequence[_Entry]) -> list[str]:
    """``tool value`` for each file, path, command or identifier a tool call named, once each."""
    seen: dict[str, None] = {}
    for entry in entries:
        if entry.kind != "call":
            continue
        name, args = _call_parts(entry)
        named = [
            str(value)
            for key, value in args.items()
            if isinstance(value, str | int) and any(k in key.lower() for k in _PATH_KEYS)
        ]
        for value in named or [name]:
            seen.setdefault(_clean(f"{name} {value}" if named else name, 160), None)
    return list(seen)


def _todos(entries: Sequence[_Entry]) -> list[str] | None:
    """The items not completed of the latest to-do list a tool call wrote, if any call wrote one."""
    for entry in reversed(entries):
        if entry.kind != "call":
            continue
        _, args = _call_parts(entry)
        items = args.get("todos")
        if isinstance(items, list):
            out = []
            for item in items:
                if isinstance(item, dict) and item.get("status") != "completed":
                    content = item.get("content") or item.get("activeForm") or ""
                    out.append(_clean(f"{content} ({item.get('status', 'pending')})"))
            return out
    return None


@dataclass
class _Sections:
    goal: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    open_work: list[str] = field(default_factory=list)
    latest: list[str] = field(default_factory=list)
    recent: list[str] = field(default_factory=list)
    """The span's last lines, newest last: quoted in the latest state when there is room."""


def _extract(entries: Sequence[_Entry], previous: dict[str, list[str]]) -> _Sections:
    users = [e for e in entries if e.kind == "user" and e.text.strip() and not e.text.startswith("[image")]
    assistants = [e for e in entries if e.kind == "assistant" and e.text.strip()]
    out = _Sections()
    kept_goal = previous.get("goal")
    out.goal = kept_goal[:1] if kept_goal else [_clean(users[0].text, 400)] if users else []
    said = ["- " + _clean(_first_sentence(e.text)).rstrip(".") for e in assistants]
    out.decisions = list(dict.fromkeys(previous.get("decisions", []) + said))
    files = [line for line in previous.get("files and artefacts", []) if line.startswith("- ")]
    out.files = list(dict.fromkeys(files + ["- " + i.rstrip(".") for i in _identifiers(entries)]))
    todos = _todos(entries)
    if todos is not None:
        out.open_work = ["- " + t for t in todos]
    elif users and (len(users) > 1 or kept_goal):
        out.open_work = ["- " + _clean(users[-1].text)]
    if not out.open_work:
        out.open_work = previous.get("open work", [])
    if assistants:
        out.latest.append("Last reply: " + _clean(assistants[-1].text, 300))
    calls = [e for e in entries if e.kind == "call"]
    if calls:
        last = calls[-1]
        result = next((e for e in entries if e.kind == "result" and e.ident == last.ident), None)
        head = (
            result.text.strip().splitlines()[0] if result is not None and result.text.strip() else "no result"
        )
        out.latest.append(f"Last tool call: {_clean(last.text, 160)}, which returned {_clean(head, 160)}")
    if not out.latest:
        out.latest = previous.get("latest state", [])
    for entry in entries[-12:]:
        label = {"call": "tool call", "result": "tool result"}.get(entry.kind, entry.kind)
        out.recent.append(f"- [{label}] {_clean(entry.text, 160)}")
    return out


def _role(heading: str) -> str:
    name = heading.lower()
    if "goal" in name or "task" in name or "objective" in name:
        return "goal"
    if "decision" in name or "progress" in name or "done" in name:
        return "decisions"
    if "file" in name or "artefact" in name or "artifact" in name or "context" in name:
        return "files"
    if "open" in name or "next" in name or "todo" in name or "remaining" in name:
        return "open_work"
    return "latest"


def write_summary(request: Request, ask: SummaryAsk, count: Callable[[str], int]) -> str:
    """A summary of ``request``'s transcript with ``ask``'s sections, within its target as far as the
    content allows (``count`` is the tokenizer); see the module docstring."""
    entries, previous = _span(request)
    parts = _extract(entries, previous)
    roles = [_role(h) for h in ask.sections]
    quote_into = "latest" if "latest" in roles else roles[-1]

    def render(decisions: int, files: int, recent: int) -> str:
        bodies: dict[str, list[str]] = {
            "goal": parts.goal,
            "decisions": parts.decisions[len(parts.decisions) - decisions :] if decisions else [],
            "files": parts.files[len(parts.files) - files :] if files else [],
            "open_work": parts.open_work,
            "latest": list(parts.latest),
        }
        if recent:
            bodies[quote_into] = bodies[quote_into] + ["The span ended with these lines."]
            bodies[quote_into] += parts.recent[len(parts.recent) - recent :]
        out = []
        used: set[str] = set()
        for heading, role in zip(ask.sections, roles, strict=True):
            body = [] if role in used else bodies[role]
            used.add(role)
            text = "\n".join(body).rstrip(".:：…,; ") if body else "none"
            out.append(f"## {heading}\n{text}.")
        return "\n\n".join(out)

    target = ask.target_tokens

    def after_drops(k: int) -> tuple[int, int]:
        # The oldest decisions and files go first, from the longer list.
        decisions, files = len(parts.decisions), len(parts.files)
        for _ in range(k):
            if decisions >= files:
                decisions -= 1
            else:
                files -= 1
        return decisions, files

    def fits(text: str) -> bool:
        return count(text) <= target

    # Bisect on the number dropped (the summary shrinks as it grows): the fewest drops that fit.
    low, high = 0, len(parts.decisions) + len(parts.files)
    if not fits(render(*after_drops(low), 0)):
        while high - low > 1:
            mid = (low + high) // 2
            if fits(render(*after_drops(mid), 0)):
                high = mid
            else:
                low = mid
        low = high
    decisions, files = after_drops(low)
    text = render(decisions, files, 0)
    if not fits(text):
        return text  # the goal and the latest state alone are over: the call's output cap cuts it
    # Then quote as many of the span's last lines as still fit.
    low, high = 0, len(parts.recent) + 1
    while high - low > 1:
        mid = (low + high) // 2
        if fits(render(decisions, files, mid)):
            low = mid
        else:
            high = mid
    return render(decisions, files, low)
