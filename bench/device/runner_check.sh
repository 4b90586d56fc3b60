#!/usr/bin/env bash
# The candidate process (executor/worker/runner.py) on one GPU, in one call (~60-120 s): the facts
# (kernel, Landlock, compute mode, device nodes), the runner driven step by step outside the executor
# with its stderr shown (bench/probes/runner_check.py: naive saxpy, a host fault after CUDA calls,
# honest and clock-rewriting host code, Landlock on and off), then the GPU tests of the
# candidate process (tests/gpu/test_candidate_process_gpu.py), again unconfined (Landlock and seccomp off)
# when they fail. Carry: .whl (as run_executor_gpu.sh). Writes to $OUT: env.txt, facts.txt,
# runner_check/report.md (and the case directories), gpu_tests.log [, gpu_tests_unconfined.log].
# Knobs: CASE_TIMEOUT (s per probe case, 40), TESTS_TIMEOUT (s, 240).
set -uo pipefail
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh
{
  uname -r
  python3 -c "from executor.worker.runner import landlock_facts; print(landlock_facts())"
  nvidia-smi --query-gpu=compute_mode,persistence_mode --format=csv
  ls -l /dev/nvidia* /dev/nvidia-caps 2>&1
  ldd --version | head -1
  python3 --version
} > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
timeout 200 python3 -m bench.probes.runner_check --out "$OUT/runner_check" --case-timeout "${CASE_TIMEOUT:-40}"
timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu \
  tests/gpu/test_candidate_process_gpu.py > "$OUT/gpu_tests.log" 2>&1
status=$?
tail -5 "$OUT/gpu_tests.log"
if [ "$status" -ne 0 ]; then
  REGRAPH_EXECUTOR_RUNNER_LANDLOCK=0 timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest --noconftest -o addopts="" \
    -p no:cacheprovider -q -rA -m gpu tests/gpu/test_candidate_process_gpu.py > "$OUT/gpu_tests_unconfined.log" 2>&1
  tail -5 "$OUT/gpu_tests_unconfined.log"
fi
