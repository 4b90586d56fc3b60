#!/usr/bin/env bash
# Issue 29: do two GPUs' host<->device copies disturb each other, and does page-locked host memory stop
# it? (session 28, helper fleet40). One device call of at most ~100 s on kind nvidia-h200-x2:
# bench/probes/copy_interference.py times synchronous 256 and 64 MB round trips (256 first: copy-bound
# tasks move hundreds of MB, and rows past the budget are skipped) (host to device and
# back, as a candidate's cudaMemcpy) on GPU 0, alone and while another process on GPU 1 loops the same
# copies, for pageable, page-locked and registered host memory, plus pageable beside GPU 1's pinned
# copies and beside a compute-only kernel loop; interference = median with the disturber / alone - 1.
# Carry .whlfleet or .whlgpu (pycuda as a wheel; installed by gpu_env.sh):
#   bash bench/device/run_copy_interference_x2.sh
# Writes to $OUT: env.txt (gpu_env.sh), gpus.txt, copy_interference.md (the table), .json (the rows with
# every sample), copy_interference.log (stderr). Knobs: BUDGET_S (whole call, 100), REPEATS (30), SIZES.
# WITH_TEST=1: then the GPU tests of the option host_memory (tests/gpu/test_page_locked_gpu.py: three
# evaluations of saxpy, ~40 s; $OUT/page_locked_gpu.log): give the call BUDGET_S=100 plus 90 s.
# Smoke run of the plumbing on a CPU machine (the probe's dry run): NO_GPU_ENV=1 DRY_RUN=1 OUT=/tmp/ci \
#   bash bench/device/run_copy_interference_x2.sh
set -uo pipefail
S=$(date +%s)
if [ -z "${NO_GPU_ENV:-}" ]; then
  for w in .whlfleet .whlgpu; do
    if [ -d "$w" ]; then rm -rf .whl; mv "$w" .whl; break; fi
  done
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh > /dev/null
fi
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
{
  nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,persistence_mode --format=csv
  nvidia-smi topo -m 2>/dev/null | head -8
  uname -r; nproc; grep -i -E "^(MemTotal|Hugepagesize)" /proc/meminfo; ulimit -l
} > "$OUT/gpus.txt" 2>&1
cat "$OUT/gpus.txt"
left=$(( ${BUDGET_S:-100} - ($(date +%s) - S) ))
# The probe stops starting rows 15 s before the end; the timeout is the hard stop.
probe_budget=$(( left - 15 )); [ "$probe_budget" -lt 10 ] && probe_budget=10
echo "set-up took $(( $(date +%s) - S )) s; the probe has $probe_budget s for its rows"
timeout "$(( left > 15 ? left - 3 : 12 ))" python3 bench/probes/copy_interference.py \
  --sizes "${SIZES:-256,64}" --repeats "${REPEATS:-30}" --budget-s "$probe_budget" \
  --out "$OUT/copy_interference.json" ${DRY_RUN:+--dry-run} > "$OUT/copy_interference.md" 2> "$OUT/copy_interference.log"
echo "probe exit $? after $(( $(date +%s) - S )) s"
cat "$OUT/copy_interference.md"
tail -5 "$OUT/copy_interference.log"
if [ -n "${WITH_TEST:-}" ]; then
  timeout 90 python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu \
    tests/gpu/test_page_locked_gpu.py > "$OUT/page_locked_gpu.log" 2>&1
  echo "GPU tests of host_memory: exit $? after $(( $(date +%s) - S )) s"; tail -8 "$OUT/page_locked_gpu.log"
fi
