"""The timing cores (``REGRAPH_EXECUTOR_TIMING_CORES``, executor.fleet.pinning): a function task's
host-timed trials on cores that no compile uses. A real evaluator of the test-only ``host`` runtime, the
real nvcc (skipped without it), real workers in their jail: the masks of nvcc and of its children are read
from ``/proc/<pid>/status`` while they build, those of the workers too, and the candidate reads its own
(``sched_getaffinity``) in each call and answers wrong when it is not the one expected: the rest of the
cores in its correctness calls (test size), the reserved ones in its warm-up and trials (timing size,
under the trials' lock), in the worker or in its runner. Off, nothing moves; on a one-core set the reservation is refused (logged) and
the compiles keep that core."""

from __future__ import annotations

import errno
import logging
import os
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from executor.fleet.pinning import (
    TIMING_CORES_ENV,
    TimingSplit,
    WorkerCores,
    _descendants_by_parent,
    descendants,
    parse_cpulist,
    pin_process,
    split_timing_cores,
    timing_split,
)
from executor.protocol import CandidateSource
from executor.taskformat import FunctionTask, KernelTask, parse_task
from executor.verdict import Verdict
from tests.support.hostcode import FIVE_CHECKED, STUB, host_evaluator, one_input_task, use_candidate_process

TIMING_N = 65536
HEAD = 'extern "C" void twice(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"
# No timing-size check: every call at the timing size is a warm-up call or a trial, under the trials' lock.
OPTIONS = FIVE_CHECKED.model_copy(update={"timing_size_checks": 0})
# The processes of an nvcc build (nvcc itself and what it starts), by their command name.
BUILD = frozenset(("nvcc", "cicc", "cudafe++", "ptxas", "fatbinary", "nvlink", "gcc", "g++", "cc1plus"))
BUILD |= {"as", "ld", "collect2"}


def checking_source(rest: set[int], reserved: set[int], tag: str) -> str:
    """``twice``, correct while its calling thread's cores are ``rest`` at the test size and ``reserved``
    at the timing size; otherwise every output is off by 1000 + the mask it saw (shown by a
    correctness failure's values)."""
    return (
        "#include <sched.h>\n"
        "static double seen_mask() {\n"
        "  cpu_set_t s; CPU_ZERO(&s);\n"
        "  if (sched_getaffinity(0, sizeof s, &s) != 0) return -1.0;\n"
        "  double m = 0.0; for (int c = 0; c < 48; ++c) if (CPU_ISSET(c, &s)) m += (double)(1ull << c);\n"
        "  return m;\n}\n"
        + HEAD
        + f"  const double want = n == {TIMING_N} ? {_bits(reserved)}.0 : {_bits(rest)}.0;\n"
        + "  const double m = seen_mask();\n"
        + "  const float off = m == want ? 0.0f : (float)(1000.0 + m);\n"
        + "  for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i] + off;\n}\n"
        + f"// {tag}\n"
        + STUB
    )


def _bits(cpus: set[int]) -> int:
    return sum(1 << c for c in cpus)


def _task() -> FunctionTask | KernelTask:
    spec = one_input_task("twice", domain="elementwise", description="y[i] = 2 x[i]", timing=TIMING_N)
    return parse_task({**spec, "reference_source": HEAD + BODY + " }"})


def _cpus_allowed(pid: int) -> set[int] | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                return set(parse_cpulist(line.split(":", 1)[1]))
    except OSError:
        return None
    return None


class Watch:
    """Samples, every 2 ms until stopped, the cores of this process's descendants: nvcc's builds (nvcc and
    every process below it) and the workers (``executor.worker`` in their command line), by role."""

    def __init__(self) -> None:
        self.build: list[tuple[str, frozenset[int]]] = []
        self.workers: dict[str, set[frozenset[int]]] = {"candidate": set(), "reference": set()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.002):
            for pid in descendants():
                try:
                    comm = Path(f"/proc/{pid}/comm").read_text().strip()
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                mask = _cpus_allowed(pid)
                if mask is None:
                    continue
                if comm == "nvcc":
                    self.build.append((comm, frozenset(mask)))
                    for child in descendants(pid):
                        child_mask = _cpus_allowed(child)
                        try:
                            child_comm = Path(f"/proc/{child}/comm").read_text().strip()
                        except OSError:
                            continue
                        if child_mask is not None and child_comm in BUILD:
                            self.build.append((child_comm, frozenset(child_mask)))
                elif "executor.worker" in cmdline and " serve " in cmdline:
                    role = "reference" if " reference " in cmdline else "candidate"
                    self.workers[role].add(frozenset(mask))


@pytest.fixture
def allowed() -> Iterator[set[int]]:
    """This process's cores, given back to every thread after the test (one test narrows them)."""
    before = os.sched_getaffinity(0)
    timing_split.cache_clear()
    yield set(before)
    pin_process(sorted(before))
    timing_split.cache_clear()


def _evaluate(tmp: Path, source: str) -> tuple[Verdict, Watch]:
    with (
        host_evaluator(tmp / "cache", prepare_next=False, prewarm_workers=False) as evaluator,
        Watch() as watch,
    ):
        verdict = evaluator.evaluate(_task(), CandidateSource(source=source), OPTIONS)
    return verdict, watch


def _last_cpu_alone(allowed: set[int]) -> bool:
    """Whether the last allowed CPU is a physical core of its own here (else the split takes its
    hyperthread sibling too, and this test's expectations would be another's)."""
    last = max(allowed)
    try:
        siblings = parse_cpulist(
            Path(f"/sys/devices/system/cpu/cpu{last}/topology/thread_siblings_list").read_text()
        )
    except OSError:
        return True
    return [c for c in siblings if c in allowed] == [last]


@pytest.mark.parametrize("runner", [False, True], ids=["in the worker", "in a runner"])
def test_on_compiles_stay_off_the_reserved_core_and_the_trials_run_on_it(
    tmp_path: Path, allowed: set[int], monkeypatch: pytest.MonkeyPatch, runner: bool
) -> None:
    if len(allowed) < 2 or not _last_cpu_alone(allowed):
        pytest.skip("needs two allowed CPUs, the last a physical core of its own")
    reserved = {max(allowed)}
    rest = allowed - reserved
    monkeypatch.setenv(TIMING_CORES_ENV, "1")
    if runner:  # the candidate called in a process of its own, the worker's child (worker/runner.py)
        use_candidate_process(monkeypatch)
    verdict, watch = _evaluate(tmp_path, checking_source(rest, reserved, "on"))
    assert verdict.passed, (verdict.stage, verdict.error, verdict.message)
    assert watch.build, "no process of the nvcc build was seen"
    assert {mask for _, mask in watch.build} == {frozenset(rest)}, watch.build
    assert {comm for comm, _ in watch.build} - {"nvcc"}, "none of nvcc's children was seen"
    # outside their trials the workers run on the rest too (inside them, the candidate's own check)
    assert watch.workers["candidate"] <= {frozenset(rest), frozenset(reserved)}, watch.workers
    assert watch.workers["reference"] <= {frozenset(rest)}, watch.workers


@pytest.mark.parametrize("value", [None, "0"], ids=["unset, automatic", "0"])
def test_off_nothing_moves(
    tmp_path: Path, allowed: set[int], monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        if len(allowed) >= 8:
            pytest.skip(f"{len(allowed)} CPUs: unset, the automatic value reserves some")
        monkeypatch.delenv(TIMING_CORES_ENV, raising=False)  # below 8 CPUs (this CI machine): none
    else:
        monkeypatch.setenv(TIMING_CORES_ENV, value)  # set, 0 wins whatever the CPUs
    verdict, watch = _evaluate(tmp_path, checking_source(allowed, allowed, "off"))
    assert verdict.passed, (verdict.stage, verdict.error, verdict.message)
    assert watch.build, "no process of the nvcc build was seen"
    assert {mask for _, mask in watch.build} == {frozenset(allowed)}, watch.build
    workers = watch.workers
    assert all(mask == frozenset(allowed) for masks in workers.values() for mask in masks), workers


def test_on_one_core_the_reservation_is_refused_and_said(
    tmp_path: Path, allowed: set[int], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    one = {min(allowed)}
    pin_process(sorted(one))  # every thread of this process: the workers and builds inherit it
    monkeypatch.setenv(TIMING_CORES_ENV, "1")
    with caplog.at_level(logging.WARNING, logger="executor.fleet.pinning"):
        verdict, watch = _evaluate(tmp_path, checking_source(one, one, "one core"))
    assert verdict.passed, (verdict.stage, verdict.error, verdict.message)
    assert {mask for _, mask in watch.build} == {frozenset(one)}, watch.build
    workers = watch.workers
    assert all(mask == frozenset(one) for masks in workers.values() for mask in masks), workers
    assert any("would leave the compiles none; nothing is reserved" in r.getMessage() for r in caplog.records)


def test_the_split_takes_whole_physical_cores_from_the_end() -> None:
    # 4 cores with their hyperthreads numbered as Linux does (c and c + 4 siblings)
    groups = [[0, 4], [1, 5], [2, 6], [3, 7]]
    split = split_timing_cores(range(8), 2, groups)
    assert split is not None and (split.reserved, split.rest) == ((3, 7), (0, 1, 2, 4, 5, 6))
    split = split_timing_cores(range(8), 3, groups)
    assert split is not None and split.reserved == (2, 3, 6, 7)
    assert split_timing_cores(range(8), 0, groups) is None
    assert split_timing_cores([0, 4], 1, [[0, 4]]) is None  # one physical core: never the compiles' last
    split = split_timing_cores([0, 1], 1)
    assert split is not None and (split.reserved, split.rest) == ((1,), (0,))


def test_descendants_by_parent_agree_with_the_kernels_children_lists() -> None:
    """Where ``/proc/<pid>/task/<tid>/children`` is missing (gVisor may), the runner is found from every
    process's parent instead: both ways give the same processes (a shell's two sleeps). Both are asked
    below the shell, not below this test's process: a pytest worker may start and end other children
    between the two reads (CI of stop 47 saw one more process in the second read)."""
    shell = subprocess.Popen(["bash", "-c", "sleep 5 & sleep 5; wait"])
    try:
        for _ in range(100):
            found = descendants(shell.pid)
            if len(found) >= 2:
                break
            threading.Event().wait(0.02)
        assert len(found) == 2, found
        assert sorted(_descendants_by_parent(shell.pid)) == sorted(found)
    finally:
        shell.kill()
        shell.wait()


def test_a_child_that_refuses_its_move_leaves_no_process_on_the_trials_cores(
    allowed: set[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the kernel refuses to move a child (the runner) to the reserved cores after the worker itself
    has moved, the trials run unreserved with the whole tree on the rest, and the worker is on the rest
    after them (review 43: it stayed on the trials' cores for the rest of its life). The refusal is the
    kernel's, injected at ``os.sched_setaffinity`` for the child's threads."""
    if len(allowed) < 2:
        pytest.skip("needs two cores: one kept for the trials, one for the rest")
    split = TimingSplit(rest=tuple(sorted(allowed))[:-1], reserved=(max(allowed),))
    pin_process(split.rest)
    child = subprocess.Popen(["sleep", "30"])
    try:
        real = os.sched_setaffinity

        def kernel(pid: int, cores: Iterable[int]) -> None:
            if pid == child.pid and set(cores) == set(split.reserved):
                raise OSError(errno.EINVAL, "Invalid argument")
            real(pid, cores)

        monkeypatch.setattr(os, "sched_setaffinity", kernel)
        cores = WorkerCores()
        cores.split = split
        with cores.trials():
            inside = os.sched_getaffinity(0)
        after = os.sched_getaffinity(0)
        assert inside == set(split.rest), inside
        assert after == set(split.rest), after
        assert _cpus_allowed(child.pid) == set(split.rest)
    finally:
        child.kill()
        child.wait()
