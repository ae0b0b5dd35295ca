"""Parse and render a 10,000-message Anthropic request with 500 inline images of ~200 KB each.

The claim under test: parsing and rendering must not copy image bytes more than once.
Each scenario runs in a fresh child process (so RSS is its own), once under ``tracemalloc`` for the
Python-heap peak and ``--repeats`` times without it for wall time and peak RSS (``ru_maxrss``; psutil's
current RSS is reported beside it). The request arrives as JSON text, as from an HTTP body; building it
is not measured.

Scenarios:

- ``peer: json.loads + b64decode``: the naive reference: load the JSON, decode every image.
- ``contextwindow parse``: load the JSON, ``anthropic.parse_request`` (decode, hash, sniff, canonical).
- ``peer: + b64encode``: the reference, then base64-encode every decoded image back to text.
- ``contextwindow parse + render``: parse, then ``anthropic.render_request`` back to a request body.

"Copies" are measured from the tracemalloc peak: (peak during the step − memory held before it) ÷ the
decoded image bytes (parse) or ÷ the base64 text rendered (render). 1.0 means each image's bytes exist
once more than before the step and nothing else; the ratio against the theoretical minimum
(wire dict + decoded bytes [+ rendered text]) is reported as well.

Run: ``PYTHONPATH=src python -m benchmarks.formats [--messages N] [--images N] [--image-kb N]``.
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import resource
import statistics
import struct
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

__all__ = ["build_request", "main"]

RESULTS = Path(__file__).parent / "results" / "formats.md"
SCENARIOS = ("peer-parse", "cw-parse", "peer-parse-encode", "cw-parse-render")
LABELS = {
    "peer-parse": "peer: json.loads + b64decode",
    "cw-parse": "contextwindow parse",
    "peer-parse-encode": "peer: + b64encode",
    "cw-parse-render": "contextwindow parse + render",
}


def _png(width: int, height: int, size: int, rng: random.Random) -> bytes:
    """A PNG header (so dimensions can be sniffed) followed by random bytes up to ``size``.

    The random tail comes after IEND, so every image is distinct (no dedup helps) and Pillow, which
    reads only up to the first IDAT, never touches it: sniffing reads the header only.
    """

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    head += chunk(b"IDAT", b"") + chunk(b"IEND", b"")
    return head + rng.randbytes(max(0, size - len(head)))


def build_request(messages: int, images: int, image_bytes: int, seed: int = 7) -> str:
    """A realistic long Anthropic request as JSON text: a coding agent's loop with screenshots."""
    rng = random.Random(seed)
    every = max(1, messages // max(1, images))
    out: list[dict[str, Any]] = []
    placed = 0
    for i in range(messages):
        if i % 2 == 0:
            content: list[dict[str, Any]] = []
            if i >= 1:
                content.append(
                    {"type": "tool_result", "tool_use_id": f"toolu_{i - 1}", "content": f"ok: step {i} " * 8}
                )
            content.append(
                {"type": "text", "text": f"Step {i}: here is the screen after the last action. " * 3}
            )
            if placed < images and i % every == 0:
                data = _png(1280, 800, image_bytes, rng)
                source = {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": base64.b64encode(data).decode(),
                }
                content.append({"type": "image", "source": source})
                placed += 1
            out.append({"role": "user", "content": content})
        else:
            out.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"I will click the next button (step {i})."},
                        {
                            "type": "tool_use",
                            "id": f"toolu_{i}",
                            "name": "computer",
                            "input": {"action": "click", "x": i % 1280, "y": i % 800},
                        },
                    ],
                }
            )
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": "You operate a computer.",
        "messages": out,
    }
    return json.dumps(body)


# ---------------------------------------------------------------------------------------------------
# child: one scenario, one measurement


def _images_of(wire: dict[str, Any]) -> list[str]:
    return [
        b["source"]["data"]
        for m in wire["messages"]
        for b in m["content"]
        if b["type"] == "image" and b["source"]["type"] == "base64"
    ]


def _run(scenario: str, text: str, traced: bool) -> dict[str, float]:
    from contextwindow.formats import anthropic

    marks: dict[str, float] = {}

    def mark(name: str) -> None:
        if traced:
            current, peak = tracemalloc.get_traced_memory()
            marks[f"{name}_current"] = current
            marks[f"{name}_peak"] = peak
            tracemalloc.reset_peak()

    if traced:
        tracemalloc.start()
    start = time.perf_counter()
    wire = json.loads(text)
    mark("loaded")
    b64_chars = sum(len(s) for s in _images_of(wire))
    if scenario.startswith("peer"):
        decoded = [base64.b64decode(s) for s in _images_of(wire)]
        mark("parsed")
        decoded_bytes = sum(len(d) for d in decoded)
        if scenario == "peer-parse-encode":
            encoded = [base64.b64encode(d).decode("ascii") for d in decoded]
            mark("rendered")
            del encoded
    else:
        parsed = anthropic.parse_request(wire)
        mark("parsed")
        decoded_bytes = sum(len(d) for d in parsed.attachments.values())
        if scenario == "cw-parse-render":
            rendered = anthropic.render_request(parsed.request, parsed.loader())
            mark("rendered")
            del rendered
    elapsed = time.perf_counter() - start
    if traced:
        tracemalloc.stop()
    import psutil

    marks.update(
        seconds=elapsed,
        maxrss=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0,
        rss_now=float(psutil.Process().memory_info().rss),
        text_chars=float(len(text)),
        b64_chars=float(b64_chars),
        decoded_bytes=float(decoded_bytes),
    )
    return marks


def _child(args: argparse.Namespace) -> None:
    text = build_request(args.messages, args.images, args.image_kb * 1024)
    print(json.dumps(_run(args.child, text, args.traced)))


def _spawn(scenario: str, args: argparse.Namespace, traced: bool) -> dict[str, float]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.formats",
        "--child",
        scenario,
        "--messages",
        str(args.messages),
        "--images",
        str(args.images),
        "--image-kb",
        str(args.image_kb),
    ] + (["--traced"] if traced else [])
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------------------------------------------
# parent: the table


def _mb(n: float) -> str:
    return f"{n / 1e6:,.0f}"


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--images", type=int, default=500)
    parser.add_argument("--image-kb", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", choices=SCENARIOS)
    parser.add_argument("--traced", action="store_true")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        _child(args)
        return ""

    rows = []
    for scenario in SCENARIOS:
        traced = _spawn(scenario, args, traced=True)
        timed = [_spawn(scenario, args, traced=False) for _ in range(args.repeats)]
        rows.append((scenario, traced, timed))

    base_seconds = statistics.median(t["seconds"] for t in rows[0][2])
    first = rows[0][1]
    lines = [
        f"Request: {args.messages:,} messages, {args.images} inline PNGs of {args.image_kb} KB "
        f"(JSON text {_mb(first['text_chars'])} MB; base64 {_mb(first['b64_chars'])} MB; "
        f"decoded {_mb(first['decoded_bytes'])} MB). Median of {args.repeats} runs; Python {sys.version.split()[0]}.",
        "",
        "| scenario | time (s) | × peer parse | traced peak (MB) | step copies of image bytes | peak ÷ theoretical | peak RSS (MB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for scenario, traced, timed in rows:
        seconds = statistics.median(t["seconds"] for t in timed)
        rss = statistics.median(t["maxrss"] for t in timed)
        wire = traced["loaded_current"]
        decoded = traced["decoded_bytes"]
        parse_peak = traced["parsed_peak"]
        copies = f"parse {(parse_peak - wire) / decoded:.2f}"
        theoretical = wire + decoded
        peak = max(traced["loaded_peak"], parse_peak)
        if "rendered_peak" in traced:
            rendered_text = traced["b64_chars"]  # the rendered base64 is as long as the input's
            copies += f", render {(traced['rendered_peak'] - traced['parsed_current']) / rendered_text:.2f}"
            theoretical += rendered_text
            peak = max(peak, traced["rendered_peak"])
        lines.append(
            f"| {LABELS[scenario]} | {seconds:.2f} | {seconds / base_seconds:.2f} | {_mb(peak)} | {copies} "
            f"| {peak / theoretical:.2f} | {_mb(rss)} |"
        )
    lines += [
        "",
        "Traced peak excludes the JSON text itself (it is the input). Theoretical minimum: the loaded wire "
        "dict + one decoded copy of every image (+ the rendered base64 text for render). Step copies: "
        "(peak during the step − memory held before it) ÷ decoded bytes (parse) or ÷ base64 text (render).",
    ]
    table = "\n".join(lines)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(f"# formats\n\n{table}\n")
    print(table)
    return table


if __name__ == "__main__":
    main()
