"""The memory watch of a GPU worker counts its runner (review 37's M5).

On a GPU the executor limits a worker's host memory by watching what is resident
(:meth:`executor.sandbox.WorkerProcess.wait` with ``watch_rss``; RLIMIT_AS breaks CUDA). A function
candidate runs in a process of its own by default, its worker's child (:mod:`executor.worker.runner`):
the watch read the worker's ``VmRSS`` alone, so a candidate there had no limit at all. It now reads the
worker's tree (:func:`executor.sandbox._tree_rss_bytes`). Here: real process trees on this host, and a
host worker whose runner allocates past the limit with the watch on (the GPU path's, on here without
a GPU: the worker gets no RLIMIT_AS, so the watch alone can refuse it). tests/gpu/test_runner_memory_gpu.py
is the same on a GPU, under the default.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.reference import build_reference
from executor.sandbox import (
    WorkerProcess,
    _job_dirs,
    _rss_parts,
    _tree_rss_bytes,
    finish_candidate,
    start_candidate,
)
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun, WorkerJob
from tests.support.hostcode import FAST, build_host_candidates, saxpy_timed_at, use_candidate_process

MB = 1 << 20

# A process that makes ARGV[2] MB of anonymous memory resident, starts a child (ARGV[1] levels below
# it), says its pids once all are ready and waits for its stdin's end. ARGV[3], what the shared memory
# is: "none"; "shared": it fills a 128-MB memfd that its child maps (resident in both); "own": its
# child fills one of its own.
TREE = """
import mmap, os, subprocess, sys
depth, mb, shm = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
anon = mmap.mmap(-1, max(mb << 20, 4096), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, len(anon), 4096):
    anon[i] = 1
fds, child_shm, mapped = (), "none", None
if shm in ("shared", "make"):
    fd = os.memfd_create("tree")
    os.ftruncate(fd, 128 << 20)
    mapped = mmap.mmap(fd, 128 << 20)
    for i in range(0, len(mapped), 4096):
        mapped[i] = 1
    if shm == "shared":
        fds, child_shm = (fd,), f"map:{fd}"
elif shm.startswith("map:"):
    mapped = mmap.mmap(int(shm[4:]), 128 << 20, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
elif shm == "own":
    child_shm = "make"
below = ""
if depth > 0:
    child = subprocess.Popen(
        [sys.executable, "-c", sys.argv[4], str(depth - 1), str(mb), child_shm, sys.argv[4]],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=fds, text=True,
    )
    below = child.stdout.readline().strip()
print(os.getpid(), below, flush=True)
sys.stdin.read()
"""


@pytest.fixture
def tree() -> Iterator[Any]:
    """Start a tree of processes (:data:`TREE`): ``tree(depth, mb, shm)`` returns their pids, the
    top's first; all are ended after the test."""
    started: list[tuple[subprocess.Popen[str], list[int]]] = []

    def start(depth: int, mb: int, shm: str) -> list[int]:
        proc = subprocess.Popen(
            [sys.executable, "-c", TREE, str(depth), str(mb), shm, TREE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        pids = [int(pid) for pid in proc.stdout.readline().split()]
        started.append((proc, pids))
        assert len(pids) == depth + 1, pids
        return pids

    yield start
    for proc, _pids in started:
        assert proc.stdin is not None
        proc.stdin.close()  # each one's end closes its child's stdin
        proc.wait(timeout=30)


def _parts(pid: int) -> list[int]:
    """``pid``'s resident memory: anonymous, file-backed, shared."""
    parts = _rss_parts(pid)
    assert parts is not None
    return parts


def _vm_rss(pid: int) -> int:
    return sum(_parts(pid))


def test_a_workers_children_and_their_children_count(tree: Any) -> None:
    top, child, grandchild = tree(2, 64, "none")
    counted = _tree_rss_bytes(top)
    # What was watched before: the top's VmRSS alone (a few MB here); the tree's 3 x 64 MB now.
    assert counted >= _vm_rss(top) + 2 * 60 * MB, (counted, _vm_rss(top))
    expected = _vm_rss(top) + _parts(child)[0] + _parts(grandchild)[0]
    assert abs(counted - expected) < 4 * MB, (counted, expected)
    # the first level alone: its own child is counted too
    assert _tree_rss_bytes(child) >= _vm_rss(child) + 60 * MB


def test_the_memory_a_child_maps_from_its_parent_counts_once(tree: Any) -> None:
    """A runner maps the input sets the worker filled (a memfd): resident in both, counted once."""
    top, child = tree(1, 0, "shared")
    assert _parts(top)[2] >= 120 * MB and _parts(child)[2] >= 120 * MB
    counted = _tree_rss_bytes(top)
    assert counted < _vm_rss(top) + _vm_rss(child) - 100 * MB, (counted, _vm_rss(top), _vm_rss(child))
    assert counted >= _vm_rss(top)


def test_shared_memory_a_child_makes_itself_counts(tree: Any) -> None:
    top, child = tree(1, 0, "own")
    assert _parts(top)[2] < 8 * MB and _parts(child)[2] >= 120 * MB
    assert _tree_rss_bytes(top) >= _vm_rss(top) + 120 * MB


# The first call makes 768 MB resident in the candidate's process and keeps it (its later calls hold
# it) for a second, then every call is the honest code.
HOG = (
    "#include <cstring>\n#include <cstdlib>\n#include <unistd.h>\n"
    'extern "C" void saxpy(int n, float a, const float* x, float* y) {\n'
    "static char* kept = nullptr;\n"
    "if (!kept) { kept = (char*)std::malloc(768u << 20); std::memset(kept, 1, 768u << 20); usleep(1000000); }\n"
    "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }"
)
LIMIT = 512 * MB  # above a host worker's own resident memory here (about 100 MB), below the hog's


def test_a_runner_past_the_limit_is_refused_by_the_watch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker gets no memory limit of its own (no RLIMIT_AS, which its runner would inherit): only
    the watch, forced on as on a GPU, can refuse the candidate. Without the runner's memory counted,
    the candidate passed (seen when the mend was broken)."""
    use_candidate_process(monkeypatch)
    wait = WorkerProcess.wait

    def watched(self: WorkerProcess, *args: Any, **kwargs: Any) -> ErrorKind | None:
        kwargs["watch_rss"] = True  # finish_candidate's for a GPU worker
        return wait(self, *args, **kwargs)

    monkeypatch.setattr(WorkerProcess, "wait", watched)
    task = saxpy_timed_at()
    (tmp_path / "built").mkdir()
    product = build_host_candidates(tmp_path / "built", {"hog": HOG})["hog"]
    job = WorkerJob(
        task=task,
        runtime="host",
        reference_library=str(build_reference(task, tmp_path)),
        seeds=[101, 202, 303, 404],
        options=FAST,
    )
    proc = WorkerProcess("candidate", "host", tmp_path, binds=_job_dirs(job), timing_cores=0)
    try:
        assert proc.own_process  # the candidate runs in a runner, the worker's child
        start_candidate(proc, job, None)  # the job's limit is None: no RLIMIT_AS in the worker
        outcome = finish_candidate(
            proc, CandidateRun(candidate_product=product, candidate_symbol="saxpy"), 60, LIMIT
        )
    finally:
        proc.close()
    assert outcome.error is ErrorKind.OUT_OF_MEMORY, outcome
    assert f"exceeded {LIMIT} bytes" in outcome.message
