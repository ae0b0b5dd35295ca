"""The default rule's word table: non-Latin words that are one token are priced as one token."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _shared import encoding
from contextwindow.pricing import Estimator, _features
from contextwindow.pricing._features import FEATURE_NAMES, WORD_SAMPLE_ABOVE, features
from contextwindow.pricing._tables import table

# Written for these tests (not from the fitting or held-out corpus): ordinary Russian and Greek
# prose of the kind an agent reads, varied enough that no word repeats often.
RUSSIAN = (
    "Вчера вечером мы долго обсуждали, как лучше организовать работу над новым проектом. "
    "Руководитель предложил разделить задачи между несколькими группами, чтобы каждая команда "
    "отвечала за свою часть системы. Программисты сначала возражали, потому что боялись потерять "
    "общую картину, но потом согласились попробовать. Через две недели стало ясно, что такой "
    "подход действительно ускоряет разработку: ошибки находят быстрее, а документация наконец "
    "стала понятной. Теперь мы планируем провести обучение для новых сотрудников и подготовить "
    "подробное описание всех внутренних сервисов, включая базу данных, очередь сообщений и "
    "механизм авторизации пользователей.\n"
    "Если у вас возникнут вопросы, пожалуйста, напишите в общий канал или обратитесь к дежурному "
    "инженеру. Мы постараемся ответить в течение рабочего дня и, при необходимости, назначим "
    "отдельную встречу, чтобы разобраться в проблеме подробнее.\n"
)
GREEK = (
    "Η ομάδα αποφάσισε να αλλάξει τον τρόπο με τον οποίο ελέγχονται οι αλλαγές στον κώδικα. "
    "Κάθε πρόταση θα εξετάζεται από δύο μηχανικούς πριν ενσωματωθεί στο κύριο έργο, ώστε τα "
    "σφάλματα να εντοπίζονται νωρίτερα και η τεκμηρίωση να παραμένει ενημερωμένη.\n"
)


def _tokens(name: str, text: str) -> int:
    enc = encoding(name)
    return len(enc.encode(text, disallowed_special=()))


class TestWordTable:
    @pytest.mark.parametrize("family", ["o200k", "cl100k"])
    def test_every_family_has_a_table_of_non_latin_words(self, family: str) -> None:
        words = _features._vocabulary(family)
        assert len(words) > 1000
        assert all(not w.isascii() for w in words)
        assert all(w == w.strip() and w for w in words)

    def test_o200k_knows_common_words_of_several_scripts(self) -> None:
        words = _features._vocabulary("o200k")
        for word in ("необходимо", "пользователь", "και", "السلام", "です"):
            assert word.encode() in words, word

    def test_the_table_comes_from_the_vocabulary_and_every_word_is_one_token(self) -> None:
        enc = encoding("o200k_base")
        words = table("wordtable")["o200k"].split()
        for word in words[:: max(1, len(words) // 300)]:  # an even sample of the table
            alone = len(enc.encode(word, disallowed_special=()))
            spaced = len(enc.encode(" " + word, disallowed_special=()))
            assert min(alone, spaced) == 1, word


class TestWordFeatures:
    def test_vocabulary_words_and_other_words_are_counted_exactly_in_short_text(self) -> None:
        _, vector = features("Чтобы изменить пароль, необходимо пройти аутентификацию.")
        text_words = 6
        vocab = vector[FEATURE_NAMES.index("vocab_words")]
        other = vector[FEATURE_NAMES.index("other_words")]
        assert vocab + other == text_words
        assert vocab >= 4  # чтобы, изменить, пароль, необходимо, пройти are common words

    def test_ascii_text_has_no_words_of_the_table(self) -> None:
        _, vector = features("Plain English text with no other script at all. " * 40)
        assert vector[FEATURE_NAMES.index("vocab_words")] == 0.0
        assert vector[FEATURE_NAMES.index("other_words")] == 0.0

    def test_a_long_text_samples_its_words_and_scales_them_to_the_whole(self) -> None:
        text = RUSSIAN * 6
        assert len(text.encode()) > 4 * WORD_SAMPLE_ABOVE
        _, vector = features(text)
        _, one = features(RUSSIAN)
        for name in ("vocab_words", "other_words"):
            assert vector[FEATURE_NAMES.index(name)] == pytest.approx(
                6 * one[FEATURE_NAMES.index(name)], rel=0.15
            )

    def test_non_ascii_text_in_a_long_ascii_text_is_found_when_the_windows_miss_it(self) -> None:
        text = "x = 1\n" * 2000 + RUSSIAN[:200] + "y = 2\n" * 2000
        _, vector = features(text)
        _, alone = features(RUSSIAN[:200])
        for name in ("vocab_words", "other_words"):
            assert vector[FEATURE_NAMES.index(name)] == alone[FEATURE_NAMES.index(name)]

    @given(st.text(max_size=3000))
    @settings(max_examples=150)
    def test_word_counts_are_finite_non_negative_and_deterministic(self, text: str) -> None:
        _, vector = features(text)
        assert vector == features(text)[1]
        assert all(x >= 0 and x == x for x in vector)


class TestAccuracyOnAlphabeticScripts:
    """Fails without the word table: pricing every Cyrillic character by its mean cost over-counts
    text of common words (and the coefficients were fitted with the table)."""

    @pytest.mark.parametrize(
        ("model", "encoding", "text", "bound"),
        [
            pytest.param("gpt-4o", "o200k_base", RUSSIAN, 0.15, id="o200k-russian"),
            pytest.param("gpt-4", "cl100k_base", RUSSIAN, 0.05, id="cl100k-russian"),
            pytest.param("gpt-4o", "o200k_base", GREEK, 0.08, id="o200k-greek"),
        ],
    )
    def test_prose_is_priced_within_the_bound_of_tiktoken(
        self, model: str, encoding: str, text: str, bound: float
    ) -> None:
        truth = _tokens(encoding, text)
        price = Estimator(model, exact=False).raw_text(text)
        assert abs(price - truth) / truth <= bound, (price, truth)
