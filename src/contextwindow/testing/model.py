"""The local provider's behaviour, shared by the in-process provider and the HTTP server.

:class:`LocalModel` takes one canonical request and decides, as a real provider would:

1. fail transiently, when told to (the next ``fail_transient`` calls; Anthropic 529
   ``overloaded_error``, OpenAI 503 ``server_error``);
2. refuse what the real APIs refuse (:mod:`.strict`: empty content, broken tool pairing, the first
   message's role, media that are not their type), with their 400 texts, unless ``strict=False``;
   then a ``max_tokens`` above the model's output cap, with the provider's own 400 text;
3. count the input (:mod:`.counting`) and enforce the window with the provider's real status and
   body: Anthropic 400 ``prompt is too long: N tokens > M maximum`` when the input alone is over,
   ``input length and `max_tokens` exceed context limit: N + B > M`` when input + max_tokens is;
   OpenAI 400 ``context_length_exceeded`` "This model's maximum context length is M tokens. However,
   you requested N tokens (A in the messages, B in the completion)...". ``effective_window`` below
   the declared window makes it reject early, like a provider that silently serves less;
4. answer: a summary when asked (:mod:`.summary`), else the next scripted assistant message, else
   (with ``call_tools``) a call of each offered tool, else a deterministic default reply; output
   longer than ``max_tokens`` is cut there (stop ``max_tokens``);
5. report usage by ``usage_mode``: ``per-call`` (this call's counts), ``cumulative`` (the running
   total of the stream, as membrane's ``usage`` event is: a
   request that continues the previous one — :func:`~contextwindow.providers.streams.continues_stream`:
   the previous request, its reply with tool uses, then their results — adds to the total; any other
   request starts a new stream and a new total; a summariser's request is a stream of its own and
   leaves the agent's stream alone), ``output-only`` (input reported as 0) or ``none``; with
   ``prompt_cache`` on, the input is split into what the prompt cache served, what it wrote and the
   rest (:mod:`.caching`: Anthropic's ``cache_control`` breakpoints, OpenAI's automatic prefixes).

State (script, failure budget, running totals by session) is guarded by a lock: the HTTP server calls
from many threads. What is remembered per session is bounded in bytes (:mod:`.sessions`).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..compaction import AppliedEdit, apply_anthropic_edits
from ..content import Message, Request, Text, ToolResult, ToolUse
from ..errors import InvalidInput, UnknownModel
from ..formats import AttachmentLoader, WireFormat
from ..formats.openai import carried
from ..models import ModelProfile, get_profile
from ..providers.streams import continues_stream
from ..usage.tracker import USAGE_MODES, Usage, UsageMode
from .caching import (
    MAX_BREAKPOINTS,
    Breakpoint,
    CacheUse,
    PromptCache,
    minimum_cacheable,
    provider_breakpoints,
    segments,
)
from .context_management import anthropic_refusal, openai_refusal
from .counting import RequestCount, block_tokens, check_scale, count_request, tokenizer_for
from .sessions import SESSION_BYTES, SessionStream, SessionStreams
from .strict import StrictRefusal, check
from .summary import summary_ask, write_summary

__all__ = [
    "LocalModel",
    "LocalReply",
    "LocalSettings",
    "Rejection",
    "arguments_for",
    "as_carried",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalSettings:
    """How the local provider behaves. ``window=None`` uses each requested model's own window."""

    window: int | None = None
    effective_window: int | None = None
    """Reject above this many tokens although ``window`` is declared (a provider serving less)."""
    usage: UsageMode = "per-call"
    default_model: str = "claude-sonnet-4-6"
    """The model when a request names none."""
    delay_seconds: float = 0.0
    """Wait this long before answering each call (the server and the in-process provider wait; the
    model itself never blocks)."""
    call_tools: bool = False
    """Answer a request that offers tools, and whose last message is not a round of tool results, by
    calling each offered tool once with arguments valid for its schema (:func:`arguments_for`); after
    the results, answer in text. Scripted replies still come first. Lets an agent's own tool loop be
    tested offline."""
    tokenizer: Literal["o200k", "cl100k"] | None = None
    """Count every request with this tiktoken family instead of the model's own: a provider whose
    tokenizer is not the one the estimator's rule approximates (cl100k counts Armenian or Greek text
    at about twice the price the Claude rule, built on o200k, gives it)."""
    strict: bool = True
    """Refuse what the real APIs refuse (:mod:`.strict`): empty content, broken tool pairing, a
    conversation opening on the assistant (Anthropic), media whose bytes are not their type."""
    any_model: bool = False
    """Serve a model name no profile names (an Azure deployment, an Ollama tag) as the default model,
    under its own name; ``False``: such a request is the API's "model not found". A platform's id of a
    known model (``us.anthropic.claude-…-v1:0``) is served as that model either way."""
    count_scale: float = 1.0
    """Count each string at this many times the tokenizer's count (:mod:`.counting`): the stand-in
    tokenizer in the units of the one it stands in for, as measured on real usage (a replay of a
    real session takes it from the session's own recorded counts)."""
    prompt_cache: bool = False
    """Cache prompts as the providers do (:mod:`.caching`): Anthropic on ``cache_control``
    breakpoints, OpenAI automatically from 1,024 tokens; usage then reports cache reads and writes
    (``cache_read_input_tokens`` / ``cache_creation_input_tokens``, ``cached_tokens``). Off: every
    input token is reported fresh, as before."""
    clock: Callable[[], float] | None = field(default=None, compare=False)
    """The prompt cache's clock in seconds (``None``: ``time.monotonic``); a test passes its own to
    move time past a lifetime."""

    def __post_init__(self) -> None:
        if self.window is not None and self.window <= 0:
            raise InvalidInput("must be > 0", path="window")
        if self.effective_window is not None and self.effective_window <= 0:
            raise InvalidInput("must be > 0", path="effective_window")
        if self.usage not in USAGE_MODES:
            raise InvalidInput(f"must be one of {', '.join(USAGE_MODES)}", path="usage")
        if self.tokenizer not in (None, "o200k", "cl100k"):
            raise InvalidInput("must be o200k, cl100k or None", path="tokenizer")
        if not self.delay_seconds >= 0:
            raise InvalidInput("must be ≥ 0", path="delay_seconds")
        check_scale(self.count_scale)


@dataclass(frozen=True, kw_only=True, slots=True)
class Rejection:
    """A refusal in the wire format's own shape."""

    status: int
    body: Mapping[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        error = self.body.get("error")
        return str(error.get("message", "")) if isinstance(error, Mapping) else ""


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalReply:
    """The local model's answer to one call: the assistant message, the counts, and the usage to report
    (``None``: report none)."""

    id: str
    model: str
    message: Message
    stop_reason: Literal["end_turn", "tool_use", "max_tokens", "compaction"]
    input_tokens: int
    output_tokens: int
    tokenizer: str
    reported: Usage | None
    before: Usage
    """For ``cumulative`` reports: the running total before this call (zero otherwise)."""
    cache: CacheUse = field(default_factory=CacheUse)
    """What this call read from and wrote to the prompt cache (:mod:`.caching`)."""
    applied_edits: tuple[AppliedEdit, ...] | None = None
    """The ``context_management`` edits applied before counting (:mod:`.context_management`);
    ``None``: the request sent none (the response then carries no ``context_management``)."""


class LocalModel:
    """The provider's brain: see the module docstring. Thread-safe."""

    def __init__(
        self,
        settings: LocalSettings | None = None,
        *,
        script: Iterable[Message] = (),
        session_bytes: int = SESSION_BYTES,
    ) -> None:
        self.settings = settings or LocalSettings()
        self._lock = threading.Lock()
        self._script: deque[Message] = deque()
        self._failures = 0
        self._calls = itertools.count(1)
        self._streams = SessionStreams(session_bytes)
        """Per session: the last request of the stream, its reply and the running total (bounded)."""
        self.cache = PromptCache(self.settings.clock or time.monotonic)
        """The prompt cache (used when ``settings.prompt_cache``)."""
        self.enqueue(*script)

    # -- scripting -----------------------------------------------------------------------------------

    def enqueue(self, *messages: Message) -> None:
        """Add assistant messages to the script; each call answers with the next one."""
        for i, message in enumerate(messages):
            if message.role != "assistant":
                raise InvalidInput("scripted replies must be assistant messages", path=f"script[{i}].role")
        with self._lock:
            self._script.extend(messages)

    def fail_next(self, calls: int) -> None:
        """Fail the next ``calls`` calls transiently (overloaded)."""
        if calls < 0:
            raise InvalidInput("must be ≥ 0", path="calls")
        with self._lock:
            self._failures = calls

    def discard_script(self, keep: int) -> int:
        """Drop the oldest scripted replies until ``keep`` remain (a host gave up on a turn); how many went."""
        if keep < 0:
            raise InvalidInput("must be ≥ 0", path="keep")
        with self._lock:
            dropped = max(0, len(self._script) - keep)
            for _ in range(dropped):
                self._script.popleft()
            return dropped

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._lock:
            return len(self._script)

    # -- one call ------------------------------------------------------------------------------------

    def profile(self, model: str | None) -> ModelProfile:
        """The profile of the model a request names (the default model when it names none)."""
        try:
            profile = get_profile(model or self.settings.default_model)
        except UnknownModel:
            if not self.settings.any_model or model is None:
                raise
            profile = get_profile(self.settings.default_model).with_(name=model)
        return (
            profile if self.settings.tokenizer is None else profile.with_(tokenizer=self.settings.tokenizer)
        )

    def window(self, profile: ModelProfile) -> int:
        """The window enforced for ``profile``: the effective window when one is set."""
        declared = self.settings.window or profile.context_window
        effective = self.settings.effective_window
        return min(declared, effective) if effective is not None else declared

    def count(
        self, request: Request, load: AttachmentLoader | None = None, *, wire: WireFormat = "anthropic"
    ) -> RequestCount:
        """The input count of ``request`` as ``wire`` carries it, as enforced."""
        return count_request(
            as_carried(request, wire), self.profile(request.model), load, scale=self.settings.count_scale
        )

    def count_input(
        self, request: Request, *, wire: WireFormat, load: AttachmentLoader | None = None
    ) -> RequestCount | Rejection:
        """The input count a call with ``request`` would report, as the providers' count endpoints
        answer it (``messages/count_tokens``, ``responses/input_tokens``, ``countTokens``): what the
        call would refuse as bad input (:mod:`.strict`) is refused the same way, and any size is
        counted (the endpoints count a request over the window; only the call refuses it). Counting
        is not a call: it consumes no scripted reply, no transient failure and no call number, and
        leaves the running totals of ``cumulative`` usage alone."""
        request = as_carried(request, wire)
        if self.settings.strict:
            refusal = check(request, wire, load)
            if refusal is not None:
                return _refusal(wire, refusal)
        return self.count(request, load)

    def handle(
        self,
        request: Request,
        *,
        wire: WireFormat,
        max_tokens: int | None,
        load: AttachmentLoader | None = None,
        session: str = "default",
        breakpoints: Sequence[Breakpoint] | None = None,
        betas: Sequence[str] | None = None,
    ) -> LocalReply | Rejection:
        """Answer one call (see the module docstring for the order of decisions). ``breakpoints``: the
        Anthropic request's ``cache_control`` markers (:func:`.caching.breakpoints_in`); ``None``, those
        :class:`~contextwindow.providers.anthropic.AnthropicProvider` marks. ``betas``: the
        ``anthropic-beta`` header's betas (``None``: the request's ``betas`` parameter, as the SDK's
        ``beta.messages.create(betas=…)`` takes them); a ``context_management`` in the request is
        refused or applied before counting (:mod:`.context_management`)."""
        request = as_carried(request, wire)
        profile = self.profile(request.model)
        model_name = request.model or profile.name
        with self._lock:
            if self._failures > 0:
                self._failures -= 1
                return _overloaded(wire)
        if self.settings.strict:
            refusal = check(request, wire, load)
            if refusal is not None:
                return _refusal(wire, refusal)
        if wire == "anthropic" and breakpoints is None:
            breakpoints = provider_breakpoints(request)
        if self.settings.strict and wire == "anthropic" and len(breakpoints or ()) > MAX_BREAKPOINTS:
            return _anthropic_error(
                400,
                "invalid_request_error",
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(breakpoints or ())}.",
            )
        if max_tokens is not None and max_tokens > profile.max_output_tokens:
            return _output_cap(wire, max_tokens, profile.max_output_tokens, model_name)
        managed = self._managed(request, profile, wire, betas, load)
        if isinstance(managed, Rejection):
            return managed
        request, applied = managed
        counted = count_request(request, profile, load, scale=self.settings.count_scale)
        n = counted.input_tokens
        window = self.window(profile)
        bound = max_tokens or 0
        if wire == "anthropic":
            if n > window:
                return _anthropic_error(
                    400, "invalid_request_error", f"prompt is too long: {n} tokens > {window} maximum"
                )
            if n + bound > window:
                return _anthropic_error(
                    400,
                    "invalid_request_error",
                    f"input length and `max_tokens` exceed context limit: {n} + {bound} > {window}, "
                    "decrease input length or `max_tokens` and try again",
                )
        elif n + bound > window:
            return _openai_error(
                400,
                f"This model's maximum context length is {window} tokens. However, you requested "
                f"{n + bound} tokens ({n} in the messages, {bound} in the completion). "
                "Please reduce the length of the messages or completion.",
                "invalid_request_error",
                code="context_length_exceeded",
                param="messages",
            )
        tok = tokenizer_for(profile, self.settings.count_scale)
        limit = max_tokens if max_tokens is not None else profile.max_output_tokens
        ask = summary_ask(request)
        with self._lock:
            call = next(self._calls)
            if ask is not None:
                content: tuple[Any, ...] = (Text(text=write_summary(request, ask, tok.count)),)
            elif self._script:
                content = tuple(self._script.popleft().content)
            elif self.settings.call_tools and request.tools and not _answers_tools(request):
                content = tuple(
                    ToolUse(
                        id=f"toolu_local_{call:06d}_{i}", name=t.name, input=arguments_for(t.input_schema)
                    )
                    for i, t in enumerate(request.tools)
                )
            else:
                content = (
                    Text(
                        text=f"Local reply {call}: {len(request.messages)} messages, "
                        f"{n} input tokens counted with {tok.name}."
                    ),
                )
        content, output, cut = _fit_output(content, limit, profile, tok)
        stop: Literal["end_turn", "tool_use", "max_tokens"] = (
            "max_tokens"
            if cut
            else "tool_use"
            if any(isinstance(b, ToolUse) for b in content)
            else "end_turn"
        )
        cached = self._cached(request, profile, wire, breakpoints or (), n, load)
        this_call = Usage(
            fresh_input=n - cached.read - cached.write,
            cache_read=cached.read,
            cache_write=cached.write,
            output=output,
        )
        reply = Message(role="assistant", content=content)
        before = Usage()
        reported: Usage | None
        mode = self.settings.usage
        if mode == "per-call":
            reported = this_call
        elif mode == "output-only":
            reported = Usage(output=output)
        elif mode == "none":
            reported = None
        elif ask is not None:
            reported = this_call  # a summariser's call is a stream of its own
        else:
            last = self._streams.get(session)
            if (
                last is not None
                and last.total is not None
                and continues_stream(last.request, last.reply, request)
            ):
                before = last.total
            reported = before + this_call
            # The next request carries the reply back as the wire does (without thinking on the
            # OpenAI wire, as ``request`` is): remember it so, or no stream continues past a reply
            # that reasoned.
            resent = carried((reply,))[-1] if wire == "openai" else reply
            self._streams.put(session, SessionStream(request=request, reply=resent, total=reported))
        return LocalReply(
            id=f"local_{call:08d}",
            model=model_name,
            message=reply,
            stop_reason=stop,
            input_tokens=n,
            output_tokens=output,
            tokenizer=counted.tokenizer,
            reported=reported,
            before=before,
            cache=cached,
            applied_edits=applied,
        )

    def _managed(
        self,
        request: Request,
        profile: ModelProfile,
        wire: WireFormat,
        betas: Sequence[str] | None,
        load: AttachmentLoader | None,
    ) -> tuple[Request, tuple[AppliedEdit, ...] | None] | Rejection:
        """``request`` as its ``context_management`` leaves it and the edits that applied, or the
        API's refusal of a malformed one (:mod:`.context_management`)."""
        management = request.params.get("context_management")
        if management is None:
            return request, None
        if wire == "openai":
            problem = openai_refusal(management)
            if problem is not None:
                return _openai_error(
                    400, problem[0], "invalid_request_error", code="invalid_value", param=problem[1]
                )
            return request, None
        given = tuple(betas if betas is not None else request.params.get("betas") or ())
        refusal = anthropic_refusal(management, given)
        if refusal is not None:
            return _anthropic_error(400, "invalid_request_error", refusal)
        scale = self.settings.count_scale

        def count(r: Request) -> int:
            return count_request(r, profile, load, scale=scale).input_tokens

        return apply_anthropic_edits(request, management.get("edits", []), count)

    def _cached(
        self,
        request: Request,
        profile: ModelProfile,
        wire: WireFormat,
        breakpoints: Sequence[Breakpoint],
        n: int,
        load: AttachmentLoader | None,
    ) -> CacheUse:
        """What the prompt cache serves of a call of ``n`` input tokens (nothing when it is off)."""
        if not self.settings.prompt_cache:
            return CacheUse()
        tok = tokenizer_for(profile, self.settings.count_scale)
        blocks = segments(request, profile, tok, load, provider=wire)
        if wire == "anthropic":
            return self.cache.anthropic(blocks, breakpoints, minimum_cacheable(profile.name))
        return self.cache.openai(blocks, n)


def _answers_tools(request: Request) -> bool:
    """Whether the request's last message is a round of tool results (the model answers in text)."""
    if not request.messages:
        return False
    last = request.messages[-1]
    return last.role == "user" and any(isinstance(b, ToolResult) for b in last.content)


def arguments_for(schema: Mapping[str, Any], _depth: int = 0) -> Any:
    """A value valid for a JSON Schema as tools use it: an object with its required properties (all of
    them when none is required), the first of an ``enum``, a ``const``, the first branch of
    ``anyOf``/``oneOf``, a ``default`` where given, and a plain value of each type (``minimum`` and
    ``minLength``/``minItems`` respected)."""
    if not isinstance(schema, Mapping) or _depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return arguments_for(branches[0], _depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties") or {}
        required = schema.get("required") or list(properties)
        return {name: arguments_for(properties.get(name, {}), _depth + 1) for name in required}
    if kind == "array":
        item = arguments_for(schema.get("items") or {}, _depth + 1)
        return [item] * max(1, int(schema.get("minItems", 1)))
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "x" * max(1, int(schema.get("minLength", 1))) if "minLength" in schema else "example"


def as_carried(request: Request, wire: WireFormat) -> Request:
    """The request as the wire carries it: an in-process call sees what an HTTP one would."""
    if wire != "openai":
        return request
    messages = carried(request.messages)
    if len(messages) == len(request.messages) and all(
        a is b for a, b in zip(messages, request.messages, strict=True)
    ):
        return request
    return replace(request, messages=messages)


def _fit_output(
    content: tuple[Any, ...], limit: int, profile: ModelProfile, tok: Any
) -> tuple[tuple[Any, ...], int, bool]:
    """The reply cut to ``limit`` output tokens: text is cut by tokens; a tool use that does not fit
    whole is dropped (a real model cut mid-call leaves no usable call)."""
    out: list[Any] = []
    used = 0
    for block in content:
        tokens = block_tokens(block, profile, tok)[1]
        if used + tokens <= limit:
            out.append(block)
            used += tokens
            continue
        room = limit - used
        if isinstance(block, Text) and room > 0:
            text = _cut_text(block.text, room, tok.count)
            out.append(Text(text=text))
            used += tok.count(text)
        return tuple(out), used, True
    return tuple(out), used, False


def _cut_text(text: str, room: int, count: Any) -> str:
    low, high = 0, len(text)
    while high - low > 1:
        mid = (low + high) // 2
        if count(text[:mid]) <= room:
            low = mid
        else:
            high = mid
    return text[:low] if count(text[:high]) > room else text[:high]


def _anthropic_error(
    status: int, kind: str, message: str, headers: Mapping[str, str] | None = None
) -> Rejection:
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return Rejection(status=status, body=body, headers=dict(headers or {}))


def _openai_error(
    status: int, message: str, kind: str, *, code: str | None = None, param: str | None = None
) -> Rejection:
    return Rejection(
        status=status, body={"error": {"message": message, "type": kind, "param": param, "code": code}}
    )


def _refusal(wire: WireFormat, refusal: StrictRefusal) -> Rejection:
    """A request the real API refuses as bad input, in ``wire``'s 400 shape."""
    if wire == "anthropic":
        return _anthropic_error(400, "invalid_request_error", refusal.message)
    return _openai_error(
        400, refusal.message, "invalid_request_error", code=refusal.code, param=refusal.param
    )


def _overloaded(wire: WireFormat) -> Rejection:
    if wire == "anthropic":
        return _anthropic_error(529, "overloaded_error", "Overloaded", {"retry-after": "0"})
    rejection = _openai_error(503, "The server is overloaded or not ready yet.", "server_error")
    return Rejection(status=503, body=rejection.body, headers={"retry-after": "0"})


def _output_cap(wire: WireFormat, requested: int, cap: int, model: str) -> Rejection:
    if wire == "anthropic":
        return _anthropic_error(
            400,
            "invalid_request_error",
            f"max_tokens: {requested} > {cap}, which is the maximum allowed number of output tokens for {model}",
        )
    return _openai_error(
        400,
        f"max_tokens is too large: {requested}. This model supports at most {cap} completion tokens, "
        f"whereas you provided {requested}.",
        "invalid_request_error",
        code="invalid_value",
        param="max_tokens",
    )
