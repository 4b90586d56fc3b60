#!/usr/bin/env bash
# One-call GPU check of the executor on a lent device (python3 3.12 with numpy/torch/pytest, CUDA nvcc),
# in at most ~9 minutes: the GPU tests, then the executor benchmark over the kernel and function tasks
# (stage times, repeatability table, a few load_inline builds for comparison).
# Carry: .whl (pydantic & co wheels; pycuda as a prebuilt wheel or its sdist in .whl/src).
# Writes to $OUT (at most 7 files): env.txt, gpu_tests.log, executor_bench.{json,md,log}, and
# pycuda_build.log + the pycuda wheel only when pycuda had to be built.
# Knobs: TASK_DIRS ("bench/kernel_tasks bench/tasks"), BENCH_GAP (s before each steady evaluation, 2), SKIP_TESTS=1, TESTS_TIMEOUT (s, 200), BENCH_TIMEOUT (s, 300), BENCH_LIMIT (tasks per directory,
# 16), BENCH_EVALS (steady evaluations per task, 2), COV_TASKS (4), COV_REPEATS (5), LOAD_INLINE (2),
# BENCH_OPTIONS (EvaluationOptions fields as JSON over the defaults, '{}').
# The repeatability table evaluates each of its tasks 2*COV_REPEATS times (on the task's timing set,
# then on fresh inputs), each after BENCH_GAP: budget about 2*COV_REPEATS*(BENCH_GAP+0.5) s per task.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH  # a carried ninja wheel lands in /tmp/site/bin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
{
  date -u
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  which nvcc; nvcc --version | tail -2
  ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -3
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 | tail -1
  (command -v ninja || python3 -c "import ninja; print('ninja (python)', ninja.__file__)") 2>&1 | tail -1
  nproc
} | tee "$OUT/env.txt"
if ! python3 -c "import pycuda.driver" 2>/dev/null; then
  export CUDA_ROOT=${CUDA_ROOT:-$(dirname "$(dirname "$(readlink -f "$(which nvcc)")")")}
  mkdir -p /tmp/pyc && tar xzf .whl/src/pycuda-*.tar.gz -C /tmp/pyc
  ( cd /tmp/pyc/pycuda-* && python3 configure.py --cuda-root="$CUDA_ROOT" >/dev/null && \
    python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/pycwheel . ) > "$OUT/pycuda_build.log" 2>&1 || { tail -40 "$OUT/pycuda_build.log"; exit 1; }
  cp /tmp/pycwheel/pycuda-*.whl "$OUT/" && python3 -m pip install -q --no-deps --target /tmp/site /tmp/pycwheel/pycuda-*.whl
fi
python3 -c "import pycuda.driver as c; c.init(); print('pycuda ok', c.Device(0).name())"
python3 -c "from executor.nvrtc import find_nvrtc; n = find_nvrtc(); print('nvrtc', n and n.release, n and n.path)" | tee -a "$OUT/env.txt"
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout "${TESTS_TIMEOUT:-200}" python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu tests/gpu \
    > "$OUT/gpu_tests.log" 2>&1
  tail -25 "$OUT/gpu_tests.log"
fi
# Kernel tasks first: if the time limit cuts the run short, the NVRTC numbers are already in.
timeout "${BENCH_TIMEOUT:-300}" python3 -m bench.executor_bench --runtime gpu \
  $(for d in ${TASK_DIRS:-bench/kernel_tasks bench/tasks}; do printf -- "--tasks %s " "$d"; done) --limit "${BENCH_LIMIT:-16}" --evals "${BENCH_EVALS:-2}" --gap "${BENCH_GAP:-2}" \
  --cov-tasks "${COV_TASKS:-4}" --cov-repeats "${COV_REPEATS:-5}" --load-inline "${LOAD_INLINE:-2}" --options "${BENCH_OPTIONS:-{\}}" \
  --out "$OUT/executor_bench.json" --md "$OUT/executor_bench.md" 2> "$OUT/executor_bench.log"
status=$?
if [ "$status" -ne 0 ]; then
  echo "benchmark exited with $status (124: time limit); tables from its checkpoint:"
  python3 -m bench.executor_bench --render "$OUT/executor_bench.json" --md "$OUT/executor_bench.md" 2>> "$OUT/executor_bench.log"
fi
tail -5 "$OUT/executor_bench.log"
