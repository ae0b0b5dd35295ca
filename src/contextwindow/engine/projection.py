"""The physical-window projection: would the next round of a turn cross the window?

Within a turn the engine appends rounds (tool results and mid-turn messages) to the request it already
sent, without recompiling, so the provider's prompt cache stays warm. Nothing in that path measures the
growing request, so at every tool boundary the engine asks this module whether the request about to go
out still fits (agent-framework's projection, with each call's own usage)::

    projection = real + out + growth + appended + reserve

- ``real``: the prompt of the latest call on this stream that *reported* a prompt (fresh input + cache
  write + cache read: every token the provider counted as input);
- ``out``: that call's output, where an output of 0 counts as ``max_tokens`` (a call that ended at a
  tool boundary wrote a tool use, so 0 is a count its adapter left at 0);
- ``growth``: what the stream grew by since that call: each round it was continued past, and the output
  (or ``max_tokens``) of each call that reported no prompt. A prompt of 0 means *unreported*, not empty;
- ``appended``: the round about to be appended, priced by :class:`~contextwindow.engine.rounds.RoundPricer`;
- ``reserve``: the output reserve the request asks for.

It runs only with a declared window and once a call on the stream has reported a prompt (``real > 0``):
before then there is no real figure to project from. All state resets at stream start; without the
reset a restarted stream inherits the number that restarted it and loops.
"""

from __future__ import annotations

from ..errors import InvalidInput
from .limits import WindowLimits

__all__ = ["PhysicalWindow", "projection"]


def projection(*, real: int, out: int, growth: int, appended: int, reserve: int) -> int:
    """``real + out + growth + appended + reserve``: the next request's size as the provider will see it."""
    for name, value in (
        ("real", real),
        ("out", out),
        ("growth", growth),
        ("appended", appended),
        ("reserve", reserve),
    ):
        if value < 0:
            raise InvalidInput("must be ≥ 0", path=name)
    return real + out + growth + appended + reserve


class PhysicalWindow:
    """The per-stream state behind the projection.

    ``window`` is the window guarded (``None``: no projection at all); ``reserve`` the output reserve
    each request asks for, which also bounds an unreported output (``max_tokens``). Both are read
    from ``limits`` (the engine's :class:`~contextwindow.engine.limits.WindowLimits`); given as
    numbers, the projection keeps its own. Raises :class:`~contextwindow.errors.InvalidInput` for a
    window ≤ 0 or a negative reserve.
    """

    __slots__ = ("growth", "limits", "out", "real")

    def __init__(
        self, window: int | None = None, reserve: int = 0, *, limits: WindowLimits | None = None
    ) -> None:
        if limits is None:
            if window is not None and window <= 0:
                raise InvalidInput("must be > 0", path="window")
            if reserve < 0:
                raise InvalidInput("must be ≥ 0", path="reserve")
            limits = WindowLimits(
                model_window=window or 1, declared=window, window=window, max_tokens=reserve
            )
        self.limits = limits
        self.real = 0
        self.out = 0
        self.growth = 0

    @property
    def window(self) -> int | None:
        return self.limits.window

    @property
    def reserve(self) -> int:
        return self.limits.max_tokens or 0

    def start_stream(self) -> None:
        """A new stream starts from nothing: it must not inherit the figure that restarted it."""
        self.real = self.out = self.growth = 0

    def observe_call(self, *, prompt: int, output: int, max_tokens: int | None = None) -> None:
        """One provider call's own usage (a per-call delta, never a stream's running total).

        A prompt > 0 sets ``real``/``out`` and zeroes ``growth``; a prompt of 0 (unreported) adds the
        call's output to ``growth``. Either way an output of 0 counts as ``max_tokens``.
        """
        if prompt < 0 or output < 0:
            raise InvalidInput("a call's usage is never negative", path="prompt" if prompt < 0 else "output")
        bound = self.reserve if max_tokens is None else max_tokens
        counted = output if output > 0 else bound
        if prompt > 0:
            self.real, self.out, self.growth = prompt, counted, 0
        else:
            self.growth += counted

    def project(self, appended: int) -> int | None:
        """The projection for a round of ``appended`` tokens, or ``None`` when none can be made."""
        if self.window is None or self.real <= 0:
            return None
        return projection(
            real=self.real, out=self.out, growth=self.growth, appended=appended, reserve=self.reserve
        )

    def over(self, appended: int) -> int | None:
        """The projection when it crosses the window (restart), else ``None`` (the round fits)."""
        projected = self.project(appended)
        if projected is None or self.window is None or projected <= self.window:
            return None
        return projected

    def continue_past(self, appended: int) -> None:
        """The stream continues past a boundary: its round now sits in the request as growth."""
        if appended < 0:
            raise InvalidInput("must be ≥ 0", path="appended")
        self.growth += appended
