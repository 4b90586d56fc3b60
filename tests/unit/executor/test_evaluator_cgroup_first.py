"""The workers' memory cgroups are placed before the evaluator starts any thread or process of its own
(review 40 M1): on cgroup v2 the placement may move the executor into a leaf of its cgroup, which a
process of its beside it (the comparison kernels' compile, submitted at the start on a GPU) would stop,
or not, by how soon it started."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import executor.evaluate as evaluate
from executor.cgroup import Placement
from executor.settings import ExecutorSettings


class _Placed(Exception):
    """Ends the evaluator's start at its placement."""


def test_the_placement_comes_before_any_thread_of_the_evaluator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads_then: list[list[str]] = []
    compiled = threading.Event()

    def placement(setting: str, **kwargs: object) -> Placement:
        threads_then.append([t.name for t in threading.enumerate()])
        raise _Placed

    def build_comparison(self: evaluate.Evaluator) -> None:
        compiled.set()

    monkeypatch.setattr(evaluate, "placement", placement)
    monkeypatch.setattr(evaluate.Evaluator, "_build_comparison", build_comparison)
    # A GPU runtime, so that the comparison kernels' build is submitted at the start.
    monkeypatch.setattr(evaluate.Evaluator, "_choose_runtime", staticmethod(lambda requested, has_gpu: "gpu"))
    monkeypatch.setattr(evaluate, "candidate_process", lambda: (False, "test"))
    before = {t.name for t in threading.enumerate()}
    with pytest.raises(_Placed):
        evaluate.Evaluator(ExecutorSettings(cache_dir=tmp_path, prewarm_workers=False))
    assert threads_then, "no placement"
    assert set(threads_then[0]) <= before, threads_then[0]
    assert not compiled.is_set()
