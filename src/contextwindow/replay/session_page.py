"""The session browser: one self-contained HTML page of a session's calls (:func:`write_session_page`).

The page holds its data (the :mod:`~contextwindow.replay.timeline` calls as JSON) and the script that
draws it: no network at view time, no library. The chart stacks each call's input (cache reads,
cache writes, fresh input) and output against the window as known at that call (the line steps
where a window was learned), a dashed line at each turn's first call, a red bar where the provider
refused the request for its size, and a mark above each call where something was folded, archived,
evicted, restarted or re-read. Hovering a bar names the call; clicking it shows its figures, what
was done for it (with each fold's summary text) and the messages appended before it. The page
opens on the call ``#call=N`` names. The page's markup, style and script are
``contextwindow/data/session_page.html``.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from .timeline import TimelineCall

__all__ = ["PAGE_NAME", "write_session_page"]

PAGE_NAME = "index.html"


def write_session_page(calls: Sequence[TimelineCall], out: Path, *, title: str, subtitle: str = "") -> Path:
    """Write the page of ``calls`` as ``out/index.html`` (``out`` made if missing); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    data = [call.as_dict() for call in calls]
    totals = {
        "calls": len(calls),
        "refused": sum(c.refused for c in calls),
        "folds": sum(a.kind == "folded" for c in calls for a in c.actions),
        "cost": sum(c.cost for c in calls if c.cost is not None)
        if any(c.cost is not None for c in calls)
        else None,
        "input": sum(c.usage.prompt for c in calls if c.usage is not None),
        "output": sum(c.usage.output for c in calls if c.usage is not None),
    }
    # JSON inside <script>: "</" written as "<\/" so no text closes the element early.
    payload = json.dumps({"calls": data, "totals": totals}, ensure_ascii=False).replace("</", "<\\/")
    template = resources.files("contextwindow").joinpath("data", "session_page.html").read_text("utf-8")
    page = template.replace("{{title}}", html.escape(title)).replace("{{subtitle}}", html.escape(subtitle))
    path = out / PAGE_NAME
    path.write_text(page.replace("{{data}}", payload), encoding="utf-8")
    return path
