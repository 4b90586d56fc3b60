#!/usr/bin/env bash
# One-call GPU check of the executor on a lent device (python3 3.12 with numpy/torch/pytest, CUDA nvcc),
# in at most ~9 minutes: the GPU tests, then the executor benchmark over the kernel and function tasks
# (stage times, repeatability table, a few load_inline builds for comparison).
# Carry: .whl (pydantic & co wheels; pycuda as a prebuilt wheel or its sdist in .whl/src).
# Writes to $OUT (at most 7 files): env.txt, gpu_tests.log, executor_bench.{json,md,log}, and
# pycuda_build.log + the pycuda wheel only when pycuda had to be built.
# Knobs: TASK_DIRS ("regraph_data/kernel_tasks regraph_data/tasks"), BENCH_GAP (s before each steady evaluation, 2), SKIP_TESTS=1, TESTS_TIMEOUT (s, 200), BENCH_TIMEOUT (s, 300), BENCH_LIMIT (tasks per directory,
# 16), BENCH_EVALS (steady evaluations per task, 2), COV_TASKS (4), COV_REPEATS (5), LOAD_INLINE (2),
# BENCH_OPTIONS (EvaluationOptions fields as JSON over the defaults, '{}').
# The repeatability table evaluates each of its tasks 2*COV_REPEATS times (on the task's timing set,
# then on fresh inputs), each after BENCH_GAP: budget about 2*COV_REPEATS*(BENCH_GAP+0.5) s per task.
# Issue 33's baseline worker alone (session 19; the GPU tests above include it), about 20 s:
#   source bench/device/gpu_env.sh; python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -m gpu tests/gpu/test_baseline_worker_gpu.py
set -uo pipefail
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu tests/gpu \
    > "$OUT/gpu_tests.log" 2>&1
  tail -25 "$OUT/gpu_tests.log"
fi
# Kernel tasks first: if the time limit cuts the run short, the NVRTC numbers are already in.
timeout "${BENCH_TIMEOUT:-300}" python3 -m bench.probes.executor_bench --runtime gpu \
  $(for d in ${TASK_DIRS:-regraph_data/kernel_tasks regraph_data/tasks}; do printf -- "--tasks %s " "$d"; done) --limit "${BENCH_LIMIT:-16}" --evals "${BENCH_EVALS:-2}" --gap "${BENCH_GAP:-2}" \
  --cov-tasks "${COV_TASKS:-4}" --cov-repeats "${COV_REPEATS:-5}" --load-inline "${LOAD_INLINE:-2}" --options "${BENCH_OPTIONS:-{\}}" \
  --out "$OUT/executor_bench.json" --md "$OUT/executor_bench.md" 2> "$OUT/executor_bench.log"
status=$?
if [ "$status" -ne 0 ]; then
  echo "benchmark exited with $status (124: time limit); tables from its checkpoint:"
  python3 -m bench.probes.executor_bench --render "$OUT/executor_bench.json" --md "$OUT/executor_bench.md" 2>> "$OUT/executor_bench.log"
fi
tail -5 "$OUT/executor_bench.log"
