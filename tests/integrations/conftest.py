"""The fixtures every adapter's tests use: the observed local provider and its server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from contextwindow.testing import LocalServer
from integrations_support import ObservedModel


@pytest.fixture
def model() -> ObservedModel:
    return ObservedModel()


@pytest.fixture
def server(model: ObservedModel) -> Iterator[LocalServer]:
    with LocalServer(model) as running:
        yield running
