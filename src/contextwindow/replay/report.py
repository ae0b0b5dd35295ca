"""What a run did, per provider call, as numbers (:func:`summarize`) and as a report people read.

A :class:`CallRecord` is one request sent to the provider: its makeup by segment as the engine priced
it, the engine's estimate, the provider's own input count, the window, whether it was rejected, and
what happened at that call (restarted, compacted, evicted, archived). :func:`summarize` reduces a run
to the summary object ``contextwindow simulate --json`` prints; :func:`write_report` writes
``makeup.png`` (each request's makeup stacked against the window, with markers where the engine
restarted, compacted or evicted) and ``index.html`` (the chart, the summary, the per-call table).

matplotlib is the ``report`` extra and is imported only by :func:`write_report`.
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from ..compile.state import SEGMENTS
from ..errors import InvalidInput

__all__ = [
    "EVENTS",
    "EVENT_LEGEND",
    "SHARES",
    "SUMMARY_ROWS",
    "CallRecord",
    "EventKind",
    "format_value",
    "percentile",
    "summarize",
    "write_report",
]


EventKind: TypeAlias = Literal["restarted", "compacted", "evicted", "archived"]
EVENTS: tuple[EventKind, ...] = ("restarted", "compacted", "evicted", "archived")

_COLOURS = {
    "system": "#4c566a",
    "tools": "#8f9bb3",
    "summaries": "#b48ead",
    "text": "#5e81ac",
    "tool_results": "#88c0d0",
    "images": "#d08770",
    "other_media": "#ebcb8b",
    "manifest": "#a3be8c",
    "output_reserve": "#e5e9f0",
}
_MARKERS: dict[str, tuple[str, str]] = {
    "restarted": ("v", "#bf616a"),
    "compacted": ("D", "#8a4f9e"),
    "evicted": ("o", "#d08770"),
    "archived": ("s", "#4c566a"),
    "rejected": ("X", "#a3000b"),
}


SUMMARY_ROWS: tuple[tuple[str, str], ...] = (
    ("calls", "provider calls"),
    ("rejections", "rejected by the provider"),
    ("recovered", "rejections recovered"),
    ("window_learned", "window learned from a rejection"),
    ("failed_turns", "turns lost"),
    ("cut_replies", "replies cut at max_tokens"),
    ("restarts", "stream restarts (recompiles)"),
    ("compactions", "compactions"),
    ("evictions", "requests that evicted media"),
    ("archived", "requests that archived tool results"),
    ("window_use_mean", "window use, mean"),
    ("window_use_p5", "window use, 5th percentile"),
    ("estimate_error_p95", "estimate error, p95"),
    ("counted", "requests sent as the provider counted them"),
    ("counts", "count calls made before sending"),
    ("counts_per_100_calls", "count calls per 100 provider calls"),
    ("tokenizer", "provider's tokenizer"),
)
"""The run summary's rows as people read them (the CLI's table and the HTML report), in order."""

EVENT_LEGEND = (
    "A restart recompiles the request from the ledger because the next round would not fit the window; "
    "a fold replaces the oldest history with a summary checkpoint (the originals stay in the ledger); "
    "an eviction sends an image as a short placeholder naming its attachment id; an archive sends a "
    "stale tool result as a placeholder the model can ask to read again."
)
"""One line saying what the events marked per request are."""


SHARES = frozenset({"window_use_mean", "window_use_p5", "estimate_error_p95"})
"""The summary keys whose value is a share (shown as a percentage); every other number is a figure."""


def format_value(value: Any, key: str | None = None) -> str:
    """A summary value as people read it: shares as percentages ("69.0%"), other figures as numbers
    ("25.0" for ``counts_per_100_calls``), counts with separators. ``key`` is the summary key (a
    float is a share when it is in :data:`SHARES` or no key is given)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1%}" if key is None or key in SHARES else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class CallRecord:
    """One request sent to the provider, as the engine priced it and the provider counted it."""

    call: int
    """0-based index of the request in the run (retries and summariser calls included)."""
    makeup: Mapping[str, int]
    """Tokens by segment (keys from :data:`SEGMENTS`; missing ones are 0), as estimated by the engine."""
    estimated_tokens: int
    """The engine's own estimate of the input it sent (the makeup without the output reserve)."""
    provider_input_tokens: int | None
    """The provider's count of the input, when it reported one."""
    window: int
    rejected: bool = False
    events: tuple[EventKind, ...] = ()
    turn: int | None = None
    counted: bool = False
    """The engine had the provider count this request before sending it: ``estimated_tokens`` is that
    count (``EngineSettings.count_before_send``)."""

    def __post_init__(self) -> None:
        path = f"calls[{self.call}]"
        _count(self.call, f"{path}.call")
        _count(self.estimated_tokens, f"{path}.estimated_tokens")
        if self.provider_input_tokens is not None:
            _count(self.provider_input_tokens, f"{path}.provider_input_tokens")
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window <= 0:
            raise InvalidInput("must be a positive integer", path=f"{path}.window")
        for name, value in self.makeup.items():
            if name not in SEGMENTS:
                raise InvalidInput(
                    f"unknown segment (known: {', '.join(SEGMENTS)})", path=f"{path}.makeup.{name}"
                )
            _count(value, f"{path}.makeup.{name}")
        for i, event in enumerate(self.events):
            if event not in EVENTS:
                raise InvalidInput(f"unknown event (known: {', '.join(EVENTS)})", path=f"{path}.events[{i}]")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "call": self.call,
            "turn": self.turn,
            "makeup": {s: int(self.makeup.get(s, 0)) for s in SEGMENTS},
            "estimated_tokens": self.estimated_tokens,
            "provider_input_tokens": self.provider_input_tokens,
            "window": self.window,
            "rejected": self.rejected,
            "events": list(self.events),
            "counted": self.counted,
        }


def _count(value: object, path: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput("must be an integer ≥ 0", path=path)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-quantile (0–1) with linear interpolation between closest ranks (numpy's default).

    ``None`` for no values: a summary says "unknown" rather than NaN.
    """
    if not 0 <= q <= 1:
        raise InvalidInput("must be between 0 and 1", path="q")
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(records: Sequence[CallRecord], *, tokenizer: str = "") -> dict[str, Any]:
    """The run summary ``simulate --json`` prints.

    - ``calls``: requests sent; ``rejections``: refused for size; ``recovered``: rejections whose next
      request was accepted.
    - ``restarts``, ``compactions``, ``evictions``, ``archived``: calls at which each happened.
    - ``window_use_mean`` / ``window_use_p5``: the provider's count of each accepted request over the
      window (mean, 5th percentile); ``None`` when the provider counted nothing.
    - ``estimate_error_p95``: 95th percentile of |estimate − provider count| / provider count over
      requests the provider counted (count > 0).
    - ``counted``: requests whose estimate was the provider's count made before sending them.
    - ``tokenizer``: what the provider counted with.
    """
    ordered = sorted(records, key=lambda r: r.call)
    use = [
        r.provider_input_tokens / r.window
        for r in ordered
        if not r.rejected and r.provider_input_tokens is not None
    ]
    errors = [
        abs(r.estimated_tokens - r.provider_input_tokens) / r.provider_input_tokens
        for r in ordered
        if r.provider_input_tokens
    ]
    recovered = sum(
        1 for before, after in itertools.pairwise(ordered) if before.rejected and not after.rejected
    )

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {
        "calls": len(ordered),
        "rejections": sum(r.rejected for r in ordered),
        "recovered": recovered,
        "restarts": sum("restarted" in r.events for r in ordered),
        "compactions": sum("compacted" in r.events for r in ordered),
        "evictions": sum("evicted" in r.events for r in ordered),
        "archived": sum("archived" in r.events for r in ordered),
        "window_use_mean": rounded(sum(use) / len(use)) if use else None,
        "window_use_p5": rounded(percentile(use, 0.05)),
        "estimate_error_p95": rounded(percentile(errors, 0.95)),
        "counted": sum(r.counted for r in ordered),
        "tokenizer": tokenizer,
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class _Labels:
    title: str = "contextwindow run"
    subtitle: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def write_report(
    records: Sequence[CallRecord],
    summary: Mapping[str, Any],
    out_dir: str | Path = "contextwindow-report",
    *,
    title: str = "contextwindow run",
    subtitle: str = "",
) -> Path:
    """Write ``makeup.png``, ``index.html`` and ``calls.json`` into ``out_dir``; returns the HTML path."""
    if not records:
        raise InvalidInput("a report needs at least one call record", path="records")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ordered = sorted(records, key=lambda r: r.call)
    _chart(ordered, out / "makeup.png", _Labels(title=title, subtitle=subtitle))
    (out / "calls.json").write_text(json.dumps([r.to_dict() for r in ordered], indent=1), encoding="utf-8")
    page = out / "index.html"
    page.write_text(_html(ordered, summary, title, subtitle), encoding="utf-8")
    return page


def _chart(records: Sequence[CallRecord], path: Path, labels: _Labels) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    xs = [r.call for r in records]
    fig, ax = plt.subplots(figsize=(14, 6.2), dpi=110)
    bottom = [0] * len(records)
    handles: list[Any] = []
    for segment in SEGMENTS:
        heights = [int(r.makeup.get(segment, 0)) for r in records]
        if not any(heights):
            continue
        ax.bar(xs, heights, bottom=bottom, width=1.0, color=_COLOURS[segment], linewidth=0, align="center")
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        handles.append(Patch(color=_COLOURS[segment], label=segment.replace("_", " ")))
    ax.step(xs, [r.window for r in records], where="mid", color="#2e3440", linewidth=1.6, linestyle="--")
    handles.append(Line2D([], [], color="#2e3440", linestyle="--", label="window"))
    counted = [(r.call, r.provider_input_tokens) for r in records if r.provider_input_tokens is not None]
    if counted:
        ax.plot(*zip(*counted, strict=True), color="#000000", linewidth=0.9, marker=".", markersize=2.5)
        handles.append(Line2D([], [], color="#000000", marker=".", label="provider's input count"))
    top = max(max(bottom), max(r.window for r in records), max((c for _, c in counted), default=0))
    lanes = {kind: top * (1.04 + 0.045 * i) for i, kind in enumerate((*EVENTS, "rejected"))}
    for kind, (marker, colour) in _MARKERS.items():
        hits = [r.call for r in records if (r.rejected if kind == "rejected" else kind in r.events)]
        if hits:
            ax.scatter(
                hits, [lanes[kind]] * len(hits), marker=marker, color=colour, s=26, zorder=3, clip_on=False
            )
            handles.append(
                Line2D([], [], linestyle="", marker=marker, color=colour, label=f"{kind} ({len(hits)})")
            )
    ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    ax.set_ylim(0, top * 1.27)
    ax.set_xlabel("provider call")
    ax.set_ylabel("tokens")
    ax.yaxis.set_major_formatter(
        matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1000:.0f}k" if v else "0")
    )
    ax.grid(axis="y", color="#d8dee9", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    # The page's own heading names the run: the chart carries only the subtitle (the title once).
    if labels.subtitle:
        ax.set_title(labels.subtitle, loc="left", fontsize=11)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _html(records: Sequence[CallRecord], summary: Mapping[str, Any], title: str, subtitle: str) -> str:
    e = html.escape
    labelled = [(key, label, summary.get(key)) for key, label in SUMMARY_ROWS if key in summary]
    known = {key for key, _ in SUMMARY_ROWS}
    labelled += [(str(k), str(k).replace("_", " "), v) for k, v in summary.items() if k not in known]
    rows = "".join(
        f"<tr><th>{e(label)}</th><td>{e(format_value(v, key))}</td></tr>" for key, label, v in labelled
    )
    head = "".join(f"<th>{e(s.replace('_', ' '))}</th>" for s in SEGMENTS)
    calls = []
    for r in records:
        use = f"{r.provider_input_tokens / r.window:.0%}" if r.provider_input_tokens is not None else "–"
        cells = "".join(f"<td>{int(r.makeup.get(s, 0)):,}</td>" for s in SEGMENTS)
        flags = ", ".join([*r.events, *(["rejected"] if r.rejected else [])])
        provider = f"{r.provider_input_tokens:,}" if r.provider_input_tokens is not None else "–"
        calls.append(
            f"<tr{' class=rejected' if r.rejected else ''}><td>{r.call}</td><td>{'' if r.turn is None else r.turn}</td>"
            f"{cells}<td>{r.estimated_tokens:,}</td><td>{provider}</td><td>{r.window:,}</td><td>{use}</td>"
            f"<td>{e(flags)}</td></tr>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#2e3440}} img{{max-width:100%}}
table{{border-collapse:collapse;font-size:13px}} td,th{{padding:2px 8px;border-bottom:1px solid #e5e9f0;text-align:right}}
th{{text-align:left}} tr.rejected{{background:#fbe9eb}} .calls th{{position:sticky;top:0;background:#eceff4}}
</style></head><body>
<h1>{e(title)}</h1><p>{e(subtitle)}</p>
<img src="makeup.png" alt="Each request's makeup by segment against the window">
<h2>Summary</h2><table>{rows}</table>
<p>{e(EVENT_LEGEND)}</p>
<h2>Calls</h2><table class="calls"><tr><th>call</th><th>turn</th>{head}<th>estimated</th><th>provider</th>
<th>window</th><th>use</th><th>events</th></tr>
{"".join(calls)}
</table></body></html>
"""
