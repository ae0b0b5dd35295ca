"""Fuzzing every public boundary, long: what each does with hostile input, against a peer.

The inputs and the judging are the property suite's (``tests/fuzzing.py``); here each boundary gets
many more examples (``--examples``, 1,500 by default, plus a third as many poisoned ones), with a
5-second alarm per call so a hang is counted rather than waited on. Columns:

- inputs tried; accepted; typed errors (a ``ContextWindowError``); bare exceptions (anything else);
- hangs (a call still running after 5 s);
- silent acceptances: a poisoned input (a known-bad part planted in a valid one: nesting past the
  limit, NaN, ``10**400``, a negative count, an empty or mislabelled file) that was accepted;
- store unchanged: of the refusals by a boundary that writes to a store, how many left it exactly as
  it was.

Peer, measured in the same run on the same wire inputs: LangChain's ``convert_to_messages`` followed
by ``count_tokens_approximately`` (langchain-core), the closest public boundary that takes wire
messages and counts them. For the peer, a ``ValueError``/``TypeError``/``NotImplementedError`` counts
as typed (its documented refusals) and anything else as bare.

Run: ``PYTHONPATH=src python -m benchmarks.fuzz [--examples N]``. Never fails on what it finds.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fuzzing import BOUNDARIES, Boundary, outcome, poisoned_wire, seeded_store, wire_requests

RESULTS = Path(__file__).parent / "results" / "fuzz.md"
HANG_SECONDS = 5.0


class Hang(BaseException):
    """Raised by the alarm inside a call that ran too long (a BaseException: nothing may catch it)."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def _run(values: st.SearchStrategy[Any], examples: int, judge: Callable[[Any], str]) -> Counter[str]:
    counts: Counter[str] = Counter()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def each(data: st.DataObject) -> None:
        value = data.draw(values)
        counts["tried"] += 1
        signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
        try:
            counts[judge(value)] += 1
        except Hang:
            counts["hang"] += 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)

    each()
    return counts


def _ours(boundary: Boundary, examples: int) -> dict[str, int]:
    store = seeded_store()
    plain = _run(boundary.values, examples, lambda v: outcome(boundary, v, store)[0])
    poisoned: Counter[str] = Counter()
    if boundary.poisoned is not None:
        poisoned = _run(boundary.poisoned, max(1, examples // 3), lambda v: outcome(boundary, v, store)[0])
    both = plain + poisoned
    refusals = both["typed"] + both["store_changed"]
    return {
        "tried": both["tried"],
        "typed": refusals,
        "bare": both["bare"],
        "hang": both["hang"],
        "silent": poisoned["accepted"],
        "poisoned": poisoned["tried"],
        "unchanged": both["typed"] if boundary.writes else -1,
        "refusals": refusals if boundary.writes else -1,
    }


BARE_TYPES: Counter[str] = Counter()


def _langchain(value: Any) -> str:
    from langchain_core.messages import convert_to_messages
    from langchain_core.messages.utils import count_tokens_approximately

    messages = value.get("messages") if isinstance(value, dict) else value
    try:
        count_tokens_approximately(convert_to_messages(messages))  # type: ignore[arg-type]
    except (ValueError, TypeError, NotImplementedError):
        return "typed"
    except Exception as err:  # what is being counted
        BARE_TYPES[type(err).__name__] += 1
        return "bare"
    return "accepted"


def _peer(examples: int) -> dict[str, int] | None:
    try:
        import langchain_core  # noqa: F401
    except ImportError:
        return None
    plain = _run(wire_requests(), examples, _langchain)
    # Only poison the peer reads: it takes the messages, not max_tokens.
    poisoned = _run(poisoned_wire(numbers=False), max(1, examples // 3), _langchain)
    both = plain + poisoned
    return {
        "tried": both["tried"],
        "typed": both["typed"],
        "bare": both["bare"],
        "hang": both["hang"],
        "silent": poisoned["accepted"],
        "poisoned": poisoned["tried"],
        "unchanged": -1,
        "refusals": -1,
    }


def _row(name: str, r: dict[str, int], seconds: float) -> str:
    unchanged = "n/a" if r["refusals"] < 0 else f"{r['unchanged']}/{r['refusals']}"
    silent = f"{r['silent']}/{r['poisoned']}" if r["poisoned"] else "n/a"
    return (
        f"| {name} | {r['tried']:,} | {r['tried'] - r['typed'] - r['bare'] - r['hang']:,} | {r['typed']:,} | "
        f"{r['bare']:,} | {r['hang']:,} | {silent} | "
        f"{unchanged} | {seconds:.1f} |"
    )


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=1_500, help="examples per boundary (default 1,500)")
    args = parser.parse_args(argv)
    previous = signal.signal(signal.SIGALRM, _alarm)
    lines = [
        "| boundary | inputs tried | accepted | typed errors | bare exceptions | hangs | silent acceptances "
        "(of poisoned) | store unchanged (of refusals) | seconds |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    total: Counter[str] = Counter()
    try:
        for boundary in BOUNDARIES:
            start = time.perf_counter()
            result = _ours(boundary, args.examples)
            lines.append(_row(f"contextwindow `{boundary.name}`", result, time.perf_counter() - start))
            print(lines[-1], flush=True)
            total.update({k: v for k, v in result.items() if v > 0})
        lines.append(
            _row(
                "**contextwindow, all boundaries**",
                {
                    **{k: total[k] for k in ("tried", "typed", "bare", "hang", "silent", "poisoned")},
                    "unchanged": total["unchanged"],
                    "refusals": total["refusals"],
                },
                0.0,
            ).replace("| 0.0 |", "| |")
        )
        start = time.perf_counter()
        peer = _peer(args.examples)
        if peer is None:
            lines.append("| peer: langchain-core not installed | | | | | | | | |")
        else:
            lines.append(
                _row(
                    "peer: langchain-core `convert_to_messages` + `count_tokens_approximately`",
                    peer,
                    time.perf_counter() - start,
                )
            )
    finally:
        signal.signal(signal.SIGALRM, previous)
    if BARE_TYPES:
        lines.append("")
        lines.append(
            "Peer's bare exceptions: " + ", ".join(f"{n}× {name}" for name, n in BARE_TYPES.most_common())
        )
    table = "\n".join(lines)
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(f"# fuzz\n\n{__doc__.split(chr(10) * 2)[0]}\n\n{table}\n")
    return table


if __name__ == "__main__":
    main()
