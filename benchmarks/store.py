"""Ledger figures: append throughput, cold load of 10,000 messages, peak RSS reading 2,000 × 1 MB images.

SQLite (both durability settings) and PostgreSQL are measured in the same run, with the memory
store and a raw ``sqlite3`` insert of the same payloads as reference points. PostgreSQL needs
``CONTEXTWINDOW_TEST_POSTGRES_URL`` (or ``CONTEXTWINDOW_BENCH_POSTGRES_URL``); without it its rows
say so. Run: ``PYTHONPATH=src python -m benchmarks.store``.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image as PILImage

from contextwindow.content import Image, Message
from contextwindow.store import Store, open_store
from contextwindow.store._codec import encode_message
from contextwindow.store._rows import NewEntry, new_id, now_iso

APPENDS = 500
LOAD = 10_000
IMAGES = 2_000
IMAGE_BYTES = 1_000_000
RSS_LIMIT_MB = 64
RESULTS = Path(__file__).parent / "results" / "store.md"


def _pg_url() -> str | None:
    return os.environ.get("CONTEXTWINDOW_BENCH_POSTGRES_URL") or os.environ.get(
        "CONTEXTWINDOW_TEST_POSTGRES_URL"
    )


def _targets(tmp: Path) -> dict[str, tuple[Any, dict[str, Any]]]:
    targets: dict[str, tuple[Any, dict[str, Any]]] = {
        "memory": (None, {}),
        "sqlite (full)": (str(tmp / "full.db"), {"durability": "full"}),
        "sqlite (normal)": (str(tmp / "normal.db"), {"durability": "normal"}),
    }
    url = _pg_url()
    if url:
        targets["postgresql"] = (url, {"schema": f"cwbench_{uuid.uuid4().hex[:8]}"})
    return targets


def _drop(url: Any, options: dict[str, Any]) -> None:
    if isinstance(url, str) and url.startswith("postgres") and "schema" in options:
        import psycopg

        with psycopg.connect(url, autocommit=True) as db:
            db.execute(f'DROP SCHEMA IF EXISTS "{options["schema"]}" CASCADE')


def _message(i: int) -> Message:
    return Message.user(f"message {i}: " + "some ordinary prose for the ledger " * 8)


def append_rate(store: Store) -> float:
    session = store.session(uuid.uuid4().hex)
    times = []
    for i in range(APPENDS):
        start = time.perf_counter()
        session.append(_message(i), block_prices=[90.0])
        times.append(time.perf_counter() - start)
    return 1.0 / statistics.median(times)


def raw_sqlite_rate(path: Path) -> float:
    """A floor: the same payload inserted with bare sqlite3 (WAL, synchronous=FULL), no validation."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("CREATE TABLE t (session TEXT, position INTEGER, payload TEXT)")
    payload = encode_message(_message(0), [90.0])
    times = []
    for i in range(APPENDS):
        start = time.perf_counter()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO t VALUES (?, ?, ?)", ("s", i, payload))
        db.execute("COMMIT")
        times.append(time.perf_counter() - start)
    db.close()
    return 1.0 / statistics.median(times)


def fill(store: Store, session_id: str, count: int) -> None:
    backend = store._backend()
    for start in range(0, count, 1000):
        now = now_iso()
        rows = [
            NewEntry(new_id("msg"), "message", 1, encode_message(_message(i), [90.0]), now)
            for i in range(start, min(count, start + 1000))
        ]
        backend.append(session_id, rows)


def cold_load(url: Any, options: dict[str, Any], session_id: str, reuse: Store | None) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        store = reuse or open_store(url, **options)
        messages = store.session(session_id).messages()
        times.append(time.perf_counter() - start)
        assert len(messages) == LOAD
        if reuse is None:
            store.close()
    return statistics.median(times)


def _image(i: int, noise: bytes) -> bytes:
    return noise + i.to_bytes(8, "big")  # distinct bytes after IEND; the header still says 577×577


def fill_images(store: Store, session_id: str) -> None:
    out = io.BytesIO()
    PILImage.frombytes("RGB", (577, 577), os.urandom(577 * 577 * 3)).save(out, "PNG", compress_level=0)
    noise = out.getvalue()[: IMAGE_BYTES - 8] if len(out.getvalue()) > IMAGE_BYTES else out.getvalue()
    session = store.session(session_id)
    for i in range(IMAGES):
        ref = session.attach(_image(i, noise), "image/png")
        session.append(Message.user(f"screenshot {i}", Image(ref=ref)), block_prices=[5.0, 1600.0])


_RSS_CHILD = """
import json, resource, sys
import psutil
from contextwindow.store import open_store
url, options, session_id = json.loads(sys.argv[1])
store = open_store(url, **options)
session = store.session(session_id)
base = psutil.Process().memory_info().rss
peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
messages = session.messages()
refs = session.attachments()
total = sum(ref.size_bytes for ref in refs)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
after = psutil.Process().memory_info().rss
print(json.dumps({"base": base, "peak": max(peak, after), "peak_before": peak_before,
                  "messages": len(messages), "attachments": len(refs), "bytes": total}))
"""


def metadata_rss(url: Any, options: dict[str, Any], session_id: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    out = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, json.dumps([url, options, session_id])],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    data = json.loads(out.stdout)
    assert data["messages"] == IMAGES and data["attachments"] == IMAGES
    # Growth above the opened, empty-handed process: the higher of the new lifetime peak and the RSS
    # after reading, over the RSS before reading (a peak reached during imports does not hide growth).
    return {"growth_mb": max(0, data["peak"] - data["base"]) / 2**20, "stored_mb": data["bytes"] / 2**20}


def _timed(label: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    value = fn()
    print(f"  {label}: {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return value


def main() -> None:
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        raw = raw_sqlite_rate(tmp / "raw.db")
        for name, (url, options) in _targets(tmp).items():
            print(f"{name}", file=sys.stderr)
            store = open_store(url, **options)
            try:
                rate = _timed("append", lambda store=store: append_rate(store))
                _timed("fill 10k", lambda store=store: fill(store, "load", LOAD))
                load = _timed(
                    "cold load",
                    lambda url=url, options=options, store=store: cold_load(
                        url, options, "load", store if url is None else None
                    ),
                )
                rss = "—"
                if url is not None and "normal" not in name:
                    _timed("fill images", lambda store=store: fill_images(store, "images"))
                    figures = metadata_rss(url, options, "images")
                    rss = f"{figures['growth_mb']:.1f} MB (of {figures['stored_mb']:.0f} MB stored)"
                rows.append(
                    f"| {name} | {rate:,.0f} | {rate / raw:.2f} | {load:.3f} | {LOAD / load:,.0f} | {rss} |"
                )
            finally:
                store.close()
                _drop(url, options)
        if not _pg_url():
            rows.append("| postgresql | not measured: set CONTEXTWINDOW_TEST_POSTGRES_URL | | | | |")
    table = "\n".join(
        [
            f"Store: {APPENDS} single-message appends (median latency → messages/s), cold load of a "
            f"{LOAD:,}-message session (open + read + validate, median of 3), and peak RSS growth while "
            f"reading the metadata of {IMAGES:,} images of ~1 MB (limit {RSS_LIMIT_MB} MB; bytes never loaded).",
            "",
            f"Raw sqlite3 insert of the same payload (WAL, synchronous=FULL): {raw:,.0f} inserts/s.",
            "",
            "| backend | appends/s | × raw sqlite3 | cold load 10k (s) | messages/s loaded | metadata peak RSS growth |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
            *rows,
        ]
    )
    print(table)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table + "\n")


if __name__ == "__main__":
    main()
