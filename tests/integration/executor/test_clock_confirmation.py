"""The executor's clock check confirms before it refuses (executor.clockcheck, the worker's
``confirm_clock``).

On a loaded host the worker can be kept off its core between its writes around a timed call, and
each timing set's first visit is one window: an honest saxpy of about 3 ms was refused once with
first-visit windows of 24.2 and 32.0 ms (load about 7 on 2 cores, test_device_peak_attack.py). Here
that disturbance is made deterministic: ``CandidateRun.first_visit_delay_ms`` (tests only) has each
first visit wait inside its announced window, before its timed region. The worker sees the rule
refuse on its own clock and makes a clock-confirming call on a fresh set after the trials; the
executor lets the outcome pass when that call's window by the kernel's stamps is within 2 x the
median + the slack. A candidate that changes its clock and keeps a memo (review 22c) must do the
work on the fresh set, and its confirming call's window shows it: refused, and the message says so.

Host runtime, built with the host compiler (the attack is x86-64 machine code).
"""

from __future__ import annotations

import platform
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from executor.clockcheck import CLOCK_FACTOR, FIRST_VISIT_SLACK_MS
from executor.protocol import EvaluationOptions
from executor.sandbox import run_job
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import ErrorKind
from executor.worker.host import host_peak
from executor.worker.messages import CandidateRun, WorkerJob
from tests.integration.executor.test_clock_attack import CLOCK_AND_MEMO, HONEST, LIMIT, run_poly_attack
from tests.integration.executor.test_clock_attack import OPTIONS as ATTACK_OPTIONS
from tests.integration.executor.test_executor_hacks_host import POLY_BODY, POLY_HEAD, POLY_TASK
from tests.support.hostcode import (
    FAST,
    SAXPY_HEAD,
    build_host_candidates,
    one_input_task,
    saxpy_timed_at,
    timing_set_job,
    use_candidate_process,
    use_worker_process,
    write_task,
)

SAXPY = SAXPY_HEAD + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"
OPTIONS = FAST.model_copy(update={"min_trials": 5, "max_trials": 7})
# Longer than 2 x a first visit of saxpy at 256 Ki floats (well under 1 ms) + the first visits' slack.
DELAY_MS = 2 * FIRST_VISIT_SLACK_MS + 10


@pytest.fixture(autouse=True, scope="module")
def _in_the_workers_process() -> Iterator[None]:
    """In their workers' process (``REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0``), whatever the suite's or
    the executor's default, unless a test says otherwise: a runner makes no clock-confirming call."""
    with pytest.MonkeyPatch.context() as patch:
        use_worker_process(patch)
        yield


def held_up(product: Path, task: FunctionTask | KernelTask, delay_ms: float = DELAY_MS) -> CandidateRun:
    """A run of ``product`` whose first visits are held up (each inside its window) by ``delay_ms``."""
    return CandidateRun(
        candidate_product=product,
        candidate_symbol=task.entry,
        call_limit=LIMIT,
        first_visit_delay_ms=delay_ms,
    )


def test_an_honest_candidate_whose_first_visits_were_held_up_passes_after_confirmation(
    tmp_path: Path,
) -> None:
    task = saxpy_timed_at(1 << 18)
    product = build_host_candidates(tmp_path, {"saxpy": SAXPY})["saxpy"]
    run = held_up(product, task)
    outcome = run_job(timing_set_job(task, tmp_path / "job", OPTIONS), run, timeout_s=120)
    assert outcome.passed, outcome.message
    timing = outcome.candidate_timing
    assert timing is not None and outcome.first_visits_ms is not None
    # the first visits really were held up past the rule's bound (else this test shows nothing)
    assert all(CLOCK_FACTOR * t + FIRST_VISIT_SLACK_MS < DELAY_MS for t in outcome.first_visits_ms)
    assert outcome.seconds["clock_confirm_calls"] >= 1, outcome.seconds
    confirmed_ms = outcome.seconds["clock_confirmed"] * 1e3
    assert confirmed_ms <= CLOCK_FACTOR * timing.median_ms + FIRST_VISIT_SLACK_MS, outcome.seconds


def test_an_honest_candidate_in_its_own_process_held_up_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 36c's M2: in a runner (executor.worker.runner) the candidate holds neither the worker's
    clock nor its done channel, and the worker makes no clock-confirming call (the runner is stopped
    after the trials); the executor does not compare the windows there, so first visits held up by
    load refuse nothing (before: implausible, "the worker made no clock-confirming call")."""
    use_candidate_process(monkeypatch)
    task = saxpy_timed_at(1 << 18)
    product = build_host_candidates(tmp_path, {"saxpy": SAXPY})["saxpy"]
    run = held_up(product, task)
    outcome = run_job(timing_set_job(task, tmp_path / "job", OPTIONS), run, timeout_s=120)
    assert outcome.passed, outcome.message
    assert "runner_roundtrip" in outcome.seconds, outcome.seconds  # it did run in a runner
    assert outcome.first_visits_ms is not None
    assert all(CLOCK_FACTOR * t + FIRST_VISIT_SLACK_MS < DELAY_MS for t in outcome.first_visits_ms)
    assert "clock_confirm_calls" not in outcome.seconds, outcome.seconds


# Every clock-confirming call's outputs are checked, not only the last's: a saxpy whose first
# confirming call (on the first new timing-size address after an address was called twice) spins 40 ms
# and leaves y as it was, so the worker makes a second, which it computes, fast.
WRONG_FIRST_CONFIRMATION = (
    "#include <chrono>\n"
    "static const float* seen[64]; static int seen_n = 0, confirm_calls = 0;\n"
    "static const float* confirming = 0; static bool repeated = false;\n"
    + SAXPY_HEAD
    + "if (n > 100000) {\n"
    + "    int at = -1; for (int k = 0; k < seen_n; ++k) if (seen[k] == x) at = k;\n"
    + "    if (at >= 0) repeated = repeated || x != confirming;\n"
    + "    else if (seen_n < 64) { if (repeated && !confirming) confirming = x; seen[seen_n++] = x; }\n"
    + "    if (x == confirming && ++confirm_calls == 1) {\n"
    + "        auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(40);\n"
    + "        while (std::chrono::steady_clock::now() < until) {}\n"
    + "        return;\n    }\n}\n"
    + "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i]; }\n"
)


def test_every_clock_confirming_call_is_checked(tmp_path: Path) -> None:
    task = saxpy_timed_at(1 << 18)
    product = build_host_candidates(tmp_path, {"saxpy": WRONG_FIRST_CONFIRMATION})["saxpy"]
    run = held_up(product, task)
    # one warm-up call (warmup_ms 0): the first address called twice is a timing set's
    outcome = run_job(timing_set_job(task, tmp_path / "job", ATTACK_OPTIONS), run, timeout_s=120)
    assert not outcome.passed and outcome.error is ErrorKind.WRONG_OUTPUT, (outcome.message, outcome.seconds)
    assert outcome.message.startswith("clock-confirming call 1 on a fresh set"), outcome.message


# Review 22c's candidate with the first visit on the trials' first slot (the third new timing-size
# address it sees, after the correctness call's and the warm-up's) timed on the true clock: the
# repeat-visit rule compares the fastest first visit with the median, so until session 35, when every
# first visit had to disagree with its window, this passed both rules (median 0.075 ms against the
# honest code's 85.7 ms).
_HIDE = "if (n > 100000) { hidden_ns += now_ns() - began - 20000; "
ONE_FIRST_VISIT_TRUE = CLOCK_AND_MEMO.replace(
    _HIDE, _HIDE.replace("{ hidden_ns", "{ if (owned != 2) hidden_ns")
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
def test_a_changed_clock_with_a_memo_is_refused_by_its_confirming_call(tmp_path: Path) -> None:
    """Review 22c's candidate (a changed clock and a memo of every answer), its first visits held up
    too: on its own clock the worker sees them refused and confirms; the confirming call on a fresh set
    takes its ~58 ms of work by the executor's clock, while the worker's clock reads 0.02 ms. And the
    same memo with one first visit on the true clock, not held up: refused (on the worker's clock
    nothing is refused, so it makes no confirming call)."""
    assert ONE_FIRST_VISIT_TRUE != CLOCK_AND_MEMO
    task = write_task(tmp_path, POLY_TASK, HONEST)
    built = build_host_candidates(tmp_path, {"memo": CLOCK_AND_MEMO, "one_true": ONE_FIRST_VISIT_TRUE})
    held = held_up(built["memo"], task)
    outcome = run_job(timing_set_job(task, tmp_path / "memo", ATTACK_OPTIONS), held, timeout_s=120)
    assert not outcome.passed and outcome.error is ErrorKind.IMPLAUSIBLE, outcome.message
    assert "first timed call on each timing set" in outcome.message, outcome.message
    assert "clock-confirming call(s) on a fresh set" in outcome.message, (outcome.message, outcome.seconds)
    assert outcome.seconds["clock_confirm_calls"] >= 1, outcome.seconds
    run = CandidateRun(candidate_product=built["one_true"], candidate_symbol=task.entry, call_limit=LIMIT)
    outcome = run_job(timing_set_job(task, tmp_path / "one_true", ATTACK_OPTIONS), run, timeout_s=120)
    timing = outcome.candidate_timing
    assert not outcome.passed and outcome.error is ErrorKind.IMPLAUSIBLE, (outcome.message, timing)
    assert "first timed call on each timing set" in outcome.message, outcome.message


# A getrandom that fills every byte with 0x5a, and a patch of a libc function's first bytes with a jump
# to another (its page made writable with a raw mprotect): what review 36c's candidates do.
SAME_ENTROPY_AND_PATCH = (
    'extern "C" long same_entropy(void* buf, size_t n, unsigned int) { std::memset(buf, 0x5a, n); return (long)n; }\n'
    "static void patch(void* fn, void* to) {\n"
    "    unsigned char* code = (unsigned char*)fn;\n"
    "    uintptr_t page = (uintptr_t)code & ~(uintptr_t)4095;\n"
    "    if (raw3(10, (long)page, 8192, 7) != 0) return;  // mprotect: read, write, execute\n"
    "    unsigned char jump[12] = {0x48, 0xB8, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xE0};  // movabs rax; jmp rax\n"
    "    uint64_t target = (uint64_t)to;\n"
    "    std::memcpy(jump + 2, &target, 8);\n"
    "    std::memcpy(code, jump, sizeof jump);\n"
    "    raw3(10, (long)page, 8192, 5);\n}\n"
)


# Review 36c (H1): a clock that lies only about the end of each of the worker thread's calls (its read
# right after the call returns says 20 us after the read before it), libc's ``getrandom`` patched to
# give a constant, and a memo of every timing-size answer keyed on the input's address. The worker's
# own window of a call (read on another clock) stays true, so it confirms: with its sets drawn from its
# own entropy every confirming set was the same, in the same buffers; the first was computed (a long
# window), the second answered at once from the memo (a short one), and only that last one was checked
# and judged: passed at a median of 0.02 ms. With the executor's distinct seeds the memo answers the
# second set with the first one's outputs.
ENTROPY_AND_MEMO = (
    "#include <cstdint>\n#include <cstring>\n#include <ctime>\n#include <vector>\n"
    "#include <sys/types.h>\n#include <sys/random.h>\n"
    "static long raw3(long nr, long a, long b, long c) {\n"
    "    long ret;\n"
    '    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");\n'
    "    return ret;\n}\n"
    "static long worker_tid = -1;  // the thread that calls (and times) the candidate\n"
    "static long long last_read_ns = 0, began_ns = 0;\n"
    "static bool patched = false, lie_next = false;\n"
    'extern "C" int lying_clock(int id, struct timespec* t) {\n'
    "    long r = raw3(228, id, (long)t, 0);\n"
    "    if (r == 0 && id == 1 && raw3(186, 0, 0, 0) == worker_tid) {  // gettid\n"
    "        if (lie_next) {\n"
    "            lie_next = false;\n"
    "            long long v = began_ns + 20000;\n"
    "            t->tv_sec = v / 1000000000LL; t->tv_nsec = v % 1000000000LL;\n"
    "        } else {\n"
    "            last_read_ns = t->tv_sec * 1000000000LL + t->tv_nsec;\n"
    "        }\n    }\n"
    "    return (int)r;\n}\n"
    + SAME_ENTROPY_AND_PATCH
    + "static const float* owners[32]; static std::vector<float> kept[32]; static int owned = 0;\n"
    + POLY_HEAD
    + "if (!patched) {\n"
    + "    patched = true; worker_tid = raw3(186, 0, 0, 0);\n"
    + "    patch((void*)&clock_gettime, (void*)&lying_clock);\n"
    + "    patch((void*)&getrandom, (void*)&same_entropy);\n}\n"
    + "long long began = last_read_ns;\nbool answered = false;\n"
    + "if (n > 100000) for (int k = 0; k < owned; ++k) if (owners[k] == x) "
    + "{ std::memcpy(y, kept[k].data(), n * sizeof(float)); answered = true; break; }\n"
    + "if (!answered) {\n    for (int i = 0; i < n; ++i) { "
    + POLY_BODY
    + " }\n    if (n > 100000 && owned < 32) { owners[owned] = x; kept[owned++].assign(y, y + n); }\n}\n"
    + "if (n > 100000) { began_ns = began; lie_next = true; }\n}\n"
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
def test_confirming_sets_the_candidate_makes_repeat_are_refused(tmp_path: Path) -> None:
    """Review 36c's H1: the clock-confirming sets come from the executor's seeds, distinct, and every
    confirming call's outputs are checked; the memo's second confirming call answers the first set's
    values on a second set, and the outcome is refused."""
    outcome = run_poly_attack(tmp_path, "entropy", ENTROPY_AND_MEMO, ATTACK_OPTIONS)
    timing = outcome.candidate_timing
    assert not outcome.passed, (outcome.message, timing, outcome.seconds)
    # the second confirming call, answered from the memo with the first set's outputs (2 calls made)
    assert outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
    assert outcome.message.startswith("clock-confirming call 2 on a fresh set"), outcome.message
    assert outcome.seconds["clock_confirm_calls"] == 2, outcome.seconds


# Review 36c (M1): the lying clock above (not the entropy), a memo keyed on the input's address and its
# first and last values (so the confirming calls, on new values, are computed: long windows, and the
# worker makes all three), and after the third call on the confirming buffers (the first address seen
# after some address was seen twice) a start and an end of a "clock-confirming call 4" written on the
# done channel by the candidate, at the worker thread's third clock read after the call (the first after the
# worker's end). Until then the executor judged the last confirming window it saw, the forged one:
# passed at a median of 0.02 ms.
_MEMO_KEY = "if (owners[k] == x) "
FORGED_CONFIRMATION = (
    ENTROPY_AND_MEMO.replace("    patch((void*)&getrandom, (void*)&same_entropy);\n", "")
    .replace("#include <vector>\n", "#include <vector>\n#include <cstdlib>\n")
    .replace(
        "static bool patched = false, lie_next = false;\n",
        "static bool patched = false, lie_next = false;\nstatic int forge_in = 0;  // worker-thread clock reads\n"
        "static void forge() {\n"
        '    const char* named = getenv("REGRAPH_DONE_FD"); if (!named) return;\n'
        '    const char start[] = "call 30.0 1 1000.0 clock-confirming call 4 on a fresh set after the trials\\n";\n'
        "    raw3(1, atoi(named), (long)start, sizeof start - 1);\n"
        '    raw3(1, atoi(named), (long)"end\\n", 4);\n}\n',
    )
    .replace(
        "        if (lie_next) {\n",
        "        if (forge_in > 0 && --forge_in == 0) forge();\n        if (lie_next) {\n",
    )
    .replace(
        "static const float* owners[32];",
        "static float firsts[32], lasts[32];\n"
        "static const float* seen[64]; static int seen_n = 0, confirm_calls = 0;\n"
        "static const float* confirming = 0; static bool repeated = false;\n"
        "static const float* owners[32];",
    )
    .replace(_MEMO_KEY, "if (owners[k] == x && firsts[k] == x[0] && lasts[k] == x[n - 1]) ")
    .replace("owners[owned] = x; ", "owners[owned] = x; firsts[owned] = x[0]; lasts[owned] = x[n - 1]; ")
    .replace(
        "if (n > 100000) { began_ns = began; lie_next = true; }\n",
        "if (n > 100000) {\n    began_ns = began; lie_next = true;\n"
        "    int at = -1; for (int k = 0; k < seen_n; ++k) if (seen[k] == x) at = k;\n"
        "    if (at >= 0) repeated = repeated || x != confirming;\n"
        "    else if (seen_n < 64) { if (repeated && !confirming) confirming = x; seen[seen_n++] = x; }\n"
        "    if (x == confirming && ++confirm_calls == 3) forge_in = 3;\n}\n",
    )
)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
def test_a_clock_confirming_call_the_candidate_writes_itself_is_refused(tmp_path: Path) -> None:
    """Review 36c's M1: the executor counts the confirming windows it saw against the confirming calls
    the worker says it made (3 here, 4 seen) and refuses the extra one."""
    assert FORGED_CONFIRMATION.count("forge();") == 1 and "same_entropy);" not in FORGED_CONFIRMATION
    assert "firsts[k] == x[0]" in FORGED_CONFIRMATION and "forge_in = 3" in FORGED_CONFIRMATION
    outcome = run_poly_attack(tmp_path, "forged", FORGED_CONFIRMATION, ATTACK_OPTIONS)
    timing = outcome.candidate_timing
    assert not outcome.passed and outcome.error is ErrorKind.IMPLAUSIBLE, (outcome.message, timing)
    assert "made 3 clock-confirming call(s) but the executor saw 4" in outcome.message, outcome.message


# The copy's cost (docs/executor.md): a confirming call's window holds the copy of every array it left,
# before its end is announced. A task that reads a 512-MB input sparsely (4,096 values, 800 damped
# steps each: a median of ~8 ms here) leaves ~40 ms of copying in that window, over 2 x its median +
# 15 ms: honest and held up, it was refused (implausible) until the executor added what the copy takes
# at its own measured host copy rate (executor.clockcheck.copy_allowance).
SPARSE_N = 1 << 27  # floats: 512 MB
SPARSE_HEAD = 'extern "C" void sparse_poly(int n, const float* x, float* y) {\n'


def sparse_loop(steps: int) -> str:
    return (
        "int stride = n / 4096;\n"
        "for (int j = 0; j < 4096; ++j) { float v = x[j * stride]; "
        f"for (int k = 0; k < {steps}; ++k) v = v * 0.999f + 0.001f * x[j * stride]; y[j] = v; }}"
    )


def sparse_task(steps: int) -> dict[str, Any]:
    """The task's ``task.json``; its reference is ``SPARSE_HEAD + sparse_loop(steps) + " }"``."""
    return one_input_task(
        "sparse_poly",
        domain="elementwise",
        description=f"y[j] = {steps} damped steps from x[j * (n / 4096)], 4096 of them",
        timing=SPARSE_N,
        output=("y", "float32", "4096"),
        rtol=1e-4,
        atol=1e-5,
    )


SPARSE_STEPS = 800
SPARSE = SPARSE_HEAD + sparse_loop(SPARSE_STEPS) + " }\n"
# The memo's task does more work per call (~30 ms here), so that what the allowance must not cover is
# far above the slack.
MEMO_STEPS = 3000
# Longer than 2 x a first visit of the sparse task (~8 ms here) + the first visits' slack, under load.
SPARSE_DELAY_MS = 200
# Review 22c's changed clock and memo of every answer, on the sparse task.
_POLY_LOOP = "for (int i = 0; i < n; ++i) { " + POLY_BODY + " }"
SPARSE_CLOCK_AND_MEMO = (
    CLOCK_AND_MEMO.replace(POLY_HEAD, SPARSE_HEAD)
    .replace(_POLY_LOOP, sparse_loop(MEMO_STEPS))
    .replace("n * sizeof(float)", "4096 * sizeof(float)")
    .replace("y + n)", "y + 4096)")
)


def _measured_job(
    task: FunctionTask | KernelTask, tmp: Path, options: EvaluationOptions, rate_scale: float = 1.0
) -> WorkerJob:
    """A job with the host's figures measured here, outside any candidate's worker, as the executor's
    peak worker measures them (executor.peak); without them the executor gives no copy allowance.
    ``rate_scale``: the host copy rate as if the peak had been measured at a moment that much slower."""
    peak = host_peak()
    assert peak.source == "measured" and peak.host_gbps > 0
    peak = peak.model_copy(update={"host_gbps": peak.host_gbps * rate_scale})
    return timing_set_job(task, tmp, options).model_copy(update={"device_peak": peak})


def test_an_honest_candidate_whose_confirming_call_copies_much_passes(tmp_path: Path) -> None:
    task = write_task(tmp_path, sparse_task(SPARSE_STEPS), SPARSE)
    product = build_host_candidates(tmp_path, {"sparse": SPARSE})["sparse"]
    run = held_up(product, task, SPARSE_DELAY_MS)
    # A run shows the allowance at work only when it passes and its confirming copy took its window past
    # the bound without it. On a loaded host the honest median grows (a clean-clone run in session 37:
    # 63.5 ms against 2 x 28.3 + 15, the run passed), and the first timed calls' windows can pass even
    # the allowance (two other such runs: refused `implausible`, 213.6 and 234.5 ms by the executor's
    # clock against 13-33 ms by the worker's: the copy allowance under load, docs/executor.md), so such
    # a run is made again, twice at most; any other refusal fails at once, and the test fails when none
    # of three shows it. Without the allowance every run is refused.
    for attempt in range(3):
        outcome = run_job(_measured_job(task, tmp_path / f"job{attempt}", OPTIONS), run, timeout_s=300)
        if not outcome.passed and outcome.error == ErrorKind.IMPLAUSIBLE and attempt < 2:
            continue
        assert outcome.passed, (outcome.message, outcome.seconds)
        timing = outcome.candidate_timing
        assert timing is not None and outcome.first_visits_ms is not None
        assert all(CLOCK_FACTOR * t + FIRST_VISIT_SLACK_MS < SPARSE_DELAY_MS for t in outcome.first_visits_ms)
        confirmed_ms = outcome.seconds["clock_confirmed"] * 1e3
        allowance_ms = outcome.seconds["clock_confirm_copy_allowance"] * 1e3
        if confirmed_ms > CLOCK_FACTOR * timing.median_ms + FIRST_VISIT_SLACK_MS:
            break
    # the copy really took the window past the bound without it (else this test shows nothing) ...
    assert confirmed_ms > CLOCK_FACTOR * timing.median_ms + FIRST_VISIT_SLACK_MS, outcome.seconds
    # ... and the allowance is at most the copy's time (512 MB read and written: ~40 ms here)
    assert 0 < allowance_ms < confirmed_ms, outcome.seconds


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate is x86-64 machine code")
@pytest.mark.parametrize("rate_scale", [1.0, 0.4])
def test_a_changed_clock_with_a_memo_is_refused_with_the_copy_allowance(
    tmp_path: Path, rate_scale: float
) -> None:
    """Review 22c's memo on the sparse task, its first visits held up, with the executor's figures: the
    confirming call's window holds its true work (~30 ms) besides the copy, which the allowance does
    not exceed, so it is still refused, and the message shows the allowance. (No physical floor: the
    task's 512 MB input would refuse the memo's 0.02 ms there first.) ``0.4``: the job's peak as if
    measured at a moment 2.5 times slower (review 37b saw this host's rate move 1.66x in 8 minutes, and
    the memo passed with x 0.45 and a smaller one with x 0.6): the executor measures the rate again
    when a confirming call was made and uses the higher. A memo whose second confirming call (made
    when the worker's copy ran past its own bound) is answered from the first is refused as
    ``wrong_output`` on that call (review 37b, L3): a refusal too."""
    assert SPARSE_CLOCK_AND_MEMO.count("sparse_poly") == 1 and "poly_iter" not in SPARSE_CLOCK_AND_MEMO
    assert sparse_loop(MEMO_STEPS) in SPARSE_CLOCK_AND_MEMO and "y + 4096)" in SPARSE_CLOCK_AND_MEMO
    task = write_task(tmp_path, sparse_task(MEMO_STEPS), SPARSE_HEAD + sparse_loop(MEMO_STEPS) + " }\n")
    product = build_host_candidates(tmp_path, {"memo": SPARSE_CLOCK_AND_MEMO})["memo"]
    options = ATTACK_OPTIONS.model_copy(update={"physical_floor": False})
    outcome = run_job(
        _measured_job(task, tmp_path / "memo", options, rate_scale),
        held_up(product, task, SPARSE_DELAY_MS),
        timeout_s=300,
    )
    assert not outcome.passed, (outcome.message, outcome.seconds)
    if outcome.error is ErrorKind.WRONG_OUTPUT:  # its second confirming call, answered from the first
        assert "clock-confirming call" in outcome.message, outcome.message
        return
    assert outcome.error is ErrorKind.IMPLAUSIBLE, (outcome.message, outcome.seconds)
    assert "clock-confirming call(s) on a fresh set" in outcome.message, (outcome.message, outcome.seconds)
    assert "for the copy of what it left" in outcome.message, outcome.message
