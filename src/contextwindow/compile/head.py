"""The budget and the head: what the request must carry before any of the history.

The budget is the window less the output reserve. The head — system, tools and the latest summary
checkpoint — is reserved first; if it alone does not fit, :class:`~contextwindow.errors.OverBudget`
says so with the makeup. :func:`measure_head` returns the limits the tail walk works within.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..content import Message, Text
from ..errors import InvalidInput, OverBudget
from ..pricing import tool_bytes
from ._run import Run
from .state import SEGMENTS, Checkpoint, CompileState
from .walk import Bounds

__all__ = ["SUMMARY_HEADER", "Head", "head_bytes", "measure_head"]

SUMMARY_HEADER = "[Summary of the earlier conversation, which is no longer shown in full]\n\n"
"""Opens the summary message that stands for the folded history."""

_BLOCK_BYTES = 40
"""JSON framing per block on the wire; an estimate for the byte wall only."""


@dataclass(frozen=True, slots=True)
class Head:
    """The head as priced: the walk's bounds, the output reserve, the request's makeup so far (its
    head segments filled in; the assembly fills the rest), and the summary that leads, if any."""

    bounds: Bounds
    reserve: int
    makeup: dict[str, int]
    summary: Message | None
    folded: tuple[str, ...]
    """``(first id, last id)`` of the history the summary stands for; empty without one."""


def measure_head(run: Run) -> Head:
    """The budget and the head for this compile. Raises :class:`~contextwindow.errors.OverBudget`
    when the reserve leaves no room or the head alone does not fit, and
    :class:`~contextwindow.errors.InvalidInput` when the checkpoint's last message is not in the
    session."""
    state, policy, est = run.state, run.policy, run.est
    reserve = policy.reserve_for(run.profile.context_window, run.profile.max_output_tokens)
    budget = run.profile.context_window - reserve
    makeup = dict.fromkeys(SEGMENTS, 0)
    makeup["output_reserve"] = reserve
    if budget <= 0:
        raise OverBudget(
            "the output reserve leaves no room for input",
            budget=max(0, budget),
            required=reserve,
            makeup=makeup,
        )
    limit = math.floor(budget * (1 + policy.over_budget_grace_ratio))
    makeup["system"] = sum(est.block(t) for t in state.system) + run.request_framing
    makeup["tools"] = sum(est.tool_spec(tool) for tool in state.tools)
    start = 0
    summary: Message | None = None
    folded: tuple[str, ...] = ()
    if state.checkpoint is not None:
        start = _after_checkpoint(run, state.checkpoint)
        summary = Message(
            role="user",
            content=(Text(text=SUMMARY_HEADER + state.checkpoint.summary),),
            id=state.checkpoint.id,
        )
        makeup["summaries"] = est.message(summary) + _counted_beyond_rule(run, state.checkpoint)
        folded = (state.checkpoint.first_id, state.checkpoint.last_id)
    head = makeup["system"] + makeup["tools"] + makeup["summaries"]
    if head > limit:
        raise OverBudget(
            "the head alone (system, tools, summary) does not fit",
            budget=budget,
            required=head,
            makeup=makeup,
        )
    bounds = Bounds(floor=start, head=head, budget=budget, limit=limit, cap=policy.message_cap_for(budget))
    return Head(bounds=bounds, reserve=reserve, makeup=makeup, summary=summary, folded=folded)


def _after_checkpoint(run: Run, checkpoint: Checkpoint) -> int:
    last = run.position_of(checkpoint.last_id)
    if last is None:
        raise InvalidInput(
            f"the checkpoint covers up to {checkpoint.last_id!r}, which is not in the session",
            path="state.checkpoint.last_id",
        )
    return last + 1


def _counted_beyond_rule(run: Run, checkpoint: Checkpoint) -> int:
    """What the summariser's own count of the summary says it costs beyond the rule's price of its
    text (0 when uncounted or the rule prices it higher): a fresh summary is content no anchor has
    counted yet, and its output count is the same text in the provider's units."""
    if checkpoint.summary_tokens is None:
        return 0
    return max(0, checkpoint.summary_tokens - run.est.text(checkpoint.summary))


def head_bytes(state: CompileState, summary: Message | None) -> int:
    """The head's size on the wire, estimated for the byte wall."""
    total = sum(len(t.text.encode()) + _BLOCK_BYTES for t in state.system)
    total += sum(tool_bytes(tool) + _BLOCK_BYTES for tool in state.tools)
    if summary is not None:
        total += sum(len(b.text.encode()) + _BLOCK_BYTES for b in summary.content if isinstance(b, Text))
    return total
