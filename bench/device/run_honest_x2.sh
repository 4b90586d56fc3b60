#!/usr/bin/env bash
# Honest refusals with two replicas on one host (session 25, helper false35), in ONE device call of at most
# 300 s on kind nvidia-h200-x2: bench/device/run_scaling.sh's mixed queue at saturation on a fleet of 2
# replicas only (SIZES=2, a BENCH_SECONDS window, 150 by default, no probe), then the count of known-good
# candidates that did not pass, each with its verdict's stage and message (bench.probes.throughput now keeps
# them in every failing record). Before the fixes (session 25's d1 run): 5 honest refusals in
# 150 s with two replicas (3 implausible, 2 reference_error), 0 with one.
# Carry .whlfleet and .whlray (as for run_scaling.sh in session 24: the fleet's wheels, Ray's apart):
#   bash bench/device/run_honest_x2.sh
# Smoke run of the plumbing on a CPU machine: NO_GPU_ENV=1 RUNTIME=host GPUS=2 BENCH_SECONDS=15 LIMIT=3 CLIENTS=2 \
#   OUT=/tmp/honest_out bash bench/device/run_honest_x2.sh
set -uo pipefail
# shellcheck source=bench/device/fleet_env.sh
source bench/device/fleet_env.sh
NO_GPU_ENV=1 OUT="$OUT" SIZES=2 BENCH_SECONDS=${BENCH_SECONDS:-150} SKIP_PROBE=1 \
  DEADLINE_S=$(( ${BUDGET_S:-285} - ($(date +%s) - S) )) bash bench/device/run_scaling.sh > /dev/null 2>&1
echo "exit $? after $(( $(date +%s) - S )) s"
sed -n '/^- 2 replicas: [0-9]* verdicts/p; /^Honest candidates refused/,$p' "$OUT/summary.md" 2>/dev/null | sed '/^###/,$d'
