#!/usr/bin/env bash
# Issue 29 with compute-bound function trials holding the host memory's lock shared and the naive
# baseline timed once per host (session 26, helper fleet36), in ONE device call of at most 330 s on kind
# nvidia-h200-x2: bench/device/run_scaling.sh's mixed queue at saturation on 1 then 2 replicas (SIZES=1,2,
# no probe), each window as long as both fit (130 s at most), then per size: evaluations/hour after the
# first minute and the efficiency (run_scaling.sh's table), how many function runs' trials held the
# host memory shared, the naive baselines' turns, and the copy-rate classes' medians, trials and robust
# CoV 1 against 2 replicas (bench.probes.throughput_copies: the precision check of the shared trials).
# Session 25 at afe7df9 (150-s windows): 3,678/h on one replica and 3,717/h on two after the first minute
# (51 %), a naive baseline's turn 0.98 -> 2.04 s, a correct function candidate's 1.02 -> 1.85 s.
# Carry .whlfleet and .whlray (as run_honest_x2.sh), bench/results moved out of the tree for the 64 MiB:
#   bash bench/device/run_host_shared_x2.sh
# REGRAPH_HOST_SHARED_BELOW_GBPS=0 in the environment gives the code before (every function trial alone).
# Smoke run of the plumbing on a CPU machine: NO_GPU_ENV=1 RUNTIME=host GPUS=2 BUDGET_S=200 LIMIT=3 CLIENTS=2 \
#   OUT=/tmp/hs_out bash bench/device/run_host_shared_x2.sh
set -uo pipefail
# shellcheck source=bench/device/fleet_env.sh
source bench/device/fleet_env.sh
left=$(( ${BUDGET_S:-325} - ($(date +%s) - S) ))
# Two windows, each with ~25 s for its fleet's start and stop (run_scaling.sh skips a size that does not
# fit), and ~15 s for the tables.
window=$(( (left - 15) / 2 - 25 )); [ "$window" -gt 130 ] && window=130
echo "window $window s per size, $left s left after the set-up"
NO_GPU_ENV=1 OUT="$OUT" SIZES=1,2 BENCH_SECONDS=$window SKIP_PROBE=1 DEADLINE_S=$left \
  bash bench/device/run_scaling.sh > /dev/null 2>&1
echo "exit $? after $(( $(date +%s) - S )) s"
sed -n '/^## The mixed queue/,/^- 2 replicas: [0-9]* verdicts/p' "$OUT/summary.md" 2>/dev/null
# the precision check: copy-bound against compute-bound tasks' medians, trials and robust CoV, 1 against 2
sed -n '/^| copy rate/,/^$/p' "$OUT/summary.md" 2>/dev/null
tmp=$(mktemp -d); tar -xzf "$OUT/scaling_results.tar.gz" -C "$tmp" 2>/dev/null
python3 - "$tmp" <<'PY' | tee -a "$OUT/summary.md"
import json, sys
from pathlib import Path
print("\n## The host memory's lock shared, the baseline's claim\n")
for n in (1, 2):
    path = Path(sys.argv[1]) / f"queue_{n}.json"
    if not path.exists():
        print(f"- {n} replicas: no run")
        continue
    for run in json.loads(path.read_text()).get("runs", []):
        recs = [r for r in run["records"] if r.get("task_kind") == "function" and "host_shared" in (r.get("seconds") or {})]
        shared = [r for r in recs if r["seconds"]["host_shared"]]
        timed = sum("baseline_timing" in (r.get("seconds") or {}) for r in run["records"])
        read = sum(
            "baseline_claim_wait" in (r.get("seconds") or {}) and "baseline_timing" not in r["seconds"]
            for r in run["records"]
        )
        turns = {t["replica"]: t["turns"] for t in run.get("turns", [])}
        print(f"- {n} replicas: function runs {len(recs)}, their trials holding the host memory shared "
              f"{len(shared)}; verdicts whose baseline their evaluation timed {timed}, read after another's "
              f"claim {read}; turns {json.dumps(turns)}")
PY
rm -rf "$tmp"
