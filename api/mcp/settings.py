"""Settings of the MCP server (its limits; the API's settings apply as well)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class McpSettings(BaseSettings):
    """Limits of the MCP server (environment prefix REGRAPH_MCP_); the API's settings apply as well."""

    model_config = SettingsConfigDict(env_prefix="REGRAPH_MCP_", extra="ignore")

    max_result_chars: int = Field(
        40_000,
        ge=2_000,
        le=2_000_000,
        description="longest tool or resource result in JSON characters; longer ones are cut, with a note",
    )
    read_timeout_s: float = Field(
        30.0, gt=0, le=600, description="longest a graph read may take before the tool gives up"
    )
    max_wait_s: float = Field(
        300.0, gt=0, le=3600, description="longest a tool follows a job's progress before answering"
    )
