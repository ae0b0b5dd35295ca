"""Two callers of one proxy, with different keys: nothing of one reaches the other's requests.

A tenant is the keyed hash of the caller's credential; sessions, named sessions, summaries and the
response-id map belong to one. Caller A talks first; caller B replays what A sent (a shared prompt, a
leaked transcript, a guessed session name or response id).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextwindow.content import Text
from contextwindow.server import BackgroundServer
from contextwindow.server.guarded import GuardTransform
from contextwindow.server.proxy import proxy_app
from contextwindow.server.tenants import ANONYMOUS, Tenants, tenant_secret
from contextwindow.store import Store, open_store
from proxy_support import FakeUpstream, fake_upstream

A, B = "sk-tenant-A", "sk-tenant-B"
CLAUDE = "claude-haiku-4-5"


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with fake_upstream() as (fake, running):
        fake.url = running.url  # type: ignore[attr-defined]
        yield fake


def _proxy(upstream: FakeUpstream, **options: Any) -> tuple[BackgroundServer, GuardTransform]:
    transform = GuardTransform(open_store(":memory:"), **options)
    return BackgroundServer(proxy_app(upstream.url, transform=transform)), transform  # type: ignore[attr-defined]


def _say(proxy: BackgroundServer, key: str, history: list[dict[str, str]], **headers: str) -> str:
    body = {"model": CLAUDE, "max_tokens": 64, "messages": history}
    answered = httpx.post(
        proxy.url + "/v1/messages", json=body, headers={"x-api-key": key, **headers}, timeout=30
    )
    assert answered.status_code == 200, answered.text[:300]
    return str(answered.json()["content"][0]["text"])


def _texts(store: Store, sid: str) -> list[str]:
    return [
        "".join(b.text for b in m.message.content if isinstance(b, Text))
        for m in store.session(sid).messages()
    ]


def _holding(store: Store, texts: list[str]) -> str:
    """The one session that holds exactly ``texts``."""
    [sid] = [sid for sid in store.sessions() if _texts(store, sid) == texts]
    return sid


def _with(store: Store, text: str) -> str:
    """The one session that holds a message of ``text``."""
    [sid] = [sid for sid in store.sessions() if text in _texts(store, sid)]
    return sid


class TestTheTenant:
    def test_is_a_keyed_hash_of_the_credential_never_the_credential(self) -> None:
        tenants = Tenants(b"secret")
        tenant = tenants.of({"x-api-key": A})
        assert tenant.startswith("t") and A not in tenant and len(tenant) == 25
        assert tenants.of({"authorization": f"Bearer {A}"}) == tenant  # one key, either header
        assert tenants.of({"x-api-key": B}) != tenant
        assert Tenants(b"another secret").of({"x-api-key": A}) != tenant
        assert tenants.of({}) == ANONYMOUS

    def test_behind_a_gateway_the_named_header_decides(self) -> None:
        tenants = Tenants(b"secret", header="X-Forwarded-User")
        alice = tenants.of({"x-forwarded-user": "alice", "x-api-key": "shared-team-key"})
        bob = tenants.of({"x-forwarded-user": "bob", "x-api-key": "shared-team-key"})
        assert alice != bob

    def test_the_secret_kept_beside_the_store_is_the_same_for_every_worker(self, tmp_path: Any) -> None:
        path = tmp_path / "proxy.sqlite.tenant-key"
        first = tenant_secret(path)
        assert tenant_secret(path) == first and len(first) == 64
        assert path.stat().st_mode & 0o777 == 0o600


class TestCallersKeptApart:
    def test_b_replaying_as_first_exchange_does_not_land_in_as_session(self, upstream: FakeUpstream) -> None:
        proxy, transform = _proxy(upstream)
        with proxy:
            history = [{"role": "user", "content": "A's task: rename the billing module"}]
            history.append({"role": "assistant", "content": _say(proxy, A, history)})
            replayed = [*history, {"role": "user", "content": "B's turn, in A's conversation"}]
            _say(proxy, B, replayed)
        store = transform.store
        a_session = _holding(store, [h["content"] for h in history])  # A's session as A left it
        b_session = _with(store, "B's turn, in A's conversation")
        assert b_session != a_session
        assert b_session.startswith(transform.tenants.of({"x-api-key": B}) + "/")

    def test_the_same_session_name_from_b_does_not_append_to_as_session(self, upstream: FakeUpstream) -> None:
        proxy, transform = _proxy(upstream)
        named = {"x-contextwindow-session": "agent-7"}
        with proxy:
            history = [{"role": "user", "content": "A's first words"}]
            history.append({"role": "assistant", "content": _say(proxy, A, history, **named)})
            _say(proxy, B, [*history, {"role": "user", "content": "B writes here"}], **named)
        store = transform.store
        tenant_a, tenant_b = transform.tenants.of({"x-api-key": A}), transform.tenants.of({"x-api-key": B})
        assert _holding(store, [h["content"] for h in history]) == f"{tenant_a}/agent-7"
        assert _with(store, "B writes here") == f"{tenant_b}/agent-7"  # B's own name, not a fork of A's

    def test_a_summary_written_with_as_key_never_goes_out_in_bs_request(self, upstream: FakeUpstream) -> None:
        # A window of 3,000 tokens and turns of about 600: A's history is soon folded into a summary,
        # which the upstream writes on A's key. B resends A's whole history, and more.
        proxy, _ = _proxy(upstream, context_window=3_000)
        history: list[dict[str, str]] = []
        with proxy:
            for turn in range(8):
                history.append({"role": "user", "content": f"A's turn {turn}: " + "detail " * 300})
                history.append({"role": "assistant", "content": _say(proxy, A, history)})
            assert "SUMMARY-FOR-" + A in upstream.sent_with(A)  # A's requests carry A's summary
            replayed = [*history, {"role": "user", "content": "B asks for more"}]
            _say(proxy, B, replayed)
        assert upstream.sent_with(B)
        assert "SUMMARY-FOR-" + A not in upstream.sent_with(B)

    def test_b_naming_as_response_id_gets_no_history_of_as_sent_on_bs_key(
        self, upstream: FakeUpstream
    ) -> None:
        proxy, _ = _proxy(upstream)
        with proxy:
            first = httpx.post(
                proxy.url + "/v1/responses",
                json={"model": "gpt-4o", "input": "A's private plan: merge on Friday", "store": False},
                headers={"authorization": f"Bearer {A}"},
            )
            assert first.status_code == 200, first.text
            response_id = first.json()["id"]
            own = httpx.post(
                proxy.url + "/v1/responses",
                json={
                    "model": "gpt-4o",
                    "input": "and then?",
                    "previous_response_id": response_id,
                    "store": False,
                },
                headers={"authorization": f"Bearer {A}"},
            )
            assert own.status_code == 200
            # A's own follow-up is A's history, sent from the ledger (the provider holds nothing).
            assert upstream.sent_with(A).count("A's private plan") == 2
            other = httpx.post(
                proxy.url + "/v1/responses",
                json={"model": "gpt-4o", "input": "hi", "previous_response_id": response_id, "store": False},
                headers={"authorization": f"Bearer {B}"},
            )
            assert other.status_code == 200
        sent = upstream.sent_with(B)
        assert response_id in sent  # as B wrote it: the provider answers for its own ids
        assert "A's private plan" not in sent


class TestSessionNames:
    @pytest.mark.parametrize("name", ["x" * 240, "tab\there"], ids=["too long with the tenant", "a tab"])
    def test_a_name_the_ledger_refuses_is_a_400_naming_the_header(
        self, upstream: FakeUpstream, name: str
    ) -> None:
        proxy, _ = _proxy(upstream)
        with proxy:
            answered = httpx.post(
                proxy.url + "/v1/messages",
                json={"model": CLAUDE, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
                headers={"x-api-key": A, "x-contextwindow-session": name},
            )
        assert answered.status_code == 400
        assert "x-contextwindow-session" in answered.json()["error"]["message"]
