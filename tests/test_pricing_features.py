"""The default rule's features: the per-character cost table, the piece classifier, sampling."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _shared import encoding
from contextwindow.pricing import Estimator
from contextwindow.pricing._features import (
    FEATURE_NAMES,
    N_BUCKETS,
    N_FEATURES,
    PIECES,
    SAMPLE_ABOVE,
    char_class,
    features,
)
from contextwindow.pricing._tables import table

PROSE = (
    "The estimator prices every block an agent sees, so that the window is never overrun. "
    "It errs a little high rather than low, because an overrun costs a failed call. "
) * 6
CODE = (
    "def price(self, block: Block) -> float:\n"
    "    if isinstance(block, Text):\n"
    "        return self._text(block.text) + self._structure.text_block\n"
    "    raise InvalidInput(f'unknown {type(block).__name__}', path='type')\n"
) * 6
CHINESE = "上下文窗口让智能体在模型的上下文限制内运行，同时尽可能保留对话内容。" * 6
RUSSIAN = "Окно контекста позволяет агенту работать в пределах модели, сохраняя разговор. " * 6
ARABIC = "نافذة السياق تسمح للوكيل بالعمل ضمن حدود النموذج مع الحفاظ على المحادثة. " * 6


def _class_of(family: str, ch: str) -> str | None:
    for cls, chars in table("chartable")["classes"][family].items():
        if ch in chars:
            return cls
    return None


def _bucket(family: str, ch: str) -> int:
    cls = _class_of(family, ch)
    assert cls is not None, f"{ch!r} is not in the {family} table"
    for group in range(3):
        for bucket in range(N_BUCKETS + 1):
            if char_class(group, bucket) == cls:
                return bucket
    raise AssertionError(cls)


class TestCharacterTable:
    @pytest.mark.parametrize("family", ["o200k", "cl100k"])
    def test_every_character_is_in_at_most_one_class(self, family: str) -> None:
        seen: set[str] = set()
        for chars in table("chartable")["classes"][family].values():
            assert not seen & set(chars)
            seen |= set(chars)
        assert len(seen) > 2000  # CJK, Cyrillic and the other scripts of the fit half

    @pytest.mark.parametrize(
        ("ch", "group"),
        [("的", 0), ("の", 0), ("한", 0), ("д", 1), ("ع", 2), ("é", 3), ("ế", 3)],
        ids=["han", "kana", "hangul", "cyrillic", "arabic", "latin-1", "vietnamese"],
    )
    def test_characters_sit_in_their_script_group(self, ch: str, group: int) -> None:
        cls = _class_of("o200k", ch)
        assert cls in {char_class(group, b) for b in range(N_BUCKETS + 1)}

    def test_uppercase_letters_have_a_class_of_their_own(self) -> None:
        assert _class_of("o200k", "Д") == char_class(1, N_BUCKETS)

    def test_a_common_han_character_costs_less_than_a_rarer_one_in_cl100k(self) -> None:
        # cl100k splits most ideographs into byte tokens; the commonest ones are single tokens.
        assert _bucket("cl100k", "的") < _bucket("cl100k", "窗")

    def test_a_character_the_corpus_lacks_is_priced_by_how_the_vocabulary_treats_it(self) -> None:
        est = Estimator("gpt-4o", exact=False)
        rare = "\u4db5"  # CJK extension A: in no fit text and in no o200k token, so it falls back to bytes
        assert _class_of("o200k", rare) is not None
        assert est.raw_text(rare * 10) > 2 * est.raw_text("的" * 10)


class TestLanguages:
    """The rule (``exact=False``) on languages the old corpus lacked; o200k counts them exactly."""

    @pytest.mark.parametrize(
        ("text", "low", "high"),
        [
            pytest.param(
                "Le modèle doit rester dans sa fenêtre de contexte, même quand la conversation devient très longue. ",
                -0.15,
                0.15,
                id="french",
            ),
            pytest.param(
                "Tiếng Việt là ngôn ngữ chính thức của Việt Nam, được hơn chín mươi triệu người sử dụng. ",
                -0.15,
                0.15,
                id="vietnamese",
            ),
            pytest.param("Հայերենը հնդեվրոպական լեզվաընտանիքի առանձին ճյուղ է։ ", -0.15, 0.15, id="armenian"),
            # Malayalam is in no fit source: priced from how the vocabulary treats its characters,
            # it errs high, and by far less than the six times a flat unknown price cost.
            pytest.param(
                "മലയാളം ഒരു ദ്രാവിഡ ഭാഷയാണ്. കേരളത്തിലെ ഔദ്യോഗിക ഭാഷയാണ് മലയാളം. ", 0.0, 1.0, id="malayalam-unseen"
            ),
        ],
    )
    def test_is_near_o200k(self, text: str, low: float, high: float) -> None:
        enc = encoding("o200k_base")
        truth = len(enc.encode(text * 10))
        error = (Estimator("gpt-4o", exact=False).raw_text(text * 10) - truth) / truth
        assert low <= error <= high, error


class TestPieceClassifier:
    @pytest.mark.parametrize(
        ("text", "piece"),
        [
            pytest.param(PROSE, "prose", id="prose"),
            pytest.param(CODE, "code", id="code"),
            pytest.param('{"a": [1, 2, {"b": null}], "c": "d"}' * 10, "json", id="json"),
            pytest.param(CHINESE, "cjk", id="chinese"),
            pytest.param(RUSSIAN, "cyrillic", id="russian"),
            pytest.param(ARABIC, "script", id="arabic"),
            pytest.param(PROSE + "上下文", "prose", id="mostly-english"),
        ],
    )
    def test_picks_the_piece_of_the_text(self, text: str, piece: str) -> None:
        assert PIECES[features(text)[0]] == piece

    @given(st.text(max_size=400))
    @settings(max_examples=200)
    def test_is_deterministic_and_the_vector_has_every_feature(self, text: str) -> None:
        first = features(text)
        assert first == features(text)
        assert len(first[1]) == N_FEATURES == len(FEATURE_NAMES)
        assert 0 <= first[0] < len(PIECES)
        assert all(x >= 0 for x in first[1])


class TestSampling:
    def test_a_long_text_is_sampled_and_scaled_to_its_exact_length(self) -> None:
        short = CHINESE
        long = CHINESE * (SAMPLE_ABOVE // len(CHINESE) + 8)  # past the sampling threshold
        ratio = len(long) / len(short)
        est = Estimator("gpt-4o", exact=False)
        assert est.raw_text(long) == pytest.approx(est.raw_text(short) * ratio, rel=0.03)

    def test_sampling_is_deterministic(self) -> None:
        text = (CHINESE + RUSSIAN) * 80
        assert Estimator("gpt-4o", exact=False).raw_text(text) == Estimator("gpt-4o", exact=False).raw_text(
            text
        )

    def test_non_ascii_counts_are_exact_for_short_text(self) -> None:
        _, vector = features("дом 家 😀")
        group = FEATURE_NAMES.index("group_cjk")
        assert vector[group : group + 3] == [1.0, 3.0, 0.0]  # 家 | д о м | –
        assert vector[FEATURE_NAMES.index("astral")] == 1.0

    def test_a_short_text_is_counted_exactly(self) -> None:
        from contextwindow.pricing._features import ASCII_SAMPLE_ABOVE

        text = (CODE * 20)[:ASCII_SAMPLE_ABOVE]
        _, vector = features(text)
        assert vector[FEATURE_NAMES.index("lower")] == sum(c.islower() for c in text)
        exact = len("".join(c if c.isalpha() else " " for c in text).split())
        runs = vector[FEATURE_NAMES.index("latin_vocab")] + vector[FEATURE_NAMES.index("latin_other")]
        assert runs == pytest.approx(exact, rel=1e-9)

    @pytest.mark.parametrize(
        "text",
        [pytest.param(CODE * 12, id="ascii"), pytest.param((CODE + RUSSIAN) * 6, id="mixed-script")],
    )
    def test_a_long_text_samples_its_ascii_counts_and_they_sum_to_its_ascii_length(self, text: str) -> None:
        from contextwindow.pricing._features import ASCII_FEATURES, ASCII_SAMPLE_ABOVE

        assert len(text.encode()) > 4 * ASCII_SAMPLE_ABOVE
        _, vector = features(text)
        names = ("lower", "upper", "digit", "space", "newline", "tab", "punct")
        classes = [vector[ASCII_FEATURES.index(name)] for name in names]
        assert sum(classes) == pytest.approx(sum(c.isascii() for c in text))
        assert min(classes) >= 0
        lower = sum(c.islower() and c.isascii() for c in text)
        assert vector[FEATURE_NAMES.index("lower")] == pytest.approx(lower, rel=0.05)
        runs = vector[FEATURE_NAMES.index("latin_vocab")] + vector[FEATURE_NAMES.index("latin_other")]
        exact = len("".join(c if c.isascii() and c.isalpha() else " " for c in text).split())
        assert runs == pytest.approx(exact, rel=0.1)

    def test_the_number_of_non_ascii_characters_stays_exact_in_a_long_text(self) -> None:
        text = (CODE + RUSSIAN) * 6
        _, vector = features(text)
        group = FEATURE_NAMES.index("group_cjk")
        assert sum(vector[group : group + 3]) == pytest.approx(sum(not c.isascii() for c in text))

    def test_a_long_text_costs_its_parts_scaled(self) -> None:
        text = CODE * 12
        assert Estimator("gpt-4o", exact=False).raw_text(text) == pytest.approx(
            Estimator("gpt-4o", exact=False).raw_text(CODE) * 12, rel=0.05
        )

    def test_windows_that_miss_the_ascii_fall_back_to_exact_counts(self) -> None:
        # A text of CJK with its only ASCII between the eight windows: counted, not dropped.
        text = CHINESE * 4 + "\n\n" + CHINESE * 4
        _, vector = features(text)
        assert vector[FEATURE_NAMES.index("newline")] == 2.0


class TestCodeFeatures:
    def test_escape_sequences_hex_literals_and_spaced_operators_are_counted(self) -> None:
        _, vector = features("x = '\\xe4\\x00' + 0x1f + MAX_SIZE")
        assert vector[FEATURE_NAMES.index("backslash")] == 2.0
        assert vector[FEATURE_NAMES.index("hex_prefix")] == 1.0
        assert vector[FEATURE_NAMES.index("space_punct")] == 4.0  # " =" " '" " +" " +"
        assert vector[FEATURE_NAMES.index("quote")] == 0.0  # single quotes are not JSON's

    def test_a_codec_table_costs_more_than_plain_code_of_its_length(self) -> None:
        # stdlib encodings/*.py: runs of '\xNN' escapes split into more tokens than identifiers.
        table = "".join(f"    '\\x{i:02x}'     #  0x{i:02X} -> CHARACTER\n" for i in range(64))
        plain = (CODE * 8)[: len(table)]
        est = Estimator("gpt-4o", exact=False)
        assert est.raw_text(table) / len(table) > est.raw_text(plain) / len(plain)

    @pytest.mark.parametrize("family", ["o200k", "cl100k"])
    def test_the_code_piece_prices_a_space_before_punctuation(self, family: str) -> None:
        # " =", " (", " {": the fit found these cost more in code than their characters say
        # (held-out code p95 16.7% -> ~14% against o200k when the feature was added, measured).
        code = table("coefficients")["text"][family]["code"]
        assert code[FEATURE_NAMES.index("space_punct")] > 0

    def test_json_with_dense_quotes_takes_the_json_piece(self) -> None:
        text = '{"name": "price", "kind": "text", "tokens": 12, "cached": true},\n' * 20
        assert PIECES[features(text)[0]] == "json"
        assert PIECES[features(CODE)[0]] == "code"


class TestScriptBoundaries:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            pytest.param("DICOM 图像\nDOS 字体\n", 2.0, id="catalogue-lines"),
            pytest.param("CSV 架构 和 Excel 表格", 3.0, id="spaced-han-words"),
            pytest.param("图像DICOM\n字体DOS", 0.0, id="no-space-before-han"),
            pytest.param("Окно контекста", 1.0, id="cyrillic-after-space"),
            pytest.param("plain ascii text", 0.0, id="ascii-only"),
        ],
    )
    def test_a_space_before_a_non_ascii_character_is_counted(self, text: str, expected: float) -> None:
        _, vector = features(text)
        assert vector[FEATURE_NAMES.index("space_nonascii")] == expected

    def test_a_long_text_samples_the_count_and_scales_it(self) -> None:
        line = "DICOM 图像\n"
        text = line * 400
        _, vector = features(text)
        assert vector[FEATURE_NAMES.index("space_nonascii")] == pytest.approx(400, rel=0.1)

    @pytest.mark.parametrize("family", ["o200k", "cl100k"])
    def test_the_cjk_piece_prices_a_space_before_a_han_word(self, family: str) -> None:
        # "DTD 文件": the space does not merge into the Han word as it does into an English one
        # (' 文' + '件', or ' ' + byte pieces); the shared-mime-info catalogue was under-priced
        # by 16-26% when the space cost nothing (held-out Chinese p95, measured).
        spaced = "DTD 文件\nDOS 字体\nEPS 图像\n" * 10
        joined = spaced.replace(" ", "")
        est = Estimator("gpt-4o" if family == "o200k" else "gpt-4", exact=False)
        assert est.raw_text(spaced) > est.raw_text(joined)


class TestOneTokenCharacters:
    @pytest.mark.parametrize("text", ["µµ", "µµµµ"])
    def test_a_character_that_is_a_token_costs_about_one_a_character_when_repeated(self, text: str) -> None:
        # "µ" alone is in the word table (one token); repeated it is a word the table lacks, and was
        # priced at the unknown-character cost (2.3 a character): "µµ" cost six times "µ".
        est = Estimator("gpt-4o", exact=False)
        assert est.raw_text(text) <= 1.5 * len(text) + 1
