"""Two ``contextwindow proxy`` processes on one PostgreSQL ledger: nothing lost, nothing mixed."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest

from contextwindow.content import Text
from contextwindow.store import open_store
from server_support import running

CONVERSATIONS = 20  # per worker
TURNS = 3


@pytest.fixture
def fresh_database() -> Iterator[str]:
    url = os.environ.get("CONTEXTWINDOW_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail("CONTEXTWINDOW_TEST_POSTGRES_URL is not set; CI must run the PostgreSQL tests")
        pytest.skip("CONTEXTWINDOW_TEST_POSTGRES_URL is not set")
    import psycopg

    name = f"cw_proxy_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    base, _, query = url.partition("?")
    fresh = base.rsplit("/", 1)[0] + "/" + name + (f"?{query}" if query else "")
    try:
        yield fresh
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.postgres
class TestTwoWorkersOneLedger:
    def test_twenty_conversations_each_are_stored_whole_and_apart(self, fresh_database: str) -> None:
        with (
            running("serve", "--window", "200000") as local,
            running("proxy", "--upstream", local, "--store", fresh_database) as first,
            running("proxy", "--upstream", local, "--store", fresh_database) as second,
        ):
            failures: list[str] = []

            def conversation(worker: str, n: int) -> None:
                history: list[dict[str, str]] = []
                with httpx.Client(base_url=worker, timeout=60) as client:
                    for turn in range(TURNS):
                        history.append(
                            {"role": "user", "content": f"conversation {worker[-5:]}/{n} turn {turn}"}
                        )
                        body = {"model": "claude-haiku-4-5", "max_tokens": 32, "messages": history}
                        answered = client.post("/v1/messages", json=body, headers={"x-api-key": "k"})
                        if answered.status_code != 200:
                            failures.append(f"{n}/{turn}: {answered.status_code} {answered.text[:200]}")
                            return
                        history.append(
                            {"role": "assistant", "content": answered.json()["content"][0]["text"]}
                        )

            threads = [
                threading.Thread(target=conversation, args=(worker, n))
                for n in range(CONVERSATIONS)
                for worker in (first, second)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=120)
            assert not failures
        with open_store(fresh_database) as ledger:
            sessions = ledger.sessions()
            assert len(sessions) == 2 * CONVERSATIONS
            seen: set[str] = set()
            for sid in sessions:
                stored = [m.message for m in ledger.session(sid).messages()]
                assert [m.role for m in stored] == ["user", "assistant"] * TURNS
                users = [b.text for m in stored if m.role == "user" for b in m.content if isinstance(b, Text)]
                prefix = users[0].rsplit(" turn ", 1)[0]
                assert users == [f"{prefix} turn {t}" for t in range(TURNS)]  # one conversation, in order
                seen.add(prefix)
            assert len(seen) == 2 * CONVERSATIONS  # none mixed into another
