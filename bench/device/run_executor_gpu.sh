#!/usr/bin/env bash
# One-call GPU check of the executor on a lent device (python3 3.12 with numpy/torch/pytest, CUDA nvcc).
# Carry: .whl (pydantic & co wheels, pycuda sdist in .whl/src or a prebuilt pycuda wheel).
# Writes to $OUT: the pycuda wheel it built, gpu tests log, bench JSON + log.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
{ date -u; nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv; which nvcc; nvcc --version | tail -2; } | tee "$OUT/env.txt"
if ! python3 -c "import pycuda.driver" 2>/dev/null; then
  export CUDA_ROOT=${CUDA_ROOT:-$(dirname "$(dirname "$(readlink -f "$(which nvcc)")")")}
  mkdir -p /tmp/pyc && tar xzf .whl/src/pycuda-*.tar.gz -C /tmp/pyc
  ( cd /tmp/pyc/pycuda-* && python3 configure.py --cuda-root="$CUDA_ROOT" >/dev/null && \
    python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/pycwheel . ) > "$OUT/pycuda_build.log" 2>&1 || { tail -40 "$OUT/pycuda_build.log"; exit 1; }
  cp /tmp/pycwheel/pycuda-*.whl "$OUT/" && python3 -m pip install -q --no-deps --target /tmp/site /tmp/pycwheel/pycuda-*.whl
fi
python3 -c "import pycuda.driver as c; c.init(); print('pycuda ok', c.Device(0).name())"
[ -n "${SKIP_TESTS:-}" ] || timeout 420 python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA tests/gpu 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
timeout ${BENCH_TIMEOUT:-150} python3 -m bench.executor_bench --tasks bench/tasks --runtime gpu --limit ${BENCH_LIMIT:-24} \
  --out "$OUT/executor_bench.json" 2> "$OUT/executor_bench.log" | tee "$OUT/executor_bench_table.txt"
tail -5 "$OUT/executor_bench.log"
