"""A body with the provider's compaction attached, as the SDKs and an HTTP client send it: the
``extra_body`` and ``extra_headers`` merged, the ``anthropic-beta`` betas joined."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "merged_betas",
    "merged_headers",
    "on_the_wire",
    "with_extras",
]


def with_extras(body: Mapping[str, Any], management: Mapping[str, Any], beta: str) -> dict[str, Any]:
    """``body`` with Anthropic's ``context_management`` in its ``extra_body`` and ``beta`` in its
    ``anthropic-beta`` header (the agent's own extras and betas kept)."""
    extra_body = {**dict(body.get("extra_body") or {}), "context_management": dict(management)}
    headers = dict(body.get("extra_headers") or {})
    headers["anthropic-beta"] = merged_betas(headers.get("anthropic-beta"), beta)
    return {**body, "extra_body": extra_body, "extra_headers": headers}


def merged_betas(given: str | None, *betas: str) -> str:
    """An ``anthropic-beta`` header value: ``given``'s betas, then each of ``betas`` it lacks."""
    names = [b.strip() for b in (given or "").split(",") if b.strip()]
    names.extend(b for b in betas if b not in names)
    return ",".join(names)


def merged_headers(agent: Mapping[str, str], added: Mapping[str, str]) -> dict[str, str]:
    """The agent's own headers with the ones a provider body adds (:func:`on_the_wire`): the added
    ``anthropic-beta`` betas join the agent's (a header's name read in any case)."""
    out = dict(agent)
    for name, value in added.items():
        same = [k for k in out if k.lower() == name.lower()]
        if name.lower() == "anthropic-beta":
            value = merged_betas(",".join(out[k] for k in same), *value.split(","))
        for k in same:
            del out[k]
        out[name] = value
    return out


def on_the_wire(body: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """A body :func:`guarded_body` made, as an HTTP client sends it: ``extra_body`` merged into the
    JSON and ``extra_headers`` apart (what the SDKs do with them). For senders that are not an SDK
    (the proxy's upstream, an adapter's raw call)."""
    json_body = {k: v for k, v in body.items() if k not in ("extra_body", "extra_headers")}
    json_body.update(body.get("extra_body") or {})
    return json_body, {str(k): str(v) for k, v in (body.get("extra_headers") or {}).items()}
