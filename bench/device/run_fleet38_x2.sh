#!/usr/bin/env bash
# Issue 29 with session 27's baseline_host_pilot (helper fleet38; measured in call 5, then withdrawn: the
# executor no longer has the setting, so this now measures the code without it): a naive baseline's own trials hold the
# host memory's lock shared when its pilot calls say the task is compute-bound. ONE device call of at most
# 330 s on kind nvidia-h200-x2: bench/device/run_host_shared_x2.sh (run_scaling.sh's mixed queue at
# saturation on 1 then 2 replicas, each window as long as both fit, ~110 s; its table, the copy-rate
# precision classes 1 against 2 replicas, the host-shared and baseline counts), then, from the same
# records: the rate after the first 45 s and the first minute of each window (the windows are too short
# for run_scaling.sh's own, which wants twice that; bench.probes.rate_after), the efficiency, how many naive baselines' trials held
# the host memory shared (their pilot), and bench.probes.fleet_breakdown's table (where a correct
# candidate's time goes, each replica's turn, the host memory's lock held alone).
# Compare with session 26's call 5 (the code before, 104-s windows, 2,526 and 2,768/h, 55 %):
# bench/results/2026-11-30_s27/fleet_breakdown.md.
# Carry .whlfleet and .whlray (as run_host_shared_x2.sh; bench/results moved out for the 64 MiB):
#   bash bench/device/run_fleet38_x2.sh
# (While the pilot existed, REGRAPH_EXECUTOR_BASELINE_HOST_PILOT=false gave the code before it: every baseline's
# trials alone). BUDGET_S (330): the whole call's limit.
# Smoke run of the plumbing on a CPU machine: NO_GPU_ENV=1 RUNTIME=host GPUS=2 BUDGET_S=230 LIMIT=3 CLIENTS=2 \
#   OUT=/tmp/f38_out bash bench/device/run_fleet38_x2.sh
set -uo pipefail
T0=$(date +%s)
BUDGET=${BUDGET_S:-330}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# run_host_shared_x2.sh's own budget: what is left less ~15 s for the tables below
BUDGET_S=$(( BUDGET - 15 )) OUT="$OUT" bash bench/device/run_host_shared_x2.sh
echo "run_host_shared_x2.sh: exit $? after $(( $(date +%s) - T0 )) s"
tmp=$(mktemp -d); tar -xzf "$OUT/scaling_results.tar.gz" -C "$tmp" 2>/dev/null
{
  printf "\n## Session 27: the baselines' pilot, the rate after the first 45 s and 60 s\n\n"
  timeout $(( BUDGET - ($(date +%s) - T0) > 5 ? BUDGET - ($(date +%s) - T0) - 2 : 3 )) \
    python3 -m bench.probes.rate_after "$tmp" --columns pilot
} | tee -a "$OUT/summary.md"
echo | tee -a "$OUT/summary.md"
timeout 20 python3 -m bench.probes.fleet_breakdown "s27=$tmp" | tee -a "$OUT/summary.md"
rm -rf "$tmp"
echo "$(( $(date +%s) - T0 )) s in all" | tee -a "$OUT/summary.md"
