"""Whose request this is: a tenant, the keyed hash of the caller's credential.

A proxy deployed once is used by many callers (a team's agents, several users' sessions); what one
of them sent must never reach another's request. Every conversation the proxy keeps therefore
belongs to a tenant: ``t`` and the first 24 hex digits (96 bits) of HMAC-SHA256 over the caller's
credential, with a secret the proxy holds. The credential is the header named by ``--tenant-header``
(behind an auth gateway that sets one), else ``x-api-key``, else the token of ``Authorization:
Bearer``; a request with none is the anonymous tenant. The credential itself is never stored or
logged: a session id shows only the tenant, and without the secret nobody holding the ledger can
tell which key a tenant is.

The secret is the configured one (``--tenant-secret-file``, else ``$CONTEXTWINDOW_TENANT_SECRET``),
else one made on first use and kept in a file beside a SQLite store (``STORE.tenant-key``, mode
0600; for another store ``.contextwindow/proxy.tenant-key``; the first process to write it wins, the
others read it), so every worker on that store computes the same tenants. Workers on several
machines (one PostgreSQL store) must be given the same secret.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path

from ..store import in_memory

__all__ = ["ANONYMOUS", "SECRET_ENV", "Tenants", "secret_file_for", "tenant_secret"]

ANONYMOUS = "t-anonymous"
"""The tenant of requests that carry no credential."""
SECRET_ENV = "CONTEXTWINDOW_TENANT_SECRET"
"""The environment variable that configures the tenants' secret."""
DEFAULT_SECRET_FILE = ".contextwindow/proxy.tenant-key"
"""Where the secret is kept when the store is not a SQLite file (PostgreSQL, memory)."""


class Tenants:
    """Maps a request's headers to its tenant (see the module docstring)."""

    def __init__(self, secret: bytes, *, header: str | None = None) -> None:
        if not secret:
            raise ValueError("the tenants' secret must not be empty")
        self._secret = secret
        self.header = header.lower() if header else None
        """The header that names the caller (set by an auth gateway); ``None``: the API key."""

    def of(self, headers: Mapping[str, str]) -> str:
        """The tenant of a request with these (lower-cased) headers."""
        credential = self.credential(headers)
        if not credential:
            return ANONYMOUS
        digest = hmac.new(self._secret, credential.encode("utf-8", "surrogateescape"), hashlib.sha256)
        return "t" + digest.hexdigest()[:24]

    def credential(self, headers: Mapping[str, str]) -> str | None:
        if self.header is not None:
            return headers.get(self.header) or None
        key = headers.get("x-api-key")
        if key:
            return key
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        return None


def secret_file_for(store: str) -> Path | None:
    """Where the secret of the store at ``store`` (the proxy's ``--store``) is kept; ``None`` for a
    store in memory (its conversations end with the process: so may its secret)."""
    if in_memory(store):
        return None
    if "://" not in store:
        return Path(store + ".tenant-key")
    if store.startswith("sqlite:///"):
        return Path(store.removeprefix("sqlite:///") + ".tenant-key")
    return Path(DEFAULT_SECRET_FILE)


def tenant_secret(path: Path | None, *, configured: bool = False) -> bytes:
    """The tenants' secret: the bytes of the file at ``path`` when it is ``configured``; else
    ``$CONTEXTWINDOW_TENANT_SECRET`` when set, else the file at ``path``, made (32 random bytes, hex)
    when there is none; with no path, a secret of this process's. Several processes starting at once
    agree: the file is written whole under a temporary name and linked into place, and a process
    that finds it taken reads what the winner wrote."""
    if configured and path is not None:
        try:
            return _read(path)
        except FileNotFoundError:
            raise ValueError(f"{path}: no such file (the tenants' secret)") from None
    from_env = os.environ.get(SECRET_ENV)
    if from_env:
        return from_env.encode()
    if path is None:
        return secrets.token_hex(32).encode()
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))
        with contextlib.suppress(FileExistsError):  # another process put its secret there first
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return _read(path)


def _read(path: Path) -> bytes:
    for _ in range(50):
        secret = path.read_bytes().strip()
        if secret:
            return secret
        time.sleep(0.01)  # written by hand and still empty: wait for it briefly
    raise ValueError(f"{path}: the tenants' secret file is empty")
