"""A function candidate runs inside its worker and can patch the C library, and with it the worker's
entropy (review 36c patched ``getrandom`` to give a constant, so ``secrets`` in the worker returned
what the candidate chose). Whatever the worker draws to keep a candidate from knowing its checks ahead
comes from the executor's seeds, handed over with the run (executor.sandbox.finish_candidate): the
clock-confirming sets (tests/integration/executor/test_clock_confirmation.py), the repeat-visit rule's
confirming set and the spot samples' draws (here; host runtime, from the worker down). Each candidate
here patches ``getrandom`` on its first call and acts on what the worker would then draw from its own
entropy, computed by the test with the constant the patch gives.
"""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

from executor.inputs import generate_inputs
from executor.taskformat import FunctionTask, KernelTask
from executor.verdict import ErrorKind
from executor.worker.host import SPOT_CALLS, SPOT_ELEMENTS
from tests.integration.executor.test_clock_confirmation import SAME_ENTROPY_AND_PATCH
from tests.support.hostcode import build_host_candidates, run_on_timing_sets, use_worker_process, write_task
from tests.unit.executor.test_repeat_confirmation import BODY, HEAD, OPTIONS, SEEN, TASK

pytestmark = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the candidates are x86-64 machine code"
)

PATCH_ENTROPY = (
    "#include <cstdint>\n#include <cstring>\n#include <sys/types.h>\n#include <sys/random.h>\n"
    "static long raw3(long nr, long a, long b, long c) {\n"
    "    long ret;\n"
    '    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");\n'
    "    return ret;\n}\n" + SAME_ENTROPY_AND_PATCH + "static bool patched = false;\n"
)
PATCH_ON_FIRST_CALL = "if (!patched) { patched = true; patch((void*)&getrandom, (void*)&same_entropy); }\n"


def _patched_randbits(bits: int) -> int:
    """``secrets.randbits(bits)`` when every byte of the entropy is 0x5a (whole bytes drawn, the
    excess low bits dropped)."""
    count = (bits + 7) // 8
    return int.from_bytes(b"\x5a" * count, "big") >> (count * 8 - bits)


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> FunctionTask | KernelTask:
    return write_task(tmp_path_factory.mktemp("entropy-task"), TASK, HEAD + BODY + " }")


def test_the_repeat_confirming_set_does_not_follow_a_patched_entropy(
    task: FunctionTask | KernelTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """test_repeat_confirmation's burst on the trials' first visits, and a wrong answer on any call
    whose inputs begin as the set of the seed the patched entropy makes of ``secrets.randbits(63)``.
    The confirming set comes from the executor's seed (CandidateRun.repeat_confirm_seeds) and the burst
    is confirmed away. With the worker's own draw the candidate recognised the confirming set ahead
    (wrong_output on the confirming call; an attack answers a memo there)."""
    use_worker_process(monkeypatch)  # the repeat-visit rule's confirming call: made in process only
    predicted = generate_inputs(task, "timing", _patched_randbits(63)).arrays["x"][:4]
    bits = ", ".join(f"0x{int(b):08x}u" for b in predicted.view(np.uint32))
    source = (
        PATCH_ENTROPY
        + SEEN
        + f"static const uint32_t predicted[4] = {{{bits}}};\n"
        + HEAD
        + PATCH_ON_FIRST_CALL
        + "if (n > 100000 && std::memcmp(x, predicted, sizeof predicted) == 0) "
        + "{ std::memset(y, 0, n * sizeof(float)); return; }\n"
        + "int p = fresh_place(n, x); if (p == 3 || p == 4) spin(150);\n"
        + BODY
        + " }"
    )
    product = build_host_candidates(tmp_path, {"predicts": source})["predicts"]
    outcome = run_on_timing_sets(task, product, tmp_path / "run", OPTIONS)
    assert outcome.passed, outcome.message
    assert "repeat_confirm_call" in outcome.seconds, outcome.seconds  # the confirming call was made


def test_the_spot_positions_do_not_follow_a_patched_entropy(
    task: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """The first timed call on each of the trials' two slots (the third and fourth timing-size buffers
    the candidate sees) computes only the positions the spot sample of timed calls 1 and 2 takes when
    the worker seeds its draws with the patched entropy's ``secrets.randbits(128)`` (the first two
    draws of SPOT_ELEMENTS positions: the first SPOT_CALLS calls are all kept), and zeros elsewhere;
    later calls on the slots are honest, so the last ones checked whole are right. With the worker's
    own draw it passed (the skim unseen); with the executor's seed (CandidateRun.spot_seed) a spot
    check refuses it."""
    assert OPTIONS.max_trials is not None and OPTIONS.max_trials <= SPOT_CALLS
    rng = np.random.default_rng(_patched_randbits(128))
    size = int(TASK["params"]["n"]["timing"])
    draws = [rng.integers(0, size, SPOT_ELEMENTS) for _ in range(2)]
    tables = "".join(
        f"static const int spot{k}[{SPOT_ELEMENTS}] = {{{', '.join(str(int(v)) for v in d)}}};\n"
        for k, d in enumerate(draws)
    )
    step = "{ float v = x[i]; for (int k = 0; k < 40; ++k) v = v * 0.999f + 0.001f * x[i]; y[i] = v; }"
    source = (
        PATCH_ENTROPY
        + SEEN
        + tables
        + HEAD
        + PATCH_ON_FIRST_CALL
        + "int p = fresh_place(n, x);\n"
        + "if (p == 3 || p == 4) {\n"
        + "    const int* at = p == 3 ? spot0 : spot1;\n"
        + "    std::memset(y, 0, n * sizeof(float));\n"
        + f"    for (int s = 0; s < {SPOT_ELEMENTS}; ++s) {{ int i = at[s]; {step} }}\n"
        + "    return;\n}\n"
        + BODY
        + " }"
    )
    product = build_host_candidates(tmp_path, {"skims": source})["skims"]
    outcome = run_on_timing_sets(task, product, tmp_path / "run", OPTIONS)
    assert not outcome.passed and outcome.error is ErrorKind.WRONG_OUTPUT, outcome.message
    assert "spot check" in outcome.message and "timed call" in outcome.message, outcome.message
