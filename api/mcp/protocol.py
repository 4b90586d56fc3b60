"""Settings and wire models of the MCP server (what its tools return beyond the API's own models)."""

from __future__ import annotations

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.optimize.protocol import JobStateName, Verification
from executor.protocol import Verdict
from search.run import CandidateCounts


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


class CandidateEvaluationPublic(BaseModel):
    """A candidate judged by the executor: the summary an agent acts on and the executor's typed verdict."""

    task_id: str
    verification: Verification = Field(
        description="'verified': run, checked and timed on a GPU; 'compile-only': the executor has no GPU"
    )
    passed: bool = Field(description="correct on every input set and timed (never true compile-only)")
    speedup: float | None = Field(description="serial reference time / candidate time, when passed")
    error_kind: str | None = Field(description="why it did not pass ('not_verified' when compile-only)")
    message: str
    verdict: Verdict


class JobStatus(BaseModel):
    """An optimization job in brief: its state, its outcome once finished (the full result is a resource)."""

    id: str
    state: JobStateName
    method: str
    task_id: str
    error: str | None
    event_count: int
    finished: bool
    verification: Verification | None = None
    outcome: str | None = Field(None, description="the outcome in words, once finished")
    counts: CandidateCounts | None = None
    best_speedup: float | None = None
    best_path: list[str] | None = None
    best_code: str | None = None
    result_uri: str = Field(description="the resource with the full result (every candidate)")
    progress: list[str] = Field(
        default_factory=list, description="the progress followed during this call, one line per event"
    )
