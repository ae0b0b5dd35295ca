"""The engine is deterministic: the same scenario twice sends the same bytes.

A realistic run (the bundled demo's first turns: source files read in chunks, JSON tool results,
screenshots as tool-result images, photos sent mid-turn) goes through the real engine, compiler,
summariser and local provider on a 16k window, once where the window is true (physical-window
restarts and covering folds) and once where the provider silently serves 85% of it (rejections
recovered by compaction). Each run uses a fresh memory store, so every ledger id and timestamp is
new: equal requests prove they never reach what is sent. Hash-order bugs only show between
processes (``PYTHONHASHSEED`` differs per process), so the same run is also made in subprocesses
with different hash seeds and compared call by call.

``python tests/engine/test_engine_determinism.py CONFIG`` prints one run's fingerprint as JSON (what the
subprocess test runs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import contextwindow.replay.simulate as simulate_module
from contextwindow.compile import Policy
from contextwindow.content import AttachmentRef, Image, Message, Request, Text
from contextwindow.engine.events import event_to_dict
from contextwindow.engine.folding.folds import _media_ids
from contextwindow.formats import AttachmentLoader, WireFormat, render
from contextwindow.replay.demo import build_demo
from contextwindow.replay.simulate import RecordingModel, simulate_sync
from contextwindow.testing.model import LocalReply, Rejection

ROOT = Path(__file__).resolve().parents[2]
WINDOW = 16_000
CONFIGS: dict[str, dict[str, Any]] = {
    # Declared window true: physical-window restarts, covering folds, eviction, archives.
    "true-window": {"usage": "cumulative", "provider_window": None},
    # The provider serves 85% of what is declared: rejections, recovery by compaction, refits.
    "serves-less": {"usage": "per-call", "provider_window": WINDOW * 85 // 100},
}
POLICY = Policy(recent_turns_full=1, archive_text_over_tokens=512)
"""Archives sooner than the default, so that two turns archive tool results too (the engine archives
only where the request needs the room, which two demo turns at the default thresholds do not reach)."""
LEDGER_ID = re.compile(r"\b(?:msg|use|anc|cal|chk|evi|arc|not)_[0-9a-f]{28}\b")
"""A ledger entry id (``store._rows.new_id``: prefix, 12 hex ms, 16 random hex)."""


@dataclass(frozen=True)
class Fingerprint:
    """What one run sent and reported, comparable across runs and processes."""

    requests: list[str]
    """Every request the provider received (agent and summariser sessions), as wire JSON, in order."""
    events: list[str]
    """The engine's events as JSON with ledger ids renamed by first appearance (``<id0>``, ...)."""
    raw_ids: list[str]
    """The ledger ids the events named, as minted: random, so they differ between runs."""
    records: list[str]
    summary: str


class _SpyModel(RecordingModel):
    """The simulation's local model, also keeping each request of every session as wire JSON."""

    seen: list[str]

    def handle(
        self,
        request: Request,
        *,
        wire: WireFormat,
        max_tokens: int | None,
        load: AttachmentLoader | None = None,
        session: str = "default",
    ) -> LocalReply | Rejection:
        assert load is not None, "the engine always gives the provider its attachment loader"
        body = render(request, wire, load)
        line = json.dumps(
            {"session": session, "max_tokens": max_tokens, "request": body},
            ensure_ascii=False,
            sort_keys=True,
        )
        _SpyModel.seen.append(line)
        return super().handle(request, wire=wire, max_tokens=max_tokens, load=load, session=session)


def run_once(config: str) -> Fingerprint:
    """One run of the scenario under ``config`` in a fresh memory store."""
    scenario = build_demo(0, image_scale=0.5)
    scenario = dataclasses.replace(scenario, turns=scenario.turns[:2])
    _SpyModel.seen = []
    original = simulate_module.RecordingModel
    simulate_module.RecordingModel = _SpyModel  # type: ignore[misc]
    try:
        result = simulate_sync(
            scenario, model="claude-sonnet-4-5", window=WINDOW, policy=POLICY, **CONFIGS[config]
        )
    finally:
        simulate_module.RecordingModel = original  # type: ignore[misc]
    names: dict[str, str] = {}
    events = [
        LEDGER_ID.sub(
            lambda m: names.setdefault(m.group(0), f"<id{len(names)}>"),
            json.dumps(event_to_dict(e), sort_keys=True, ensure_ascii=False),
        )
        for e in result.events
    ]
    return Fingerprint(
        requests=list(_SpyModel.seen),
        events=events,
        raw_ids=list(names),
        records=[json.dumps(dataclasses.asdict(r), sort_keys=True) for r in result.records],
        summary=json.dumps(result.summary, sort_keys=True, default=str),
    )


def _digests(fp: Fingerprint) -> dict[str, Any]:
    def sha(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    return {
        "requests": [sha(r) for r in fp.requests],
        "events": [sha(e) for e in fp.events],
        "records": sha("\n".join(fp.records)),
        "summary": fp.summary,
    }


def _first_difference(a: list[str], b: list[str]) -> str:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            at = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
            return f"item {index} differs at char {at}: {x[max(0, at - 120) : at + 80]!r} vs {y[max(0, at - 120) : at + 80]!r}"
    return f"lengths differ: {len(a)} vs {len(b)}"


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def twice(request: pytest.FixtureRequest) -> tuple[str, Fingerprint, Fingerprint]:
    config: str = request.param
    return config, run_once(config), run_once(config)


class TestTheSameScenarioTwiceInOneProcess:
    def test_the_run_exercises_what_determinism_must_survive(
        self, twice: tuple[str, Fingerprint, Fingerprint]
    ) -> None:
        config, first, _ = twice
        kinds = {json.loads(e)["type"] for e in first.events}
        sent = "\n".join(first.requests)
        assert {"stream_restarted", "compacted", "tool_result", "stream_resumed"} <= kinds
        assert '"type": "image"' in sent and '"tool_result"' in sent
        assert "<attachments>" in sent and "[tool result archived as" in sent  # eviction + archive
        assert any(json.loads(r)["session"] == "summarizer" for r in first.requests)
        if config == "serves-less":
            assert "overflow_recovered" in kinds

    def test_every_request_is_byte_identical(self, twice: tuple[str, Fingerprint, Fingerprint]) -> None:
        _, first, second = twice
        assert len(first.requests) == len(second.requests)
        assert first.requests == second.requests, _first_difference(first.requests, second.requests)

    def test_the_event_streams_are_equal_with_ledger_ids_named_by_appearance(
        self, twice: tuple[str, Fingerprint, Fingerprint]
    ) -> None:
        _, first, second = twice
        assert first.events == second.events, _first_difference(first.events, second.events)

    def test_the_report_numbers_are_equal(self, twice: tuple[str, Fingerprint, Fingerprint]) -> None:
        _, first, second = twice
        assert first.records == second.records, _first_difference(first.records, second.records)
        assert first.summary == second.summary

    def test_ledger_ids_differ_between_runs_and_none_reaches_a_request(
        self, twice: tuple[str, Fingerprint, Fingerprint]
    ) -> None:
        """The ledger's ids are random and its timestamps real; they may stay so only because nothing
        sent carries them: the runs minted different ids and still sent equal bytes."""
        _, first, second = twice
        assert first.raw_ids and len(first.raw_ids) == len(second.raw_ids)
        assert not set(first.raw_ids) & set(second.raw_ids)
        leaked = [m.group(0) for r in first.requests for m in LEDGER_ID.finditer(r)]
        assert leaked == []


class TestIdsGoOutInAStableOrder:
    def test_media_ids_dropped_by_a_rung_are_listed_in_order_of_appearance(self) -> None:
        """The evict rung's ``attachments_evicted`` ids: a set of strings would list them in the order
        this process's hash seed picks (50 ids: the odds that set order equals appearance order are nil)."""
        refs = []
        for n in range(50):
            sha = hashlib.sha256(str(n).encode()).hexdigest()
            refs.append(AttachmentRef(id=f"att_{sha[:32]}", sha256=sha, media_type="image/png", size_bytes=9))
        messages = [Message(role="user", content=(Text(text="look"), Image(ref=r))) for r in refs]
        messages.append(Message(role="user", content=(Image(ref=refs[0]),)))  # a repeat counts once
        assert list(_media_ids(messages)) == [r.id for r in refs]


class TestTheSameScenarioAcrossProcesses:
    @pytest.mark.parametrize("config", ["serves-less"])
    def test_processes_with_different_hash_seeds_send_the_same_bytes(self, config: str) -> None:
        outs = []
        for seed in ("0", "4242"):
            env = dict(os.environ, PYTHONHASHSEED=seed)
            env["PYTHONPATH"] = os.pathsep.join(
                [str(ROOT / "src"), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
            )
            done = subprocess.run(
                [sys.executable, __file__, config],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            assert done.returncode == 0, done.stderr[-3000:]
            outs.append(json.loads(done.stdout))
        first, second = outs
        assert len(first["requests"]) == len(second["requests"]) > 0
        differing = [
            i for i, (a, b) in enumerate(zip(first["requests"], second["requests"], strict=True)) if a != b
        ]
        assert differing == [], f"requests {differing[:10]} differ between hash seeds"
        assert first["events"] == second["events"]
        assert first["records"] == second["records"]
        assert first["summary"] == second["summary"]


if __name__ == "__main__":
    print(json.dumps(_digests(run_once(sys.argv[1]))))
