#!/usr/bin/env bash
# Why an honest candidate's first timed calls run slow, and what stops it (session 26, helper exec36): one
# device call of about 130 s on kind nvidia-h200-x2 (a single GPU runs the kernel part and the idle
# conditions only). bench/device/first_call_probe.py's kernel part (block_sum through the executor's
# GpuKernelRuntime.time, launch gate off and on, host quiet / two busy threads / every core busy) and its
# function part (function-like calls on GPU 0, in "evaluations" of a pause, a warm-up and 8 timed calls,
# with GPU 0 idle, after a busy kernel, or with other work beside: GPU 1's kernels, host arrays drawn and
# freed, processes started, CUDA contexts made and torn down one process after another, unlocked and under
# a lock the evaluations hold alone until each context is made or until its process exits; per condition
# the evaluations the repeat-visit rule would refuse, and those still refused with its confirming call).
# Writes $OUT/first_call.md and $OUT/first_call.json. Carry .whlfleet (pycuda and pydantic as wheels):
#   bash bench/device/run_first_call_x2.sh
set -uo pipefail
S=$(date +%s)
if [ -d .whlfleet ]; then rm -rf .whl; mv .whlfleet .whl; fi
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh > /dev/null
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,persistence_mode --format=csv | tee "$OUT/gpus.txt"
timeout "${PROBE_S:-150}" python3 bench/device/first_call_probe.py --seconds "${SECONDS_PER_CONDITION:-10}" \
  --md "$OUT/first_call.md" --json "$OUT/first_call.json" > "$OUT/first_call.log" 2>&1
echo "probe exit $? after $(( $(date +%s) - S )) s"
cat "$OUT/first_call.md" 2>/dev/null || tail -30 "$OUT/first_call.log"
