#!/usr/bin/env bash
# Issue 29's scaling in the steady state its target names, in ONE device call of at most 400 s on kind
# nvidia-h200-x2. The runs before (run_host_shared_x2.sh, run_scaling.sh) start each window on a fresh
# cache, so in ~120-s windows about half of each replica's GPU turn went to timing naive baselines
# (bench/results/2026-11-30_s27/fleet_breakdown.md), which a deployment times once per host and GPU
# model and keeps for a day. Here:
#   1. the prepare pass: every task of the mixed queue prepared on a fleet of 2 replicas
#      (bench.probes.throughput --prepare-only: POST /v1/prepare, then again with wait_s until the
#      task is prepared and its naive baseline stored in the host's store), its seconds, the tasks
#      ready and the baselines it timed; its limit is what the windows leave (at most PREPARE_MAX_S);
#   2. the mixed queue at saturation on 1 then 2 replicas, each a fresh fleet over that same store
#      (the host's, as a deployment's replicas and restarts share it; each window's candidates new
#      compiles), windows as long as fit (>= 120 s each when the pass ends in time, at most WINDOW_MAX_S),
#      ending hard;
#   3. the tables of run_host_shared_x2.sh/run_fleet38_x2.sh: where the time goes per size
#      (render_time_table), the rate after the first 45 s and the first minute with the efficiency
#      (bench.probes.rate_after),
#      outcomes and honest refusals, the copy-rate precision classes 1 against 2
#      (bench.probes.throughput_copies) and bench.probes.fleet_breakdown's tables.
# Returns in $OUT: summary.md (every table), warm_results.tar.gz (the JSONs with every verdict's
# record, the logs; packed after each step), env.txt.
# Carry .whlfleet and .whlray (as run_host_shared_x2.sh; bench/results moved out of the tree for the
# 64 MiB):   bash bench/device/run_scaling_warm_x2.sh
# Knobs: BUDGET_S (400), WINDOW_MIN_S (120), WINDOW_MAX_S (150), PREPARE_MAX_S (180), PER_TASK (4),
# CLIENTS (16 per replica), LIMIT (tasks per directory), RAY_PORT (6381).
# Smoke run of the plumbing on a CPU machine (host runtime: function tasks, fake GPUs, baselines timed
# on the host with host_baseline):
#   NO_GPU_ENV=1 RUNTIME=host GPUS=2 BUDGET_S=300 WINDOW_MIN_S=30 WINDOW_MAX_S=40 LIMIT=3 CLIENTS=2 \
#     RAY_PORT=6391 OUT=/tmp/warm_out bash bench/device/run_scaling_warm_x2.sh
set -uo pipefail
# shellcheck source=bench/device/fleet_env.sh
source bench/device/fleet_env.sh
BUDGET=${BUDGET_S:-400}; WMIN=${WINDOW_MIN_S:-120}; WMAX=${WINDOW_MAX_S:-150}
RUNTIME=${RUNTIME:-gpu}
RES=${RES:-/tmp/warm_results}; STORE=${STORE:-/tmp/warm_store}
rm -rf "$RES" "$STORE"; mkdir -p "$RES"
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60 HF_HUB_OFFLINE=1
N=${GPUS:-$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)}
TASKS="--tasks regraph_data/tasks --tasks regraph_data/kernel_tasks --limit ${LIMIT:-1000}"
SETTINGS='{}'
if [ "$RUNTIME" = host ]; then
  TASKS="--tasks regraph_data/tasks --limit ${LIMIT:-1000}"
  SETTINGS='{"host_baseline":true}'  # the host runtime times no baseline unless asked (the smoke run)
fi
RAY_PORT=${RAY_PORT:-6381}
QUEUE="--runtime $RUNTIME --ray 127.0.0.1:$RAY_PORT $TASKS --per-task ${PER_TASK:-4} --hangs 3 --settings $SETTINGS"
left() { echo $(( BUDGET - ($(date +%s) - S) )); }
summary() { echo -e "$*" >> "$RES/summary.md"; }
pack() {
  cp "$RES/summary.md" "$OUT/summary.md" 2>/dev/null
  tar czf "$OUT/warm_results.tar.gz.part" -C "$RES" . && mv "$OUT/warm_results.tar.gz.part" "$OUT/warm_results.tar.gz"
}
{
  echo "GPUs: $N; runtime: $RUNTIME; budget $BUDGET s; windows $WMIN-$WMAX s; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cores: $(nproc); NUMA nodes: $(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l)"
  # the settings a run is compared by, as the environment hands them to Ray's processes; the timing cores
  # as the replicas resolve them (unset: automatic, each pinned replica's share's own; review 45 F8)
  tcores=$(python3 -m bench.probes.timing_cores_plan 2>/dev/null) || tcores="${REGRAPH_EXECUTOR_TIMING_CORES:-automatic}"
  echo "host-memory lock scope: ${REGRAPH_HOST_LOCK_SCOPE:-host}; timing cores: $tcores; host memory: ${REGRAPH_EXECUTOR_HOST_MEMORY:-pageable}"
} | tee -a "$OUT/env.txt"
summary "# Scaling in the steady state: every task prepared first ($(date -u +%FT%TZ))\n\n\`\`\`\n$(cat "$OUT/env.txt")\n\`\`\`"
# Ray's head in a process group of its own (--block), ended by that group alone: on a shared CPU machine
# (the smoke run) another program's Ray is left alone, which `ray stop --force` would end too.
setsid ray start --block --head --port="$RAY_PORT" --num-gpus="$N" --include-dashboard=false \
  --disable-usage-stats --temp-dir="/tmp/raywarm$RAY_PORT" >> "$RES/ray.log" 2>&1 &
RAY_PID=$!
# (`ray start --block` outlives a SIGTERM to its group: then a SIGKILL, as tests/support/raycluster.py does)
trap 'kill -TERM -- -"$RAY_PID" 2>/dev/null; sleep 2; kill -KILL -- -"$RAY_PID" 2>/dev/null; pack' EXIT
for _ in $(seq 120); do
  grep -q "Ray runtime started" "$RES/ray.log" 2>/dev/null && break
  kill -0 "$RAY_PID" 2>/dev/null || break
  sleep 0.5
done
grep -q "Ray runtime started" "$RES/ray.log" || { tail -30 "$RES/ray.log"; exit 1; }
# A size takes its window plus ~25 s (the fleet's start and stop); ~20 s for the tables at the end.
# 1. The prepare pass gets what two windows of WINDOW_MIN_S leave (its fleet's start and stop too).
cap=$(( $(left) - 2 * (WMIN + 25) - 20 - 25 )); [ "$cap" -gt "${PREPARE_MAX_S:-180}" ] && cap=${PREPARE_MAX_S:-180}
[ "$cap" -lt 10 ] && cap=10
echo "prepare pass: at most $cap s ($(left) s left)" >> "$RES/steps.txt"
# shellcheck disable=SC2086 # QUEUE is a list of words
timeout $(( cap + 90 )) python3 -m bench.probes.throughput $QUEUE --replicas 2 --prepare-only --cache "$STORE" \
  --prepare-timeout "$cap" --out "$RES/prepare.json" --md "$RES/prepare.md" > /dev/null 2> "$RES/prepare.log"
echo "prepare: exit $? at $(( $(date +%s) - S )) s" >> "$RES/steps.txt"
summary "\n## The prepare pass (2 replicas, limit $cap s)\n"
grep -h "^Prepare pass\|^Not ready\|^Errors" "$RES/prepare.md" >> "$RES/summary.md" 2>/dev/null || summary "no prepare result"
du -sh "$STORE" >> "$RES/steps.txt" 2>&1
pack
# 2. The windows: what is left, shared by the two sizes.
window=$(( ($(left) - 20) / 2 - 25 )); [ "$window" -gt "$WMAX" ] && window=$WMAX
echo "window $window s per size ($(left) s left)" >> "$RES/steps.txt"
[ "$window" -lt "$WMIN" ] && summary "\n**The windows are $window s, under $WMIN s: the prepare pass took longer than planned.**"
for n in 1 2; do
  if [ "$(left)" -lt $(( window + 20 )) ]; then summary "\n## $n replicas: skipped ($(left) s left)"; continue; fi
  # shellcheck disable=SC2086
  timeout $(( $(left) - 10 )) python3 -m bench.probes.throughput $QUEUE --replicas "$n" --cache "$STORE" \
    --clients "${CLIENTS:-16}" --max-seconds "$window" --hard-stop \
    --out "$RES/queue_$n.json" --md "$RES/queue_$n.md" > /dev/null 2> "$RES/queue_$n.log"
  echo "size $n: exit $? at $(( $(date +%s) - S )) s" >> "$RES/steps.txt"
  pack
done
# 3. The tables.
timeout 40 python3 - "$RES" <<'PY' >> "$RES/summary.md" 2>> "$RES/steps.txt"
import json, sys
from pathlib import Path
from bench.probes.rate_after import render_rate_table
from bench.probes.throughput import render_honest_refusals, render_time_table
res = Path(sys.argv[1])
runs = {}
for n in (1, 2):
    path = res / f"queue_{n}.json"
    if path.exists():
        for run in json.loads(path.read_text()).get("runs", []):
            runs[n] = run
print("\n## The mixed queue at saturation, every task prepared first\n")
print("\n".join(render_time_table(list(runs.values()))) if runs else "no run finished")
for n, run in runs.items():
    print(f"- {n} replicas: {run['verdicts']} verdicts, {run['lost']} lost, {run['retried']} retried, "
          f"wall {run['wall_s']} s, outcomes {json.dumps(run['outcomes'])}")
print("\n## The rate after the first 45 s and 60 s, and what was still a first evaluation\n")
print("\n".join(render_rate_table(runs, "warm")))
print("\n" + "\n".join(render_honest_refusals(list(runs.values()))) if runs else "")
PY
summary "\n### Copy-bound against compute-bound function candidates, 1 against 2\n"
timeout 20 python3 -m bench.probes.throughput_copies "$RES" 1 2 >> "$RES/summary.md" 2>> "$RES/steps.txt"
summary ""
timeout 20 python3 -m bench.probes.fleet_breakdown "warm=$RES" >> "$RES/summary.md" 2>> "$RES/steps.txt"
summary "\n$(( $(date +%s) - S )) s in all"
pack
cat "$RES/summary.md"
