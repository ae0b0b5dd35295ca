"""The window's figures as known now (:class:`WindowLimits`): one value per engine, written only by
its :class:`~contextwindow.engine.window.WindowState`, read by the parts that measure against it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WindowLimits"]


@dataclass(slots=True)
class WindowLimits:
    """The declared and learned window and the output bound of the latest compile.

    Only :class:`~contextwindow.engine.window.WindowState` writes these; the fit, the projection,
    the proactive trigger, the notes and the request compiler hold this one value and read it, so a
    learned limit is written once.
    """

    model_window: int
    """The model window (``ModelProfile.context_window``)."""
    declared: int | None
    """The declared window (``EngineSettings.declared_window``, else the model window); ``None``
    when the projection is off (``use_physical_window=False``). It never changes."""
    window: int | None
    """The window guarded: the declared one until a rejection proves the provider serves less
    (then that limit, even with the projection off). ``None``: nothing is guarded."""
    max_tokens: int | None = None
    """Each call's output bound, set by the latest compile (``None`` before any)."""
    reserve: int = 0
    """The output reserve of the latest compile."""

    @property
    def known(self) -> int:
        """The window compile fits against: the guarded one, else the model window."""
        return self.window if self.window is not None else self.model_window
