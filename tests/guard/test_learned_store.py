"""What is learned about a provider endpoint and model is the store's, not one session's: a new
session, another guard or another process on the same store starts from it (the window served, the
calibration), ``inspect`` shows it, and a request the provider accepted above the learned window
withdraws that lesson."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import contextwindow
from _shared import LazyModule
from contextwindow.store.learned import REFRESH_SECONDS, LearnedWindows, lessons
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

CLAUDE = "claude-sonnet-4-6"
SCALE = 1.6
"""The provider counts this many times what the estimator prices: calibration has to learn it."""


def words(tag: str, turn: int, n: int = 400) -> str:
    return " ".join(f"{tag}{turn}_{i}" for i in range(n))


def _turns(
    url: str, store: str, tag: str, turns: int, refused: list[int] | None = None
) -> list[tuple[int, int]]:
    """Run ``turns`` turns of a new conversation on ``store``; each call's (estimate, real input).
    ``refused`` gets one item per call the provider refused for size (and the guard recovered)."""
    seen: list[tuple[int, int]] = []
    history: list[dict[str, Any]] = []
    with anthropic.Anthropic(api_key="local", base_url=url, max_retries=0) as raw:
        client = contextwindow.guard(raw, store=store)
        for turn in range(turns):
            history.append({"role": "user", "content": f"{tag} {turn}: {words(tag, turn)}"})
            response = client.messages.create(model=CLAUDE, max_tokens=256, messages=history)
            events = client.last_exchange.events
            if refused is not None:
                refused += [turn for e in events if e.type == "overflow_recovered"]
            sent = [e for e in events if e.type == "request_sent"]
            seen.append((sent[-1].estimated_tokens, response.usage.input_tokens))
            history.append({"role": "assistant", "content": response.content})
        client.store.close()
    return seen


def _error(estimate: int, real: int) -> float:
    return abs(estimate - real) / real


class TestCalibrationIsTheStores:
    def test_a_new_session_starts_calibrated_by_what_another_session_learned(self, tmp_path: Path) -> None:
        store = str(tmp_path / "ledger.db")
        with LocalServer(LocalModel(LocalSettings(count_scale=SCALE))) as server:
            first = _turns(server.url, store, "alpha", 6)
            second = _turns(server.url, store, "beta", 1)
        assert _error(*first[0]) > 0.25  # the first session started uncalibrated
        assert _error(*first[-1]) < 0.1  # and learned the provider's units
        assert _error(*second[0]) < 0.1  # a new conversation starts from them
        learned = [
            lesson for lesson in lessons(contextwindow.open_store(store)) if lesson.what == "calibration"
        ]
        assert [lesson.model for lesson in learned] == [CLAUDE]
        assert learned[0].value is not None and learned[0].value > 1.2  # the units it learned

    def test_another_process_on_the_same_sqlite_store_starts_calibrated_and_at_the_learned_window(
        self, tmp_path: Path
    ) -> None:
        store = str(tmp_path / "ledger.db")
        settings = LocalSettings(count_scale=SCALE, effective_window=16_000)
        with LocalServer(LocalModel(settings)) as server:
            script = textwrap.dedent(
                f"""
                import anthropic, contextwindow
                history = []
                with anthropic.Anthropic(api_key="local", base_url={server.url!r}, max_retries=0) as raw:
                    client = contextwindow.guard(raw, store={store!r})
                    for turn in range(14):
                        words = " ".join(f"gamma{{turn}}_{{i}}" for i in range(400))
                        history.append({{"role": "user", "content": f"gamma {{turn}}: {{words}}"}})
                        reply = client.messages.create(model={CLAUDE!r}, max_tokens=256, messages=history)
                        history.append({{"role": "assistant", "content": reply.content}})
                    client.store.close()
                """
            )
            subprocess.run([sys.executable, "-c", script], check=True, timeout=300)
            mine = LearnedWindows(contextwindow.open_store(store), "anthropic")
            assert mine.get(CLAUDE) is not None  # the other process learned the window
            refused: list[int] = []
            seen = _turns(server.url, store, "delta", 14, refused)
        assert _error(*seen[0]) < 0.1  # calibrated from the first call
        assert refused == []  # and fitted to the window the other process learned


class TestAWindowAcceptedAboveTheLesson:
    def test_a_request_the_provider_accepted_above_the_learned_window_withdraws_it(
        self, tmp_path: Path
    ) -> None:
        store = str(tmp_path / "ledger.db")
        with contextwindow.open_store(store) as opened:
            LearnedWindows(opened, "anthropic")[CLAUDE] = 12_000  # the endpoint served 12k back then
        # It serves 40k now, and counts more than the (not yet calibrated) estimate says.
        with (
            LocalServer(LocalModel(LocalSettings(count_scale=SCALE, effective_window=40_000))) as server,
            anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw,
        ):
            client = contextwindow.guard(raw, store=store)
            asked = [{"role": "user", "content": words("eps", 0, 1_900)}]
            response = client.messages.create(model=CLAUDE, max_tokens=256, messages=asked)
            client.store.close()
        assert response.usage.input_tokens > 12_000  # accepted above the lesson
        with contextwindow.open_store(store) as opened:
            assert LearnedWindows(opened, "anthropic").get(CLAUDE) is None  # withdrawn for every guard
            (window,) = [lesson for lesson in lessons(opened) if lesson.what == "window"]
            assert window.value is None

    def test_a_request_accepted_within_the_learned_window_keeps_it(self, tmp_path: Path) -> None:
        with contextwindow.open_store(str(tmp_path / "ledger.db")) as opened:
            windows = LearnedWindows(opened, "anthropic")
            windows[CLAUDE] = 12_000
            assert not windows.accepted(CLAUDE, 12_000)
            assert LearnedWindows(opened, "anthropic").get(CLAUDE) == 12_000
            assert windows.accepted(CLAUDE, 12_001)
            assert LearnedWindows(opened, "anthropic").get(CLAUDE) is None

    def test_a_guard_told_a_larger_window_keeps_lessons_of_its_own(self, tmp_path: Path) -> None:
        # A larger-context beta (or a context_window= given) is another endpoint: the lesson the default
        # one taught does not cap it.
        store = str(tmp_path / "ledger.db")
        with contextwindow.open_store(store) as opened:
            LearnedWindows(opened, "anthropic")[CLAUDE] = 12_000
        with (
            LocalServer(LocalModel(LocalSettings(effective_window=40_000))) as server,
            anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0) as raw,
        ):
            client = contextwindow.guard(raw, store=store, context_window=40_000)
            asked = [{"role": "user", "content": words("zeta", 0, 4_000)}]
            response = client.messages.create(model=CLAUDE, max_tokens=256, messages=asked)
            events = [e.type for e in client.last_exchange.events]
            client.store.close()
        assert response.usage.input_tokens > 12_000 and "compacted" not in events
        with contextwindow.open_store(store) as opened:
            assert LearnedWindows(opened, "anthropic").get(CLAUDE) == 12_000  # the default's lesson stands


class TestALessonWithdrawnElsewhere:
    def test_reaches_a_running_guard_within_a_second_and_is_not_read_more_often(self, tmp_path: Path) -> None:
        store = str(tmp_path / "ledger.db")
        now = [100.0]
        with contextwindow.open_store(store) as here, contextwindow.open_store(store) as there:
            running = LearnedWindows(here, "anthropic", clock=lambda: now[0])
            elsewhere = LearnedWindows(there, "anthropic")
            elsewhere[CLAUDE] = 12_000
            assert running.get(CLAUDE) == 12_000  # learned in the other process, read here
            assert elsewhere.accepted(CLAUDE, 30_000)  # the other process saw the endpoint serve more
            now[0] += REFRESH_SECONDS / 2
            assert running.get(CLAUDE) == 12_000  # not read again yet: at most one read a second
            now[0] += REFRESH_SECONDS / 2
            assert running.get(CLAUDE) is None  # the withdrawal reached the running one
            elsewhere[CLAUDE] = 9_000  # a smaller window learned there later
            now[0] += REFRESH_SECONDS
            assert running.get(CLAUDE) == 9_000
