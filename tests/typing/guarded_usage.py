"""Checked by mypy (tests/guard/test_callers.py), never run: ``guard()`` keeps the client's own type."""

from __future__ import annotations

from typing import assert_type

import anthropic
import openai

import contextwindow
from contextwindow.guard import Exchange, GuardOptions, last_exchange, store_of
from contextwindow.store import Store


def anthropic_sync(raw: anthropic.Anthropic) -> None:
    client = contextwindow.guard(raw, store=":memory:", context_window=16_000)
    assert_type(client, anthropic.Anthropic)
    message = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    )
    assert_type(message, anthropic.types.Message)
    assert_type(last_exchange(client), Exchange | None)
    assert_type(store_of(client), Store)


async def anthropic_async(raw: anthropic.AsyncAnthropic) -> None:
    client = contextwindow.guard(raw, GuardOptions(store=":memory:"))
    assert_type(client, anthropic.AsyncAnthropic)
    message = await client.messages.create(
        model="claude-sonnet-4-5", max_tokens=64, messages=[{"role": "user", "content": "Hi"}]
    )
    assert_type(message, anthropic.types.Message)


def openai_sync(raw: openai.OpenAI) -> None:
    client = contextwindow.guard(raw)
    assert_type(client, openai.OpenAI)
    completion = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Hi"}])
    assert_type(completion, openai.types.chat.ChatCompletion)


async def openai_async(raw: openai.AsyncOpenAI) -> None:
    client = contextwindow.guard(raw, store=":memory:")
    assert_type(client, openai.AsyncOpenAI)
