"""The API keys' logic: a token's live key (authentication), and keys created, listed and revoked.

No FastAPI here. It asks the store for its `KeyStore` only; errors are `api.graph.errors`'.
"""

from __future__ import annotations

from api.graph.errors import GraphConflictError, GraphUnavailableError, InvalidApiKeyError, translated
from api.keys.models import ApiKeyCreate, ApiKeyCreated, ApiKeyPublic
from graphdb.errors import ApiKeyNotFoundError, StoreUnavailableError
from graphdb.models import ApiKey
from graphdb.store import KeyStore


class KeyService:
    """API keys, over a `KeyStore`."""

    def __init__(self, store: KeyStore) -> None:
        """Serve `store`."""
        self.store = store

    def key_for_token(self, token: str) -> ApiKey:
        """The live API key of `token`; raises `InvalidApiKeyError` for an unknown or revoked one."""
        try:
            return self.store.lookup_api_key(token)
        except ApiKeyNotFoundError as e:
            raise InvalidApiKeyError(str(e)) from e
        except StoreUnavailableError as e:
            raise GraphUnavailableError(str(e)) from e

    def create_key(self, request: ApiKeyCreate, *, actor: str) -> ApiKeyCreated:
        """Create an API key; its token is returned this once."""
        with translated():
            # The audit log records the key's name: two live keys with one name could not be told apart.
            if any(k.name == request.name and k.revoked_at is None for k in self.store.list_api_keys()):
                raise GraphConflictError(f"a live API key is already called {request.name!r}")
            key, token = self.store.create_api_key(request.name, request.role, actor=actor)
        return ApiKeyCreated(**ApiKeyPublic.of(key).model_dump(), token=token)

    def list_keys(self) -> list[ApiKeyPublic]:
        """Every API key, oldest first (without tokens or hashes)."""
        with translated():
            return [ApiKeyPublic.of(k) for k in self.store.list_api_keys()]

    def revoke_key(self, key_id: str, *, actor: str) -> ApiKeyPublic:
        """Revoke an API key (idempotent)."""
        with translated():
            return ApiKeyPublic.of(self.store.revoke_api_key(key_id, actor=actor))
