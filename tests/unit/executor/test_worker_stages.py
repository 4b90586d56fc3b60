"""A verdict names only the stages the workers report (executor.sandbox.KNOWN_STAGES), anything else in a
worker's progress file reads as "an unknown stage" (review 41 H1): so every stage a worker writes must
be among them, or an honest worker's crash would be reported in "an unknown stage" (and the waiter's
checks of PREPARED and the run's stages would never see theirs)."""

from __future__ import annotations

import ast
from pathlib import Path

from executor.sandbox import KNOWN_STAGES, RUN_STAGES, UNKNOWN_STAGE
from executor.worker import messages

WORKER = Path(messages.__file__).parent


def _reported_stages() -> set[str]:
    """The stages written by the workers' sources: the last argument of each call of ``progress`` or
    ``write_progress``, a string or a name of :mod:`executor.worker.messages`."""
    stages: set[str] = set()
    for source in WORKER.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name not in ("progress", "write_progress"):
                continue
            arg = node.args[-1]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                stages.add(arg.value)
            elif isinstance(arg, ast.Name) and isinstance(getattr(messages, arg.id, None), str):
                stages.add(getattr(messages, arg.id))
            else:  # a stage passed through (CandidateWorker.progress's own call)
                assert source.name == "candidate.py" and isinstance(arg, ast.Name), ast.dump(node)
    return stages


def test_every_stage_a_worker_reports_is_known() -> None:
    reported = _reported_stages()
    assert {"inputs", "prepared", "correctness", "timing", "reference", "reference_timing"} <= reported
    assert reported <= KNOWN_STAGES, reported - KNOWN_STAGES
    assert RUN_STAGES <= KNOWN_STAGES
    assert UNKNOWN_STAGE not in KNOWN_STAGES
