"""API keys: only a token's sha256 is stored; the token itself is shown once, at creation."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from typing import Any

from neo4j import ManagedTransaction

from graphdb import store_queries as q
from graphdb.errors import ApiKeyNotFoundError, InvalidOperationError
from graphdb.models import ApiKey, Role, utc_now
from graphdb.store.base import StoreBase
from graphdb.store.records import _enum_values, _native, _props


def hash_token(token: str) -> str:
    """The sha256 hex digest under which an API key token is stored and looked up."""
    return hashlib.sha256(token.encode()).hexdigest()


def live_key(row: dict[str, Any] | None) -> ApiKey:
    """The key of a stored `k {.*}` row; raises `ApiKeyNotFoundError` for none or a revoked one."""
    if row is None:
        raise ApiKeyNotFoundError("unknown API key")
    key = ApiKey.model_validate(_native(row))
    if key.revoked_at is not None:
        raise ApiKeyNotFoundError("this API key was revoked")
    return key


class Neo4jKeys(StoreBase):
    """The API key part of `Neo4jGraphStore`."""

    def create_api_key(self, name: str, role: Role, *, actor: str) -> tuple[ApiKey, str]:
        """Create a key; return it and its token (shown once: only the token's sha256 is stored)."""
        token = "rg_" + secrets.token_urlsafe(32)
        key = ApiKey(
            id=uuid.uuid4().hex,
            name=name,
            role=role,
            key_hash=hash_token(token),
            created_at=utc_now(),
            created_by=actor,
        )

        def work(tx: ManagedTransaction) -> None:
            tx.run(q.CREATE_API_KEY, row=_enum_values(_props(key.model_dump()))).consume()
            self._audit_in(tx, actor, "api_key.create", f"api_key:{key.id}", name=name, role=role.value)

        self._write(work)
        return key, token

    def lookup_api_key(self, token: str) -> ApiKey:
        """The live key for `token`; raises `ApiKeyNotFoundError` for unknown or revoked keys."""
        rows = self._rows(q.GET_API_KEY_BY_HASH, key_hash=hash_token(token))
        return live_key(rows[0]["k"] if rows else None)

    def list_api_keys(self) -> list[ApiKey]:
        """Every key (hashes only), oldest first."""
        return [ApiKey.model_validate(_native(r["k"])) for r in self._rows(q.LIST_API_KEYS)]

    def revoke_api_key(self, key_id: str, *, actor: str) -> ApiKey:
        """Revoke a key (idempotent); raises `ApiKeyNotFoundError`, or `InvalidOperationError` for the last live admin key."""

        def work(tx: ManagedTransaction) -> dict[str, Any]:
            tx.run(q.LOCK_ADMIN_KEYS).consume()  # first: the read below then sees every earlier revocation
            live_admins = [r["id"] for r in tx.run(q.LIVE_ADMIN_KEY_IDS)]
            if live_admins == [key_id]:
                raise InvalidOperationError(
                    "this is the last live admin key: create another admin key before revoking it "
                    "(nobody could manage keys otherwise)"
                )
            rows = list(tx.run(q.REVOKE_API_KEY, id=key_id, at=utc_now()))
            if not rows:
                raise ApiKeyNotFoundError(f"no API key has id {key_id!r}")
            self._audit_in(tx, actor, "api_key.revoke", f"api_key:{key_id}")
            return dict(rows[0]["k"])

        return ApiKey.model_validate(_native(self._write(work)))
