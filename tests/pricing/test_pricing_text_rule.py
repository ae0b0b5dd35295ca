"""The default text rule: pieces of text priced by their greedy split against the family's vocabulary."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _shared import encoding
from contextwindow.pricing import Estimator, _text, _vocabulary
from contextwindow.pricing._text import PIECE, SAMPLE_ABOVE, SPLIT_SAMPLE, cjk_share, rule_tokens
from contextwindow.pricing._vocabulary import FAMILIES, vocabulary

PROSE = (
    "The estimator prices every block an agent sees, so that the window is never overrun. "
    "It errs a little high rather than low, because an overrun costs a failed call. "
)
CODE = (
    "def price(self, block: Block) -> float:\n"
    "    if isinstance(block, Text):\n"
    "        return self._text(block.text) + self._structure.text_block\n"
    "    raise InvalidInput(f'unknown {type(block).__name__}', path='type')\n"
)
LANGUAGES = {
    "english": PROSE,
    "code": CODE,
    "json": '{"id": 17, "name": "context window", "tags": ["a", "b"], "size": 1234567, "ok": true}\n',
    "french": "Le modèle doit rester dans sa fenêtre de contexte, même quand la conversation devient très longue. ",
    "spanish": "Por favor, introduzca su contraseña nueva dos veces para verificar que la ha escrito correctamente. ",
    "vietnamese": "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, được hơn chín mươi triệu người sử dụng. ",
    "russian": "Окно контекста позволяет агенту работать в пределах модели, сохраняя разговор. ",
    "chinese": "上下文窗口让智能体在模型的上下文限制内运行，同时尽可能保留对话内容。",
    "japanese": "コンテキストウィンドウは、会話をできるだけ残しながらモデルの制限内でエージェントを動かします。",
    "korean": "컨텍스트 창은 대화를 최대한 유지하면서 에이전트가 모델의 한도 안에서 동작하게 합니다. ",
    "armenian": "Հայերենը հնդեվրոպական լեզվաընտանիքի առանձին ճյուղ է։ ",
    "georgian": "ქართული ენა ქართველური ენების ოჯახს მიეკუთვნება. ",
    "thai": "ภาษาไทยเป็นภาษาราชการของประเทศไทย มีผู้พูดหลายสิบล้านคน ",
    "malayalam": "മലയാളം ഒരു ദ്രാവിഡ ഭാഷയാണ്. കേരളത്തിലെ ഔദ്യോഗിക ഭാഷയാണ് മലയാളം. ",
}
_TIKTOKEN = {"o200k": "o200k_base", "cl100k": "cl100k_base"}


def _truth(family: str, text: str) -> int:
    return len(encoding(_TIKTOKEN[family]).encode(text, disallowed_special=()))


class TestVocabulary:
    @pytest.mark.parametrize("family", FAMILIES)
    def test_is_every_token_of_the_tokenizer(self, family: str) -> None:
        enc = encoding(_TIKTOKEN[family])
        assert vocabulary(family).tokens == frozenset(enc.token_byte_values())

    @pytest.mark.parametrize("family", FAMILIES)
    def test_every_byte_is_a_token_so_every_piece_splits(self, family: str) -> None:
        tokens = vocabulary(family).tokens
        assert all(bytes([b]) in tokens for b in range(256))

    def test_a_family_without_a_vocabulary_uses_o200k(self) -> None:
        assert vocabulary("gemini") is vocabulary("o200k")

    @pytest.mark.parametrize(
        ("piece", "tokens"),
        [
            pytest.param(b" the", 1, id="a-token"),
            pytest.param(" contraseña".encode(), 1, id="an-accented-word-that-is-a-token"),
            pytest.param(b"\xff\xfe", 2, id="bytes-that-start-no-token"),
            pytest.param(b"", 0, id="empty"),
        ],
    )
    def test_splits_a_piece_into_its_longest_tokens(self, piece: bytes, tokens: int) -> None:
        encoding("o200k_base")  # the table is generated from it; skip where tiktoken is absent
        assert vocabulary("o200k").split(piece) == tokens

    @pytest.mark.parametrize(
        "word", ["Kontextfenster", "contextwindow", "ქართველური", "ദ്രാവിഡ", "HTTPServerError"]
    )
    def test_a_word_splits_into_about_as_many_tokens_as_tiktoken_gives_it(self, word: str) -> None:
        piece = (" " + word).encode()
        assert abs(vocabulary("o200k").split(piece) - _truth("o200k", " " + word)) <= 1

    def test_forgetting_the_cache_changes_no_price(self, monkeypatch: pytest.MonkeyPatch) -> None:
        text = "".join(LANGUAGES.values()) * 3
        cold = Estimator("gpt-4o", exact=False).raw_text(text)
        monkeypatch.setattr(_vocabulary, "CACHE_LIMIT", 2)
        vocabulary("o200k")._splits.clear()
        assert Estimator("gpt-4o", exact=False).raw_text(text) == cold
        assert len(vocabulary("o200k")._splits) <= 2


class TestPieces:
    @pytest.mark.parametrize(
        ("text", "pieces"),
        [
            pytest.param("Hello world", [b"Hello", b" world"], id="words-keep-their-space"),
            pytest.param("x = 12345", [b"x", b" =", b" ", b"123", b"45"], id="digits-by-three"),
            pytest.param("    def f", [b"   ", b" def", b" f"], id="indent-leaves-a-space-to-the-word"),
            pytest.param("a\n\n  b", [b"a", b"\n\n", b" ", b" b"], id="line-breaks"),
            pytest.param("(self", [b"(self"], id="one-character-before-a-word"),
            pytest.param("año", ["año".encode()], id="non-ascii-is-a-letter"),
        ],
    )
    def test_split_like_the_tokenizers_pre_tokenizer(self, text: str, pieces: list[bytes]) -> None:
        assert PIECE.findall(text.encode()) == pieces

    @given(st.text(max_size=300))
    @settings(max_examples=200, deadline=None)
    def test_cover_the_text_byte_for_byte(self, text: str) -> None:
        raw = text.encode("utf-8", "surrogatepass")
        assert b"".join(PIECE.findall(raw)) == raw


class TestAccuracy:
    """Held-out figures are ``benchmarks/pricing_accuracy.py``'s; these pin each script's order."""

    @pytest.mark.parametrize("family", FAMILIES)
    @pytest.mark.parametrize("language", LANGUAGES)
    def test_is_within_twelve_percent_of_tiktoken(self, family: str, language: str) -> None:
        text = LANGUAGES[language] * 8
        truth = _truth(family, text)
        model = {"o200k": "gpt-4o", "cl100k": "gpt-4"}[family]
        price = Estimator(model, exact=False).raw_text(text)
        assert abs(price - truth) / truth <= 0.12, (price, truth)

    def test_a_rare_character_costs_its_bytes_and_a_common_one_less(self) -> None:
        encoding("o200k_base")
        est = Estimator("gpt-4o", exact=False)
        rare = "\u4db5"  # CJK extension A: in no o200k token, so it falls back to its three bytes
        assert est.raw_text(rare * 10) == pytest.approx(30 * _text._scales()["o200k"])
        assert est.raw_text("的" * 10) < 15


class TestSampling:
    def test_a_short_text_splits_every_piece(self) -> None:
        text = LANGUAGES["georgian"] * 4
        raw = text.encode()
        assert len(raw) <= SAMPLE_ABOVE
        vocab = vocabulary("o200k")
        assert rule_tokens(raw, vocab) == sum(vocab.split(p) for p in PIECE.findall(raw))

    @pytest.mark.parametrize("language", ["english", "code", "russian", "chinese", "thai", "mixed"])
    def test_a_long_text_is_read_on_windows_and_stays_near_the_exact_split(self, language: str) -> None:
        # each window stands for an eighth of the text: a text whose parts differ at that scale
        # (a short preface to a long file) is the sampling's known error, measured by the benchmark
        text = "".join(LANGUAGES.values()) * 40 if language == "mixed" else LANGUAGES[language] * 400
        raw = text.encode()
        assert len(raw) > 4 * SAMPLE_ABOVE
        vocab = vocabulary("o200k")
        full = sum(vocab.split(p) for p in PIECE.findall(raw))
        assert abs(rule_tokens(raw, vocab) - full) / full <= 0.05

    def test_windows_start_and_end_on_character_boundaries(self) -> None:
        raw = ("ภาษาไทย" * 3000).encode()  # no spaces: the windows align to characters
        for start, end in _text._spans(raw):
            raw[start:end].decode("utf-8")  # raises when a window cuts a character

    def test_many_pieces_that_are_not_tokens_are_split_on_a_sample(self) -> None:
        words = " ".join(f"zq{i}xv" for i in range(3 * SPLIT_SAMPLE))  # rare pieces, < SAMPLE_ABOVE
        raw = words.encode()
        vocab = vocabulary("o200k")
        full = sum(vocab.split(p) for p in PIECE.findall(raw))
        assert abs(rule_tokens(raw, vocab) - full) / full <= 0.05

    def test_is_deterministic(self) -> None:
        text = "".join(LANGUAGES.values()) * 50
        assert len({Estimator("gpt-4o", exact=False).raw_text(text) for _ in range(3)}) == 1


class TestPathologicalInput:
    @pytest.mark.parametrize(
        "text",
        [
            pytest.param("x" * 1_000_000, id="a-million-x"),
            pytest.param(" " * 100_000, id="spaces"),
            pytest.param("\ud800" * 1000, id="lone-surrogates"),
            pytest.param("🙂" * 5000, id="emoji"),
            pytest.param("\x00\x01\x02" * 3000, id="control-bytes"),
        ],
    )
    def test_is_finite_positive_and_at_most_the_bytes(self, text: str) -> None:
        price = Estimator("claude-sonnet-4-5").raw_text(text)
        assert 1.0 <= price <= 2 * len(text.encode("utf-8", "surrogatepass"))

    def test_empty_text_costs_nothing(self) -> None:
        assert Estimator("gpt-4o", exact=False).raw_text("") == 0.0

    @given(st.text(max_size=2000))
    @settings(max_examples=150, deadline=None)
    def test_a_short_text_costs_at_most_its_bytes_and_at_least_a_token(self, text: str) -> None:
        raw = text.encode("utf-8", "surrogatepass")
        tokens = rule_tokens(raw, vocabulary("o200k"))
        assert (1 if raw else 0) <= tokens <= len(raw)


class TestClaudeGenerations:
    def test_the_cjk_share_of_a_text_is_its_cjk_bytes(self) -> None:
        assert cjk_share(LANGUAGES["chinese"].encode()) > 0.95
        assert cjk_share(PROSE.encode()) == 0.0
        assert 0.2 < cjk_share((PROSE + LANGUAGES["chinese"]).encode()) < 0.8

    def test_the_newer_generation_prices_cjk_like_the_older_and_english_higher(self) -> None:
        older, newer = Estimator("claude-sonnet-4-5"), Estimator("claude-opus-4-7")
        chinese = LANGUAGES["chinese"] * 20
        assert newer.raw_text(chinese) == pytest.approx(older.raw_text(chinese), rel=0.01)
        assert newer.raw_text(PROSE * 20) > 1.2 * older.raw_text(PROSE * 20)


class TestRememberedPrices:
    """A text rule remembers recent answers: the same figures, fewer encodes, bounded memory."""

    def _counting(self) -> tuple[list[str], Any]:
        seen: list[str] = []

        def price(text: str) -> float:
            seen.append(text)
            return float(len(text))

        return seen, _text._remembered(price)

    def test_a_text_priced_again_is_answered_from_memory_with_the_same_figure(self) -> None:
        seen, priced = self._counting()
        assert priced("hello") == priced("hello") == 5.0
        assert seen == ["hello"]

    def test_a_long_text_is_never_held(self) -> None:
        seen, priced = self._counting()
        long = "x" * (_text._REMEMBERED_CHARS + 1)
        assert priced(long) == priced(long) == float(len(long))
        assert seen == [long, long]

    def test_a_text_longer_than_a_message_block_is_held_too(self) -> None:
        # A checkpoint's summary is priced in the head of every compile; a summariser's transcript
        # twice a fold: tens of thousands of characters each, encoded again every time before.
        seen, priced = self._counting()
        summary = "the task so far. " * 2_000
        assert priced(summary) == priced(str(summary)) == float(len(summary))
        assert seen == [summary]

    def test_a_long_history_priced_again_is_answered_from_memory(self) -> None:
        # A fold prices the messages it may cover again: with room for 512 texts only, a history of
        # a few thousand messages emptied the memo on every pass and each was encoded again.
        seen, priced = self._counting()
        texts = [f"message {i}: " + "words " * 40 for i in range(3_000)]
        for _ in range(2):
            assert [priced(t) for t in texts] == [float(len(t)) for t in texts]
        assert len(seen) == len(texts)

    def test_the_characters_held_are_bounded(self) -> None:
        seen, priced = self._counting()
        size = _text._REMEMBERED_TOTAL // 5 + 1
        assert size <= _text._REMEMBERED_CHARS
        texts = [str(i) * size for i in range(7)]
        assert [priced(t) for t in texts] == [float(len(t)) for t in texts]
        cells = priced.__closure__
        memo = next(c.cell_contents for c in cells if isinstance(c.cell_contents, dict))
        assert sum(map(len, memo)) <= _text._REMEMBERED_TOTAL
        assert priced(texts[-1]) == float(size) and len(seen) == len(texts)

    def test_memory_is_bounded_and_answers_stay_right_past_the_bound(self) -> None:
        seen, priced = self._counting()
        texts = [f"text {i}" for i in range(_text._REMEMBERED_TEXTS * 2 + 3)]
        assert [priced(t) for t in texts] == [float(len(t)) for t in texts]
        cells = priced.__closure__  # the memo is the closure's one dict
        memo = next(c.cell_contents for c in cells if isinstance(c.cell_contents, dict))
        assert 0 < len(memo) <= _text._REMEMBERED_TEXTS
        assert priced(texts[-1]) == float(len(texts[-1])) and len(seen) == len(texts)
