"""Timing hacks that the host runtime can show (function tasks, plain C++ on the CPU; issue 33).

The GPU corpus of the same classes is ``tests/gpu/adversarial/`` (marker ``gpu``). Here:

* a candidate that remembers its last answer keyed on a sample of its input values (not their
  address): the trials used to see the same values on every call, so it answered from memory and
  passed with hundreds of times the honest speed; now successive timed calls see different timing
  sets, so it recomputes and is timed like the honest code;
* one that remembers every answer it gave: rotation alone does not beat it (its answers are right),
  the physical floor does (``implausible``);
* the honest code of both tasks passes, with the floor recorded, so the floor takes no honest
  candidate.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import ErrorKind
from executor.worker.messages import WorkerOutcome
from tests.support.hostcode import FAST, build_host_candidates, one_input_task, run_on_timing_sets, write_task

# A compute-heavy elementwise task: 300 dependent steps per element.
POLY_BODY = "float v = x[i]; for (int k = 0; k < 300; ++k) v = v * 0.999f + 0.001f * x[i]; y[i] = v;"
POLY_HEAD = 'extern "C" void poly_iter(int n, const float* x, float* y) {\n'
POLY_TASK = one_input_task(
    "poly_iter",
    domain="elementwise",
    description="y[i] = 300 damped steps from x[i]",
    timing=131072,
    rtol=1e-4,
    atol=1e-5,
)
# A task that reads far more than the host's last-level cache and writes one number.
SUM_HEAD = 'extern "C" void sum_big(int n, const float* x, double* s) {\n'
SUM_BODY = "double t = 0; for (int i = 0; i < n; ++i) t += x[i]; s[0] = t;"
SUM_TASK = one_input_task(
    "sum_big",
    domain="reduction",
    description="s[0] = the sum of n floats",
    timing=24 << 20,
    output=("s", "float64", "1"),
    low=0.0,
    high=1.0,
)

# Remembers its last answer, keyed on a sample of the input values (not the pointer).
VALUE_MEMO = (
    "#include <cstring>\n#include <vector>\nstatic std::vector<float> memo; static float key[4]; static int kn = -1;\n"
    + POLY_HEAD
    + "float k[4] = {x[0], x[n / 3], x[n / 2], x[n - 1]};\n"
    "if (n == kn && std::memcmp(k, key, sizeof k) == 0) { std::memcpy(y, memo.data(), n * sizeof(float)); return; }\n"
    "for (int i = 0; i < n; ++i) { " + POLY_BODY + " }\n"
    "memo.assign(y, y + n); kn = n; std::memcpy(key, k, sizeof k); }"
)
# Remembers every answer (up to 16), keyed on a sample of the values.
ALL_MEMO = (
    "static float keys[16][3]; static double sums[16]; static int kept = 0;\n"
    + SUM_HEAD
    + "for (int j = 0; j < kept; ++j) if (keys[j][0] == x[0] && keys[j][1] == x[n / 2] && keys[j][2] == x[n - 1]) "
    "{ s[0] = sums[j]; return; }\n" + SUM_BODY + "\n"
    "if (kept < 16) { keys[kept][0] = x[0]; keys[kept][1] = x[n / 2]; keys[kept][2] = x[n - 1]; sums[kept++] = t; } }"
)

# Remembers its last answer keyed on the input's address (and size): right only where an address is
# handed back with the same values.
POINTER_MEMO = (
    "#include <cstring>\n#include <vector>\nstatic std::vector<float> memo; static const float* seen = 0; "
    "static int seen_n = -1;\n"
    + POLY_HEAD
    + "if (x == seen && n == seen_n) { std::memcpy(y, memo.data(), n * sizeof(float)); return; }\n"
    "for (int i = 0; i < n; ++i) { " + POLY_BODY + " }\n"
    "memo.assign(y, y + n); seen = x; seen_n = n; }"
)

# Remembers every answer keyed on the input's address, at the timing size only (the correctness
# calls at the test size never see it): every answer is right, the slots' addresses never change,
# and on a compute-bound task the floor (which counts bytes) is microseconds. (Review 22.)
SLOT_MEMO = (
    "#include <cstring>\n#include <vector>\nstatic const float* owners[16]; static std::vector<float> kept[16]; "
    "static int owned = 0;\n"
    + POLY_HEAD
    + "if (n > 100000) for (int k = 0; k < owned; ++k) if (owners[k] == x) "
    "{ std::memcpy(y, kept[k].data(), n * sizeof(float)); return; }\n"
    "for (int i = 0; i < n; ++i) { " + POLY_BODY + " }\n"
    "if (n > 100000 && owned < 16) { owners[owned] = x; kept[owned++].assign(y, y + n); } }"
)
# Sorts its const input in place and copies it out: right outputs, and every later call on the same
# slot sorts data that are already sorted. (Review 22.)
SORT_HEAD = 'extern "C" void sort_f(int n, const float* x, float* y) {\n'
SORT_HONEST = SORT_HEAD + "std::memcpy(y, x, (size_t)n * sizeof(float)); std::sort(y, y + n); }"
SORT_IN_PLACE = (
    SORT_HEAD
    + "float* a = const_cast<float*>(x); std::sort(a, a + n); std::memcpy(y, a, (size_t)n * sizeof(float)); }"
)
# The same from its sixth call on: after the correctness calls (three sets, the timing size, the
# first again), so only the trials see it.
SORT_IN_PLACE_LATER = (
    "static int calls = 0;\n"
    + SORT_HEAD
    + "if (++calls < 6) { std::memcpy(y, x, (size_t)n * sizeof(float)); std::sort(y, y + n); return; }\n"
    "float* a = const_cast<float*>(x); std::sort(a, a + n); std::memcpy(y, a, (size_t)n * sizeof(float)); }"
)
SORT_TASK = one_input_task(
    "sort_f", domain="sort", description="y = x sorted ascending", timing=1 << 19, rtol=0.0, atol=0.0
)


# Knows which timed calls are checked whole: the last on each of its slots (their addresses do not
# change), when the trials run to a count it knows. On the timing-size inputs it computes the first
# call on each address and the last (the SKIM_VISITS-th) in full, and every call between with a tenth
# of the steps of a cheaper loop: wrong values, a tenth of the time or less, above the physical floor.
# Only a check of one of those calls can see them. Ten visits a slot (eight skimmed: the median is a
# skimmed call's) show it as well as fifty did, at a fifth of the trials (each a cache flush and a call).
SKIM_VISITS = 10
SKIM_TRIALS = 3 * SKIM_VISITS  # 3 slots (3 timing sets, 2 rotated copies: one round), SKIM_VISITS calls each
SKIM = (
    "static const float* seen[64]; static int visits[64]; static int nseen = 0;\n"
    + POLY_HEAD
    + "bool skim = false;\n"
    "if (n == 131072) { int k = 0; while (k < nseen && seen[k] != x) ++k;\n"
    "  if (k == nseen && nseen < 64) { seen[nseen] = x; visits[nseen++] = 0; }\n"
    f"  int c = k < 64 ? ++visits[k] : 1; skim = c > 1 && c < {SKIM_VISITS}; }}\n"
    "if (skim) { for (int i = 0; i < n; ++i) { float v = x[i]; for (int k = 0; k < 30; ++k) v *= 0.9f; y[i] = v; } return; }\n"
    "for (int i = 0; i < n; ++i) { " + POLY_BODY + " } }"
)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FunctionTask | KernelTask]:
    tmp = tmp_path_factory.mktemp("hack-tasks")
    return {
        "poly": write_task(tmp, POLY_TASK, POLY_HEAD + "for (int i = 0; i < n; ++i) { " + POLY_BODY + " } }"),
        "sum": write_task(tmp, SUM_TASK, SUM_HEAD + SUM_BODY + " }"),
        "sort": write_task(tmp, SORT_TASK, "#include <algorithm>\n#include <cstring>\n" + SORT_HONEST),
    }


@pytest.fixture(scope="module")
def products(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_host_candidates(
        tmp_path_factory.mktemp("hack-candidates"),
        {
            "poly_honest": POLY_HEAD + "for (int i = 0; i < n; ++i) { " + POLY_BODY + " } }",
            "poly_value_memo": VALUE_MEMO,
            "sum_honest": SUM_HEAD + SUM_BODY + " }",
            "sum_all_memo": ALL_MEMO,
            "poly_skim": SKIM,
            "poly_pointer_memo": POINTER_MEMO,
            "poly_slot_memo": SLOT_MEMO,
            "sort_honest": "#include <algorithm>\n#include <cstring>\n" + SORT_HONEST,
            "sort_in_place": "#include <algorithm>\n#include <cstring>\n" + SORT_IN_PLACE,
            "sort_in_place_later": "#include <algorithm>\n#include <cstring>\n" + SORT_IN_PLACE_LATER,
        },
    )


def _evaluate(task: FunctionTask | KernelTask, product: str, tmp: Path) -> WorkerOutcome:
    return run_on_timing_sets(task, product, tmp, FAST.model_copy(update={"min_trials": 5, "max_trials": 9}))


def test_a_value_keyed_memo_is_timed_like_the_honest_code(
    tasks: dict[str, FunctionTask | KernelTask], products: dict[str, str], tmp_path: Path
) -> None:
    honest = _evaluate(tasks["poly"], products["poly_honest"], tmp_path / "honest")
    memo = _evaluate(tasks["poly"], products["poly_value_memo"], tmp_path / "memo")
    assert honest.passed and memo.passed, (honest.message, memo.message)
    assert honest.candidate_timing is not None and memo.candidate_timing is not None
    # Before the trials rotated through timing sets, the memo answered every timed call from memory:
    # over a hundred times the honest speed here. Now it recomputes on every call.
    assert memo.candidate_timing.median_ms > honest.candidate_timing.median_ms / 3, (
        memo.candidate_timing.median_ms,
        honest.candidate_timing.median_ms,
    )


def test_a_memo_of_every_answer_is_below_the_floor(
    tasks: dict[str, FunctionTask | KernelTask], products: dict[str, str], tmp_path: Path
) -> None:
    outcome = _evaluate(tasks["sum"], products["sum_all_memo"], tmp_path)
    assert not outcome.passed and outcome.stage == "timing"
    assert outcome.error is ErrorKind.IMPLAUSIBLE, outcome.message
    assert outcome.floor is not None and outcome.floor.floor_ms is not None
    assert outcome.floor.measured_ms is not None and outcome.floor.measured_ms < outcome.floor.floor_ms
    assert "below the physical floor" in outcome.message


def test_a_pointer_keyed_memo_answers_the_second_set_with_the_first_ones_outputs(
    tasks: dict[str, FunctionTask | KernelTask], products: dict[str, str], tmp_path: Path
) -> None:
    # The correctness calls at one size reuse their buffers (executor.worker.host.FunctionRuntime):
    # the second set arrives at the first one's address, every time, whatever the allocator does.
    for attempt in range(3):
        outcome = _evaluate(tasks["poly"], products["poly_pointer_memo"], tmp_path / str(attempt))
        assert not outcome.passed and outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
        assert outcome.stage == "correctness" and outcome.input_sets_checked == 1, outcome.message


def test_repeat_visits_far_faster_than_the_first_ones_are_implausible(
    tasks: dict[str, FunctionTask | KernelTask], products: dict[str, str], tmp_path: Path
) -> None:
    """A memo of every answer keyed on the slots' addresses gives right answers on every call, above the
    floor; only its first visit to each timing set does the work (option repeat_gain_limit). The honest
    poly_iter passes (above)."""
    outcome = _evaluate(tasks["poly"], products["poly_slot_memo"], tmp_path / "memo")
    assert not outcome.passed and outcome.error is ErrorKind.IMPLAUSIBLE, outcome.message
    assert outcome.stage == "timing" and "fastest first call on a timing set" in outcome.message, (
        outcome.message
    )
    off = FAST.model_copy(update={"min_trials": 5, "max_trials": 9, "repeat_gain_limit": None})
    memo = run_on_timing_sets(tasks["poly"], products["poly_slot_memo"], tmp_path / "off", off)
    assert memo.passed, memo.message  # what the check is for: every other check passes it


def test_a_candidate_that_changes_its_const_input_is_caught_whenever_it_does(
    tasks: dict[str, FunctionTask | KernelTask], products: dict[str, str], tmp_path: Path
) -> None:
    """A sort of its const input in place: right outputs, and every later call on the same copy sorts
    sorted data (review 22b: 7-11x). Caught on the call that did it, a correctness call or (when it
    waits for the trials) the copies' check after them; the honest sort passes."""
    now = _evaluate(tasks["sort"], products["sort_in_place"], tmp_path / "now")
    assert not now.passed and now.error is ErrorKind.WRONG_OUTPUT and now.stage == "correctness", now.message
    assert "changed its input 'x'" in now.message
    later = _evaluate(tasks["sort"], products["sort_in_place_later"], tmp_path / "later")
    assert not later.passed and later.error is ErrorKind.WRONG_OUTPUT and later.stage == "timing", (
        later.message
    )
    assert "a timed call on timing set" in later.message and "changed its input 'x'" in later.message
    honest = _evaluate(tasks["sort"], products["sort_honest"], tmp_path / "sort_honest")
    assert honest.passed, honest.message


def test_honest_code_passes_above_its_floor(
    tasks: dict[str, FunctionTask | KernelTask], products: dict[str, str], tmp_path: Path
) -> None:
    outcome = _evaluate(tasks["sum"], products["sum_honest"], tmp_path)
    assert outcome.passed, outcome.message
    floor = outcome.floor
    assert floor is not None and floor.floor_ms is not None and floor.floor_ms > 0
    assert floor.read_bytes == (24 << 20) * 4 and floor.written_bytes == 8 and floor.path == "host memory"


def test_calls_skimmed_between_the_checked_ones_are_caught_by_a_spot_check(
    tasks: dict[str, FunctionTask | KernelTask], products: dict[str, str], tmp_path: Path
) -> None:
    # A trial count the candidate can count on (no stop rule: min_time at exactly SKIM_TRIALS).
    options = FAST.model_copy(
        update={
            "min_trials": SKIM_TRIALS,
            "max_trials": SKIM_TRIALS,
            "target_error": 0.0,
            "max_timing_s": 60.0,
        }
    )
    outcome = run_on_timing_sets(tasks["poly"], products["poly_skim"], tmp_path, options)
    # Without spot checks it passed with all but two of each slot's calls skimmed, at about a tenth of
    # the honest median. Every timed call's outputs are now sampled, so the first skimmed call fails.
    assert not outcome.passed and outcome.stage == "timing", outcome.message
    assert outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
    assert "spot check" in outcome.message and "timed call" in outcome.message, outcome.message
