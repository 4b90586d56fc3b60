"""Timed calls see values the candidate has not just seen, and their outputs are checked (issue 33,
items 1 and 2), on the host runtime: the function-task timing loop (``FunctionRuntime.time``, which the
GPU function runtime shares) and the worker that checks its timed calls. The kernel-task loop is
``tests/gpu/test_timing_rotation_gpu.py`` (marker ``gpu``).

* the values each call saw, read back from the candidate's own library: the warm-up calls see a set
  that no timed call sees, no two successive timed calls see the same set, and every timing set is
  timed;
* end to end through the sandboxed worker: a candidate that answers wrong whenever it is called on the
  values of its previous call passes (no timed call repeats the one before), and a candidate that counts
  its calls and answers wrong past the correctness calls is ``wrong_output`` at stage ``timing``, the
  message naming the timed call and its timing set.
"""

from __future__ import annotations

import ctypes
import itertools
import re
from pathlib import Path

import pytest

from executor.inputs import generate_inputs
from executor.protocol import EvaluationOptions
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import ErrorKind
from executor.worker.host import HostFunctionRuntime, HostSlots
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import FAST, build_host_candidates, one_input_task, run_on_timing_sets, write_task

HEAD = 'extern "C" void scaled_copy(int n, const float* x, float* y) {\n'
BODY = "for (int i = 0; i < n; ++i) y[i] = 2.0f * x[i];"
TASK = one_input_task("scaled_copy", domain="elementwise", description="y[i] = 2 x[i]", timing=4096)

# Keeps x[0] and x[n/2] of every call, read back through seen_calls / seen_value.
LOGGING = (
    "static float seen[1 << 14][2]; static int calls = 0;\n"
    'extern "C" int seen_calls() { return calls; }\n'
    'extern "C" float seen_value(int i, int k) { return seen[i][k]; }\n'
    + HEAD
    + "if (calls < (1 << 14)) { seen[calls][0] = x[0]; seen[calls][1] = x[n / 2]; } ++calls;\n"
    + BODY
    + " }\n"
)
# Right, except on the values of its previous call (a memo of the last answer, made visible).
WRONG_ON_REPEAT = (
    "static float last[2]; static int last_n = -1;\n"
    + HEAD
    + "bool repeat = n == last_n && x[0] == last[0] && x[n / 2] == last[1];\n"
    "last[0] = x[0]; last[1] = x[n / 2]; last_n = n;\n" + BODY + "\nif (repeat) y[0] += 1.0f; }\n"
)
# Right on the correctness calls (two test-size sets, the timing-size set, the first again), then wrong.
COUNTING = "static int calls = 0;\n" + HEAD + BODY + "\nif (++calls > 4) y[n - 1] += 1.0f; }\n"
HONEST = HEAD + BODY + " }\n"


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> FunctionTask | KernelTask:
    return write_task(tmp_path_factory.mktemp("timing-sets-task"), TASK, HONEST)


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(
        tmp_path_factory.mktemp("timing-sets-candidates"),
        {"logging": LOGGING, "wrong_on_repeat": WRONG_ON_REPEAT, "counting": COUNTING},
    )


# The default (2 sets, 3 rotated copies: 4 slots, a whole number of rounds) and 3 sets.
@pytest.mark.parametrize("sets", [EvaluationOptions().timing_sets, 3])
def test_the_warm_up_set_is_never_timed_and_successive_timed_calls_see_other_sets(
    task: FunctionTask | KernelTask, products: dict[str, str], sets: int
) -> None:
    rotate = EvaluationOptions().rotate_buffers
    sources = [generate_inputs(task, "timing", seed) for seed in (101, 202, 303)[:sets]]
    warm = generate_inputs(task, "timing", 404)
    key = [(float(s.arrays["x"][0]), float(s.arrays["x"][2048])) for s in sources]
    warm_key = (float(warm.arrays["x"][0]), float(warm.arrays["x"][2048]))
    assert len(set(key) | {warm_key}) == sets + 1  # every set its own sample
    runtime = HostFunctionRuntime(task, products["logging"], task.entry)
    lib = ctypes.CDLL(products["logging"])  # the same library the runtime loaded: its log
    lib.seen_value.restype = ctypes.c_float
    before = lib.seen_calls()  # the calls of the other parameter's run, in this process
    options = FAST.model_copy(
        update={"warmup": 2, "warmup_ms": 0, "timing_sets": sets, "rotate_buffers": rotate}
    )
    stats, last = runtime.time(HostSlots(sources, rotate, warm=warm), options)
    calls = lib.seen_calls()
    seen = [(lib.seen_value(i, 0), lib.seen_value(i, 1)) for i in range(before, calls)]
    warm_up, timed = seen[:2], seen[2:]
    assert warm_up == [warm_key, warm_key]
    assert len(timed) == stats.trials >= 2 * sets + 1  # every set at least twice, then once more
    # the median is a repeat visit: the first visits are fewer than half of the trials
    assert sum(1 for i, k in enumerate(timed) if k not in timed[:i]) == sets < stats.trials / 2
    assert warm_key not in timed
    assert all(a != b for a, b in itertools.pairwise(timed)), timed
    assert set(timed) == set(key)
    # The last timed call on every slot is handed to the worker to check: every set among them.
    assert sorted({source for source, _, _ in last["checks"]}) == list(range(sets))
    assert all(call.startswith("timed call ") for _, call, _ in last["checks"])


def _evaluate(task: FunctionTask | KernelTask, product: str, tmp: Path) -> WorkerOutcome:
    return run_on_timing_sets(task, product, tmp, FAST.model_copy(update={"max_trials": 9}))


def test_no_timed_call_sees_the_values_of_the_call_before_it(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    outcome = _evaluate(task, products["wrong_on_repeat"], tmp_path)
    assert outcome.passed and outcome.stage == "timing", outcome.message
    assert (
        outcome.candidate_timing is not None and outcome.candidate_timing.trials >= 2 * FAST.timing_sets + 1
    )


def test_the_timing_record_keeps_every_trial_in_order_with_its_rotation(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    """What a device run's records need to show why the stop rule took the trials it took."""
    outcome = _evaluate(task, products["logging"], tmp_path)
    timing = outcome.candidate_timing
    assert outcome.passed and timing is not None, outcome.message
    assert timing.samples_ms is not None and len(timing.samples_ms) == min(timing.trials, 40)
    assert timing.sets == FAST.timing_sets
    # 4096 floats fit any cache: rotate_buffers copies, rounded up to whole rounds of the sets
    assert (
        timing.slots == -(-max(FAST.rotate_buffers, FAST.timing_sets) // FAST.timing_sets) * FAST.timing_sets
    )
    assert outcome.first_visits_ms is not None
    assert timing.samples_ms[: FAST.timing_sets] == [float(f"{x:.4g}") for x in outcome.first_visits_ms]
    assert min(timing.samples_ms) <= timing.median_ms <= max(timing.samples_ms)


@pytest.mark.parametrize(("host_rotate", "copies"), [(None, 4), (2, 2), (1, 2)])
def test_function_tasks_rotate_through_host_rotate_buffers_copies_when_it_is_set(
    task: FunctionTask | KernelTask,
    products: dict[str, str],
    tmp_path: Path,
    host_rotate: int | None,
    copies: int,
) -> None:
    """``host_rotate_buffers`` (function tasks) over ``rotate_buffers``, still whole rounds of the sets."""
    options = FAST.model_copy(
        update={"rotate_buffers": 3, "host_rotate_buffers": host_rotate, "max_trials": 9}
    )
    outcome = run_on_timing_sets(task, products["logging"], tmp_path, options)
    assert outcome.passed and outcome.candidate_timing is not None, outcome.message
    assert (outcome.candidate_timing.sets, outcome.candidate_timing.slots) == (2, copies)


def test_a_wrong_timed_call_is_wrong_output_at_timing_and_names_the_call(
    task: FunctionTask | KernelTask, products: dict[str, str], tmp_path: Path
) -> None:
    outcome = _evaluate(task, products["counting"], tmp_path)
    assert not outcome.passed and outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
    assert outcome.stage == "timing"
    assert re.match(
        rf"timed call \d+ \(on timing set [1-{FAST.timing_sets}] of {FAST.timing_sets}\): 1/4096 elements of 'y' differ",
        outcome.message,
    ), outcome.message
    assert (
        outcome.mismatch is not None and outcome.mismatch.size == "timing" and outcome.mismatch.index == 4095
    )
