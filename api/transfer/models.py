"""Wire models of the whole graph's transfer (`/v1/graph/export`, `/v1/graph/import`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ImportSummary(BaseModel):
    """What an import loaded. API keys are never imported: keys in the file are ignored and counted."""

    techniques: int
    transitions: int
    examples: int
    decisions: int
    audit: int
    trajectories: int
    api_keys_ignored: int = Field(
        description="API keys the file held (files written before exports left them out): not imported"
    )
