"""The timed-batch fault candidate of tests/gpu/test_executor_gpu.py evaluated in process, with the
floors of the run limit and of the call limit at their defaults (5 s, 2 s) and both at 30 s, printing
each verdict's error, message and stage seconds: tells whether a ``timeout`` verdict for it comes from
the device (the stray write landing in mapped memory and the batch running long) or from the fleet's
path. Device diagnostic, run by hand:

    PYTHONPATH=. python3 bench/device/fault_probe.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from executor.evaluate import Evaluator
from executor.protocol import CandidateSource
from executor.settings import ExecutorSettings
from executor.taskformat import load_task
from tests.gpu.test_executor_gpu import LATE, QUICK, TASKS_DIR


def prepared_first() -> None:
    """The fault candidate on an evaluator that has just evaluated a correct candidate of the task,
    so it runs in the workers prepared for it (as in the GPU tests' module-wide evaluator)."""
    task = load_task(TASKS_DIR / "block_sum")
    correct = LATE.replace("AFTER_FIRST_TIMING_LAUNCH", "sums[blockIdx.x] = s[0];")
    fault = LATE.replace("AFTER_FIRST_TIMING_LAUNCH", "sums[blockIdx.x + (1 << 28)] = s[0];")
    with tempfile.TemporaryDirectory() as tmp:
        evaluator = Evaluator(ExecutorSettings(cache_dir=Path(tmp), runtime="gpu", run_timeout_s=60))
        try:
            for name, source in (("correct", correct), ("fault", fault), ("correct again", correct)):
                evaluator.wait_for_preparation()
                v = evaluator.evaluate(task, CandidateSource(source=source + f"\n// {name}\n"), QUICK)
                seconds = {k: round(x, 3) for k, x in v.seconds.items()}
                print(
                    json.dumps(
                        {
                            "prepared_first": name,
                            "error": v.error,
                            "message": v.message[:200],
                            "seconds": seconds,
                        }
                    ),
                    flush=True,
                )
        finally:
            evaluator.close()


def main() -> int:
    if "--prepared" in sys.argv:
        prepared_first()
        return 0
    task = load_task(TASKS_DIR / "block_sum")
    for offset in (28, 24):
        source = LATE.replace("AFTER_FIRST_TIMING_LAUNCH", f"sums[blockIdx.x + (1 << {offset})] = s[0];")
        for floor, call_floor in ((5.0, 2.0), (30.0, 30.0)):
            with tempfile.TemporaryDirectory() as tmp:
                settings = ExecutorSettings(
                    cache_dir=Path(tmp),
                    runtime="gpu",
                    run_timeout_s=60,
                    run_limit_floor_s=floor,
                    run_call_floor_s=call_floor,
                )
                evaluator = Evaluator(settings)
                try:
                    v = evaluator.evaluate(task, CandidateSource(source=source + f"\n// {floor}\n"), QUICK)
                finally:
                    evaluator.close()
            print(
                json.dumps(
                    {
                        "offset": f"1<<{offset}",
                        "floor_s": floor,
                        "call_floor_s": call_floor,
                        "error": v.error.value if v.error else None,
                        "stage": v.stage.value,
                        "message": v.message[:300],
                        "run_limit": v.run_limit.model_dump() if v.run_limit else None,
                        "seconds": {k: round(x, 3) for k, x in v.seconds.items()},
                    }
                ),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
