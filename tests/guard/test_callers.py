"""Per-call facts per caller: ``last_exchange`` per thread and asyncio task; ``guard()`` keeps the type."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import contextwindow
from _shared import LazyModule
from contextwindow.guard import last_exchange, store_of
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(LocalModel(LocalSettings(window=16_000))) as running:
        yield running


def first_text(exchange: Any) -> str:
    content = exchange.body["messages"][0]["content"]
    return content if isinstance(content, str) else content[0]["text"]


class TestLastExchangePerCaller:
    def test_each_thread_sees_its_own_latest_call(self, server: LocalServer) -> None:
        raw = anthropic.Anthropic(api_key="local", base_url=server.url, max_retries=0)
        client = contextwindow.guard(raw, store=":memory:")
        wrong: list[str] = []
        barrier = threading.Barrier(4)

        def agent(name: str) -> None:
            barrier.wait()
            history: list[dict[str, Any]] = []
            for turn in range(10):
                history.append({"role": "user", "content": f"{name} turn {turn}"})
                response = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, messages=history)
                history.append({"role": "assistant", "content": response.content})
                seen = client.last_exchange
                if seen is None or first_text(seen) != f"{name} turn 0":
                    wrong.append(f"{name} after {turn}")

        threads = [threading.Thread(target=agent, args=(f"agent{i}",)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        try:
            assert wrong == []
            assert client.last_exchange is None  # this thread made no call
        finally:
            store_of(client).close()
            raw.close()

    def test_each_asyncio_task_sees_its_own_latest_call(self, server: LocalServer) -> None:
        async def main() -> list[str]:
            raw = anthropic.AsyncAnthropic(api_key="local", base_url=server.url, max_retries=0)
            client = contextwindow.guard(raw, store=":memory:")

            async def agent(name: str) -> str:
                history: list[dict[str, Any]] = []
                for turn in range(5):
                    history.append({"role": "user", "content": f"{name} turn {turn}"})
                    response = await client.messages.create(
                        model="claude-sonnet-4-5", max_tokens=64, messages=history
                    )
                    history.append({"role": "assistant", "content": response.content})
                    await asyncio.sleep(0)
                exchange = last_exchange(client)
                return "" if exchange is None else first_text(exchange)

            try:
                return list(await asyncio.gather(*(agent(f"task{i}") for i in range(3))))
            finally:
                store_of(client).close()
                await raw.close()

        assert asyncio.run(main()) == ["task0 turn 0", "task1 turn 0", "task2 turn 0"]

    def test_the_typed_accessors_refuse_a_client_guard_did_not_return(self) -> None:
        with pytest.raises(TypeError, match=r"not a client contextwindow\.guard"):
            last_exchange(object())


class TestTypes:
    def test_guard_returns_the_clients_own_type_to_mypy(self) -> None:
        # tests/typing/guarded_usage.py asserts the types with typing.assert_type; mypy fails on any.
        pytest.importorskip("mypy")
        env = {**os.environ, "MYPYPATH": str(ROOT / "src")}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--follow-imports=silent",
                "tests/typing/guarded_usage.py",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stdout + done.stderr
