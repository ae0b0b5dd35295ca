"""Bad input is refused at the door with InvalidInput naming the field, and the store is unchanged."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from test_store_conformance import png

from contextwindow.content import AttachmentRef, Image, Message, Text, ToolUse
from contextwindow.errors import InvalidInput
from contextwindow.store import Budgets, Session, Store, open_store
from test_attachments import png_header


def snapshot(store: Store) -> Any:
    out = []
    for sid in store.sessions():
        session = store.session(sid)
        out.append((sid, session.entries(), session.attachments()))
    return out


def seeded(store: Store) -> Session:
    session = store.session("s")
    session.append(Message.user("hello"))
    session.attach(png(4, 4), "image/png")
    return session


CASES: list[tuple[str, Callable[[Session], object], str]] = [
    ("nan-price", lambda s: s.append(Message.user("x"), block_prices=[math.nan]), "block_prices[0]"),
    ("negative-price", lambda s: s.append(Message.user("x"), block_prices=[-1]), "block_prices[0]"),
    ("infinite-price", lambda s: s.append(Message.user("x"), block_prices=[math.inf]), "block_prices[0]"),
    ("price-count", lambda s: s.append(Message.user("x", "y"), block_prices=[1]), "block_prices"),
    ("not-a-message", lambda s: s.append({"role": "user"}), "message"),  # type: ignore[arg-type]
    ("bad-role", lambda s: s.append(Message(role="system", content=(Text(text="x"),))), "message.role"),  # type: ignore[arg-type]
    ("nan-metadata", lambda s: s.append(Message.user("x", metadata={"t": math.nan})), "message.metadata.t"),
    (
        "nan-tool-input",
        lambda s: s.append(Message.assistant(ToolUse(id="t", name="n", input={"x": [math.inf]}))),
        "message.content[0].input.x[0]",
    ),
    ("lone-surrogate", lambda s: s.append(Message.user("\ud800")), "message.content[0].text"),
    (
        "lone-surrogate-in-metadata",
        lambda s: s.append(Message.user("x", metadata={"k": ["ok", "\udfff"]})),
        "message.metadata.k[1]",
    ),
    ("price-past-a-float", lambda s: s.append(Message.user("x"), block_prices=[10**400]), "block_prices[0]"),
    ("price-past-the-bound", lambda s: s.append(Message.user("x"), block_prices=[10**13]), "block_prices[0]"),
    ("text-not-a-string", lambda s: s.append(Message.user(Text(text=5))), "message.content[0].text"),  # type: ignore[arg-type]
    ("content-not-blocks", lambda s: s.append(Message(role="user", content=5)), "message.content"),  # type: ignore[arg-type]
    ("nul-in-attachment-id", lambda s: s.attachment("att_\x00"), "attachment"),
    ("nul-in-read-id", lambda s: s.read_attachment("att_\x00" + "0" * 31), "attachment"),
    ("empty-media", lambda s: s.attach(b"", "image/png"), "data"),
    ("empty-text", lambda s: s.attach(b"", "text/plain"), "data"),
    ("not-an-image", lambda s: s.attach(b"junk", "image/png"), "data"),
    ("not-a-pdf", lambda s: s.attach(b"junk", "application/pdf"), "data"),
    ("bomb-header", lambda s: s.attach(png_header(70_000, 70_000), "image/png"), "width"),
    ("giant-header", lambda s: s.attach(png_header(10**9, 10**9), "image/png", width=10, height=10), "width"),
    ("claim-contradicts-header", lambda s: s.attach(png(3, 3), "image/png", width=10, height=3), "width"),
    (
        "bad-ref-width",
        lambda s: s.append(
            Message.user(
                Image(
                    ref=AttachmentRef(
                        id="att_x", sha256="0" * 64, media_type="image/png", size_bytes=1, width=-3
                    )
                )
            )
        ),
        "message.content[0].ref.width",
    ),
    (
        "unattached-ref",
        lambda s: s.append(
            Message.user(
                Image(ref=AttachmentRef(id="att_x", sha256="0" * 64, media_type="image/png", size_bytes=1))
            )
        ),
        "message.content",
    ),
    ("nan-record", lambda s: s.record("usage", {"input_tokens": math.nan}), "payload.input_tokens"),
    ("unknown-kind", lambda s: s.record("gossip", {}), "kind"),
    ("message-kind", lambda s: s.record("message", {}), "kind"),
    ("payload-not-object", lambda s: s.record("note", [1, 2]), "payload"),  # type: ignore[arg-type]
    ("non-json-payload", lambda s: s.record("note", {"x": {1, 2}}), "payload.x"),
    ("checkpoint-no-range", lambda s: s.record("checkpoint", {"summary": "s"}), "payload.first_id"),
    (
        "checkpoint-foreign-id",
        lambda s: s.record_checkpoint("s", first_id="msg_nope", last_id="msg_nope"),
        "payload.first_id",
    ),
    ("media-type-not-allowed", lambda s: s.attach(b"x", "application/x-msdownload"), "media_type"),
    ("media-type-malformed", lambda s: s.attach(b"x", "png"), "media_type"),
    ("media-type-lies", lambda s: s.attach(png(3, 3), "image/jpeg"), "media_type"),
    ("not-bytes", lambda s: s.attach("text", "text/plain"), "data"),  # type: ignore[arg-type]
    ("bad-duration", lambda s: s.attach(b"x", "audio/mpeg", duration_seconds=math.nan), "duration_seconds"),
    ("non-json-meta", lambda s: s.attach(b"x", "text/plain", when=object()), "meta.when"),
    ("kinds-as-string", lambda s: s.entries("note"), "kinds"),
]


class TestBadInputLeavesTheStoreUnchanged:
    @pytest.mark.parametrize(("call", "path"), [(c, p) for _, c, p in CASES], ids=[i for i, _, _ in CASES])
    def test_refused_with_the_field_named(
        self, target: Any, call: Callable[[Session], object], path: str
    ) -> None:
        store = target.open()
        session = seeded(store)
        before = snapshot(store)
        with pytest.raises(InvalidInput) as raised:
            call(session)
        assert raised.value.path == path
        assert snapshot(store) == before
        assert store.verify() == []


class TestAdmissionBudgets:
    def test_an_over_budget_attachment_names_the_figures_and_writes_nothing(self, target: Any) -> None:
        store = target.open(budgets=Budgets(max_attachment_bytes=1000))
        session = seeded(store) if target.kind != "memory" else store.session("s")
        before = snapshot(store)
        with pytest.raises(InvalidInput, match=r"1001 bytes.*1000"):
            session.attach(b"x" * 1001, "text/plain")
        assert snapshot(store) == before

    def test_a_message_over_the_per_message_total_is_refused(self) -> None:
        store = open_store(None, budgets=Budgets(max_message_attachment_bytes=150))
        session = store.session("s")
        a = session.attach(b"a" * 100, "text/plain")
        b = session.attach(b"b" * 100, "text/plain")
        from contextwindow.content import Document

        session.append(Message.user(Document(ref=a), Document(ref=a)))  # the same attachment counts once
        with pytest.raises(InvalidInput, match=r"200 bytes.*150"):
            session.append(Message.user(Document(ref=a), Document(ref=b)))
        assert len(session.messages()) == 1

    def test_image_dimensions_beyond_sanity_are_refused(self) -> None:
        session = open_store(None, budgets=Budgets(max_image_side=100)).session("s")
        with pytest.raises(InvalidInput, match="200×10"):
            session.attach(png(200, 10), "image/png")
        session = open_store(None, budgets=Budgets(max_image_pixels=99)).session("s")
        with pytest.raises(InvalidInput, match="100 px"):
            session.attach(png(10, 10), "image/png")

    def test_any_media_type_when_the_allow_list_is_off(self) -> None:
        session = open_store(None, budgets=Budgets(allowed_media_types=None)).session("s")
        assert session.attach(b"MZ", "application/x-msdownload").media_type == "application/x-msdownload"

    def test_a_budget_must_be_a_count(self) -> None:
        with pytest.raises(InvalidInput, match=r"budgets\.max_attachment_bytes"):
            Budgets(max_attachment_bytes=-1)

    def test_a_tampered_ref_is_refused(self) -> None:
        session = open_store(None).session("s")
        ref = session.attach(png(2, 2), "image/png")
        from dataclasses import replace

        with pytest.raises(InvalidInput, match="does not match"):
            session.append(Message.user(Image(ref=replace(ref, size_bytes=1))))
