"""Wire models of evaluations: one candidate judged by the executor (the MCP tools' answers)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from api.optimize.models import Verification
from executor.protocol import Verdict


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
