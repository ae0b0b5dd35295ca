"""Fixtures for the ledger tests: one conformance suite over memory, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from contextwindow.store import Store, open_store

ENV = "CONTEXTWINDOW_TEST_POSTGRES_URL"


def postgres_url() -> str:
    """The test server's URL; missing fails the test in CI and skips it locally."""
    url = os.environ.get(ENV)
    if not url:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{ENV} is not set; CI must run the PostgreSQL store tests (see .ci/postgres.sh)")
        pytest.skip(f"{ENV} is not set")
    return url


@dataclass
class Target:
    """Where a test's store lives; ``open()`` gives a new handle on the same data (not for memory)."""

    kind: str
    url: str | None
    options: dict[str, Any] = field(default_factory=dict)
    _memory: Store | None = None
    opened: list[Store] = field(default_factory=list)

    def open(self, **extra: Any) -> Store:
        if self.kind == "memory":
            if self._memory is None or extra:
                self._memory = open_store(None, **extra)
            return self._memory
        store = open_store(self.url, **{**self.options, **extra})
        self.opened.append(store)
        return store

    def close_all(self) -> None:
        for store in self.opened:
            store.close()


def _drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def make_target(kind: str, tmp_path: Path) -> tuple[Target, Callable[[], None]]:
    if kind == "memory":
        return Target("memory", None), lambda: None
    if kind == "sqlite":
        return Target("sqlite", str(tmp_path / "ledger.db")), lambda: None
    url = postgres_url()
    schema = f"cwtest_{uuid.uuid4().hex[:12]}"
    return Target("postgres", url, {"schema": schema}), lambda: _drop_schema(url, schema)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    made, cleanup = make_target(request.param, tmp_path)
    yield made
    made.close_all()
    cleanup()


@pytest.fixture(params=["sqlite", "postgres"])
def durable_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    made, cleanup = make_target(request.param, tmp_path)
    yield made
    made.close_all()
    cleanup()


@pytest.fixture
def store(target: Target) -> Iterator[Store]:
    opened = target.open()
    yield opened
    opened.close()
