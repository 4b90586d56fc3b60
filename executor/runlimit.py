"""How long a candidate's worker may run before it is killed: derived from the task, not one fixed cap.

A hanging candidate holds the GPU until its worker is killed, so the fixed ``run_timeout_s`` (300 s)
made one hang cost as much as a hundred normal evaluations. The limit is instead what a slow but
legitimate candidate could need: ``factor`` times a measured time per call (the parent candidate's
when the caller gives it, else the serial reference's on the timing set) for every call outside the
timed trials, plus the trials' own wall-clock budget (the warm-up cap and ``max_timing_s``, which stop
the timing stage by themselves), never below ``floor_s`` (worker start, uploads and the comparisons of
a small task) and never above the configured cap, which still applies when nothing was measured.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RunLimitBasis = Literal["cap", "floor", "reference", "parent"]


class RunLimit(BaseModel):
    """The wall-clock limit that applied to a candidate's run, and what it was derived from."""

    seconds: float = Field(gt=0)
    basis: RunLimitBasis = Field(
        description="'reference' or 'parent': factor x that time per call plus the timing budget; "
        "'floor': that came out below the floor; 'cap': above the cap, or nothing was measured"
    )
    basis_ms: float | None = Field(default=None, description="the time per call it was derived from")


def run_limit(
    *,
    cap_s: float,
    floor_s: float,
    factor: float,
    calls: int,
    timing_budget_s: float,
    reference_ms: float | None = None,
    parent_ms: float | None = None,
) -> RunLimit:
    """The limit of one candidate's run.

    ``calls`` counts the candidate's calls outside the timed trials (the correctness sets, the
    timing-size checks, the re-run of the first set); ``timing_budget_s`` bounds the warm-up and the
    trials. ``parent_ms`` wins over ``reference_ms`` when both are known.
    """
    basis: RunLimitBasis
    if parent_ms is not None and parent_ms > 0:
        basis, per_call_ms = "parent", parent_ms
    elif reference_ms is not None and reference_ms > 0:
        basis, per_call_ms = "reference", reference_ms
    else:
        return RunLimit(seconds=cap_s, basis="cap")
    derived = factor * per_call_ms / 1e3 * max(calls, 1) + timing_budget_s
    if derived >= cap_s:
        return RunLimit(seconds=cap_s, basis="cap", basis_ms=per_call_ms)
    if derived <= floor_s:
        return RunLimit(seconds=min(floor_s, cap_s), basis="floor", basis_ms=per_call_ms)
    return RunLimit(seconds=derived, basis=basis, basis_ms=per_call_ms)
