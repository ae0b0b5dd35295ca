"""How close plain, calibrated and anchored estimates come to the provider's real prompt count.

A long mixed conversation is replayed request by request against a "provider" that counts with the
real ``o200k_base`` tokenizer: a real Claude Code session (prose, code, JSON tool inputs and results,
``../shared/data/claude-code-sessions``) with Chinese and Japanese user turns and screenshots mixed in.
The true prompt of a request is the tiktoken count of each message's rendered text, plus
:data:`PER_MESSAGE_OVERHEAD` per message and :data:`REPLY_PRIMING` per request (OpenAI's chat format),
plus each image's tokens by OpenAI's tile rule (:func:`tile_rule_tokens`).

For every request from the second on, four estimates are compared with that count:

- **plain**: the estimate function alone;
- **calibrated**: the plain estimate times the multiplier a :class:`~contextwindow.usage.calibration.Calibrator`
  learned from the previous requests (one sample per request);
- **anchored**: the previous request's real count plus the change of the plain estimate since
  (:func:`~contextwindow.usage.tracker.anchored_estimate`);
- **anchored, calibrated delta**: the same, with both payloads priced at the current multiplier.

The estimate function is a parameter of :func:`measure`; :func:`main` runs the table twice in the
same run: with contextwindow's ``Estimator`` (:func:`estimator_estimate`) and with the peers' rule
:func:`chars4_estimate` (``ceil(chars/4)`` per block, litellm's and https://github.com/withastro/flue's
fallback).

Run: ``PYTHONPATH=src TIKTOKEN_CACHE_DIR=../shared/tokenizers python -m benchmarks.anchored_accuracy``.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextwindow.content import (
    AttachmentRef,
    Block,
    Image,
    Message,
    Text,
    ToolResult,
    ToolUse,
    attachment_id,
)
from contextwindow.pricing import Estimator
from contextwindow.usage.calibration import Calibrator
from contextwindow.usage.tracker import Anchor, AnchorBook, anchored_estimate

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SESSION = (
    SHARED
    / "data/claude-code-sessions/real_projects/-Users-dain-workspace-claude-code-log-sample"
    / "37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl"
)
RESULTS = Path(__file__).resolve().parent / "results" / "anchored_accuracy.md"

PER_MESSAGE_OVERHEAD = 4
"""Tokens the chat format adds around each message (``<|im_start|>role … <|im_end|>``; OpenAI cookbook)."""
REPLY_PRIMING = 3
"""Tokens that prime the reply (``<|im_start|>assistant``; OpenAI cookbook)."""
MODEL, CONNECTION = "gpt-4o", "bench"

Estimate = Callable[[Sequence[Message]], int]

CJK_TURNS = (
    "请帮我检查一下这个测试文件里的异步夹具，为什么在并行运行时会出现事件循环冲突？我希望每个测试都有独立的事件循环，"
    "并且不要影响其他模块的配置。另外请说明一下修改的原因，以及有没有更简单的办法。",
    "このテストは並列実行すると失敗します。イベントループの扱いを見直して、各テストが独立して動くようにしてください。"
    "変更点と理由を簡単にまとめてもらえると助かります。",
    "我们的持续集成流水线最近变慢了很多，尤其是集成测试部分。能不能把慢的测试标记出来，单独放到一个任务里运行？"
    "请保留现有的目录结构，只修改必要的配置文件。",
    "ログ出力が多すぎて、失敗したテストの原因が見つけにくいです。警告レベル以上だけを表示するように設定を変えて、"
    "必要なときだけ詳細ログを有効にできるようにしてください。",
    "请用中文总结一下到目前为止做过的所有修改：哪些文件改了，为什么改，还有哪些问题没有解决。"
    "如果有需要我决定的事情，请单独列出来。",
)
SCREENSHOTS = ((1280, 800), (1920, 1080), (800, 600), (2560, 1440), (390, 844))


def tile_rule_tokens(width: int, height: int) -> int:
    """OpenAI's tile rule for gpt-4o at high detail: fit 2048², shortest side to 768, 85 + 170 per 512-px tile.

    Source: https://platform.openai.com/docs/guides/images-vision (tile section).
    """
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _image(width: int, height: int, salt: str) -> Image:
    sha = hashlib.sha256(f"{salt}:{width}x{height}".encode()).hexdigest()
    ref = AttachmentRef(
        id=attachment_id(sha),
        sha256=sha,
        media_type="image/png",
        size_bytes=width * height,
        width=width,
        height=height,
    )
    return Image(ref=ref)


def _tool_result_content(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return "\n".join(str(part.get("text", "")) for part in raw if isinstance(part, dict))
    return "" if raw is None else json.dumps(raw)


def load_conversation(path: Path = SESSION) -> list[Message]:
    """The session's messages (assistant lines of one API message merged), with CJK turns and images added."""
    messages: list[Message] = []
    last_assistant_id: str | None = None
    tool_results = 0
    user_turns = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        kind, message = entry.get("type"), entry.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict):
            continue
        content = message.get("content")
        raw_blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        blocks: list[Block] = []
        for raw in raw_blocks:
            kind_of = raw.get("type")
            if kind_of == "text" and raw.get("text"):
                blocks.append(Text(text=raw["text"]))
            elif kind_of == "tool_use":
                blocks.append(ToolUse(id=raw["id"], name=raw["name"], input=raw.get("input") or {}))
            elif kind_of == "tool_result":
                tool_results += 1
                text = _tool_result_content(raw.get("content"))
                if tool_results % 12 == 0:
                    w, h = SCREENSHOTS[(tool_results // 12) % len(SCREENSHOTS)]
                    nested: str | tuple[Text | Image, ...] = (
                        Text(text=text),
                        _image(w, h, raw["tool_use_id"]),
                    )
                else:
                    nested = text
                blocks.append(ToolResult(tool_use_id=raw["tool_use_id"], content=nested))  # type: ignore[arg-type]
        if not blocks:
            continue
        if kind == "assistant":
            if message.get("id") == last_assistant_id and messages and messages[-1].role == "assistant":
                messages[-1] = Message(role="assistant", content=messages[-1].content + tuple(blocks))
                continue
            last_assistant_id = message.get("id")
            messages.append(Message(role="assistant", content=tuple(blocks)))
        else:
            last_assistant_id = None
            if not any(isinstance(b, ToolResult) for b in blocks):
                user_turns += 1
            if messages and messages[-1].role == "user":
                messages[-1] = Message(role="user", content=messages[-1].content + tuple(blocks))
            else:
                messages.append(Message(role="user", content=tuple(blocks)))
            # a CJK user turn after every fourth tool result round
            if tool_results and tool_results % 4 == 0 and any(isinstance(b, ToolResult) for b in blocks):
                cjk = CJK_TURNS[(tool_results // 4) % len(CJK_TURNS)]
                messages[-1] = Message(role="user", content=(*messages[-1].content, Text(text=cjk)))
    return messages


def _render(block: Block) -> str:
    """The text a block puts on the wire (tool calls as compact JSON; media carry no text)."""
    if isinstance(block, Text):
        return block.text
    if isinstance(block, ToolUse):
        return block.name + json.dumps(dict(block.input), separators=(",", ":"), ensure_ascii=False)
    if isinstance(block, ToolResult):
        if isinstance(block.content, str):
            return block.content
        return "\n".join(_render(b) for b in block.content)
    return ""


def _images(block: Block) -> list[Image]:
    if isinstance(block, Image):
        return [block]
    if isinstance(block, ToolResult) and not isinstance(block.content, str):
        return [b for b in block.content if isinstance(b, Image)]
    return []


def _image_tokens(image: Image) -> int:
    ref = image.ref
    assert ref is not None and ref.width is not None and ref.height is not None
    return tile_rule_tokens(ref.width, ref.height)


def chars4_estimate(messages: Sequence[Message]) -> int:
    """The peers' rule: ``ceil(chars/4)`` per block, images by the provider's published tile rule."""
    total = 0
    for message in messages:
        for block in message.content:
            total += math.ceil(len(_render(block)) / 4) + sum(_image_tokens(i) for i in _images(block))
    return total


_ESTIMATOR = Estimator("gpt-4o")


class O200kProvider:
    """The provider: counts a request's prompt with the real o200k_base tokenizer (per message, cached)."""

    def __init__(self) -> None:
        import tiktoken

        self._enc = tiktoken.get_encoding("o200k_base")
        self._cache: dict[int, int] = {}

    def message_tokens(self, index: int, message: Message) -> int:
        if index not in self._cache:
            text = "\n".join(_render(b) for b in message.content)
            images = sum(_image_tokens(i) for b in message.content for i in _images(b))
            self._cache[index] = (
                len(self._enc.encode(text, disallowed_special=())) + PER_MESSAGE_OVERHEAD + images
            )
        return self._cache[index]

    def prompt_tokens(self, messages: Sequence[Message]) -> int:
        return sum(self.message_tokens(i, m) for i, m in enumerate(messages)) + REPLY_PRIMING


@dataclass
class Errors:
    plain: list[float]
    calibrated: list[float]
    anchored: list[float]
    anchored_calibrated: list[float]
    cold: int
    requests: int
    final_multiplier: float
    last_prompt: int = 0


def measure(messages: Sequence[Message], estimate: Estimate = chars4_estimate) -> Errors:
    """Replay every request (the history before each assistant message); relative errors from the second on."""
    provider = O200kProvider()
    calibrator = Calibrator(model=MODEL, connection=CONNECTION)
    book = AnchorBook()
    previous_plain = 0
    out = Errors([], [], [], [], 0, 0, 1.0)
    request_ends = [i for i, m in enumerate(messages) if m.role == "assistant" and i > 0]
    for n, end in enumerate(request_ends):
        request = messages[:end]
        truth = provider.prompt_tokens(request)
        plain = estimate(request)
        m = calibrator.multiplier
        calibrated = math.floor(plain * m + 0.5)
        anchored = book.estimate(model=MODEL, connection=CONNECTION, estimate_now=plain)
        # the same anchor with both payloads priced at the current multiplier (compile is pure, so the
        # anchored payload can be re-priced): the delta is then in calibrated units
        latest = book.latest
        repriced = (
            None
            if latest is None
            else Anchor(
                model=MODEL,
                connection=CONNECTION,
                input_tokens=latest.input_tokens,
                payload_estimate=math.floor(previous_plain * m + 0.5),
            )
        )
        anchored_cal = anchored_estimate(
            repriced, model=MODEL, connection=CONNECTION, estimate_now=calibrated
        )
        if n >= 1:
            out.requests += 1
            out.plain.append((plain - truth) / truth)
            out.calibrated.append((calibrated - truth) / truth)
            out.anchored.append((anchored.value - truth) / truth)
            out.anchored_calibrated.append((anchored_cal.value - truth) / truth)
            out.cold += anchored.cold
        # the provider accepted the request: learn once, and anchor on its real count
        calibrator.arm(calibrated)
        calibrator.report_real_input(truth)
        output = provider.message_tokens(end, messages[end])
        book.record(
            Anchor(
                model=MODEL,
                connection=CONNECTION,
                input_tokens=truth,
                output_tokens=output,
                payload_estimate=plain,
            )
        )
        previous_plain = plain
        out.last_prompt = truth
    out.final_multiplier = calibrator.multiplier
    return out


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(abs(v) for v in values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def table(errors: Errors, messages: Sequence[Message]) -> str:
    rows = [
        ("plain", errors.plain),
        ("calibrated", errors.calibrated),
        ("anchored", errors.anchored),
        ("anchored, calibrated delta", errors.anchored_calibrated),
    ]
    base_p95 = _pct(errors.plain, 0.95)
    blocks = sum(len(m.content) for m in messages)
    lines = [
        f"Conversation: {len(messages)} messages, {blocks} blocks, {errors.requests + 1} requests "
        f"(errors from the second request on, n = {errors.requests}), the last one {errors.last_prompt:,} "
        f"tokens; provider: tiktoken o200k_base "
        f"+ {PER_MESSAGE_OVERHEAD}/message + {REPLY_PRIMING}/request + OpenAI tile rule for images. "
        f"Final multiplier {errors.final_multiplier:.3f}; anchored cold starts: {errors.cold}.",
        "",
        "| estimate | median signed error | p50 abs error | p95 abs error | p95 vs plain |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, values in rows:
        p95 = _pct(values, 0.95)
        lines.append(
            f"| {name} | {statistics.median(values):+.2%} | {_pct(values, 0.5):.2%} | {p95:.2%} | "
            f"{p95 / base_p95:.3f}× |"
        )
    return "\n".join(lines) + "\n"


def estimator_estimate(messages: Sequence[Message]) -> int:
    """contextwindow's own ruler: the default ``Estimator`` for an o200k model (gpt-4o)."""
    return _ESTIMATOR.messages(messages)


def main() -> None:
    messages = load_conversation()
    text = "# anchored_accuracy\n\n"
    for name, estimate in (
        ("contextwindow Estimator (gpt-4o)", estimator_estimate),
        ("peer: chars/4", chars4_estimate),
    ):
        text += f"## estimate: {name}\n\n" + table(measure(messages, estimate), messages) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
