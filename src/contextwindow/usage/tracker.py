"""Provider usage, normalised, and each call's own usage out of a stream of samples.

``Usage`` is what a provider counted for one call (or, for a cumulative sample, for a run of calls),
in one shape for every provider: ``fresh_input``, ``cache_read``, ``cache_write``, ``output`` and
``reasoning``. The three input fields are disjoint, so :attr:`Usage.prompt` (everything the provider
counted as input, the figure a context window is measured against) is their sum. Anthropic reports
cache tokens *beside* ``input_tokens``; OpenAI reports cached tokens *inside* the prompt count, so
its parser subtracts them out of ``fresh_input`` rather than counting them twice
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching,
https://platform.openai.com/docs/api-reference/chat/object). ``output`` is everything the model
generated, reasoning included; ``reasoning`` is the part of it that was reasoning (OpenAI counts it
inside ``completion_tokens``).

:class:`UsageTracker` turns one stream's samples (cumulative across a tool loop, as membrane's
``usage`` event is, or one per call) into each call's own
usage. A call whose prompt is 0, a repeated cumulative sample included, is *unreported*, not empty; an
output of 0 counts as the call's ``max_tokens`` bound, because the call generated something the
sample did not show. A refused attempt's usage is kept out. A cumulative sample that goes backwards is
:class:`~contextwindow.errors.InvalidInput`: no per-call figure is ever negative.

Anchors (``{input_tokens, output_tokens, payload_estimate}`` of the last accepted request) live in
:mod:`contextwindow.usage.anchor` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeAlias, get_args

from ..errors import InvalidInput, UsageError
from ..limits import MAX_TOKENS, check_count
from .anchor import Anchor, AnchorBook, AnchoredEstimate, anchored_estimate, newest_anchor

__all__ = [
    "USAGE_MODES",
    "Anchor",
    "AnchorBook",
    "AnchoredEstimate",
    "CallUsage",
    "Usage",
    "UsageMode",
    "UsageTracker",
    "anchored_estimate",
    "newest_anchor",
]

UsageMode: TypeAlias = Literal["cumulative", "per-call", "output-only", "none"]
"""How a provider reports usage in a stream, as the real APIs variously do: each sample the running
total since the stream started (``cumulative``), each call's own (``per-call``), each call's own with
the input reported as 0 (``output-only``), or no samples at all (``none``)."""
USAGE_MODES: tuple[UsageMode, ...] = get_args(UsageMode)
"""Every :data:`UsageMode`, in order."""


def _as_mapping(obj: Any, path: str) -> Mapping[str, Any]:
    """A usage object as a mapping: dicts as they are, pydantic SDK models through ``model_dump()``."""
    if isinstance(obj, Mapping):
        return obj
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    if hasattr(obj, "__dict__") and not isinstance(obj, type):
        return {k: v for k, v in vars(obj).items() if not k.startswith("_")}
    raise InvalidInput(f"expected a usage object or mapping, got {type(obj).__name__}", path=path)


def _count(value: Any, path: str) -> int:
    """A token count: a whole number between 0 and ``limits.MAX_TOKENS`` (an integral float from
    JSON is accepted); ``None`` means 0."""
    if value is None:
        return 0
    if type(value) is int and 0 <= value <= MAX_TOKENS:
        return value  # the common case, decided as check_count decides it, without its calls
    return check_count(value, path=path, what="a token count")


def _unwrap(
    m: Mapping[str, Any], wanted: tuple[str, ...], wrappers: tuple[str, ...], path: str
) -> tuple[Mapping[str, Any], str]:
    """Accept a whole response too: descend into its ``usage`` when none of the count fields is here."""
    if any(k in m for k in wanted):
        return m, path
    for key in wrappers:
        inner = m.get(key)
        if inner is not None:
            return _as_mapping(inner, f"{path}.{key}"), f"{path}.{key}"
    raise InvalidInput(f"no usage counts found (expected one of {', '.join(wanted)})", path=path)


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Token counts a provider reported, normalised; every field is a whole number between 0 and
    ``limits.MAX_TOKENS`` (anything else is ``InvalidInput``)."""

    fresh_input: int = 0
    """Input tokens neither read from nor written to a prompt cache."""
    cache_read: int = 0
    """Input tokens read from a prompt cache."""
    cache_write: int = 0
    """Input tokens written to a prompt cache (Anthropic's ``cache_creation_input_tokens``)."""
    output: int = 0
    """Every generated token, reasoning included."""
    reasoning: int = 0
    """The part of ``output`` that was reasoning or thinking."""

    def __post_init__(self) -> None:
        for f in fields(self):
            # Checked and normalised at the edge: an integral float from JSON is stored as an int.
            object.__setattr__(self, f.name, _count(getattr(self, f.name), f"usage.{f.name}"))
        if self.reasoning > self.output:
            raise InvalidInput(
                f"reasoning ({self.reasoning}) cannot exceed output ({self.output})", path="usage.reasoning"
            )

    @property
    def prompt(self) -> int:
        """Everything the provider counted as input: fresh + cache read + cache write."""
        return self.fresh_input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        """Prompt plus output: what the call occupied of the context window."""
        return self.prompt + self.output

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def minus(self, earlier: Usage, *, path: str = "usage") -> Usage:
        """Field-wise ``self − earlier``; a field that went backwards is ``InvalidInput``, never negative."""
        out: dict[str, int] = {}
        for f in fields(self):
            now, before = getattr(self, f.name), getattr(earlier, f.name)
            if now < before:
                raise InvalidInput(
                    f"cumulative sample went backwards ({before} → {now}); samples of one stream "
                    "must never decrease (call start_stream() at a new stream)",
                    path=f"{path}.{f.name}",
                )
            out[f.name] = now - before
        # Field-wise deltas can leave reasoning > output only if the samples were inconsistent.
        if out["reasoning"] > out["output"]:
            raise InvalidInput("reasoning grew more than output between samples", path=f"{path}.reasoning")
        return Usage(**out)

    @classmethod
    def from_anthropic(cls, obj: Any, *, path: str = "usage") -> Usage:
        """Anthropic Messages ``usage``: ``input_tokens`` is fresh input, disjoint from both cache fields.

        Source: Anthropic prompt-caching docs, "total_input_tokens = cache_read_input_tokens +
        cache_creation_input_tokens + input_tokens"
        (https://platform.claude.com/docs/en/build-with-claude/prompt-caching). Anthropic reports no
        separate thinking count, so ``reasoning`` is 0. A whole ``Message`` is accepted too (its ``usage``).
        """
        m, path = _unwrap(
            _as_mapping(obj, path),
            ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"),
            ("usage",),
            path,
        )
        return cls(
            fresh_input=_count(m.get("input_tokens"), f"{path}.input_tokens"),
            cache_read=_count(m.get("cache_read_input_tokens"), f"{path}.cache_read_input_tokens"),
            cache_write=_count(m.get("cache_creation_input_tokens"), f"{path}.cache_creation_input_tokens"),
            output=_count(m.get("output_tokens"), f"{path}.output_tokens"),
        )

    @classmethod
    def from_openai(cls, obj: Any, *, path: str = "usage") -> Usage:
        """OpenAI usage, Chat Completions or Responses, told apart by their field names.

        Chat: ``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details.cached_tokens``,
        ``completion_tokens_details.reasoning_tokens``. Responses: ``input_tokens``, ``output_tokens``,
        ``input_tokens_details.cached_tokens``, ``output_tokens_details.reasoning_tokens``. Cached
        tokens are a subset of the prompt (OpenAI's usage object), so ``fresh_input = prompt − cached``; a
        ``cache_write_tokens`` detail, where a server sends one, is taken as a subset the same way.
        """
        m, path = _unwrap(
            _as_mapping(obj, path),
            ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"),
            ("usage",),
            path,
        )
        if "prompt_tokens" in m or "completion_tokens" in m:
            p_key, o_key, pd_key, od_key = (
                "prompt_tokens",
                "completion_tokens",
                "prompt_tokens_details",
                "completion_tokens_details",
            )
        else:
            p_key, o_key, pd_key, od_key = (
                "input_tokens",
                "output_tokens",
                "input_tokens_details",
                "output_tokens_details",
            )
        prompt = _count(m.get(p_key), f"{path}.{p_key}")
        output = _count(m.get(o_key), f"{path}.{o_key}")
        pd = _as_mapping(m[pd_key], f"{path}.{pd_key}") if m.get(pd_key) is not None else {}
        od = _as_mapping(m[od_key], f"{path}.{od_key}") if m.get(od_key) is not None else {}
        cached = _count(pd.get("cached_tokens"), f"{path}.{pd_key}.cached_tokens")
        written = _count(pd.get("cache_write_tokens"), f"{path}.{pd_key}.cache_write_tokens")
        reasoning = _count(od.get("reasoning_tokens"), f"{path}.{od_key}.reasoning_tokens")
        if cached + written > prompt:
            raise InvalidInput(
                f"cached tokens ({cached + written}) exceed the prompt ({prompt}); OpenAI counts them inside it",
                path=f"{path}.{pd_key}.cached_tokens",
            )
        if reasoning > output:
            raise InvalidInput(
                f"reasoning tokens ({reasoning}) exceed the output ({output}); OpenAI counts them inside it",
                path=f"{path}.{od_key}.reasoning_tokens",
            )
        return cls(
            fresh_input=prompt - cached - written,
            cache_read=cached,
            cache_write=written,
            output=output,
            reasoning=reasoning,
        )


_ZERO = Usage()


@dataclass(frozen=True, kw_only=True, slots=True)
class CallUsage:
    """One call's own usage within a stream, with what the projection and calibration need."""

    index: int
    """Position of the call in its stream, from 0 (refused attempts keep their index)."""
    usage: Usage
    """The call's own counts (a cumulative sample's delta)."""
    reported: bool
    """False when the call's prompt is 0 (a repeated cumulative sample included): unreported, not empty."""
    output_counted: int
    """The call's output, or its ``max_tokens`` bound when the sample shows an output of 0."""
    max_tokens: int
    refused: bool = False

    @property
    def prompt(self) -> int:
        """The call's own prompt: fresh + cache read + cache write (0 when unreported)."""
        return self.usage.prompt


class UsageTracker:
    """Each call's own usage from one stream's usage samples (``docs/concepts.md``, "Usage sample").

    ``mode="cumulative"``: every sample is the running total since the stream started (membrane's
    ``usage`` event, Anthropic ``message_delta`` within a call); a call's usage is the field-wise
    difference from the previous sample, and a repeated sample is an unreported call.
    Any other mode (``per-call``, ``output-only``, ``none``): every sample is one call's own usage, and
    a call whose sample reports no prompt is unreported.

    Refused attempts: :meth:`refused` takes the last fed call out of the stream's calls and totals and,
    in cumulative mode, rolls the baseline back to the sample before it, because a provider layer that
    retries (membrane ≥ 0.5.87, ``discardedUsage``) leaves a refused attempt out of its running total.
    A layer that counts it in anyway makes the next call look larger, never smaller: errs high.

    Not thread-safe: one tracker follows one stream.
    """

    def __init__(self, mode: UsageMode) -> None:
        if mode not in USAGE_MODES:
            raise UsageError(f"mode must be one of {', '.join(USAGE_MODES)}, got {mode!r}")
        self.mode: UsageMode = mode
        self._calls: list[CallUsage] = []
        self._baseline = _ZERO
        self._baseline_before_last = _ZERO
        self._next_index = 0

    def start_stream(self) -> None:
        """Forget the previous stream: a restarted stream inherits nothing, or it restarts again at once."""
        self._calls.clear()
        self._baseline = _ZERO
        self._baseline_before_last = _ZERO
        self._next_index = 0

    def feed(self, sample: Usage, *, max_tokens: int) -> CallUsage:
        """Record one call's sample; return that call's own usage.

        ``max_tokens`` is the call's output bound, used when its sample shows no output.
        """
        if not isinstance(sample, Usage):
            raise UsageError(
                f"feed() takes a Usage (see Usage.from_anthropic etc.), got {type(sample).__name__}"
            )
        bound = _count(max_tokens, "max_tokens")
        if self.mode == "cumulative":
            own = sample.minus(self._baseline, path="usage")
            self._baseline_before_last, self._baseline = self._baseline, sample
        else:
            own = sample
        return self._append(own, bound)

    def unreported(self, *, max_tokens: int) -> CallUsage:
        """Record a call that completed with no usage sample at all (usage off, or an interrupted stream)."""
        bound = _count(max_tokens, "max_tokens")
        self._baseline_before_last = self._baseline
        return self._append(_ZERO, bound)

    def refused(self) -> CallUsage:
        """Mark the last fed call as a refused attempt: its usage is kept out of the stream's figures.

        Call it only for an attempt whose usage was fed; an attempt that produced no sample has nothing
        to keep out.
        """
        if not self._calls or self._calls[-1].refused:
            raise UsageError("refused(): no fed call to mark (each fed call can be refused once)")
        last = self._calls.pop()
        if self.mode == "cumulative":
            self._baseline = self._baseline_before_last
        marked = CallUsage(
            index=last.index,
            usage=last.usage,
            reported=last.reported,
            output_counted=last.output_counted,
            max_tokens=last.max_tokens,
            refused=True,
        )
        return marked

    def _append(self, own: Usage, bound: int) -> CallUsage:
        call = CallUsage(
            index=self._next_index,
            usage=own,
            reported=own.prompt > 0,
            output_counted=own.output if own.output > 0 else bound,
            max_tokens=bound,
        )
        self._next_index += 1
        self._calls.append(call)
        return call

    @property
    def calls(self) -> tuple[CallUsage, ...]:
        """The stream's surviving calls, oldest first (refused attempts left out)."""
        return tuple(self._calls)

    @property
    def total(self) -> Usage:
        """The surviving calls' usage summed: the stream's running total without refused attempts."""
        acc = _ZERO
        for call in self._calls:
            acc = acc + call.usage
        return acc

    @property
    def stream_fresh_input(self) -> int:
        """Accumulated fresh input of the stream: what the stream budget measures (agent-framework's
        ``lastStreamInputTokens``)."""
        return self.total.fresh_input
