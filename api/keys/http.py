"""API keys over HTTP: create (the token shown once), list, revoke (admin)."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.auth import RequireAdmin
from api.deps import KeyServiceDep
from api.errors import responses
from api.keys.models import ApiKeyCreate, ApiKeyCreated, ApiKeyPublic

router = APIRouter(prefix="/v1", tags=["graph"])


@router.post(
    "/keys",
    status_code=status.HTTP_201_CREATED,
    summary="Create an API key; its token is in this response only (admin)",
    responses=responses(403, 409),
)
def create_key(body: ApiKeyCreate, caller: RequireAdmin, service: KeyServiceDep) -> ApiKeyCreated:
    return service.create_key(body, actor=caller.name)


@router.get("/keys", summary="List API keys, without tokens (admin)", responses=responses(403))
def list_keys(caller: RequireAdmin, service: KeyServiceDep) -> list[ApiKeyPublic]:
    return service.list_keys()


@router.post(
    "/keys/{key_id}/revoke",
    summary="Revoke an API key (admin); the last live admin key cannot be revoked (409)",
    responses=responses(403, 404, 409),
)
def revoke_key(key_id: str, caller: RequireAdmin, service: KeyServiceDep) -> ApiKeyPublic:
    return service.revoke_key(key_id, actor=caller.name)
