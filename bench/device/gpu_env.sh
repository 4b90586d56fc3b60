# Sourced by the device scripts: the carried wheels installed into /tmp/site, pycuda built when it is
# not there, and env.txt written to $OUT. Carry: .whl (pydantic & co wheels; pycuda as a prebuilt
# wheel or its sdist in .whl/src; for the fleet also Ray's cp312 wheel and its dependencies, which
# may instead lie in an untracked directory named by RAY_WHEELS, since Ray's wheel alone is 79 MB).
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH  # a carried ninja wheel lands in /tmp/site/bin
# Installed once per machine and set of wheels: a later call on the same warm machine (or a second
# script of the same call, running beside the first) does not rewrite /tmp/site under a running program.
_wheels_stamp=$(ls -l .whl/*.whl ${RAY_WHEELS:+"$RAY_WHEELS"/*.whl} 2>/dev/null | md5sum | cut -c1-16)
if [ "$(cat /tmp/site/.regraph-wheels 2>/dev/null)" != "$_wheels_stamp" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  if [ -n "${RAY_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$RAY_WHEELS"/*.whl || exit 1
  fi
  echo "$_wheels_stamp" > /tmp/site/.regraph-wheels
fi
{
  date -u
  nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  which nvcc; nvcc --version | tail -2
  ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -3
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" 2>&1 | tail -1
  (command -v ninja || python3 -c "import ninja; print('ninja (python)', ninja.__file__)") 2>&1 | tail -1
  nproc
  python3 -c "from executor.worker.host import host_cache_bytes; print('host last-level cache', host_cache_bytes() >> 20, 'MiB')" 2>/dev/null
  lscpu 2>/dev/null | grep -E "^Model name|^L3" || true
} | tee "$OUT/env.txt"
if ! python3 -c "import pycuda.driver" 2>/dev/null; then
  export CUDA_ROOT=${CUDA_ROOT:-$(dirname "$(dirname "$(readlink -f "$(which nvcc)")")")}
  mkdir -p /tmp/pyc && tar xzf .whl/src/pycuda-*.tar.gz -C /tmp/pyc
  # The extension's sources compiled on every core first (pip's build is serial), then packed in place.
  ( cd /tmp/pyc/pycuda-* && python3 configure.py --cuda-root="$CUDA_ROOT" >/dev/null && \
    { python3 setup.py -q build_ext -j "$(nproc)" || true; } && \
    python3 -m pip wheel -q --no-build-isolation --no-deps -w /tmp/pycwheel . ) > "$OUT/pycuda_build.log" 2>&1 || { tail -40 "$OUT/pycuda_build.log"; exit 1; }
  cp /tmp/pycwheel/pycuda-*.whl "$OUT/" && python3 -m pip install -q --no-deps --target /tmp/site /tmp/pycwheel/pycuda-*.whl
fi
python3 -c "import pycuda.driver as c; c.init(); print('pycuda ok', c.Device(0).name())"
python3 -c "from executor.nvrtc import find_nvrtc; n = find_nvrtc(); print('nvrtc', n and n.release, n and n.path)" | tee -a "$OUT/env.txt"
