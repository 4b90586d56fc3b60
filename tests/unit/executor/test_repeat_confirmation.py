"""The repeat-visit rule's confirming call (``repeat_confirm``, session 26; host runtime, function tasks).

On two H200s of one host, honest function candidates were refused as ``implausible``: other processes'
work came in bursts of 0.17-0.5 s from the trials' start, and both first visits ran 4-11 times the
median (docs/executor.md). Where the rule would refuse, the worker now times one more first visit
right after the trials, on a set drawn then from a secret seed, in buffers made before the candidate
ran; its outputs are checked, and it counts as a first visit. Here a candidate stands in for such a
burst: it spins on its first call on the trials' two slots (the third and fourth timing-size buffers
it sees, after the correctness call's and the warm-up's) and on no other. A memo of every answer does
the work on the confirming call too and is still refused; a confirming call that answers wrong is
``wrong_output``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.protocol import EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import ErrorKind
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import FAST, build_host_candidates, one_input_task, run_on_timing_sets, write_task

HEAD = 'extern "C" void damp(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) { float v = x[i]; for (int k = 0; k < 40; ++k) v = v * 0.999f + 0.001f * x[i]; y[i] = v; }"
TASK = one_input_task(
    "damp",
    domain="elementwise",
    description="y[i] = 40 damped steps from x[i]",
    timing=131072,
    rtol=1e-4,
    atol=1e-5,
)
# The timing-size buffers (x) seen so far, in order; the call's place among them (1-based), 0 when the
# address was seen before.
SEEN = (
    "#include <chrono>\n#include <cstring>\n"
    "static const float* seen[64]; static int nseen = 0;\n"
    "static int fresh_place(int n, const float* x) {\n"
    "    if (n < 100000) return 0;\n"
    "    for (int k = 0; k < nseen; ++k) if (seen[k] == x) return 0;\n"
    "    if (nseen < 64) seen[nseen] = x;\n"
    "    return ++nseen;\n}\n"
    "static void spin(int ms) {\n"
    "    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);\n"
    "    while (std::chrono::steady_clock::now() < until) {}\n}\n"
)
# A burst on the trials' first visits only: the slots are the third and fourth buffers.
BURST = SEEN + HEAD + "int p = fresh_place(n, x); if (p == 3 || p == 4) spin(150);\n" + BODY + " }"
# The same, and a wrong answer in any buffer after those (the confirming call's).
BURST_THEN_WRONG = (
    SEEN + HEAD + "int p = fresh_place(n, x); if (p == 3 || p == 4) spin(150);\n"
    "if (p > 4) { std::memset(y, 0, n * sizeof(float)); return; }\n" + BODY + " }"
)
# Every answer remembered, keyed on the buffer's address at the timing size (review 22's slot memo).
SLOT_MEMO = (
    "#include <vector>\nstatic const float* owners[16]; static std::vector<float> kept[16]; static int owned = 0;\n"
    + HEAD
    + "if (n > 100000) for (int k = 0; k < owned; ++k) if (owners[k] == x) "
    "{ std::memcpy(y, kept[k].data(), n * sizeof(float)); return; }\n"
    + BODY
    + "\nif (n > 100000 && owned < 16) { owners[owned] = x; kept[owned++].assign(y, y + n); } }"
)
OPTIONS = FAST.model_copy(update={"min_trials": 5, "max_trials": 9})
# The slot memo, and on the confirming call (a buffer it has never seen, after the trials' two) the work
# left to a thread that writes the answer after the call has returned (review 37's H1): the confirming
# call's outputs must be taken when it returns, as a timed call's samples are, not read later.
SLOT_MEMO_LATE_CONFIRM = (
    "#include <future>\n"
    + SEEN
    + "static void work(int n, const float* x, float* y) {"
    + BODY
    + " }\n"
    + "static std::future<void> pending;\n"
    + "#include <vector>\nstatic const float* owners[16]; static std::vector<float> kept[16]; static int owned = 0;\n"
    + HEAD
    + "int p = fresh_place(n, x);\n"
    + "if (n > 100000) for (int k = 0; k < owned; ++k) if (owners[k] == x) "
    "{ std::memcpy(y, kept[k].data(), n * sizeof(float)); return; }\n"
    + "if (p > 4) { pending = std::async(std::launch::async, [=] { work(n, x, y); }); return; }\n"
    + "work(n, x, y);\n"
    + "if (n > 100000 && owned < 16) { owners[owned] = x; kept[owned++].assign(y, y + n); } }"
)


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> FunctionTask | KernelTask:
    return write_task(tmp_path_factory.mktemp("confirm-task"), TASK, HEAD + BODY + " }")


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(
        tmp_path_factory.mktemp("confirm-candidates"),
        {
            "burst": "#include <cstring>\n" + BURST,
            "burst_then_wrong": BURST_THEN_WRONG,
            "slot_memo": "#include <cstring>\n" + SLOT_MEMO,
            "slot_memo_late_confirm": SLOT_MEMO_LATE_CONFIRM,
        },
    )


def _run(
    task: FunctionTask | KernelTask, product: str, tmp: Path, options: EvaluationOptions
) -> WorkerOutcome:
    return run_on_timing_sets(task, product, tmp, options)


def test_a_burst_on_every_first_visit_is_confirmed_away(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    outcome = _run(task, products["burst"], tmp_path / "on", OPTIONS)
    assert outcome.passed, outcome.message
    assert outcome.first_visits_ms is not None and min(outcome.first_visits_ms) >= 150.0
    assert outcome.candidate_timing is not None
    # The confirming call is no burst (150 ms): 50 ms of slack for a loaded machine's scheduling (2 ms
    # was a flake seen once by review 34 with the suite running beside it).
    bound_ms = 3 * outcome.candidate_timing.median_ms + 50.0
    assert bound_ms < 150.0, bound_ms  # else the bound could not tell a burst (review 35 L5)
    assert outcome.seconds["repeat_confirm_call"] * 1e3 < bound_ms
    # Without the confirmation the rule refuses it, as it did honest code on two GPUs.
    off = _run(
        task, products["burst"], tmp_path / "off", OPTIONS.model_copy(update={"repeat_confirm": False})
    )
    assert not off.passed and off.error is ErrorKind.IMPLAUSIBLE, off.message
    assert "repeat_confirm_call" not in off.seconds


def test_a_memo_of_every_answer_is_refused_after_its_confirming_call(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    outcome = _run(task, products["slot_memo"], tmp_path, OPTIONS)
    assert not outcome.passed and outcome.error is ErrorKind.IMPLAUSIBLE, outcome.message
    assert outcome.stage == "timing" and "fastest first call on a timing set" in outcome.message
    assert "the confirming call on a fresh set after the trials took" in outcome.message, outcome.message


def test_a_confirming_call_that_answers_wrong_is_wrong_output(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    outcome = _run(task, products["burst_then_wrong"], tmp_path, OPTIONS)
    assert not outcome.passed and outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
    assert outcome.stage == "timing"
    assert outcome.message.startswith("the confirming call on a fresh set after the trials: "), (
        outcome.message
    )


def test_a_confirming_call_answered_after_it_returned_is_not_a_pass(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """A memo whose confirming call returns at once and lets a thread write its answer later: what the
    call left is taken when it returns, so the late answer is not there (the outputs' prefill, NaN:
    ``unwritten_output``; a thread part-way through: ``wrong_output``); before the fix it passed at
    about 150x its first visits (review 37, host runtime)."""
    outcome = _run(task, products["slot_memo_late_confirm"], tmp_path, OPTIONS)
    assert not outcome.passed, (outcome.candidate_timing, outcome.first_visits_ms)
    assert outcome.error in (ErrorKind.UNWRITTEN_OUTPUT, ErrorKind.WRONG_OUTPUT), outcome.message
    assert outcome.stage == "timing"
    assert outcome.message.startswith("the confirming call on a fresh set after the trials: "), (
        outcome.message
    )
