"""How long a candidate's worker may run before it is killed: derived from the task, not one fixed cap.

A hanging candidate holds the GPU until its worker is killed, so the fixed ``run_timeout_s`` (300 s)
made one hang cost as much as a hundred normal evaluations. The limit is instead what a slow but
legitimate candidate could need: ``factor`` times a measured time per call (the parent candidate's
when the caller gives it, else the serial reference's on the timing set) for every call outside the
timed trials, plus the trials' own wall-clock budget (the warm-up cap and ``max_timing_s``, which stop
the timing stage by themselves), never below ``floor_s`` (worker start, uploads and the comparisons of
a small task) and never above the configured cap, which still applies when nothing was measured.

That run limit is paid in full by a candidate that hangs in its very first call. Each call therefore
also has a limit of its own (:class:`CallLimit`): ``call_floor_s`` plus ``factor`` times the same time
per call, for every call of a batch timed together (in the warm-up and the trials, the candidate's own
slowest call there so far when that is smaller). The worker announces each call's start and end to
its parent (:mod:`executor.sandbox`), which kills it when a call runs past its limit; between calls
(the worker's own comparisons and copies) only the run limit applies, and the run limit stays the
backstop, since the candidate runs in the worker's process and could fake the announcements.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

RunLimitBasis = Literal["cap", "floor", "reference", "parent"]
CallLimitBasis = Literal["reference", "parent"]


class CallLimit(BaseModel):
    """The wall-clock limit of each candidate call: ``floor_s`` plus ``factor`` x ``basis_ms`` per call
    (a batch of N calls or launches timed together gets N times that, plus the floor once)."""

    seconds: float = Field(gt=0, description="the limit of one call: floor_s + factor x basis_ms")
    floor_s: float = Field(gt=0)
    factor: float = Field(gt=0)
    basis: CallLimitBasis = Field(description="whose time per call it was derived from")
    basis_ms: float = Field(gt=0, description="the time per call it was derived from")

    def per_call_ms(self, seen_ms: float | None = None) -> float:
        """The time per call that a limit is derived from: ``basis_ms``, or ``seen_ms`` when that is
        smaller (the slowest of the candidate's own earlier calls or launches in the same warm-up and
        trials, on the same inputs: the next ones are not expected to take longer)."""
        return self.basis_ms if seen_ms is None or seen_ms <= 0 else min(self.basis_ms, seen_ms)

    def for_calls(self, calls: int = 1, seen_ms: float | None = None) -> float:
        """The limit of ``calls`` calls (or kernel launches) run as one batch."""
        return self.floor_s + max(calls, 1) * self.factor * self.per_call_ms(seen_ms) / 1e3

    def describe(self, calls: int = 1, per_call_ms: float | None = None) -> str:
        """How :meth:`for_calls` came out, in words (``per_call_ms``: the time per call it used)."""
        times = f"{calls} x " if calls > 1 else ""
        if per_call_ms is None or per_call_ms >= self.basis_ms:
            return f"{self.floor_s:g}s floor + {times}{self.factor:g} x the {self.basis}'s {self.basis_ms:.3g} ms per call"
        return (
            f"{self.floor_s:g}s floor + {times}{self.factor:g} x {per_call_ms:.3g} ms per call, its own "
            f"slowest so far in these trials; the {self.basis}'s: {self.basis_ms:.3g} ms"
        )


class RunLimit(BaseModel):
    """The wall-clock limit that applied to a candidate's run, and what it was derived from."""

    seconds: float = Field(gt=0)
    basis: RunLimitBasis = Field(
        description="'reference' or 'parent': factor x that time per call plus the timing budget; "
        "'floor': that came out below the floor; 'cap': above the cap, or nothing was measured"
    )
    basis_ms: float | None = Field(default=None, description="the time per call it was derived from")
    call: CallLimit | None = Field(
        default=None,
        description="the limit of each candidate call; None: nothing was measured, only the run limit applied",
    )
    stopped_by: Literal["call", "run"] | None = Field(
        default=None,
        description="when the candidate was killed for taking too long: 'call' (one call ran past its "
        "call limit) or 'run' (the run limit, or the worker's own cap)",
    )


def _per_call(reference_ms: float | None, parent_ms: float | None) -> tuple[CallLimitBasis, float] | None:
    """The measured time per call that the limits are derived from: the parent's when known, else the
    reference's; None when neither was measured."""
    if parent_ms is not None and parent_ms > 0:
        return "parent", parent_ms
    if reference_ms is not None and reference_ms > 0:
        return "reference", reference_ms
    return None


def call_limit(
    *, floor_s: float, factor: float, reference_ms: float | None = None, parent_ms: float | None = None
) -> CallLimit | None:
    """The limit of each candidate call, or None when no time per call was measured (``parent_ms``
    wins over ``reference_ms``, as in :func:`run_limit`)."""
    measured = _per_call(reference_ms, parent_ms)
    if measured is None:
        return None
    basis, per_call_ms = measured
    seconds = floor_s + factor * per_call_ms / 1e3
    return CallLimit(seconds=seconds, floor_s=floor_s, factor=factor, basis=basis, basis_ms=per_call_ms)


def run_limit(
    *,
    cap_s: float,
    floor_s: float,
    factor: float,
    calls: int,
    timing_budget_s: float,
    reference_ms: float | None = None,
    parent_ms: float | None = None,
    call_floor_s: float | None = None,
    confirm_s: float = 0.0,
) -> RunLimit:
    """The limit of one candidate's run.

    ``calls`` counts the candidate's calls outside the timed trials (the correctness sets, the
    timing-size checks, the re-run of the first set); ``timing_budget_s`` bounds the warm-up and the
    trials; ``confirm_s`` is what else the run may need after the trials (the repeat-visit rule's
    confirming calls, each in a fresh process: its start, load and warm-up), added to the derived
    limit (the floor already has room for a run's own starts). ``parent_ms`` wins over ``reference_ms``
    when both are known. With ``call_floor_s``, the limit of each call (:func:`call_limit`) comes with it.
    """
    call = (
        call_limit(floor_s=call_floor_s, factor=factor, reference_ms=reference_ms, parent_ms=parent_ms)
        if call_floor_s is not None
        else None
    )
    measured = _per_call(reference_ms, parent_ms)
    if measured is None:
        return RunLimit(seconds=cap_s, basis="cap")
    basis, per_call_ms = measured
    derived = factor * per_call_ms / 1e3 * max(calls, 1) + timing_budget_s + confirm_s
    if derived >= cap_s:
        return RunLimit(seconds=cap_s, basis="cap", basis_ms=per_call_ms, call=call)
    if derived <= floor_s:
        return RunLimit(seconds=min(floor_s, cap_s), basis="floor", basis_ms=per_call_ms, call=call)
    return RunLimit(seconds=derived, basis=basis, basis_ms=per_call_ms, call=call)
