"""One conformance suite: memory, SQLite and PostgreSQL behave the same."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest
from _strategies import json_objects, messages
from hypothesis import HealthCheck, given, settings
from PIL import Image as PILImage

from conftest import Target
from contextwindow.content import Image, Message, Text, ToolResult, ToolUse
from contextwindow.errors import InvalidInput, SessionMoved
from contextwindow.store import RECORD_KINDS, Store, open_store


def png(width: int, height: int, color: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def plain(message: Message) -> Message:
    """The message as a value, without what the ledger adds."""
    return Message(role=message.role, content=message.content, metadata=message.metadata)


class TestMessagesRoundTrip:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(message=messages)
    def test_any_valid_message_reads_back_equal(self, store: Store, message: Message) -> None:
        session = store.session(uuid.uuid4().hex)
        stored = session.append(message)
        [read] = session.messages()
        assert read == stored
        assert plain(read.message) == plain(message)
        if message.created_at is not None:
            assert read.message.created_at == message.created_at

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(message=messages)
    def test_the_writers_message_log_reads_what_any_other_reader_decodes(
        self, store: Store, message: Message
    ) -> None:
        session = store.session(uuid.uuid4().hex)
        stored = session.append(message, block_prices=[1.5] * len(message.content))
        [taken] = session.message_log()
        [decoded] = store.session(session.id).message_log()  # another handle: the row decoded
        assert taken is stored  # the value the append validated, not decoded again
        assert taken == decoded and taken.block_prices == decoded.block_prices

    def test_a_tool_inputs_key_order_reads_back_as_written_by_any_reader(self, store: Store) -> None:
        # a request rebuilt from the ledger renders it as the writer's did: a provider's prompt cache
        # matches the bytes
        session = store.session("s")
        session.append(
            Message.assistant(ToolUse(id="t1", name="edit", input={"path": "a", "old": "x", "new": "y"}))
        )
        [mine] = session.message_log()
        [other] = store.session("s").message_log()
        [read] = store.session("s").messages()
        for stored in (mine, other, read):
            assert list(stored.message.content[0].input) == ["path", "old", "new"]  # type: ignore[union-attr]
        assert mine == other == read

    def test_the_logs_of_one_handle_share_what_they_decoded_within_a_bound(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        import contextwindow.store._ledger as ledger

        monkeypatch.setattr(ledger, "VALIDATED_MESSAGES", 8)
        store.session("s").extend([Message.user(f"m{i}") for i in range(12)])  # another handle wrote them
        session = store.session("s")
        first = session.message_log()
        read = [first[i] for i in (0, *range(5, 12))]  # eight decoded, the bound
        second = session.message_log()
        assert [second[i] is first[i] for i in range(12)] == [True] + [False] * 4 + [True] * 7
        assert [s.message for s in second] == [s.message for s in first] and read
        written = session.append(Message.user("new"))  # the ninth: the oldest decoded one goes
        third = session.message_log()
        assert third[12] is written and third[0] is not first[0]

    def test_append_assigns_id_position_and_time(self, store: Store) -> None:
        session = store.session("s")
        first = session.append(Message.user("one"))
        second = session.append(Message.assistant("two"))
        assert first.message.id and second.message.id and first.id != second.id
        assert (first.position, second.position) == (0, 1)
        assert first.message.created_at is not None and first.message.created_at.tzinfo is not None

    def test_block_prices_are_kept_with_the_message(self, store: Store) -> None:
        session = store.session("s")
        session.append(Message.user("a", "b"), block_prices=[3, 4.5])
        session.append(Message.user("c"))
        prices = [m.block_prices for m in session.messages()]
        assert prices == [(3.0, 4.5), None]

    def test_the_ten_thousand_one_character_blocks_and_a_megabyte_of_text_round_trip(
        self, store: Store
    ) -> None:
        session = store.session("s")
        many = Message.user(*(Text(text="x") for _ in range(10_000)))
        big = Message.user("x" * 1_000_000)
        session.append(many, block_prices=[1.0] * 10_000)
        session.append(big)
        read = session.messages()
        assert len(read[0].message.content) == 10_000 and read[1].message.content == big.content


class TestEntryKinds:
    @pytest.mark.parametrize("kind", sorted(RECORD_KINDS - {"checkpoint"}))
    def test_each_record_kind_round_trips(self, store: Store, kind: str) -> None:
        session = store.session("s")
        payload = {"a": 1, "b": [1.5, "x", None], "c": {"d": True}}
        entry = session.record(kind, payload)
        assert entry.kind == kind and entry.payload == payload and entry.version == 1
        assert session.entries([kind]) == [entry]
        assert session.latest(kind) == entry

    def test_a_checkpoint_keeps_its_summary_and_covered_range(self, store: Store) -> None:
        session = store.session("s")
        first = session.append(Message.user("one"))
        last = session.append(Message.assistant("two"))
        entry = session.record_checkpoint("they said hello", first_id=first.id, last_id=last.id, tokens=12)
        assert entry.payload == {
            "summary": "they said hello",
            "first_id": first.id,
            "last_id": last.id,
            "tokens": 12,
        }
        assert store.verify() == []

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(payload=json_objects)
    def test_any_json_object_is_a_note(self, store: Store, payload: dict[str, Any]) -> None:
        session = store.session(uuid.uuid4().hex)
        assert session.record("note", payload).payload == payload
        assert session.entries(["note"])[0].payload == payload

    def test_latest_is_the_newest_of_its_kind(self, store: Store) -> None:
        session = store.session("s")
        assert session.latest("anchor") is None
        session.record("anchor", {"input_tokens": 1})
        session.append(Message.user("x"))
        session.record("anchor", {"input_tokens": 2})
        session.record("usage", {"input_tokens": 3})
        latest = session.latest("anchor")
        assert latest is not None and latest.payload == {"input_tokens": 2}

    def test_payloads_read_are_copies(self, store: Store) -> None:
        session = store.session("s")
        session.record("note", {"x": [1]})
        entry = session.entries()[0]
        entry.payload["x"].append(2)  # type: ignore[index]
        assert session.entries()[0].payload == {"x": [1]}


class TestOrdering:
    def test_all_kinds_share_one_dense_total_order(self, store: Store) -> None:
        session = store.session("s")
        session.append(Message.user("a"))
        session.record("usage", {"n": 1})
        session.append(Message.assistant("b"))
        session.note("hello")
        entries = session.entries()
        assert [e.position for e in entries] == [0, 1, 2, 3]
        assert [e.kind for e in entries] == ["message", "usage", "message", "note"]
        assert [m.position for m in session.messages()] == [0, 2]
        assert [e.kind for e in session.entries(["note", "usage"])] == ["usage", "note"]

    def test_a_tool_use_and_its_result_keep_their_order(self, store: Store) -> None:
        session = store.session("s")
        session.append(Message.assistant(ToolUse(id="t1", name="ls", input={"path": "/"})))
        session.append(Message.user(ToolResult(tool_use_id="t1", content="a b c")))
        kinds = [type(m.message.content[0]).__name__ for m in session.messages()]
        assert kinds == ["ToolUse", "ToolResult"]


class TestConditionalAppends:
    def test_length_counts_the_entries_of_every_kind(self, store: Store) -> None:
        session = store.session("s")
        assert session.length() == 0
        session.append(Message.user("a"))
        session.note("n")
        session.extend([Message.assistant("b"), Message.user("c")])
        assert session.length() == 4 == len(session.entries())
        assert store.sessions() == ["s"]

    def test_reading_the_length_of_a_new_session_creates_nothing(self, store: Store) -> None:
        assert store.session("nobody").length() == 0
        assert store.sessions() == []

    def test_an_append_at_the_expected_length_is_written(self, store: Store) -> None:
        session = store.session("s")
        session.append(Message.user("a"), expect=0)
        stored = session.extend([Message.assistant("b"), Message.user("c")], expect=1)
        assert [m.position for m in stored] == [1, 2]
        assert [m.message.content for m in session.messages()] == [
            (Text(text="a"),),
            (Text(text="b"),),
            (Text(text="c"),),
        ]

    def test_an_append_after_another_writer_moved_the_session_writes_nothing(self, store: Store) -> None:
        mine, theirs = store.session("s"), store.session("s")
        mine.append(Message.user("a"))
        seen = mine.length()
        theirs.note("another worker was here")
        with pytest.raises(SessionMoved) as moved:
            mine.extend([Message.assistant("b"), Message.user("c")], expect=seen)
        assert (moved.value.expected, moved.value.found) == (1, 2)
        assert [e.kind for e in mine.entries()] == ["message", "note"]
        assert store.verify() == []

    def test_a_refused_append_to_a_session_never_written_leaves_no_session(self, store: Store) -> None:
        with pytest.raises(SessionMoved):
            store.session("s").append(Message.user("a"), expect=3)
        assert store.sessions() == []
        assert store.session("s").length() == 0

    def test_a_batch_with_one_bad_message_writes_none_of_them(self, store: Store) -> None:
        session = store.session("s")
        with pytest.raises(InvalidInput):
            session.extend([Message.user("a"), Message.user("b")], block_prices=[[1.0], [-1.0]])
        assert session.length() == 0

    def test_a_handle_counts_what_it_appended(self, store: Store) -> None:
        mine, theirs = store.session("s"), store.session("s")
        mine.append(Message.user("a"))
        mine.record("usage", {"n": 1})
        theirs.note("x")
        mine.extend([Message.assistant("b"), Message.user("c")])
        assert (mine.appended, theirs.appended, mine.length()) == (4, 1, 5)

    @pytest.mark.parametrize("expect", [-1, True, 1.5, "0"])
    def test_an_expected_length_that_is_not_one_is_invalid_input(self, store: Store, expect: Any) -> None:
        with pytest.raises(InvalidInput, match="expect"):
            store.session("s").append(Message.user("a"), expect=expect)
        assert store.sessions() == []


class TestSessionsByPrefix:
    def test_only_the_ids_that_start_with_the_prefix_are_listed_sorted(self, store: Store) -> None:
        for sid in ["run_1.2", "run_1", "run%1", "run_10", "rûn_1", "other", "run_1.1"]:
            store.session(sid).note("x")
        assert store.sessions(prefix="run_1") == ["run_1", "run_1.1", "run_1.2", "run_10"]
        assert store.sessions(prefix="run%") == ["run%1"]  # no pattern characters: a plain prefix
        assert store.sessions(prefix="rû") == ["rûn_1"]
        assert store.sessions(prefix="nobody") == []
        assert store.sessions(prefix="") == store.sessions() == sorted(store.sessions())


class TestBatches:
    def test_writes_in_a_batch_are_all_there_when_it_ends(self, store: Store) -> None:
        ref = None
        with store.batch():
            session = store.session("s")
            ref = session.attach(png(4, 4), "image/png")
            session.append(Message.user("look", Image(ref=ref)))
            session.record("usage", {"n": 1})
            store.session("t").note("another session, same batch")
            assert session.length() == 2  # a batch reads its own writes
        assert [e.kind for e in store.session("s").entries()] == ["message", "usage"]
        assert store.session("s").read_attachment(ref) == png(4, 4)
        assert store.sessions() == ["s", "t"] and store.verify() == []

    def test_a_batch_that_raises_leaves_the_store_as_it_was(self, store: Store) -> None:
        store.session("s").append(Message.user("before"))
        with pytest.raises(RuntimeError), store.batch():
            session = store.session("s")
            session.append(Message.assistant("inside"))
            session.attach(png(4, 4), "image/png")
            store.session("new").note("inside")
            raise RuntimeError("the block failed")
        assert [m.message.content for m in store.session("s").messages()] == [(Text(text="before"),)]
        assert store.session("s").attachments() == []
        assert store.sessions() == ["s"] and store.verify() == []
        store.session("s").append(Message.assistant("after"))  # and the store goes on
        assert store.session("s").length() == 2

    def test_a_write_refused_inside_a_batch_undoes_only_itself(self, store: Store) -> None:
        with store.batch():
            session = store.session("s")
            session.append(Message.user("kept"))
            with pytest.raises(SessionMoved):
                session.append(Message.user("refused"), expect=0)
            with pytest.raises(SessionMoved):
                store.session("fresh").append(Message.user("refused"), expect=5)
            session.append(Message.assistant("also kept"))
        assert [m.message.role for m in store.session("s").messages()] == ["user", "assistant"]
        assert store.sessions() == ["s"] and store.verify() == []

    def test_batches_nest(self, store: Store) -> None:
        with store.batch():
            store.session("s").append(Message.user("outer"))
            with pytest.raises(RuntimeError), store.batch():
                store.session("s").append(Message.user("inner"))
                raise RuntimeError
            store.session("s").append(Message.user("outer again"))
        stored = store.session("s").messages()
        assert [m.message.content[0].text for m in stored] == ["outer", "outer again"]  # type: ignore[union-attr]
        # The inner batch's append is undone: the next one takes its place in the hash chain.
        assert [m.position for m in stored] == [0, 1] and store.verify() == []

    def test_a_failed_write_inside_a_batch_leaves_the_next_append_in_place(self, store: Store) -> None:
        with store.batch():
            session = store.session("s")
            session.append(Message.user("a"))
            with pytest.raises(InvalidInput):  # refused part-way through its checks
                session.extend([Message.user("b"), Message.user("c")], block_prices=[[1.0], [-1.0]])
            session.record("usage", {"n": 1})
            session.append(Message.assistant("d"))
        assert [e.position for e in store.session("s").entries()] == [0, 1, 2]
        assert store.verify() == []

    def test_a_session_removed_inside_a_batch_starts_afresh_when_appended_again(self, store: Store) -> None:
        with store.batch():
            store.session("s").append(Message.user("gone"))
            store.session("s").note("gone too")
            store.prune(max_bytes=0, reclaim=False)
            store.session("s").append(Message.user("anew"))
        [only] = store.session("s").entries()
        assert (only.position, only.kind) == (0, "message")
        assert store.verify() == []


class TestIsolation:
    def test_sessions_do_not_see_each_others_entries(self, store: Store) -> None:
        a, b = store.session("a"), store.session("b")
        a.append(Message.user("for a"))
        b.record("note", {"for": "b"})
        assert [m.message.content for m in a.messages()] == [(Text(text="for a"),)]
        assert b.messages() == [] and [e.kind for e in b.entries()] == ["note"]
        assert store.sessions() == ["a", "b"]

    def test_a_session_cannot_read_another_sessions_attachment_by_its_id(self, store: Store) -> None:
        ref = store.session("a").attach(png(4, 4), "image/png")
        other = store.session("b")
        with pytest.raises(InvalidInput):
            other.read_attachment(ref.id)
        with pytest.raises(InvalidInput):
            other.attachment(ref)
        with pytest.raises(InvalidInput, match="not attached"):
            other.append(Message.user(Image(ref=ref)))


class TestAttachments:
    def test_identical_bytes_are_stored_once(self, store: Store) -> None:
        data = png(8, 6)
        a = store.session("a").attach(data, "image/png")
        again = store.session("a").attach(data, "image/png")
        b = store.session("b").attach(data, "image/png")
        assert a == again == b
        assert store.session("b").read_attachment(a) == data
        assert store.verify() == []

    def test_dimensions_are_sniffed_from_the_header(self, store: Store) -> None:
        ref = store.session("s").attach(png(33, 17), "image/png")
        assert (ref.width, ref.height, ref.size_bytes, ref.media_type) == (
            33,
            17,
            len(png(33, 17)),
            "image/png",
        )
        assert ref.id == f"att_{ref.sha256[:32]}"

    def test_metadata_reads_give_the_ref_and_the_extra_meta(self, store: Store) -> None:
        session = store.session("s")
        ref = session.attach(
            b"%PDF-1.4 /Type /Page /Type /Pages /Type /Page", "application/pdf", filename="a.pdf"
        )
        assert ref.pages == 2
        assert session.attachment(ref.id) == ref and session.attachments() == [ref]
        assert session.attachment_meta(ref) == {"filename": "a.pdf"}

    def test_caller_figures_fill_what_sniffing_cannot(self, store: Store) -> None:
        ref = store.session("s").attach(b"\x00" * 100, "video/mp4", duration_seconds=12.5, token_estimate=900)
        assert (ref.duration_seconds, ref.token_estimate) == (12.5, 900.0)

    def test_a_message_carries_its_attachment_refs(self, store: Store) -> None:
        session = store.session("s")
        ref = session.attach(png(2, 3), "image/png")
        stored = session.append(Message.user("see", Image(ref=ref)), block_prices=[1, 1600])
        [read] = session.messages()
        assert read == stored and read.message.content[1] == Image(ref=ref)
        assert session.read_attachment(ref) == png(2, 3)


class TestAttachmentMetadataBelongsToTheSession:
    """Bytes are shared by content hash; what a session says about them is its own."""

    PDF = b"%PDF-1.4 " + b"/Type /Page " * 50 + b"/Type /Pages"

    def test_a_stamp_set_by_one_session_is_never_seen_or_paid_by_another(self, store: Store) -> None:
        a, b = store.session("a"), store.session("b")
        stamped = a.attach(self.PDF, "application/pdf", token_estimate=0, filename="a.pdf")
        plain_ref = b.attach(self.PDF, "application/pdf")
        assert stamped.token_estimate == 0.0 and stamped.pages == 50
        assert plain_ref.token_estimate is None and plain_ref.pages == 50
        assert b.attachment(plain_ref.id) == plain_ref and b.attachments() == [plain_ref]
        assert b.attachment_meta(plain_ref) == {} and a.attachment_meta(stamped) == {"filename": "a.pdf"}
        assert a.attachment(stamped.id) == stamped
        assert stamped.sha256 == plain_ref.sha256 and stamped.id == plain_ref.id

    def test_the_bytes_are_still_stored_once(self, store: Store) -> None:
        store.session("a").attach(self.PDF, "application/pdf", token_estimate=5)
        store.session("b").attach(self.PDF, "application/pdf", token_estimate=7)
        backend = store._backend()
        assert len(backend.blob_ids()) == 1 and len(backend.all_attachments()) == 1
        assert store.verify() == []

    def test_claimed_figures_stay_with_the_session_that_claimed_them(self, store: Store) -> None:
        data = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 100
        a = store.session("a").attach(data, "video/mp4", duration_seconds=12.5)
        b = store.session("b").attach(data, "video/mp4")
        assert (a.duration_seconds, b.duration_seconds) == (12.5, None)

    def test_each_session_appends_against_its_own_view(self, store: Store) -> None:
        from contextwindow.content import Document

        a, b = store.session("a"), store.session("b")
        ref_a = a.attach(self.PDF, "application/pdf", token_estimate=0)
        ref_b = b.attach(self.PDF, "application/pdf")
        a.append(Message.user(Document(ref=ref_a)))
        b.append(Message.user(Document(ref=ref_b)))
        [read_b] = b.messages()
        assert read_b.message.content[0] == Document(ref=ref_b)
        assert store.verify() == []

    def test_attaching_again_in_one_session_keeps_its_first_link(self, store: Store) -> None:
        session = store.session("a")
        first = session.attach(self.PDF, "application/pdf", token_estimate=3)
        again = session.attach(self.PDF, "application/pdf", token_estimate=9)
        assert first == again and again.token_estimate == 3.0


class TestLifecycle:
    def test_a_closed_store_refuses_use(self, target: Target) -> None:
        from contextwindow.errors import UsageError

        store = target.open()
        session = store.session("s")
        store.close()
        store.close()
        with pytest.raises(UsageError):
            session.append(Message.user("x"))
        with pytest.raises(UsageError):
            store.session("s")

    def test_a_store_is_a_context_manager(self, target: Target) -> None:
        with target.open() as store:
            store.session("s").note("x")
        assert "closed" in repr(store)

    def test_unknown_options_and_urls_are_usage_errors(self) -> None:
        from contextwindow.errors import UsageError

        with pytest.raises(UsageError, match="option"):
            open_store(None, durability="full")
        with pytest.raises(UsageError, match="unsupported"):
            open_store("mysql://x")
