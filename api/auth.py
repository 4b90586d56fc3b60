"""API keys and roles: who may read the graph, curate it, or administer it.

A request presents its key as `X-API-Key: <token>` or `Authorization: Bearer <token>`. The token's
sha256 is looked up in the graph store (tokens themselves are never stored); a revoked or unknown
key gets 401, a key whose role is too low for the route gets 403, both in the error envelope.

Roles are ordered: reader < curator < admin. Readers read and query (`/v1/cypher`); curators also
change the graph (techniques, examples, relabel decisions); admins also import and manage keys.
Every change is recorded in the audit log under the key's name.

`REGRAPH_ANONYMOUS_READ=true` lets requests without any key read as a reader named "anonymous"
(useful on a trusted network or for a public read-only mirror). A request that does present a key
is always checked, and writes always need a key. The first admin key is made on the command line:
`regraph keys create-admin NAME` prints its token once.

Routes take `RequireReader`, `RequireCurator` or `RequireAdmin` as a parameter and get the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from api.deps import KeyServiceDep, StateDep
from api.errors import ServiceError, ServiceErrorKind, ServiceUnavailableError
from api.graph.errors import GraphUnavailableError, InvalidApiKeyError
from api.keys.service import KeyService
from api.state import AppState
from graphdb.models import Role

ANONYMOUS = "anonymous"
ROLE_RANK = {Role.READER: 0, Role.CURATOR: 1, Role.ADMIN: 2}

_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="an API key token")
_bearer = HTTPBearer(auto_error=False, description="an API key token as a bearer token")


@dataclass(frozen=True)
class Caller:
    """Who is making the request: the key's name (recorded in the audit log) and role."""

    name: str
    role: Role
    key_id: str | None = None  # None for anonymous readers

    def may(self, role: Role) -> bool:
        """Whether this caller's role is at least `role`."""
        return ROLE_RANK[self.role] >= ROLE_RANK[role]

    @property
    def job_owner(self) -> str:
        """What a job this caller submits records as its owner: the key id ('anonymous' without a key)."""
        return self.key_id or ANONYMOUS

    @property
    def job_scope(self) -> str | None:
        """Whose jobs this caller may see and cancel: None for admins (everyone's), else its own."""
        return None if self.may(Role.ADMIN) else self.job_owner


def get_caller(
    state: StateDep,
    keys: KeyServiceDep,
    api_key: Annotated[str | None, Depends(_api_key_header)],
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """The caller of this request; 401 without a (valid) key unless anonymous reading is on."""
    token = api_key or (bearer.credentials if bearer is not None else None)
    if not token:
        if state.settings.anonymous_read:
            return Caller(name=ANONYMOUS, role=Role.READER)
        raise ServiceError(
            "an API key is required: send X-API-Key or Authorization: Bearer",
            kind=ServiceErrorKind.UNAUTHORIZED,
        )
    try:
        key = keys.key_for_token(token)
    except InvalidApiKeyError as e:
        raise ServiceError(f"the API key is not valid: {e}", kind=ServiceErrorKind.UNAUTHORIZED) from e
    return Caller(name=key.name, role=key.role, key_id=key.id)


CallerDep = Annotated[Caller, Depends(get_caller)]


def key_role(state: AppState, token: str) -> Role | None:
    """The role of `token`'s live key, or None for an unknown or revoked one (for the HTTP edge, before
    a body is read); raises `ServiceUnavailableError` when the store cannot tell (not there, or not
    answering in time)."""
    if state.graph_store is None or state.embedder is None:
        raise ServiceUnavailableError("the graph store is starting or stopping")
    try:
        return KeyService(state.graph_store).key_for_token(token).role
    except InvalidApiKeyError:
        return None
    except GraphUnavailableError as e:
        raise ServiceUnavailableError(str(e)) from e


def _requiring(role: Role) -> Callable[[Caller], Caller]:
    def require(caller: CallerDep) -> Caller:
        if not caller.may(role) and caller.key_id is None:
            # An anonymous reader has not authenticated at all: asking for a key is the useful answer.
            raise ServiceError(
                f"this needs an API key with the {role.value} role; anonymous requests only read",
                kind=ServiceErrorKind.UNAUTHORIZED,
            )
        if not caller.may(role):
            raise ServiceError(
                f"this needs the {role.value} role; the key {caller.name!r} is {caller.role.value}",
                kind=ServiceErrorKind.FORBIDDEN,
            )
        return caller

    require.__name__ = f"require_{role.value}"
    return require


require_reader = _requiring(Role.READER)
require_curator = _requiring(Role.CURATOR)
require_admin = _requiring(Role.ADMIN)

RequireReader = Annotated[Caller, Depends(require_reader)]
"""Any valid key (or anonymous, when `REGRAPH_ANONYMOUS_READ` is on)."""
RequireCurator = Annotated[Caller, Depends(require_curator)]
"""A curator or admin key."""
RequireAdmin = Annotated[Caller, Depends(require_admin)]
"""An admin key."""
