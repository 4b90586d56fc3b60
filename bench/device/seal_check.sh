#!/usr/bin/env bash
# A runner's const inputs read-only on a GPU (session 39, executor/worker/runner.py SharedArrays): the
# kernel's answer to the seal, the CUDA toolkit, then the GPU tests of the seal and of the runner
# (tests/gpu/test_const_input_seal_gpu.py: cudaHostRegisterReadOnly of a const input passes, the default
# flags are refused, a write to a const input is a crash; tests/gpu/test_candidate_process_gpu.py).
# ~2-4 min. Carry: .whl (as run_executor_gpu.sh). Writes to $OUT: facts.txt, gpu_tests.log.
set -uo pipefail
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh
{
  uname -r
  python3 -c "from executor.worker.runner import candidate_process, input_seal; print('seal:', input_seal() or 'in force'); print(candidate_process()[1])"
  nvcc --version | tail -2
} > "$OUT/facts.txt" 2>&1
cat "$OUT/facts.txt"
timeout "${TESTS_TIMEOUT:-400}" python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu \
  tests/gpu/test_const_input_seal_gpu.py tests/gpu/test_candidate_process_gpu.py > "$OUT/gpu_tests.log" 2>&1
status=$?
tail -15 "$OUT/gpu_tests.log"
exit "$status"
