# Sourced by the two-GPU fleet scripts (run_honest_x2.sh, run_host_shared_x2.sh): S (the start, epoch
# seconds), the carried .whlfleet used as .whl, Ray's wheels from .whlray, bench/device/gpu_env.sh
# sourced (skipped with NO_GPU_ENV=1, for a smoke run of the plumbing on a CPU machine), and OUT made.
S=$(date +%s)
if [ -z "${NO_GPU_ENV:-}" ]; then
  if [ -d .whlfleet ]; then rm -rf .whl; mv .whlfleet .whl; fi
  export RAY_WHEELS=${RAY_WHEELS:-.whlray}
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh > /dev/null
fi
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
