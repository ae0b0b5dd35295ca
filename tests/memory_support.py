"""What of contextwindow only the cyclic garbage collector could free.

A serving process runs the collector's full pass rarely (:func:`contextwindow.server.runner.tune_gc`),
so what a conversation held must be freed by reference counting the moment it is dropped: anything
in a reference cycle waits, and the process's memory grows meanwhile. :func:`collector_off` turns the
collector off for a block; the function it yields collects and names the contextwindow objects that
were garbage only the collector could free.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def collector_off() -> Iterator[Callable[[], Counter[str]]]:
    """The collector off within the block (what was garbage before is collected first); the yielded
    function collects and counts, by type, the contextwindow objects that were in cycles."""

    def cyclic() -> Counter[str]:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            found = Counter(
                f"{type(o).__module__}.{type(o).__qualname__}"
                for o in gc.garbage
                if type(o).__module__.startswith("contextwindow")
            )
        finally:
            gc.garbage.clear()
            gc.set_debug(0)
        return found

    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield cyclic
    finally:
        if was_enabled:
            gc.enable()
