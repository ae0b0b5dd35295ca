"""The proxy with the guard: naive agents that resend their whole history never see a rejection.

The upstream is the local provider enforcing 16,000 tokens while the model's profile says 200,000,
and nobody tells the proxy: the first rejection teaches it, the retry is transparent to the agent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from _shared import LazyModule
from contextwindow.server import BackgroundServer
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import proxy_app
from contextwindow.store import open_store
from contextwindow.testing import LocalModel, LocalServer, LocalSettings

anthropic = LazyModule("anthropic")
openai = LazyModule("openai")

ENFORCED = 16_000
TURNS = 12


def _tool_output(turn: int) -> str:
    lines = [
        f"src/module_{turn}/file_{i}.py:{i * 7}: def handler_{turn}_{i}(request, context): ..."
        for i in range(120)
    ]
    return "\n".join(lines)  # about 3,000 tokens


@pytest.fixture
def upstream() -> Iterator[LocalServer]:
    settings = LocalSettings(effective_window=ENFORCED, default_model="claude-haiku-4-5")
    with LocalServer(LocalModel(settings)) as running:
        yield running


@pytest.fixture
def guarded_proxy(upstream: LocalServer) -> Iterator[tuple[BackgroundServer, GuardTransform]]:
    transform = GuardTransform(open_store(":memory:"))
    with BackgroundServer(proxy_app(upstream.url, transform=transform)) as running:
        yield running, transform


class TestNaiveAgentsThroughTheGuard:
    def test_an_anthropic_agent_resending_everything_gets_no_error(
        self, guarded_proxy: tuple[BackgroundServer, GuardTransform], upstream: LocalServer
    ) -> None:
        proxy, _ = guarded_proxy
        history: list[dict[str, Any]] = []
        rejected_direct = False
        with (
            anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0) as client,
            anthropic.Anthropic(base_url=upstream.url, api_key="k", max_retries=0) as direct,
        ):
            for turn in range(TURNS):
                history.append(
                    {"role": "user", "content": f"turn {turn}: here is the listing\n{_tool_output(turn)}"}
                )
                if turn == TURNS - 1:
                    try:
                        direct.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=history)
                    except anthropic.BadRequestError:
                        rejected_direct = True
                if turn % 2:
                    with client.messages.stream(
                        model="claude-haiku-4-5", max_tokens=256, messages=history
                    ) as stream:
                        reply = stream.get_final_message()
                else:
                    reply = client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=history)
                history.append({"role": "assistant", "content": reply.content[0].text})  # type: ignore[union-attr]
                assert reply.usage.input_tokens <= ENFORCED
        assert rejected_direct  # the same history sent directly is refused: the guard did the work

    def test_an_openai_agent_resending_everything_gets_no_error(
        self, guarded_proxy: tuple[BackgroundServer, GuardTransform]
    ) -> None:
        proxy, _ = guarded_proxy
        history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful coding agent."}]
        with openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0) as client:
            for turn in range(TURNS):
                history.append({"role": "user", "content": f"turn {turn}:\n{_tool_output(turn)}"})
                reply = client.chat.completions.create(model="gpt-4o", max_tokens=256, messages=history)
                history.append({"role": "assistant", "content": reply.choices[0].message.content})
                assert reply.usage is not None and reply.usage.prompt_tokens + 256 <= ENFORCED

    def test_count_tokens_counts_what_the_guard_would_send(
        self, guarded_proxy: tuple[BackgroundServer, GuardTransform]
    ) -> None:
        proxy, _ = guarded_proxy
        with anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0) as client:
            counted = client.messages.count_tokens(
                model="claude-haiku-4-5", messages=[{"role": "user", "content": "hello there"}]
            )
        assert 0 < counted.input_tokens < 100

    def test_a_refusal_the_guard_cannot_recover_reaches_the_agent_as_the_upstream_sent_it(
        self, guarded_proxy: tuple[BackgroundServer, GuardTransform]
    ) -> None:
        proxy, _ = guarded_proxy
        with (
            anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0) as client,
            pytest.raises(anthropic.BadRequestError) as caught,
        ):
            client.messages.create(  # an edit the API does not know: refused, whatever the guard sends
                model="claude-haiku-4-5",
                max_tokens=100,
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                extra_body={"context_management": {"edits": [{"type": "forget_everything"}]}},
            )
        assert caught.value.status_code == 400
        assert caught.value.body["error"]["type"] == "invalid_request_error"  # type: ignore[index]

    @pytest.mark.parametrize("api", ["anthropic", "openai", "responses"])
    def test_a_streamed_reply_is_recorded_in_the_ledger_as_it_passes(
        self, guarded_proxy: tuple[BackgroundServer, GuardTransform], api: str
    ) -> None:
        proxy, transform = guarded_proxy
        prompt = [{"role": "user", "content": f"stream this ({api})"}]
        if api == "anthropic":
            with (
                anthropic.Anthropic(base_url=proxy.url, api_key="k", max_retries=0) as client,
                client.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=prompt) as stream,
            ):
                text = stream.get_final_message().content[0].text  # type: ignore[union-attr]
        elif api == "responses":
            with (
                openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0) as client,
                client.responses.stream(model="gpt-4o", max_output_tokens=64, input=prompt) as stream,
            ):
                text = stream.get_final_response().output_text
        else:
            with openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0) as client:
                chunks = client.chat.completions.create(
                    model="gpt-4o",
                    max_tokens=64,
                    messages=prompt,
                    stream=True,  # type: ignore[arg-type]
                )
                text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        [sid] = transform.store.sessions()
        stored = [m.message for m in transform.store.session(sid).messages()]
        assert [m.role for m in stored] == ["user", "assistant"]
        assert stored[1].content[0].text == text  # type: ignore[union-attr]


class TestResponsesThroughTheGuard:
    def test_a_naive_responses_agent_resending_everything_gets_no_error(
        self, guarded_proxy: tuple[BackgroundServer, GuardTransform], upstream: LocalServer
    ) -> None:
        proxy, transform = guarded_proxy
        history: list[Any] = []
        with (
            openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0) as client,
            openai.OpenAI(base_url=upstream.url + "/v1", api_key="k", max_retries=0) as direct,
        ):
            for turn in range(TURNS):
                history.append({"role": "user", "content": f"turn {turn}:\n{_tool_output(turn)}"})
                if turn % 2:
                    events = list(
                        client.responses.create(
                            model="gpt-4o",
                            instructions="Be brief.",
                            max_output_tokens=256,
                            input=history,
                            stream=True,
                        )
                    )
                    assert events[-1].type == "response.completed"
                    reply = events[-1].response
                else:
                    reply = client.responses.create(
                        model="gpt-4o", instructions="Be brief.", max_output_tokens=256, input=history
                    )
                history += [item.model_dump(exclude_none=True) for item in reply.output]
                assert reply.usage is not None and reply.usage.input_tokens + 256 <= ENFORCED
            with pytest.raises(openai.BadRequestError, match="maximum context length"):
                direct.responses.create(model="gpt-4o", max_output_tokens=256, input=history)
        [sid] = transform.store.sessions()  # every call, streamed or not, continued one session
        assert len(transform.store.session(sid).messages()) == 2 * TURNS

    def test_a_chained_responses_agent_gets_no_error(
        self, guarded_proxy: tuple[BackgroundServer, GuardTransform]
    ) -> None:
        proxy, transform = guarded_proxy
        previous: str | None = None
        with openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0) as client:
            for turn in range(TURNS):
                kwargs: dict[str, Any] = {"previous_response_id": previous} if previous else {}
                reply = client.responses.create(
                    model="gpt-4o",
                    max_output_tokens=256,
                    input=f"turn {turn}:\n{_tool_output(turn)}",
                    **kwargs,
                )
                previous = reply.id
                assert reply.usage is not None and reply.usage.input_tokens + 256 <= ENFORCED
        [sid] = transform.store.sessions()
        assert len(transform.store.session(sid).messages()) == 2 * TURNS
