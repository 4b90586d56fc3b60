"""A function candidate runs in a process of its own (:mod:`executor.worker.runner`), not in its checker.

Review 22b's attack: native code that, during its untimed correctness calls, reads its own process's
memory, finds the timing sets' inputs there (the worker made them before the candidate arrived) and
fills a memo of every answer before the trials: every timed call, first visits included, was answered
from the memo (2,176-3,504x on the GPU, every check passed). The candidate below does the same on the
host: it scans every readable anonymous, heap and shared (memfd) mapping listed in ``/proc/self/maps``
for runs of ``N`` plausible inputs (floats in [-1, 1)), computes each run's answer and keeps it,
keyed on eight of its values; a timed call whose input matches a kept key copies the answer (after
reading its input eight times, so as to stay above the physical floor).

In the worker's own process it found every timing set and passed at a small fraction of the honest
time. In the runner it finds only what it was handed: the current call's inputs (the fresh timing-size
set at its correctness call, which is the warm-up's set, never timed), so the timed calls are computed
and timed like the honest code.

The runner is also confined with Landlock before it loads the library (where the kernel has none, it
refuses to load it unless the operator turns Landlock off for runners): the
worker's jail shows the stored timing sets (inputs and expected outputs) and the worker's job file, and
the runner, in the same jail, may no longer open them.

Host runtime, built with the host compiler (no static rules: what is tested is the process boundary).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from executor.sandbox import run_job
from executor.worker.messages import CandidateRun, WorkerOutcome
from executor.worker.runner import LANDLOCK_ENV, landlock_version
from tests.integration.executor.test_clock_attack import HONEST, OPTIONS
from tests.integration.executor.test_executor_hacks_host import POLY_BODY, POLY_HEAD, POLY_TASK
from tests.support.hostcode import (
    assert_no_gain,
    build_host_candidates,
    timing_set_job,
    use_candidate_process,
    write_task,
)
from tests.support.scripts import script_answer


def _scanner(whose: str) -> str:
    """The memory-scanning memo (above), reading the memory of ``whose``: ``"self"`` (its own process)
    or ``"parent"`` (the process that started it: the worker, when it runs in a runner), through
    ``/proc/PID/maps`` and ``/proc/PID/mem``."""
    pid = '"self"' if whose == "self" else "std::to_string(getppid())"
    return (
        "#include <cstdio>\n#include <cstring>\n#include <cstdint>\n#include <string>\n#include <vector>\n"
        "#include <fcntl.h>\n#include <unistd.h>\n"
        "static const int N = 131072;\n"
        "struct Memo { float key[8]; std::vector<float> y; };\n"
        "static std::vector<Memo> memos; static bool timing_seen = false; volatile double sink;\n"
        "static void keyof(const float* x, float* k) { for (int j = 0; j < 8; ++j) k[j] = x[(long)j * (N - 1) / 7]; }\n"
        "static void honest(int n, const float* x, float* y) { for (int i = 0; i < n; ++i) { "
        + POLY_BODY
        + " } }\n"
        "static bool plausible(float v) { uint32_t b; std::memcpy(&b, &v, 4); uint32_t e = (b >> 23) & 0xff; "
        "return e >= 100 && e <= 126; }\n"
        "static void keep(const float* x) {\n"
        "  Memo m; keyof(x, m.key);\n"
        "  for (auto& o : memos) if (!std::memcmp(o.key, m.key, sizeof m.key)) return;\n"
        "  if (memos.size() >= 64) return;\n"
        "  m.y.resize(N); honest(N, x, m.y.data()); memos.push_back(m);\n}\n"
        "static void scan() {\n"
        f'  std::string dir = std::string("/proc/") + {pid};\n'
        '  FILE* f = std::fopen((dir + "/maps").c_str(), "r"); if (!f) return;\n'
        '  int mem = open((dir + "/mem").c_str(), O_RDONLY); if (mem < 0) { std::fclose(f); return; }\n'
        "  char line[512]; std::vector<float> region;\n"
        "  while (std::fgets(line, sizeof line, f)) {\n"
        '    unsigned long lo, hi; char perms[8]; char path[256] = "";\n'
        '    if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %255s", &lo, &hi, perms, path) < 3) continue;\n'
        "    if (perms[0] != 'r' || perms[1] != 'w' || hi - lo > (1ul << 30)) continue;\n"
        '    if (path[0] && std::strcmp(path, "[heap]") != 0 && std::strncmp(path, "/memfd:", 7) != 0) continue;\n'
        "    region.resize((hi - lo) / 4);\n"
        "    if (pread(mem, region.data(), hi - lo, (off_t)lo) != (ssize_t)(hi - lo)) continue;\n"
        "    const float* p = region.data(); size_t count = region.size(), run = 0;\n"
        "    for (size_t i = 0; i < count; ++i) {\n"
        "      if (plausible(p[i])) { if (++run == (size_t)N) { keep(p + i + 1 - N); run = 0; } } else run = 0; }\n"
        "  }\n  close(mem); std::fclose(f);\n}\n"
        + POLY_HEAD
        + "if (n != N || !timing_seen) { scan(); timing_seen = n == N; }\n"
        "if (n == N) { float k[8]; keyof(x, k); double s = 0;\n"
        "  for (int r = 0; r < 8; ++r) for (int i = 0; i < n; ++i) s += x[i];\n"
        "  for (auto& m : memos) if (!std::memcmp(m.key, k, sizeof k)) { std::memcpy(y, m.y.data(), n * sizeof(float)); "
        "sink = s; return; } }\n"
        "honest(n, x, y);\n}\n"
    )


@pytest.fixture(autouse=True)
def _candidate_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner is the operator's choice (off by default): on for these workers."""
    use_candidate_process(monkeypatch)


@pytest.mark.parametrize(("whose", "landlock"), [("self", True), ("parent", True), ("parent", False)])
def test_a_candidate_that_reads_its_process_memory_finds_no_timing_set(
    tmp_path: Path, whose: str, landlock: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``self``: its own process's memory. ``parent``: its parent's, through ``/proc``, which two things
    keep out, each alone: Landlock (a confined process may not trace one outside its domain) and the
    worker making itself non-dumpable (the runner has the worker's uid)."""
    if not landlock:
        monkeypatch.setenv(LANDLOCK_ENV, "0")
    task = write_task(tmp_path, POLY_TASK, HONEST)
    built = build_host_candidates(tmp_path, {"scan": _scanner(whose), "honest": HONEST})
    # The honest code before and after the scan: the machine's load moves between runs.
    outcomes = []
    for n, name in enumerate(("honest", "scan", "honest")):
        run = CandidateRun(candidate_product=built[name], candidate_symbol=task.entry)
        outcomes.append(run_job(timing_set_job(task, tmp_path / f"{n}-{name}", OPTIONS), run, timeout_s=120))
    # Where it ran in the worker, it passed at 1/60-1/190 of the honest time (the memo answered every
    # timed call). In its own process it may pass, but only at the honest code's speed.
    assert_no_gain(outcomes[1], outcomes[0], outcomes[2])


def _nosy(paths: list[Path]) -> str:
    """The honest code, wrong in its first element whenever it can open one of ``paths``."""
    opens = " || ".join(f'open("{p}", O_RDONLY) >= 0' for p in paths)
    return (
        "#include <fcntl.h>\n"
        + POLY_HEAD
        + f"for (int i = 0; i < n; ++i) {{ {POLY_BODY} }}\nif ({opens}) y[0] += 1.0f;\n}}\n"
    )


def test_the_candidate_cannot_open_the_stored_timing_sets_or_its_workers_job(tmp_path: Path) -> None:
    if landlock_version() == 0:
        pytest.skip("no Landlock on this kernel")
    task = write_task(tmp_path, POLY_TASK, HONEST)
    job = timing_set_job(task, tmp_path / "job", OPTIONS)
    assert job.timing_set is not None
    # The store's directory (the sets are made there by the first run's reference, before the
    # candidate runs) and the job file in the worker's own directory (its working directory).
    (tmp_path / "build").mkdir()
    built = build_host_candidates(
        tmp_path / "build", {"nosy": _nosy([Path(job.timing_set.dir), Path("job.json")])}
    )
    run = CandidateRun(candidate_product=built["nosy"], candidate_symbol=task.entry)
    outcome = run_job(job, run, timeout_s=120)
    # In the worker's process (and in a runner without Landlock) both opens succeed: wrong_output.
    assert outcome.passed, outcome.message


# A worker's side of a runner, in a process of its own (a Runner makes its process non-dumpable): each
# case starts a runner of ``runtime`` in the working directory, does ``act`` to it before its first
# answer, then waits for its start-up; prints how that went, as JSON.
_RUNNER_CASE = """
import json, os, signal, sys
from executor.gpulock import LOCK_ENV
from executor.worker import runner as r
from executor.worker.runtime import CandidateFailed
runtime, act = sys.argv[1], sys.argv[2]
r.START_S = 3.0
os.environ[LOCK_ENV] = os.path.abspath("gpu.lock")
started = r.Runner(runtime)
with open(f"/proc/{started.proc.pid}/environ", "rb") as f:
    environ = f.read().split(b"\\0")
if act != "none":
    os.kill(started.proc.pid, getattr(signal, act))
out = {"lock_env": any(e.startswith(LOCK_ENV.encode() + b"=") for e in environ)}
started.start()
try:
    started.roundtrip_s("ping", 2)
    out["kind"] = None
except CandidateFailed as e:
    out["kind"], out["message"] = e.kind.value, str(e)
print(json.dumps(out))
"""


def _runner_case(tmp_path: Path, runtime: str, act: str) -> dict[str, object]:
    return script_answer(_RUNNER_CASE, runtime, act, cwd=tmp_path)


_WORKER_OF_A_RUNNER = """
import sys
from pathlib import Path
import numpy as np
from executor.worker.runner import Runner, SharedArrays
from tests.integration.executor.test_clock_attack import HONEST
from tests.integration.executor.test_executor_hacks_host import POLY_HEAD, POLY_TASK
from tests.support.hostcode import build_host_candidates, write_task
here = Path(".").resolve()
task = write_task(here, POLY_TASK, HONEST)
spin = build_host_candidates(here, {"spin": POLY_HEAD + "for (;;) {}\\n}"})["spin"]
started = Runner("host")
started.load(task, spin, task.entry)
print(started.proc.pid, flush=True)
started.call(SharedArrays.like({"x": np.zeros(8, np.float32), "y": np.zeros(8, np.float32)}), {"n": 8})
"""


def test_a_runner_dies_with_its_worker(tmp_path: Path) -> None:
    """The runner sets its own parent-death signal (nothing runs between its fork and its exec: a GPU
    worker has the CUDA driver's threads by then): a worker killed while its runner is in a call that
    never returns (so never reads its socket again) takes the runner with it."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER_OF_A_RUNNER], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None
        pid = int(worker.stdout.readline())
    finally:
        worker.kill()
        worker.wait()
    deadline = time.monotonic() + 10.0
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        # gone, or a zombie of the init that adopted it
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] == "Z":
            break
        time.sleep(0.05)
    alive = (
        Path(f"/proc/{pid}").exists()
        and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    )
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"the runner {pid} outlived its worker"


def test_a_runner_is_never_given_the_executors_locks(tmp_path: Path) -> None:
    """The worker holds the locks for its runner. A runner that took one itself (its CUDA context,
    under the GPU lock shared) waited at the turnstile that its own worker's run holds, until the
    run's limit killed both (the H200's first run: every GPU function candidate a timeout)."""
    assert _runner_case(tmp_path, "host", "none") == {"lock_env": False, "kind": None}


@pytest.mark.parametrize(
    ("runtime", "act", "says"),
    [
        # No CUDA here: its driver does not load at start-up (logged), its context fails (the reply).
        ("gpu", "none", ["failed the request 'start'", "could not load the CUDA driver", "pycuda"]),
        ("host", "SIGABRT", ["ended at the request 'ping'", "died from SIGABRT"]),
        ("host", "SIGSTOP", ["did not answer the request 'ping' within 3 s", "still running"]),
    ],
)
def test_a_runner_that_fails_before_the_load_says_why(
    tmp_path: Path, runtime: str, act: str, says: list[str]
) -> None:
    """Before the candidate's library is loaded, nothing of the candidate's has run: a runner that dies,
    stalls or fails then is the host's ``runtime_not_available``, never a bare timeout or crash, and
    its message says how it ended, what Landlock is here, and the end of the runner's stderr."""
    if runtime == "gpu" and importlib.util.find_spec("pycuda") is not None:
        pytest.skip("the GPU case is for a host without CUDA")
    result = _runner_case(tmp_path, runtime, act)
    assert result["kind"] == "runtime_not_available", result
    message = str(result["message"])
    for part in [*says, "before the candidate was loaded", "Landlock"]:
        assert part in message, message


def test_a_fresh_runner_that_fails_before_its_load_quotes_only_its_own_stderr(tmp_path: Path) -> None:
    """Review 39b's L4: the repeat-visit rule's fresh runner appends to the trials' runner's stderr,
    where that runner's candidate wrote; a failure of the fresh one before its load quotes only what it
    wrote itself (none of the candidate's text as the runner's own)."""
    (tmp_path / "runner.stderr").write_text("WRITTEN BY THE TRIALS' CANDIDATE\n")
    result = _runner_case(tmp_path, "host", "SIGABRT")
    assert result["kind"] == "runtime_not_available", result
    message = str(result["message"])
    assert "died from SIGABRT" in message, message
    assert "WRITTEN BY THE TRIALS' CANDIDATE" not in message, message


_IOCTL_CASE = """
import errno, fcntl, os, termios
from executor.worker import runner as r
assert r.confine(["/usr", "/lib", "/lib64", "/etc"], list(r.DEVICES)) is None
fd = os.open("/dev/null", os.O_RDWR)
try:
    fcntl.ioctl(fd, termios.TCGETS, bytes(64))
except OSError as e:
    print(errno.errorcode[e.errno])
"""


def test_a_runners_confinement_lets_device_ioctls_through(tmp_path: Path) -> None:
    """The CUDA driver talks to ``/dev/nvidia*`` by ioctl. Landlock restricts a device's ioctls only
    where the ruleset handles that right (ABI 5, Linux 6.10+); the runner's handles the first ABI's
    rights only, so an ioctl on a device it may open reaches the driver (``/dev/null`` answers a
    terminal's ioctl with ENOTTY; a ruleset that handled ioctls would refuse it first, EACCES)."""
    if landlock_version() == 0:
        pytest.skip("no Landlock on this kernel")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    done = subprocess.run(
        [sys.executable, "-c", _IOCTL_CASE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ENOTTY", done.stdout


def test_the_candidate_cannot_signal_its_worker(tmp_path: Path) -> None:
    """The runner has its worker's uid: unscoped, a candidate could stop, interrupt or kill the process
    that checks and times it (here SIGTERM at its first call: the worker died, a ``crash``). Confined
    with Landlock's signal scope (ABI 6, Linux 6.12+), the signal is refused (EPERM) and the honest
    work that follows passes."""
    if landlock_version() < 6:
        pytest.skip("no Landlock signal scope on this kernel")
    source = (
        "#include <signal.h>\n#include <unistd.h>\n"
        + POLY_HEAD
        + "static bool sent = false; if (!sent) { sent = true; kill(getppid(), SIGTERM); }\n"
        + f"for (int i = 0; i < n; ++i) {{ {POLY_BODY} }}\n}}\n"
    )
    task = write_task(tmp_path, POLY_TASK, HONEST)
    built = build_host_candidates(tmp_path, {"signal": source})
    run = CandidateRun(candidate_product=built["signal"], candidate_symbol=task.entry)
    outcome = run_job(timing_set_job(task, tmp_path / "job", OPTIONS), run, timeout_s=120)
    assert outcome.passed, outcome.message


# At its first call: a thread (pthread_create: clone3, else clone with CLONE_THREAD) that the candidate
# joins, then a child by a raw fork (x86-64: 57) and by a raw clone without CLONE_THREAD (56, SIGCHLD:
# a fork too), each child leaving at once. Its first output is wrong when a child was made.
_FORKER = (
    "#include <pthread.h>\n#include <signal.h>\n#include <unistd.h>\n#include <sys/syscall.h>\n"
    "static void* nothing(void*) { return nullptr; }\n"
    'static long raw2(long nr, long a, long b) { long r; __asm__ volatile("syscall" : "=a"(r) '
    ': "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory"); return r; }\n'
    + POLY_HEAD
    + "static int forked = -1;\n"
    "if (forked < 0) {\n"
    "  pthread_t t; if (pthread_create(&t, nullptr, nothing, nullptr) == 0) pthread_join(t, nullptr); else forked = 9;\n"
    "  long a = raw2(57, 0, 0); if (a == 0) _exit(0);\n"
    "  long b = raw2(56, SIGCHLD, 0); if (b == 0) _exit(0);\n"
    "  if (forked < 0) forked = (a > 0) + (b > 0);\n}\n"
    + f"for (int i = 0; i < n; ++i) {{ {POLY_BODY} }}\nif (forked) y[0] += 1.0f;\n}}\n"
)


def _run_confined(tmp_path: Path, source: str) -> WorkerOutcome:
    """``source`` on the poly task's timing sets in a runner confined by its seccomp filter (skipped
    where there is no Landlock: the tests then turn the runner's confinement off, the filter with it)."""
    if landlock_version() == 0:
        pytest.skip("no Landlock on this kernel")
    task = write_task(tmp_path, POLY_TASK, HONEST)
    built = build_host_candidates(tmp_path, {"candidate": source})
    run = CandidateRun(candidate_product=built["candidate"], candidate_symbol=task.entry)
    return run_job(timing_set_job(task, tmp_path / "job", OPTIONS), run, timeout_s=120)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
def test_the_candidates_process_makes_threads_but_no_process(tmp_path: Path) -> None:
    """A process the runner forked outlived its kill (review 23b: a helper wrote back an ``in`` array
    the candidate had changed, once the runner was gone, racing the worker's last checks). The runner
    refuses every fork before it loads the library (seccomp on every thread: a clone without
    CLONE_THREAD, fork, vfork, clone3, the exec family), and still makes threads. (Where there is no
    Landlock, the tests turn the runner's confinement off, the filter with it.)"""
    outcome = _run_confined(tmp_path, _FORKER)
    assert outcome.passed, outcome.message


# memfd_create and memfd_secret on the candidate's first call: either one that succeeds marks the output.
_MEMFD_MAKER = (
    "#include <sys/mman.h>\n#include <sys/syscall.h>\n#include <unistd.h>\n"
    + POLY_HEAD
    + "static int made = -1;\n"
    "if (made < 0) {\n"
    '  int a = memfd_create("hoard", 0); int b = (int)syscall(447, 0);\n'
    "  made = (a >= 0) + (b >= 0);\n}\n"
    + f"for (int i = 0; i < n; ++i) {{ {POLY_BODY} }}\nif (made) y[0] += 1.0f;\n}}\n"
)


def test_the_candidates_process_makes_no_file_in_memory(tmp_path: Path) -> None:
    """A memfd filled and unmapped holds host memory that neither RLIMIT_AS nor the RSS watch counts,
    bounded only by a memory cgroup, which many hosts do not give the executor (the GPU device's
    cgroup v2 is not delegated to it). The runner's filter refuses memfd_create and memfd_secret
    (EPERM) before it loads the library; the runner maps the worker's memfds and makes none, so honest
    code is not touched."""
    outcome = _run_confined(tmp_path, _MEMFD_MAKER)
    assert outcome.passed, outcome.message
    assert "runner_roundtrip" in outcome.seconds, outcome.seconds  # it ran in a runner
