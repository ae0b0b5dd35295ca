"""Prices under a previous commit's rules, in a subprocess, for before/after tables in one run.

``git archive <rev> src`` is unpacked into a temporary folder and a child Python imports
``contextwindow`` from there (the current interpreter, the same installed packages), prices what it
is sent (pickled: texts per model, or canonical messages per model) with ``Estimator(model)`` of that
commit (``exact=False`` when the commit knows it), and sends the prices back. Deterministic rules
give the same prices whenever they run, so the figures are the previous rule's, beside the new.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path
from typing import Any

from benchmarks._paths import ROOT

__all__ = ["BASE", "prices"]

BASE = "fe226a6"
"""The commit whose rules are "the previous rule": the layout commit this work started from."""

_CHILD = r"""
import inspect, pickle, sys
from contextwindow.pricing import Estimator
jobs = pickle.load(sys.stdin.buffer)
kw = {"exact": False} if "exact" in inspect.signature(Estimator).parameters else {}
out = []
for kind, model, items in jobs:
    try:
        est = Estimator(model, **kw)
    except Exception:  # a model that commit did not know
        out.append(None)
        continue
    if kind == "text":
        out.append([float(est.raw_text(t)) for t in items])
    else:
        out.append([float(est.messages(m)) for m in items])
pickle.dump(out, sys.stdout.buffer)
"""


def prices(jobs: list[tuple[str, str, list[Any]]], rev: str = BASE) -> list[list[float] | None] | None:
    """Per job ``(kind, model, items)`` (kind ``text``: strings, ``messages``: tuples of messages),
    the prices under ``rev``'s rules (``None`` for a model that commit did not know); ``None`` when
    the commit cannot be read (a shallow clone)."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        done = subprocess.run(
            [sys.executable, "-c", _CHILD],
            input=pickle.dumps(jobs),
            capture_output=True,
            check=True,
            env={**_env(), "PYTHONPATH": str(Path(tmp) / "src")},
        )
    result: list[list[float] | None] = pickle.loads(done.stdout)
    return result


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
