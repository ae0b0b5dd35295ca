"""Attachment intake: base64 decoding, data URLs, header sniffing and references."""

from __future__ import annotations

import base64
import hashlib
import struct
import zlib

import pytest

from contextwindow.attachments import decode_base64, make_ref, sniff, split_data_url
from contextwindow.content import MAX_DIMENSION_PX
from contextwindow.errors import InvalidInput
from strategies import AUDIO, IMAGES, PDF, WAV


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims a size; no pixel data (sniffing must not need any)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"") + chunk(b"IEND", b"")


class TestDecodeBase64:
    def test_decodes(self) -> None:
        assert decode_base64(base64.b64encode(b"hello").decode(), path="p") == b"hello"

    def test_wrapped_base64_is_still_base64(self) -> None:
        text = base64.encodebytes(b"x" * 200).decode()
        assert "\n" in text
        assert decode_base64(text, path="p") == b"x" * 200

    @pytest.mark.parametrize("bad", ["!!!", "QU=JD", "QQ", "é", "QUJD\x00", "=QUJ"], ids=repr)
    def test_bad_text_names_the_path(self, bad: str) -> None:
        with pytest.raises(InvalidInput) as caught:
            decode_base64(bad, path="messages[0].content[1].source.data")
        assert caught.value.path == "messages[0].content[1].source.data"

    @pytest.mark.parametrize("bad", [b"QUJD", None, 5], ids=repr)
    def test_non_strings_are_refused(self, bad: object) -> None:
        with pytest.raises(InvalidInput):
            decode_base64(bad, path="x")  # type: ignore[arg-type]


class TestDataUrls:
    def test_splits(self) -> None:
        assert split_data_url("data:image/png;base64,QUJD", path="u") == ("image/png", "QUJD")

    def test_an_empty_media_type_is_octet_stream(self) -> None:
        assert split_data_url("data:;base64,QUJD", path="u")[0] == "application/octet-stream"

    @pytest.mark.parametrize(
        "bad", ["data:image/png,QUJD", "https://x/y.png", "data:image/png;base64", "QUJD"]
    )
    def test_not_a_base64_data_url(self, bad: str) -> None:
        with pytest.raises(InvalidInput) as caught:
            split_data_url(bad, path="messages[0].content[0].image_url.url")
        assert caught.value.path == "messages[0].content[0].image_url.url"


class TestSniff:
    @pytest.mark.parametrize(
        ("data", "media_type", "size"), IMAGES, ids=lambda v: v if isinstance(v, str) else None
    )
    def test_reads_image_dimensions(self, data: bytes, media_type: str, size: tuple[int, int]) -> None:
        assert sniff(data, media_type) == {"width": size[0], "height": size[1]}

    def test_reads_only_the_header(self) -> None:
        # A 9000×8000 PNG with no pixel data at all: the header is enough.
        assert sniff(png_header(9_000, 8_000), "image/png") == {"width": 9_000, "height": 8_000}

    def test_a_decompression_bomb_header_still_gives_its_dimensions_and_no_warning(self) -> None:
        # Pillow refuses to open past its bomb limit; the header is read all the same.
        assert sniff(png_header(100_000, 100_000), "image/png") == {"width": 100_000, "height": 100_000}
        assert sniff(png_header(10**9, 10**9), "image/png") == {"width": 10**9, "height": 10**9}
        assert sniff(png_header(11_000, 11_000), "image/png") == {"width": 11_000, "height": 11_000}

    def test_an_implausible_header_gives_its_figures_for_the_budget_to_refuse(self) -> None:
        assert sniff(png_header(MAX_DIMENSION_PX + 1, 1), "image/png") == {
            "width": MAX_DIMENSION_PX + 1,
            "height": 1,
        }

    @pytest.mark.parametrize("junk", [b"", b"not an image", b"\x89PNG\r\n\x1a\n", PDF])
    def test_unreadable_images_give_nothing(self, junk: bytes) -> None:
        assert sniff(junk, "image/png") == {}

    def test_counts_pdf_pages_not_the_pages_tree(self) -> None:
        assert sniff(PDF, "application/pdf") == {"pages": 2}
        assert sniff(b"%PDF-1.4 nothing", "application/pdf") == {}

    def test_reads_wav_duration(self) -> None:
        assert sniff(WAV, "audio/wav") == {"duration_seconds": 0.25}
        assert sniff(b"RIFF", "audio/wav") == {}

    def test_unknown_media_give_nothing(self) -> None:
        assert sniff(AUDIO[1][0], "audio/mpeg") == {}
        assert sniff(b"\x00" * 10, "video/mp4") == {}


class TestMakeRef:
    def test_hashes_sizes_and_sniffs(self) -> None:
        data, media_type, (width, height) = IMAGES[2]
        ref = make_ref(data, media_type)
        digest = hashlib.sha256(data).hexdigest()
        assert (ref.sha256, ref.id, ref.size_bytes) == (digest, f"att_{digest[:32]}", len(data))
        assert (ref.width, ref.height, ref.media_type) == (width, height, media_type)

    def test_the_same_bytes_give_the_same_ref(self) -> None:
        assert make_ref(PDF, "application/pdf") == make_ref(bytearray(PDF), "Application/PDF")
        assert make_ref(memoryview(PDF), "application/pdf").pages == 2

    def test_meta_fills_what_the_header_does_not_say_and_is_validated(self) -> None:
        assert make_ref(WAV, "audio/wav", duration_seconds=9.0).duration_seconds == 0.25  # the header wins
        assert make_ref(b"ID3", "audio/mpeg", duration_seconds=9.0).duration_seconds == 9.0
        assert make_ref(WAV, "audio/wav", token_estimate=float("nan")).token_estimate is None
        with pytest.raises(InvalidInput) as caught:
            make_ref(b"ID3", "audio/mpeg", duration_seconds=-1.0)
        assert caught.value.path == "duration_seconds"

    @pytest.mark.parametrize(
        ("width", "height"), [(70_000, 70_000), (10**9, 10**9), (65_536, 1), (20_000, 20_000)], ids=str
    )
    def test_a_header_past_the_dimension_budget_is_refused_even_when_pillow_will_not_open_it(
        self, width: int, height: int
    ) -> None:
        with pytest.raises(InvalidInput, match="budget") as caught:
            make_ref(png_header(width, height), "image/png")
        assert caught.value.path == "width"
        with pytest.raises(InvalidInput, match="header says"):  # small claims cannot hide the header
            make_ref(png_header(width, height), "image/png", width=10, height=10)

    def test_claimed_dimensions_that_contradict_the_header_are_refused(self) -> None:
        with pytest.raises(InvalidInput, match="header says 30") as caught:
            make_ref(png_header(30, 20), "image/png", width=10, height=20)
        assert caught.value.path == "width"
        assert make_ref(png_header(30, 20), "image/png", width=30, height=20).width == 30

    def test_claimed_dimensions_fill_an_unknown_header_within_the_budget(self) -> None:
        assert make_ref(b"<svg/>", "image/svg+xml", width=10, height=12).height == 12
        with pytest.raises(InvalidInput, match="budget"):
            make_ref(b"<svg/>", "image/svg+xml", width=70_000, height=70_000)

    @pytest.mark.parametrize(
        ("data", "media_type"),
        [
            (b"", "image/png"),
            (b"", "text/plain"),
            (b"not an image", "image/png"),
            (b"hello", "application/pdf"),
        ],
        ids=["empty-png", "empty-text", "junk-png", "junk-pdf"],
    )
    def test_empty_or_mislabelled_bytes_are_refused(self, data: bytes, media_type: str) -> None:
        with pytest.raises(InvalidInput):
            make_ref(data, media_type)

    def test_bytes_of_another_image_format_are_refused_where_the_media_type_came_from(self) -> None:
        with pytest.raises(InvalidInput, match="image/png, not image/jpeg") as caught:
            make_ref(
                png_header(3, 3), "image/jpeg", media_type_path="messages[0].content[0].source.media_type"
            )
        assert caught.value.path == "messages[0].content[0].source.media_type"

    @pytest.mark.parametrize("media_type", ["png", "", "image/", "/png", "image png", None, 5])
    def test_a_bad_media_type_names_where_it_came_from(self, media_type: object) -> None:
        with pytest.raises(InvalidInput) as caught:
            make_ref(PDF, media_type, media_type_path="messages[0].content[0].source.media_type")  # type: ignore[arg-type]
        assert caught.value.path == "messages[0].content[0].source.media_type"

    def test_media_type_parameters_are_allowed(self) -> None:
        assert make_ref(b"hi", "text/plain; charset=utf-8").media_type == "text/plain; charset=utf-8"

    def test_data_must_be_bytes(self) -> None:
        with pytest.raises(InvalidInput):
            make_ref("text", "text/plain")  # type: ignore[arg-type]
