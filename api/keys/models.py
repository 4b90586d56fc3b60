"""Wire models of API keys (`/v1/keys`): a key's token is shown exactly once, when it is created."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from api.wire import WireRequest
from graphdb.models import ApiKey, Role


class ApiKeyCreate(WireRequest):
    """A new API key. Its name is what the audit log records for every change made with it."""

    name: str = Field(min_length=1, max_length=100, pattern=r"^[\w.@-]+$")
    role: Role


class ApiKeyPublic(BaseModel):
    """An API key without its token (only the token's hash is stored)."""

    id: str
    name: str
    role: Role
    created_at: datetime
    created_by: str
    revoked_at: datetime | None

    @classmethod
    def of(cls, key: ApiKey) -> ApiKeyPublic:
        """The public view of a stored key (its hash left out)."""
        return cls.model_validate(key.model_dump(exclude={"key_hash"}))


class ApiKeyCreated(ApiKeyPublic):
    """A key just created: `token` is shown this once and cannot be recovered later."""

    token: str
