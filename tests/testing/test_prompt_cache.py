"""The local provider's prompt cache: Anthropic's breakpoints and OpenAI's automatic prefixes, as
their docs describe them, in process and through the real SDK clients."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from _shared import LazyModule
from contextwindow.content import Message, Request, Text, Thinking
from contextwindow.errors import ProviderError
from contextwindow.formats import loader_from
from contextwindow.models import get_profile
from contextwindow.providers import complete
from contextwindow.testing import (
    LocalModel,
    LocalProvider,
    LocalReply,
    LocalServer,
    LocalSettings,
    count_request,
    rejection_error,
)
from contextwindow.testing.caching import (
    LOOKBACK_BLOCKS,
    OPENAI_STEP,
    Breakpoint,
    CacheUse,
    minimum_cacheable,
    segments,
)
from contextwindow.testing.counting import REPLY_PRIMING, tokenizer_for

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

LOAD = loader_from({})
SONNET = "claude-sonnet-4-6"
LONG = "The quick brown fox jumps over the lazy dog near the river bank. " * 160  # about 2,200 tokens


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def cached_model(clock: Clock | None = None, **settings: object) -> LocalModel:
    return LocalModel(LocalSettings(prompt_cache=True, clock=clock or Clock(), **settings))  # type: ignore[arg-type]


def user(text: str) -> Message:
    return Message(role="user", content=(Text(text=text),))


def assistant(text: str) -> Message:
    return Message(role="assistant", content=(Text(text=text),))


def ask(model: LocalModel, request: Request, *marks: Breakpoint, wire: str = "anthropic") -> LocalReply:
    reply = model.handle(request, wire=wire, max_tokens=50, load=LOAD, breakpoints=marks)  # type: ignore[arg-type]
    assert isinstance(reply, LocalReply), reply
    return reply


def at_end(request: Request, ttl: str = "5m") -> Breakpoint:
    m = len(request.messages) - 1
    return Breakpoint(at=("messages", m, len(request.messages[m].content) - 1), ttl=ttl)  # type: ignore[arg-type]


SYSTEM_MARK = Breakpoint(at=("system", 0))


def conversation(*texts: str, system: str = LONG) -> Request:
    messages = [user(t) if i % 2 == 0 else assistant(t) for i, t in enumerate(texts)]
    return Request(model=SONNET, system=(Text(text=system),), messages=tuple(messages))


class TestAnthropicBreakpoints:
    def test_a_second_identical_request_reads_the_prefix_the_first_wrote(self) -> None:
        model = cached_model()
        request = conversation("What is in the document?")
        first = ask(model, request, at_end(request))
        second = ask(model, request, at_end(request))
        total = first.input_tokens
        assert first.cache.read == 0 and first.cache.write == total - REPLY_PRIMING
        assert second.cache.read == total - REPLY_PRIMING and second.cache.write == 0
        assert second.reported is not None
        assert second.reported.fresh_input == REPLY_PRIMING  # only what follows the last breakpoint
        assert second.reported.prompt == total  # the three fields add up to the input

    def test_a_changed_early_block_invalidates_every_prefix_after_it(self) -> None:
        model = cached_model()
        before = conversation("first question", "an answer", "second question")
        ask(model, before, SYSTEM_MARK, at_end(before))
        changed = conversation("FIRST question, edited", "an answer", "second question")
        again = ask(model, changed, SYSTEM_MARK, at_end(changed))
        system_prefix = sum(s.tokens for s in _blocks(changed)[:1])
        assert again.cache.read == system_prefix  # the system prompt before the change is still read
        assert again.cache.write == again.input_tokens - REPLY_PRIMING - system_prefix

    def test_a_changed_system_prompt_reads_nothing(self) -> None:
        model = cached_model()
        request = conversation("a question")
        ask(model, request, SYSTEM_MARK, at_end(request))
        other = conversation("a question", system=LONG + " And one more rule.")
        assert ask(model, other, SYSTEM_MARK, at_end(other)).cache.read == 0

    def test_a_grown_conversation_finds_the_earlier_breakpoint_by_looking_back(self) -> None:
        model = cached_model()
        first = conversation("one", "two", "three")
        ask(model, first, at_end(first))
        grown = conversation("one", "two", "three", "four", "five")
        reply = ask(model, grown, at_end(grown))
        assert reply.cache.read == _prefix(first)
        assert reply.cache.write == _prefix(grown) - _prefix(first)

    def test_a_hit_more_than_twenty_blocks_back_is_not_found(self) -> None:
        model = cached_model()
        texts = [f"turn {i}" for i in range(3)]
        first = conversation(*texts)
        ask(model, first, at_end(first))
        far = conversation(*texts, *(f"more {i}" for i in range(LOOKBACK_BLOCKS + 1)))
        assert ask(model, far, at_end(far)).cache.read == 0
        within = conversation(*texts, *(f"other {i}" for i in range(LOOKBACK_BLOCKS)))
        assert ask(model, within, at_end(within)).cache.read == _prefix(first)

    def test_the_five_minute_lifetime_runs_from_the_last_use(self) -> None:
        clock = Clock()
        model = cached_model(clock)
        request = conversation("a question")
        ask(model, request, at_end(request))
        clock.now += 299
        assert ask(model, request, at_end(request)).cache.read > 0  # and the hit refreshes it
        clock.now += 299
        assert ask(model, request, at_end(request)).cache.read > 0
        clock.now += 301
        expired = ask(model, request, at_end(request))
        assert expired.cache.read == 0 and expired.cache.write == _prefix(request)

    def test_a_hit_found_by_looking_back_refreshes_that_entry(self) -> None:
        clock = Clock()
        model = cached_model(clock)
        first = conversation("one", "two", "three")
        ask(model, first, at_end(first))
        for later in ("four", "five"):  # each a different continuation: only ``first``'s entry is shared
            clock.now += 299
            grown = conversation("one", "two", "three", later, "and more")
            assert ask(model, grown, at_end(grown)).cache.read == _prefix(first)

    def test_the_one_hour_lifetime_outlasts_five_minutes_and_is_reported_apart(self) -> None:
        clock = Clock()
        model = cached_model(clock)
        request = conversation("a question")
        written = ask(model, request, at_end(request, "1h"))
        assert written.cache.write_1h == written.cache.write > 0
        clock.now += 3_000
        assert ask(model, request, at_end(request, "1h")).cache.read == _prefix(request)
        clock.now += 3_601
        assert ask(model, request, at_end(request, "1h")).cache.read == 0

    def test_a_fifth_breakpoint_is_refused_with_anthropics_error(self) -> None:
        model = cached_model()
        request = conversation("a", "b", "c", "d", "e")
        marks = [Breakpoint(at=("messages", m, 0)) for m in range(5)]
        refused = model.handle(request, wire="anthropic", max_tokens=50, load=LOAD, breakpoints=marks)
        assert not isinstance(refused, LocalReply)
        assert refused.status == 400
        assert refused.message == "A maximum of 4 blocks with cache_control may be provided. Found 5."
        assert isinstance(ask(model, request, *marks[:4]), LocalReply)

    def test_below_the_models_minimum_nothing_is_cached(self) -> None:
        model = cached_model()
        short = conversation("a question", system="A short system prompt. " * 30)
        assert _prefix(short) < minimum_cacheable(SONNET) == 1024
        ask(model, short, at_end(short))
        again = ask(model, short, at_end(short))
        assert again.cache.read == again.cache.write == 0
        assert again.reported is not None and again.reported.fresh_input == again.input_tokens

    def test_haiku_4_5_needs_four_thousand_tokens(self) -> None:
        model = cached_model()
        mid = Request(model="claude-haiku-4-5", system=(Text(text=LONG),), messages=(user("q"),))
        assert 2048 < _prefix(mid) < minimum_cacheable("claude-haiku-4-5") == 4096
        ask(model, mid, at_end(mid))
        assert ask(model, mid, at_end(mid)).cache.read == 0
        big = Request(model="claude-haiku-4-5", system=(Text(text=LONG * 2),), messages=(user("q"),))
        ask(model, big, at_end(big))
        assert ask(model, big, at_end(big)).cache.read == _prefix(big)

    def test_without_a_breakpoint_nothing_is_cached(self) -> None:
        model = cached_model()
        request = conversation("a question")
        ask(model, request)
        assert ask(model, request).cache == CacheUse()

    def test_off_by_default_every_input_token_is_fresh(self) -> None:
        model = LocalModel()
        request = conversation("a question")
        ask(model, request, at_end(request))
        reply = ask(model, request, at_end(request))
        assert reply.reported is not None and reply.reported.fresh_input == reply.input_tokens


class TestOpenAIPrefixes:
    def test_a_repeated_prompt_reads_its_prefix_in_128_token_steps(self) -> None:
        model = cached_model()
        request = conversation("What is in the document?")
        first = ask(model, request, wire="openai")
        second = ask(model, request, wire="openai")
        assert first.cache.read == 0
        shared = first.input_tokens - REPLY_PRIMING
        assert second.cache.read == shared // OPENAI_STEP * OPENAI_STEP
        assert second.cache.read % 128 == 0 and second.cache.read >= 1024
        assert second.reported is not None and second.reported.prompt == second.input_tokens

    def test_a_grown_prompt_reads_the_prefix_it_shares(self) -> None:
        model = cached_model()
        first = conversation("one")
        ask(model, first, wire="openai")
        grown = conversation("one", "two", "three")
        assert ask(model, grown, wire="openai").cache.read == _prefix(first) // 128 * 128

    def test_below_1024_tokens_nothing_is_cached(self) -> None:
        model = cached_model()
        short = conversation("q", system="Short. " * 100)
        assert short.messages and _prefix(short) < 1024
        ask(model, short, wire="openai")
        assert ask(model, short, wire="openai").cache.read == 0

    def test_the_anthropic_and_openai_caches_are_apart(self) -> None:
        model = cached_model()
        request = conversation("a question")
        ask(model, request, at_end(request))
        assert ask(model, request, wire="openai").cache.read == 0


class TestBlocks:
    @pytest.mark.parametrize("model", [SONNET, "claude-opus-4-5", "gpt-4o"])
    def test_the_blocks_and_the_priming_add_up_to_the_count(self, model: str) -> None:
        thinking = Message(
            role="assistant", content=(Thinking(thinking="hmm", signature="s" * 400), Text(text="ok"))
        )
        request = Request(
            model=model,
            system=(Text(text="sys"), Text(text="more sys")),
            messages=(user("hello"), thinking, user("again"), Message(role="assistant", content=())),
        )
        profile = get_profile(model)
        blocks = segments(request, profile, tokenizer_for(profile), LOAD)
        assert sum(b.tokens for b in blocks) + REPLY_PRIMING == count_request(request, profile).input_tokens


class TestInProcessProvider:
    def test_the_provider_marks_its_breakpoints_and_usage_carries_the_cache(self) -> None:
        provider = LocalProvider(settings=LocalSettings(prompt_cache=True, clock=Clock()))
        request = conversation("a question")

        def usage() -> object:
            return asyncio.run(complete(provider, request, max_tokens=50, load=LOAD)).usage

        first, second = usage(), usage()
        assert first.cache_write > 0 and first.cache_read == 0  # type: ignore[attr-defined]
        assert second.cache_read == first.cache_write and second.cache_write == 0  # type: ignore[attr-defined]

    def test_the_fifth_breakpoint_is_a_provider_error(self) -> None:
        model = cached_model()
        request = conversation("a", "b", "c", "d", "e")
        marks = [Breakpoint(at=("messages", m, 0)) for m in range(5)]
        refused = model.handle(request, wire="anthropic", max_tokens=50, load=LOAD, breakpoints=marks)
        assert not isinstance(refused, LocalReply)
        assert isinstance(rejection_error(refused), ProviderError)


# -- through the real SDK clients --------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[LocalServer]:
    with LocalServer(cached_model(default_model=SONNET)) as running:
        yield running


def _anthropic_body(question: str, *, marks: int = 1) -> dict[str, object]:
    system = [{"type": "text", "text": LONG, "cache_control": {"type": "ephemeral"}}]
    content = [{"type": "text", "text": f"{question} {i}"} for i in range(max(marks, 1))]
    for block in content[: marks - 1]:
        block["cache_control"] = {"type": "ephemeral"}
    content[-1]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    return {
        "model": SONNET,
        "max_tokens": 50,
        "system": system,
        "messages": [{"role": "user", "content": content}],
    }


class TestThroughTheSDKs:
    def test_anthropic_reports_cache_creation_then_cache_read(self, server: LocalServer) -> None:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        first = client.messages.create(**_anthropic_body("q"))
        second = client.messages.create(**_anthropic_body("q"))
        assert first.usage.cache_creation_input_tokens > 1024 and first.usage.cache_read_input_tokens == 0
        assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
        assert second.usage.cache_creation_input_tokens == 0 and second.usage.input_tokens == REPLY_PRIMING
        with client.messages.stream(**_anthropic_body("q")) as stream:
            final = stream.get_final_message()
        assert final.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens

    def test_anthropic_refuses_a_fifth_breakpoint(self, server: LocalServer) -> None:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.messages.create(**_anthropic_body("q", marks=4))
        assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(refused.value)

    def test_anthropic_refuses_an_unknown_ttl(self, server: LocalServer) -> None:
        client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
        body = _anthropic_body("q")
        body["system"][0]["cache_control"] = {"type": "ephemeral", "ttl": "2h"}  # type: ignore[index]
        with pytest.raises(anthropic.BadRequestError, match="ttl"):
            client.messages.create(**body)

    def test_openai_chat_reports_cached_tokens_within_prompt_tokens(self, server: LocalServer) -> None:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        messages = [{"role": "system", "content": LONG}, {"role": "user", "content": "q"}]
        first = client.chat.completions.create(model="gpt-4o", messages=messages)
        second = client.chat.completions.create(model="gpt-4o", messages=messages)
        assert first.usage.prompt_tokens_details.cached_tokens == 0
        cached = second.usage.prompt_tokens_details.cached_tokens
        assert cached >= 1024 and cached % 128 == 0 and cached <= second.usage.prompt_tokens
        assert second.usage.prompt_tokens == first.usage.prompt_tokens

    def test_openai_responses_reports_cached_tokens_within_input_tokens(self, server: LocalServer) -> None:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0)
        first = client.responses.create(model="gpt-4o", instructions=LONG, input="q")
        second = client.responses.create(model="gpt-4o", instructions=LONG, input="q")
        assert first.usage.input_tokens_details.cached_tokens == 0, (first.usage, second.usage)
        cached = second.usage.input_tokens_details.cached_tokens
        assert cached >= 1024 and cached % 128 == 0 and cached <= second.usage.input_tokens, second.usage


def _blocks(request: Request) -> list:  # type: ignore[type-arg]
    profile = get_profile(request.model or SONNET)
    return segments(request, profile, tokenizer_for(profile), LOAD)


def _prefix(request: Request) -> int:
    """The tokens up to the request's last block (everything but the reply priming)."""
    return sum(b.tokens for b in _blocks(request))


class TestThroughTheProjectsProviders:
    """The SDK providers the engine uses read the cache fields into ``Usage``, and the in-process
    provider reports what the same calls over HTTP report."""

    def _usages(self, provider: object, request: Request, client: object = None) -> list[object]:
        async def calls() -> list[object]:
            try:
                return [
                    (await complete(provider, request, max_tokens=50, load=LOAD)).usage  # type: ignore[arg-type]
                    for _ in range(2)
                ]
            finally:
                if client is not None:
                    await client.close()  # type: ignore[attr-defined]

        return asyncio.run(calls())

    def test_anthropic_provider_over_http_matches_the_in_process_provider(self, server: LocalServer) -> None:
        from contextwindow.providers.anthropic import AnthropicProvider

        request = conversation("a question", "an answer", "another question")
        client = anthropic.AsyncAnthropic(base_url=server.url, api_key="t", max_retries=0)
        over_http = self._usages(AnthropicProvider(client), request, client)
        local = LocalProvider(settings=LocalSettings(prompt_cache=True, clock=Clock()))
        assert over_http == self._usages(local, request)
        assert over_http[1].cache_read > 1024 and over_http[1].cache_write == 0  # type: ignore[attr-defined]

    def test_openai_provider_reads_cached_tokens_as_cache_reads(self, server: LocalServer) -> None:
        from contextwindow.providers.openai import OpenAIProvider

        request = Request(model="gpt-4o", system=(Text(text=LONG),), messages=(user("q"),))
        client = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="t", max_retries=0)
        first, second = self._usages(OpenAIProvider(client), request, client)
        local = LocalProvider(settings=LocalSettings(prompt_cache=True, clock=Clock()), wire="openai")
        assert [first, second] == self._usages(local, request)
        assert first.cache_read == 0 and second.cache_read % 128 == 0 and second.cache_read >= 1024  # type: ignore[attr-defined]
        assert second.prompt == first.prompt  # type: ignore[attr-defined]


class TestCumulativeUsage:
    def test_a_continued_streams_totals_carry_the_cache_fields_and_diff_to_each_calls_own(self) -> None:
        from contextwindow.content import ToolResult, ToolSpec
        from contextwindow.usage.tracker import UsageTracker

        model = cached_model(usage="cumulative", call_tools=True)
        tool = ToolSpec(name="look", description="Look something up.", input_schema={"type": "object"})
        first = Request(model=SONNET, system=(Text(text=LONG),), tools=(tool,), messages=(user("go"),))
        one = ask(model, first, SYSTEM_MARK, at_end(first))
        call = one.message.content[0]
        result = Message(role="user", content=(ToolResult(tool_use_id=call.id, content="found it"),))  # type: ignore[attr-defined]
        second = Request(
            model=SONNET,
            system=first.system,
            tools=first.tools,
            messages=(*first.messages, one.message, result),
        )
        two = ask(model, second, SYSTEM_MARK, at_end(second))
        assert two.before == one.reported  # the stream continued
        tracker = UsageTracker("cumulative")
        tracker.feed(one.reported, max_tokens=50)  # type: ignore[arg-type]
        own = tracker.feed(two.reported, max_tokens=50).usage  # type: ignore[arg-type]
        assert own.cache_read == two.cache.read == _prefix(first)
        assert own.cache_write == two.cache.write and own.prompt == two.input_tokens
