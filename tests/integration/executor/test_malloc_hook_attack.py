"""A function candidate that hooks libc's ``malloc`` in the worker's process writes the right answer at
exactly the elements the worker samples, and does each timed call's work outside its window (review
37, H1). Open where the candidate shares the worker's process (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0``,
or its default ``auto`` on a host where a runner cannot confine itself); closed by the runner, which the
default runs wherever it can confine itself (Landlock and its seccomp filter: this host).

Session 36 sampled each timed call's outputs inside its window (executor.worker.host.FunctionRuntime.time,
review 36c's H2): work left to later is then not in the sample. But the sample is numpy's: it draws the
positions into a new 32 KiB int64 array and gathers the values into a new 16 KiB one, both from libc's
``malloc``. The candidate below puts a jump to its own ``malloc`` over libc's (as
:mod:`test_clock_attack`'s candidates do over ``clock_gettime`` and ``write``): it keeps the pointer it
returned for the positions' array, and when the gather's array is asked for (the positions are drawn by
then) it computes the right outputs at those positions, in the window but 4096 elements' work, not the
call's. The call itself returns at once; its whole work is done in its hooked ``write`` of the call's
end line, outside every window, before the slot's next call or the whole checks. Review 37 saw it pass
at a median of 0.049 ms against the honest 86 ms (elementwise, 9 trials), 0.046-0.048 ms on the output
compared sorted (25 and 40 trials). Its variant that does the work before the call's start (below)
defeats the before-sample the same way.

It passes the static rules and the link check (it declares ``write`` and ``malloc`` itself, includes
nothing that names them): a libc hook needs neither Python's API nor an unlisted import. In the runner
(:mod:`executor.worker.runner`) the candidate has only its own process's ``malloc`` and ``write``: the
worker's samples are drawn where it cannot see them. There it passed at the honest speed (medians 85.9
and 86.6 ms against the honest 86.2 and 85.7, session 36); it does not learn there which call is timed
either (a runner is not given the done channel), so what this shows is that this candidate gains
nothing, not that no deferral can work in a runner.

Host runtime, built with the host compiler (x86-64 only: the candidate is machine code).
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

import pytest

from executor import linkcheck, static
from executor.sandbox import run_job
from executor.worker.messages import CandidateRun, WorkerOutcome
from executor.worker.runner import candidate_process, landlock_version
from tests.integration.executor.test_clock_attack import (
    CLOCK,
    HONEST,
    LIMIT,
    OPTIONS,
    POLY_SORTED_TASK,
    REFUSED,
)
from tests.integration.executor.test_executor_hacks_host import POLY_BODY, POLY_HEAD, POLY_TASK
from tests.support.hostcode import (
    assert_no_gain,
    build_host_candidates,
    timing_set_job,
    use_candidate_process,
    use_default_candidate_process,
    use_worker_process,
    write_task,
)

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")

# Its own declarations of write and malloc (no <unistd.h>, no <cstdlib>), its own number parser.
PREDICTING = (
    CLOCK.split('extern "C" int slowed_clock')[0]
    + 'extern "C" long write(int, const void*, unsigned long);\n'
    + 'extern "C" void* malloc(unsigned long);\n'
    + "static int num(const char* s) { int v = 0; while (*s >= 48 && *s <= 57) v = v * 10 + (*s++ - 48); return v; }\n"
    + "static int done_fd = -1, current = 0; static bool pending = false, armed = false;\n"
    + "static const float* px = 0; static float* py = 0; static int pn = 0; static long worker_tid = -1;\n"
    + "static long long* positions = 0;\n"
    + "static void one(int i, const float* x, float* y) { "
    + POLY_BODY
    + " }\n"
    + "static void work(int n, const float* x, float* y) { for (int i = 0; i < n; ++i) one(i, x, y); }\n"
    + "static unsigned char* mcode = 0; static unsigned char msaved[12], mjump[12]; static volatile int mlock = 0;\n"
    + 'extern "C" void* hooked_malloc(size_t n) {\n'
    + "    while (__sync_lock_test_and_set(&mlock, 1)) {}\n"
    + "    std::memcpy(mcode, msaved, 12);  // libc's own malloc back for this call\n"
    + "    void* p = ((void* (*)(size_t))(void*)mcode)(n);\n"
    + "    std::memcpy(mcode, mjump, 12);\n"
    + "    __sync_lock_release(&mlock);\n"
    + "    if (armed && raw3(186, 0, 0, 0) == worker_tid) {\n"
    + "        if (n == 4096 * 8) positions = (long long*)p;  // the sample's positions, about to be drawn\n"
    + "        else if (n == 4096 * 4 && positions) {  // the gather's values: the positions are drawn\n"
    + "            for (int k = 0; k < 4096; ++k) { long long i = positions[k]; if (i >= 0 && i < pn) one((int)i, px, py); }\n"
    + "            armed = false; positions = 0;\n"
    + "        }\n"
    + "    }\n"
    + "    return p;\n}\n"
    + 'extern "C" long late_write(int fd, const void* buf, unsigned long count) {\n'
    + '    if ((done_fd < 0 || fd == done_fd) && count > 5 && count < 200 && std::memcmp(buf, "call ", 5) == 0) {\n'
    + "        char line[200]; std::memcpy(line, buf, count); line[count] = 0;\n"
    + '        const char* at = std::strstr(line, "timed call ");\n'
    + "        current = at ? num(at + 11) : 0; done_fd = fd;\n"
    + "    }\n"
    + "    long r = raw3(1, fd, (long)buf, (long)count);\n"
    + '    if (pending && fd == done_fd && count == 4 && std::memcmp(buf, "end\\n", 4) == 0) {\n'
    + "        pending = false; armed = false; positions = 0; work(pn, px, py);  // the call's work, after its end\n"
    + "    }\n"
    + "    return r;\n}\n"
    + "static void patch(void* fn, void* to, unsigned char* saved, unsigned char* jump) {\n"
    + "    unsigned char* code = (unsigned char*)fn;\n"
    + "    uintptr_t page = (uintptr_t)code & ~(uintptr_t)4095;\n"
    + "    raw3(10, (long)page, 8192, 7);  // mprotect: read, write, execute\n"
    + "    unsigned char j[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};  // movabs rax; jmp rax\n"
    + "    uint64_t target = (uint64_t)to; std::memcpy(j + 2, &target, 8);\n"
    + "    if (saved) std::memcpy(saved, code, 12);\n"
    + "    if (jump) std::memcpy(jump, j, 12);\n"
    + "    std::memcpy(code, j, 12);\n}\n"
    + POLY_HEAD
    + "if (!patched) { patched = true;\n"
    + "    worker_tid = raw3(186, 0, 0, 0);\n"
    + "    patch((void*)&write, (void*)&late_write, 0, 0);\n"
    + "    mcode = (unsigned char*)(void*)&malloc; patch((void*)&malloc, (void*)&hooked_malloc, msaved, mjump); }\n"
    + "if (n > 100000 && current > 0) { px = x; py = y; pn = n; pending = true; armed = true; return; }\n"
    + "work(n, x, y);\n}\n"
)


# The same hook, and the work done before the call instead (review 37's probe_before2.py): in its
# hooked ``write`` of a timed call's start line (after the worker restored the slot's outputs, outside
# the window) the candidate keeps what was restored and does the whole call's work; at the
# before-sample's gather it puts the restored values back at exactly the drawn positions, and the call
# returns at once; at the after-sample's first allocation (before its positions are drawn) it computes
# those 4,096 elements. A slot's first timed call (whose buffers it has not seen yet) is left to after
# its end as above. Review 37: passed at 0.057 ms (9 trials) and 0.054 ms (40).
BEFORE_PREDICTING = (
    PREDICTING.replace(
        "static long long* positions = 0;\n",
        "static long long* positions = 0;\n"
        "static const float* sx[2]; static float* sy[2]; static int sn[2] = {0, 0}; static float* saved = 0;\n"
        "static int phase = 0, cur = -1; static long long drawn[4096]; static long long* before = 0;\n",
    )
    .replace(
        "    if (armed && raw3(186, 0, 0, 0) == worker_tid) {\n",
        "    if (phase == 1 && raw3(186, 0, 0, 0) == worker_tid) {  // the before-sample\n"
        "        if (n == 4096 * 8) before = (long long*)p;\n"
        "        else if (n == 4096 * 4 && before) {  // its positions drawn: the restored values put back\n"
        "            for (int k = 0; k < 4096; ++k) { drawn[k] = before[k]; sy[cur][drawn[k]] = saved[drawn[k]]; }\n"
        "            before = 0; phase = 2;\n"
        "        }\n"
        "    } else if (phase == 3 && n == 4096 * 8 && raw3(186, 0, 0, 0) == worker_tid) {  // the after-sample\n"
        "        for (int k = 0; k < 4096; ++k) one((int)drawn[k], sx[cur], sy[cur]);\n"
        "        phase = 0;\n"
        "    }\n"
        "    if (armed && raw3(186, 0, 0, 0) == worker_tid) {\n",
    )
    .replace(
        "        current = at ? num(at + 11) : 0; done_fd = fd;\n",
        "        current = at ? num(at + 11) : 0; done_fd = fd;\n"
        "        if (current > 0 && sn[(current - 1) % 2] > 0) {  // after the restore: the whole work now\n"
        "            cur = (current - 1) % 2; int m = sn[cur];\n"
        "            if (!saved) saved = (float*)malloc(sizeof(float) * m);\n"
        "            std::memcpy(saved, sy[cur], sizeof(float) * m); work(m, sx[cur], sy[cur]); phase = 1;\n"
        "        }\n",
    )
    .replace(
        "if (n > 100000 && current > 0) { px = x;",
        "if (n > 100000 && current > 0) { int slot = (current - 1) % 2;\n"
        "    if (phase == 2 && sy[slot] == y) { phase = 3; return; }\n"
        "    sx[slot] = x; sy[slot] = y; sn[slot] = n;\n"
        "    px = x;",
    )
)
ATTACKS = {"after": PREDICTING, "before": BEFORE_PREDICTING}


def _run(tmp_path: Path, name: str, source: str, task_json: dict[str, Any], trials: int) -> WorkerOutcome:
    tmp_path = tmp_path / name
    task = write_task(tmp_path, task_json, HONEST)
    product = build_host_candidates(tmp_path, {name: source})[name]
    options = OPTIONS.model_copy(update={"min_trials": trials, "max_trials": trials})
    run = CandidateRun(candidate_product=product, candidate_symbol=task.entry, call_limit=LIMIT)
    return run_job(timing_set_job(task, tmp_path / name, options), run, timeout_s=180)


def test_the_predicting_candidate_passes_the_static_rules_and_the_link_check(tmp_path: Path) -> None:
    task = write_task(tmp_path, POLY_TASK, HONEST)
    # What the honest code breaks too: it does no GPU work (the poly task is the host's).
    assert {v.rule for v in static.check_source(task, HONEST)} == {"no_gpu_work"}
    for name, product in build_host_candidates(tmp_path, ATTACKS).items():
        assert {v.rule for v in static.check_source(task, ATTACKS[name])} == {"no_gpu_work"}, name
        assert linkcheck.python_symbols(product) == [] and linkcheck.process_symbols(product) == [], name


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="review 37 H1: a candidate in the worker's process that hooks libc's malloc sees where the "
    "worker's samples are drawn and writes the right answer there; open there "
    "(REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0, or auto on a host without Landlock), closed by the runner",
)
@pytest.mark.parametrize(
    ("task_json", "trials"), [(POLY_TASK, 9), (POLY_SORTED_TASK, 25)], ids=["elementwise", "sorted"]
)
@pytest.mark.parametrize("attack", ATTACKS)
def test_a_candidate_that_predicts_the_samples_in_the_workers_process_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, task_json: dict[str, Any], trials: int, attack: str
) -> None:
    use_worker_process(monkeypatch)
    # Closed means refused on every run: three runs, as a load burst can get one refused by its timing
    # (an XPASS in session 39's loaded clean-clone run, this strict xfail's only failure so far).
    for run in range(3):
        outcome = _run(tmp_path / str(run), attack, ATTACKS[attack], task_json, trials)
        assert not outcome.passed and outcome.error in REFUSED, (outcome.message, outcome.candidate_timing)


@pytest.mark.parametrize(
    ("setting", "task_json", "trials"),
    [("default", POLY_TASK, 9), ("default", POLY_SORTED_TASK, 25), ("1", POLY_TASK, 9)],
    ids=["default-elementwise", "default-sorted", "1-elementwise"],
)
def test_in_its_own_process_the_predicting_candidates_gain_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, task_json: dict[str, Any], trials: int
) -> None:
    """``default``: the executor's default (``auto``), which runs the candidate in a process of its own
    wherever a runner can confine itself, as here. ``1``: always in a process of its own, confined or
    not (where the kernel has no Landlock: the only case run there); on one task, the other's
    path being the default's wherever Landlock is."""
    if setting == "1":
        use_candidate_process(monkeypatch)
    else:
        if landlock_version() == 0:
            pytest.skip("no Landlock on this kernel: the default runs the candidate in its worker (H1 open)")
        use_default_candidate_process(monkeypatch)
        assert candidate_process()[0], candidate_process()[1]
    honest = _run(tmp_path, "honest", HONEST, task_json, trials)
    for name, source in ATTACKS.items():
        assert_no_gain(_run(tmp_path, name, source, task_json, trials), honest)
