"""The runner's untimed moments (review 23b, with ``REGRAPH_EXECUTOR_CANDIDATE_PROCESS`` on).

A function candidate in a runner (:mod:`executor.worker.runner`) is timed by the worker around a call
request and its acknowledgement. Two things the candidate controls were outside that timing:

* the hand-over of a rotation slot's mapping, once a request of its own before the slot's first timed
  call: a candidate that redirects libc's ``mmap64`` (a raw ``mprotect``, no Python, no ``dlsym``)
  computed each slot's answer while it was mapped, and its timed calls only copied it (review 23b:
  1,420x, every check passed). The mapping now goes with the first call's request, timed.
* the empty round trip taken off every timed call, measured after the library was loaded: a
  candidate that slowed its replies to those pings had that much taken off each call (review 23b:
  22.5x). It is now measured before the load, and a load after which the pings are much slower is
  refused.

Host runtime, x86-64 machine code, loaded straight into worker jobs (the static rules would refuse it).
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from executor.sandbox import run_job
from executor.verdict import ErrorKind
from executor.worker.messages import CandidateRun
from tests.integration.executor.test_clock_attack import HONEST, LIMIT, OPTIONS
from tests.integration.executor.test_executor_hacks_host import POLY_BODY, POLY_HEAD, POLY_TASK
from tests.support.hostcode import (
    assert_no_gain,
    build_host_candidates,
    timing_set_job,
    use_candidate_process,
    write_task,
)

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the candidates are x86-64 machine code"
)

# Raw system calls and a function's first bytes overwritten with a jump to another (movabs rax; jmp rax).
PATCHER = (
    "#include <cstdint>\n#include <cstring>\n#include <cerrno>\n#include <ctime>\n"
    "static long raw6(long nr, long a, long b, long c, long d, long e, long f) {\n"
    '    long ret; register long r10 __asm__("r10") = d; register long r8 __asm__("r8") = e;\n'
    '    register long r9 __asm__("r9") = f;\n'
    '    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)\n'
    '                     : "rcx", "r11", "memory");\n'
    "    return ret;\n}\n"
    "static void jump_to(void* from, void* to) {\n"
    "    unsigned char* code = (unsigned char*)from; uintptr_t page = (uintptr_t)code & ~(uintptr_t)4095;\n"
    "    if (raw6(10, (long)page, 8192, 7, 0, 0, 0) != 0) return;\n"
    "    unsigned char jump[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};\n"
    "    uint64_t target = (uint64_t)to; std::memcpy(jump + 2, &target, 8); std::memcpy(code, jump, 12);\n"
    "    raw6(10, (long)page, 8192, 5, 0, 0, 0);\n}\n"
    "static void honest(int n, const float* x, float* y) { for (int i = 0; i < n; ++i) { "
    + POLY_BODY
    + " } }\n"
)
# Computes the answer of every timing-size shared mapping as it is mapped; a call on one copies it.
MAP_MEMO = (
    PATCHER + "static const int N = 131072;\n"
    "static const float* keys[16]; static float answers[16][N]; static int kept = 0;\n"
    'extern "C" void* mmap64(void*, unsigned long, int, int, int, long);\n'
    'extern "C" void* mapped(void* addr, unsigned long len, int prot, int flags, int fd, long off) {\n'
    "    long r = raw6(9, (long)addr, (long)len, prot, flags, fd, off);\n"
    "    if (r < 0 && r > -4096) { errno = (int)-r; return (void*)-1; }\n"
    "    const float* x = (const float*)r;\n"
    "    if ((flags & 1) && fd >= 0 && len == 2ul * N * 4 && (x[0] != 0.0f || x[1] != 0.0f)) {\n"
    "        int k = 0; while (k < kept && keys[k] != x) ++k;\n"
    "        if (k == kept && kept < 16) ++kept;\n"
    "        if (k < 16) { keys[k] = x; honest(N, x, answers[k]); }\n    }\n"
    "    return (void*)r;\n}\n"
    "__attribute__((constructor)) static void hook() { jump_to((void*)&mmap64, (void*)&mapped); }\n"
    + POLY_HEAD
    + "if (n == N) for (int k = 0; k < kept; ++k) if (keys[k] == x) {\n"
    "    std::memcpy(y, answers[k], sizeof answers[k]); return; }\n"
    "honest(n, x, y);\n}\n"
)


def _slow_pings(n: int) -> str:
    """Honest calls; its replies 2-22 (after the load's: the empty round trips, 20 of them before
    the fix, 21 now) wait as long as one of its calls takes on ``n`` elements, measured in its
    constructor."""
    return (
        PATCHER + f"static const int N = {n};\n"
        "static int replies = 0; static long delay_ns = 0; static float bx[N], by[N];\n"
        "static void nap(long ns) { struct timespec t = {ns / 1000000000L, ns % 1000000000L}; "
        "raw6(35, (long)&t, 0, 0, 0, 0, 0); }\n"
        "static long long now_ns() { struct timespec t; raw6(228, 1, (long)&t, 0, 0, 0, 0); "
        "return t.tv_sec * 1000000000LL + t.tv_nsec; }\n"
        'extern "C" long send(int, const void*, unsigned long, int);\n'
        'extern "C" long sent(int fd, const void* buf, unsigned long len, int flags) {\n'
        '    if (len >= 3 && std::memcmp(buf, "ok ", 3) == 0 && ++replies >= 2 && replies <= 22) nap(delay_ns);\n'
        "    long r = raw6(44, fd, (long)buf, (long)len, flags, 0, 0);\n"
        "    if (r < 0 && r > -4096) { errno = (int)-r; return -1; }\n"
        "    return r;\n}\n"
        "__attribute__((constructor)) static void hook() {\n"
        "    for (int i = 0; i < N; ++i) bx[i] = (i % 100) * 0.01f;\n"
        "    long long best = -1;\n"
        "    for (int r = 0; r < 3; ++r) { long long t0 = now_ns(); honest(N, bx, by); long long t = now_ns() - t0;\n"
        "        if (best < 0 || t < best) best = t; }\n"
        "    delay_ns = (long)(best * 0.95); jump_to((void*)&send, (void*)&sent);\n}\n"
        + POLY_HEAD
        + "honest(n, x, y); }\n"
    )


@pytest.fixture(autouse=True)
def _candidate_process(monkeypatch: pytest.MonkeyPatch) -> None:
    use_candidate_process(monkeypatch)


def _run(tmp_path: Path, spec: dict, sources: dict[str, str]) -> dict:
    task = write_task(tmp_path, spec, HONEST)
    built = build_host_candidates(tmp_path, {"honest": HONEST, **sources})
    outcomes = {}
    for name, product in built.items():
        run = CandidateRun(candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT)
        outcomes[name] = run_job(timing_set_job(task, tmp_path / name, OPTIONS), run, timeout_s=300)
    return outcomes


def test_a_slot_is_handed_over_inside_its_first_timed_call(tmp_path: Path) -> None:
    outcomes = _run(tmp_path, POLY_TASK, {"memo": MAP_MEMO})
    honest, memo = outcomes["honest"], outcomes["memo"]
    # Before: passed at 1/500-1/1400 of the honest median (each slot's first visit as fast as its
    # repeats). Now the answer is computed inside a first visit, and the repeats' gain is refused.
    assert_no_gain(memo, honest)
    if not memo.passed:
        assert memo.error is ErrorKind.IMPLAUSIBLE, memo.message


def test_the_round_trip_taken_off_is_measured_before_the_library_is_loaded(tmp_path: Path) -> None:
    n = 8192  # ~3.7 ms a call: its slowed pings would have been taken off ~95 % of each call
    spec = {**POLY_TASK, "params": {"n": {"test": 1000, "timing": n}}}
    outcomes = _run(tmp_path, spec, {"pings": _slow_pings(n)})
    honest, pings = outcomes["honest"], outcomes["pings"]
    assert honest.passed and honest.candidate_timing is not None, honest.message
    assert 0 < honest.seconds["runner_roundtrip"] < 0.002, honest.seconds
    assert not pings.passed and pings.error is ErrorKind.IMPLAUSIBLE, (pings.message, pings.candidate_timing)
    assert "round trip" in pings.message, pings.message


def test_a_runner_killed_by_sigkill_is_a_crash_that_names_it(tmp_path: Path) -> None:
    """The OOM killer's signal: the worker ends itself the same way (it cannot reset SIGKILL's
    handler, which once ended it with a traceback and a bare exit status instead)."""
    killed = (
        "#include <csignal>\n#include <unistd.h>\n"
        + POLY_HEAD
        + "kill(getpid(), SIGKILL); (void)x; (void)y; }\n"
    )
    outcomes = _run(tmp_path, POLY_TASK, {"killed": killed})
    assert outcomes["honest"].passed, outcomes["honest"].message
    killed_outcome = outcomes["killed"]
    assert not killed_outcome.passed and killed_outcome.error is ErrorKind.CRASH, killed_outcome.message
    assert "SIGKILL" in killed_outcome.message, killed_outcome.message


def test_an_untimed_request_has_a_deadline(tmp_path: Path) -> None:
    """The first empty round trip measured after the load (reply 3, after the load's and the start-up
    ping's) waits past the 5 s that a request which is not a call may take: refused as a timeout."""
    stalls = (
        PATCHER + "static int replies = 0;\n"
        'extern "C" long send(int, const void*, unsigned long, int);\n'
        'extern "C" long sent(int fd, const void* buf, unsigned long len, int flags) {\n'
        '    if (len >= 3 && std::memcmp(buf, "ok ", 3) == 0 && ++replies == 3) {\n'
        "        struct timespec t = {6, 0}; raw6(35, (long)&t, 0, 0, 0, 0, 0); }\n"
        "    long r = raw6(44, fd, (long)buf, (long)len, flags, 0, 0);\n"
        "    if (r < 0 && r > -4096) { errno = (int)-r; return -1; }\n"
        "    return r;\n}\n"
        "__attribute__((constructor)) static void hook() { jump_to((void*)&send, (void*)&sent); }\n"
        + POLY_HEAD
        + "honest(n, x, y); }\n"
    )
    outcomes = _run(tmp_path, POLY_TASK, {"stalls": stalls})
    stalled = outcomes["stalls"]
    assert not stalled.passed and stalled.error is ErrorKind.TIMEOUT, stalled.message
    assert "not timed" in stalled.message, stalled.message
