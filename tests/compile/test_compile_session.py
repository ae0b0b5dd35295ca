"""Compiling a ledger session: byte-identical after reopen, archives recorded before they show."""

from __future__ import annotations

import io
import json
from pathlib import Path

from PIL import Image as PILImage

from contextwindow.compile import Policy, SessionCompiler, compile_session
from contextwindow.content import AttachmentRef, Image, Message, Text, ToolResult, ToolUse
from contextwindow.formats import render
from contextwindow.models import ModelProfile
from contextwindow.pricing import Estimator
from contextwindow.store import open_store

PROFILE = ModelProfile(
    name="test-model", provider="other", context_window=60_000, max_output_tokens=1000, tokenizer="unknown"
)
POLICY = Policy(max_inline_images=3, media_hysteresis_ratio=0.5, recent_turns_full=6, image_depth_tokens=0)


def png(n: int) -> bytes:
    buf = io.BytesIO()
    PILImage.new("RGB", (8 + n, 8), (n % 255, 0, 0)).save(buf, "PNG")
    return buf.getvalue()


def fill(path: Path, turns: int) -> None:
    est = Estimator(PROFILE, preset="seed-store")
    with open_store(path) as store:
        session = store.session("s1")
        for n in range(turns):
            ref = session.attach(png(n), "image/png")
            for message in (
                Message.user(f"turn {n}: look at the screen"),
                Message.assistant(ToolUse(id=f"t{n}", name="screenshot", input={"n": n})),
                Message.user(ToolResult(tool_use_id=f"t{n}", content=(Text(text="here"), Image(ref=ref)))),
                Message.assistant(f"I see frame {n}."),
            ):
                session.append(message, block_prices=[est.raw_block(b) for b in message.content])


def rendered_bytes(store_path: Path) -> bytes:
    with open_store(store_path) as store:
        session = store.session("s1")
        out = compile_session(
            session,
            model=PROFILE,
            policy=POLICY,
            system="be brief",
            estimator=Estimator(PROFILE, preset="seed-store"),
        )
        allowed = {r.id for r in out.inline_attachments}

        def load(ref: AttachmentRef) -> bytes:
            assert ref.id in allowed, ref.id
            return session.read_attachment(ref)

        body = render(out.to_request(model="test-model"), "anthropic", load)
        return json.dumps(body, sort_keys=True).encode()


class TestReopen:
    def test_a_reopened_store_compiles_byte_identical_requests(self, tmp_path: Path) -> None:
        path = tmp_path / "ledger.db"
        fill(path, 12)
        live = rendered_bytes(path)  # writes the archive records and the watermark
        assert rendered_bytes(path) == live  # reopen: state read back from the ledger
        assert rendered_bytes(path) == live

    def test_archives_and_the_watermark_are_recorded_in_the_ledger(self, tmp_path: Path) -> None:
        path = tmp_path / "ledger.db"
        fill(path, 12)
        rendered_bytes(path)
        with open_store(path) as store:
            session = store.session("s1")
            archives = session.entries(["archive"])
            assert archives and all(
                e.payload["kind"] == "contextwindow.archived_tool_result" for e in archives
            )
            assert session.latest("eviction") is not None
            before = len(archives)
            compile_session(
                session, model=PROFILE, policy=POLICY, estimator=Estimator(PROFILE, preset="seed-store")
            )
            assert len(session.entries(["archive"])) == before  # nothing recorded twice


class TestIncremental:
    def test_a_session_compiler_compiles_and_reads_only_new_entries(self, tmp_path: Path) -> None:
        path = tmp_path / "ledger.db"
        fill(path, 4)
        with open_store(path) as store:
            session = store.session("s1")
            live = SessionCompiler(session)
            first = live.compile(model=PROFILE, policy=Policy(recent_turns_full=10))
            session.append(Message.user("one more"))
            second = live.compile(model=PROFILE, policy=Policy(recent_turns_full=10))
            assert second.messages[: len(first.messages)] == first.messages
            assert second.messages[-1].content == (Text(text="one more"),)
            fresh = SessionCompiler(session).compile(model=PROFILE, policy=Policy(recent_turns_full=10))
            assert fresh == second

    def test_a_checkpoint_recorded_between_compiles_is_read_in_the_same_pass_as_the_archives(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "ledger.db"
        fill(path, 4)
        with open_store(path) as store:
            session = store.session("s1")
            reads: list[str] = []
            entries, latest = session.entries, session.latest
            session.entries = lambda kinds=None, **kw: reads.append("entries") or entries(kinds, **kw)  # type: ignore[method-assign]
            session.latest = lambda kind: reads.append("latest") or latest(kind)  # type: ignore[method-assign]
            live = SessionCompiler(session)
            live.compile(model=PROFILE, policy=POLICY)
            ids = [m.message.id for m in session.messages()]
            session.record(
                "checkpoint", {"summary": "the earlier frames", "first_id": ids[0], "last_id": ids[7]}
            )
            reads.clear()
            folded = live.compile(model=PROFILE, policy=POLICY)
            # Archives, the checkpoint and the eviction: one read (besides the messages' own).
            assert reads == ["entries"]
            assert "the earlier frames" in json.dumps(
                render(folded.to_request(model="m"), "anthropic", lambda r: b"")
            )
            fresh = SessionCompiler(store.session("s1")).compile(model=PROFILE, policy=POLICY)
            assert fresh == folded


def test_each_compile_reads_only_the_entries_appended_since_the_last(tmp_path: Path) -> None:
    """A session without archives, checkpoints or evictions is not read whole on every compile: the
    overlay read starts after the newest message the last one saw, and still finds a checkpoint
    written meanwhile."""
    with open_store(":memory:") as store:
        session = store.session("s1")
        for n in range(40):
            session.append(Message.user(f"question {n}") if n % 2 == 0 else Message.assistant(f"answer {n}"))
        backend = store._backend()
        reads: list[tuple[tuple[str, ...] | None, int | None, int]] = []
        entries = backend.entries

        def counting(session_id: str, kinds: object, *, after: int | None = None) -> object:
            rows = entries(session_id, kinds, after=after)  # type: ignore[arg-type]
            reads.append((tuple(kinds) if kinds is not None else None, after, len(rows)))  # type: ignore[arg-type]
            return rows

        backend.entries = counting  # type: ignore[method-assign]
        compiler = SessionCompiler(session, estimator=Estimator(PROFILE, preset="seed-store"))
        compiler.compile(model=PROFILE, policy=POLICY)
        session.append(Message.user("question 40"))
        reads.clear()
        compiler.compile(model=PROFILE, policy=POLICY)
        assert [after for _, after, _ in reads] == [39, 39]
        first, last = session.messages()[0].id, session.messages()[1].id
        session.record_checkpoint("the first exchange", first_id=first, last_id=last)
        session.append(Message.assistant("answer 41"))
        compiled = compiler.compile(model=PROFILE, policy=POLICY)
        assert compiled.decisions.folded == (first, last)
        assert "the first exchange" in compiled.messages[0].content[0].text  # type: ignore[union-attr]
