"""Test-session setup: real tokenizers come from ``../shared/tokenizers`` (offline).

A test module sits in the folder of the package it tests (``tests/engine/`` for ``contextwindow.engine``),
a cross-cutting one here. The support modules here (``engine_support``, ``_shared``, ...) import from
every folder (``pythonpath`` in ``pyproject.toml``). Test module names are unique across the folders:
there is no ``__init__.py``, and pytest puts each folder on ``sys.path``. A module whose tests use an
SDK or an agent framework imports it when they run, not when the suite is collected
(``_shared.LazyModule``, checked by ``test_collection.py``).
"""

from __future__ import annotations

import os

from hypothesis import settings

from _shared import TOKENIZERS

# No per-example deadline: on a shared two-core machine a first call that loads a tokenizer took
# 1.7 s against hypothesis's 200 ms and failed as "flaky"; speed is measured in benchmarks/. The
# profile inherits the active one, so under CI=true hypothesis's own "ci" profile (derandomized
# draws, no database) still holds.
settings.register_profile("contextwindow", settings(), deadline=None)
settings.load_profile("contextwindow")

if TOKENIZERS.is_dir():
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TOKENIZERS))
elif os.environ.get("CI") == "true":
    raise RuntimeError(f"CI needs the real tokenizers at {TOKENIZERS}")
