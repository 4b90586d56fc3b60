"""Wire models of the audit log (`/v1/audit`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from graphdb.models import AuditEntry


class AuditEntryPublic(BaseModel):
    """Who changed what, and when."""

    id: str
    actor: str
    action: str
    target: str
    details: dict[str, Any]
    at: datetime

    @classmethod
    def of(cls, entry: AuditEntry) -> AuditEntryPublic:
        """The public view of an audit entry."""
        return cls.model_validate(entry.model_dump())


class AuditList(BaseModel):
    """A page of audit entries, newest first."""

    items: list[AuditEntryPublic]
    limit: int
    offset: int
