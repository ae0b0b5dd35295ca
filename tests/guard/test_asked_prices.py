"""The agent's request as written is priced once per message: the figure is the estimator's own,
and a call whose history only grew prices only what is new."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from contextwindow.content import Message, Request, Text, Thinking, ToolResult, ToolSpec, ToolUse
from contextwindow.guard._asked import AskedPrices, MessagePrices
from contextwindow.guard._match import chain
from contextwindow.models import get_profile
from contextwindow.pricing import Estimator


def _history(n: int) -> list[Message]:
    out: list[Message] = []
    for i in range(n):
        if i % 3 == 2:
            out.append(
                Message.assistant(
                    Thinking(thinking=f"think {i} " * 20, signature="sig"),
                    ToolUse(id=f"t{i}", name="read", input={"i": i}),
                )
            )
            out.append(Message.user(ToolResult(tool_use_id=f"t{i}", content=f"row {i} " * 50)))
            out.append(
                Message.assistant(Text(text=f"read {i}"))
            )  # the tool loop ends: the next ask is a new turn
        else:
            out.append(
                Message.user(f"ask {i} " * 10) if i % 3 == 0 else Message.assistant(Text(text=f"ok {i}"))
            )
    return out


def _request(messages: list[Message]) -> Request:
    return Request(
        system=(Text(text="You are careful."),),
        tools=(ToolSpec(name="read", description="read a row"),),
        messages=tuple(messages),
    )


class _Counting(Estimator):
    priced = 0
    blocks_priced: ClassVar[list[Any]] = []

    def raw_message(self, message: Message) -> tuple[float, ...]:
        type(self).priced += 1
        return super().raw_message(message)

    def raw_block(self, block: Any) -> float:
        type(self).blocks_priced.append(block)
        return super().raw_block(block)


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-3-7-sonnet", "gpt-4o"])
def test_the_figure_is_the_estimators_as_the_history_grows_and_is_edited(model: str) -> None:
    estimator = Estimator(get_profile(model))
    asked = AskedPrices()
    history = _history(30)
    stripped = 0
    for n in range(1, len(history) + 1):
        request = _request(history[:n])
        assert asked.request(estimator, request, chain(request.messages)) == estimator.request(request)
        stripped += estimator.uncharged(request.messages) > 0
    # Earlier turns' thinking is not charged on some models: the sum leaves it out as the estimator does.
    assert stripped > 0 if model.startswith("claude") else stripped == 0
    edited = [*history[:5], Message.user("an edited turn"), *history[6:]]
    request = _request(edited)
    assert asked.request(estimator, request, chain(request.messages)) == estimator.request(request)


def test_a_grown_history_prices_only_its_new_messages() -> None:
    estimator: Any = _Counting(get_profile("claude-sonnet-4-5"))
    asked = AskedPrices()
    history = _history(60)
    request = _request(history[:-1])
    asked.request(estimator, request, chain(request.messages))
    before = _Counting.priced
    request = _request(history)
    asked.request(estimator, request, chain(request.messages))
    assert _Counting.priced - before == 1


def test_a_grown_history_adds_up_only_what_follows_the_last_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The last request's running sums serve the next one's leading run: no earlier message is
    looked up again, and a shorter request (the agent dropped its newest messages), one whose history
    was edited mid-way and one with fewer hashes than messages still get the estimator's figure."""
    estimator = Estimator(get_profile("claude-sonnet-4-5"))
    asked = AskedPrices()
    history = _history(60)
    asked.request(estimator, _request(history[:-2]), chain(history[:-2]))
    rounded: list[int] = []
    priced = AskedPrices._priced
    monkeypatch.setattr(
        AskedPrices,
        "_priced",
        lambda self, est, message, key: rounded.append(1) or priced(self, est, message, key),
    )
    request = _request(history)
    assert asked.request(estimator, request, chain(request.messages)) == estimator.request(request)
    assert len(rounded) == 2
    for messages in (history[:30], [*history[:10], Message.user("edited"), *history[11:]], history):
        request = _request(messages)
        hashes = chain(request.messages)
        assert asked.request(estimator, request, hashes) == estimator.request(request)
        assert asked.request(estimator, request, hashes[:-3]) == estimator.request(request)


def test_another_estimator_prices_again() -> None:
    profile = get_profile("claude-sonnet-4-5")
    asked = AskedPrices()
    request = _request(_history(12))
    hashes = chain(request.messages)
    assert asked.request(Estimator(profile), request, hashes) == Estimator(profile).request(request)
    calibrated = Estimator(profile, 1.3)
    assert asked.request(calibrated, request, hashes) == calibrated.request(request)


@pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-3-7-sonnet"])
def test_a_recalibration_prices_no_block_again(model: str) -> None:
    profile = get_profile(model)
    asked = AskedPrices()
    request = _request(_history(30))
    hashes = chain(request.messages)
    assert asked.request(_Counting(profile), request, hashes) == Estimator(profile).request(request)
    in_messages = {id(block) for message in request.messages for block in message.content}
    for multiplier in (1.06, 0.9, 1.06, 1.0):
        _Counting.blocks_priced = []
        figure = asked.request(_Counting(profile, multiplier), request, hashes)
        # The figure is the recalibrated estimator's, every block of the history priced at it...
        assert figure == Estimator(profile, multiplier).request(request)
        # ...from the raw prices kept: no message block was priced again (only the head was).
        assert not [b for b in _Counting.blocks_priced if id(b) in in_messages]
        assert _Counting.blocks_priced  # the head (system, tools) is priced on every call


def test_an_estimator_that_prices_otherwise_prices_again() -> None:
    asked = AskedPrices()
    request = _request(_history(12))
    hashes = chain(request.messages)
    asked.request(Estimator(get_profile("claude-sonnet-4-5")), request, hashes)
    other = Estimator(get_profile("gpt-4o"), 1.2)
    assert asked.request(other, request, hashes) == other.request(request)
    seed = Estimator(get_profile("gpt-4o"), 1.2, preset="seed-store")
    assert asked.request(seed, request, hashes) == seed.request(request)


class TestMessagePrices:
    """The same prices keyed by the message objects (the provider's editing prices requests before
    they are matched to a conversation): the estimator's figure, each message priced once."""

    @pytest.mark.parametrize("model", ["claude-sonnet-4-5", "claude-3-7-sonnet", "gpt-4o"])
    def test_the_figure_is_the_estimators_for_the_request_and_its_edits(self, model: str) -> None:
        estimator = Estimator(get_profile(model))
        prices = MessagePrices()
        history = _history(30)
        for n in range(1, len(history) + 1):
            request = _request(history[:n])
            assert prices.request(estimator, request) == estimator.request(request)
        edited = [*history[:5], Message.user("an edited turn"), *history[6:]]
        request = _request(edited)
        assert prices.request(estimator, request) == estimator.request(request)
        calibrated = Estimator(get_profile(model), 1.3)
        assert prices.request(calibrated, request) == calibrated.request(request)

    def test_messages_priced_before_are_not_priced_again(self) -> None:
        estimator: Any = _Counting(get_profile("claude-sonnet-4-5"))
        prices = MessagePrices()
        history = _history(60)
        prices.request(estimator, _request(history[:-1]))
        before = _Counting.priced
        prices.request(estimator, _request(history))
        # An edit of one message (a cleared tool result) prices that one alone.
        edited = [*history[:4], Message.user(ToolResult(tool_use_id="t2", content="[cleared]")), *history[5:]]
        prices.request(estimator, _request(edited))
        assert _Counting.priced - before == 2
        # The same content in another object is priced again (the key is the object), at the same figure.
        copied = [Message(role=m.role, content=m.content, id=m.id) for m in history]
        assert prices.request(estimator, _request(copied)) == Estimator(
            get_profile("claude-sonnet-4-5")
        ).request(_request(copied))

    def test_what_it_keeps_is_bounded_by_the_latest_request(self) -> None:
        estimator = Estimator(get_profile("gpt-4o"))
        prices = MessagePrices()
        for start in range(0, 400, 20):  # many short unrelated requests through one core
            prices.request(estimator, _request([Message.user(f"q {start + i}") for i in range(10)]))
        assert len(prices._raw) <= 2 * 10 + 64
