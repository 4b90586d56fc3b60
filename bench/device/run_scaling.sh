#!/usr/bin/env bash
# Issue 29's scaling run in ONE device call (kind nvidia-h200-x4, <= 600 s): a Ray head on this machine
# with one executor replica per GPU (each pinned to its GPU's share of the cores), then, in this order,
# each step only when it still fits in DEADLINE_S (a skipped step says so):
#   1. bench.probes.throughput's mixed queue at saturation on fleets of SIZES replicas (default 1,4,2), a fresh
#      cache each, BENCH_SECONDS (150) of queue each: evaluations/hour over the run and after the first
#      minute, scaling efficiency, and the table of where the time goes per fleet size (lock held, time
#      under the lock, trials' lock wait, driver init, context lock wait and creation, trials);
#   2. the first-pass/second-pass probe: every task's known-good candidate once on a fresh fleet of
#      PROBE_REPLICAS (default: the largest size), then again, by PROBE_CLIENTS (16) callers; the first
#      pass's rate apart (a pass is cut at what is left of the deadline, and says how many it finished).
#      With three 150 s windows the probe does not fit in 600 s: run it in a call of its own with SIZES=0
#      (about 150 s on four replicas: ~40 s to install, ~15 s to start, two passes).
# Each window ends hard (--hard-stop): the calls still in flight at its end are dropped, not waited for,
# so a size takes its window plus ~20 s (the fleet's start and stop) and the next size starts on time.
# Returns at most 5 files in $OUT: summary.md (every table), scaling_results.tar.gz (JSONs with every
# verdict's record, logs; packed again after each step, so a call cut short still brings back what it
# finished), env.txt, and pycuda's wheel and build log only when pycuda had to be built.
# Carry: .whl (bench/device/fetch_wheels.sh, with the prebuilt pycuda wheel) and Ray's wheels in the folder
# named by RAY_WHEELS (bench/device/strip_ray_wheel.sh): e.g. carry [".whl", ".whlray"], RAY_WHEELS=.whlray.
# Knobs: DEADLINE_S (590), SIZES, BENCH_SECONDS, PER_TASK (4), CLIENTS (16 per replica), PROBE_REPLICAS,
# PROBE_CLIENTS, SKIP_PROBE=1; REGRAPH_HOST_LOCK_SCOPE (host, the default, or device: executor.gpulock);
# AB_DEVICE_SCOPE=N: after the sizes, when at least 130 s are left, size N once more with
# REGRAPH_HOST_LOCK_SCOPE=device (Ray restarted with it; the window cut to what is left), so one call
# compares the host-wide host-memory lock with one per GPU on the same machine.
# AB_SIZE=N AB_ENV="VAR=value ..." AB_TAG=name: the same A/B with any settings (the executor's
# REGRAPH_EXECUTOR_* ones, REGRAPH_CONTEXT_LOCK_SCOPE=host, ...): size N once more with AB_ENV exported
# to Ray's processes; its files are queue_N_<AB_TAG>.* (AB_DEVICE_SCOPE=N is AB_SIZE=N with
# AB_ENV=REGRAPH_HOST_LOCK_SCOPE=device AB_TAG=device). AB_MIN_S (130): the least time left to run it.
# After the table, bench.probes.throughput_copies compares each size's correct function candidates with the
# first size's by their task's copy rate (what another replica slows if the host's memory and PCIe are shared).
# Smoke run of the same plumbing on a CPU machine (host runtime: function tasks, fake GPUs):
#   NO_GPU_ENV=1 RUNTIME=host GPUS=2 SIZES=1,2 BENCH_SECONDS=15 LIMIT=3 CLIENTS=2 PROBE_CLIENTS=4 \
#     DEADLINE_S=400 OUT=/tmp/scale_out bash bench/device/run_scaling.sh
set -uo pipefail
started=$(date +%s)
if [ -z "${NO_GPU_ENV:-}" ]; then
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh
else
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; : > "$OUT/env.txt"
fi
RES=${RES:-/tmp/scaling_results}; rm -rf "$RES"; mkdir -p "$RES"
RUNTIME=${RUNTIME:-gpu}
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60 HF_HUB_OFFLINE=1
N=${GPUS:-$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)}
# 1 and 4 first: if the deadline cuts a size, it is 2.
if [ "$N" -ge 4 ]; then SIZES=${SIZES:-1,4,2}; else SIZES=${SIZES:-$(seq -s, 1 "$N")}; fi
BENCH=${BENCH_SECONDS:-150}; DEADLINE=${DEADLINE_S:-590}
LARGEST=$(echo "$SIZES" | tr ',' '\n' | sort -n | tail -1)
TASKS="--tasks regraph_data/tasks --tasks regraph_data/kernel_tasks --limit ${LIMIT:-1000}"
[ "$RUNTIME" = host ] && TASKS="--tasks regraph_data/tasks --limit ${LIMIT:-1000}"
left() { echo $(( DEADLINE - ($(date +%s) - started) )); }
summary() { echo -e "$*" >> "$RES/summary.md"; }
pack() {
  cp "$RES/summary.md" "$OUT/summary.md" 2>/dev/null
  tar czf "$OUT/scaling_results.tar.gz.part" -C "$RES" . && mv "$OUT/scaling_results.tar.gz.part" "$OUT/scaling_results.tar.gz"
}
{
  echo "GPUs: $N; sizes: $SIZES; runtime: $RUNTIME; $BENCH s per size; deadline $DEADLINE s"
  echo "cores: $(nproc); NUMA nodes: $(ls -d /sys/devices/system/node/node[0-9]* 2>/dev/null | wc -l); kernel $(uname -r) (4.4.0: gVisor)"
  echo "host-memory lock scope: ${REGRAPH_HOST_LOCK_SCOPE:-host}; commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi topo -m 2>/dev/null | head -12
} | tee -a "$OUT/env.txt"
summary "# Scaling on $N GPUs ($(date -u +%FT%TZ))\n\n\`\`\`\n$(cat "$OUT/env.txt")\n\`\`\`"
python3 -c "import ray; print('ray', ray.__version__)" | tee -a "$RES/env.txt" || { pack; exit 1; }
start_ray() {
  ray start --head --port=6381 --num-gpus="$N" --include-dashboard=false --disable-usage-stats \
    --temp-dir=/tmp/rayscale >> "$RES/ray.log" 2>&1
}
start_ray || { tail -30 "$RES/ray.log"; pack; exit 1; }
trap 'ray stop --force >/dev/null 2>&1; pack' EXIT
# 1. The mixed queue on each fleet size: a size is run only when its window and a start fit.
nsizes=$(echo "$SIZES" | tr ',' '\n' | wc -l)
for n in $(echo "$SIZES" | tr ',' ' '); do
  [ "$n" = 0 ] && continue  # SIZES=0: the probe alone
  if [ "$(left)" -lt $(( BENCH + 25 )) ]; then summary "\n## $n replicas: skipped ($(left) s left)"; continue; fi
  timeout $(( $(left) > 0 ? $(left) : 1 )) python3 -m bench.probes.throughput --runtime "$RUNTIME" --ray 127.0.0.1:6381 \
    --replicas "$n" $TASKS --per-task "${PER_TASK:-4}" --hangs 3 --clients "${CLIENTS:-16}" \
    --max-seconds "$BENCH" --hard-stop --out "$RES/queue_$n.json" --md "$RES/queue_$n.md" 2> "$RES/queue_$n.log"
  echo "size $n: exit $? at $(( $(date +%s) - started )) s" >> "$RES/steps.txt"
  ls -R "${REGRAPH_GPU_LOCK_DIR:-/tmp/regraph-gpu-locks}" >> "$RES/steps.txt" 2>&1  # host-memory.lock beside the GPUs'
  pack
done
# 1b. The A/B: one size again with other settings (by default a host-memory lock per GPU, as before session 23).
AB_N=${AB_SIZE:-${AB_DEVICE_SCOPE:-}}
if [ -n "${AB_DEVICE_SCOPE:-}" ] && [ -z "${AB_SIZE:-}" ]; then AB_ENV="REGRAPH_HOST_LOCK_SCOPE=device"; AB_TAG=device; fi
AB_ENV=${AB_ENV:-REGRAPH_HOST_LOCK_SCOPE=device}; AB_TAG=${AB_TAG:-device}
if [ -n "$AB_N" ]; then
  if [ "$(left)" -lt "${AB_MIN_S:-130}" ]; then summary "\n## $AB_N replicas, $AB_ENV: skipped ($(left) s left)"; else
    ray stop --force >/dev/null 2>&1
    # shellcheck disable=SC2086 # AB_ENV is a list of VAR=value words
    ( export $AB_ENV; start_ray ) || summary "\nRay did not start again for the A/B"
    ab_window=$(( $(left) - 50 < BENCH ? $(left) - 50 : BENCH ))  # the window, the start and stop, the tables
    timeout $(( $(left) > 0 ? $(left) : 1 )) python3 -m bench.probes.throughput --runtime "$RUNTIME" --ray 127.0.0.1:6381 \
      --replicas "$AB_N" $TASKS --per-task "${PER_TASK:-4}" --hangs 3 --clients "${CLIENTS:-16}" \
      --max-seconds "$ab_window" --hard-stop --out "$RES/queue_${AB_N}_${AB_TAG}.json" --md "$RES/queue_${AB_N}_${AB_TAG}.md" \
      2> "$RES/queue_${AB_N}_${AB_TAG}.log"
    echo "size $AB_N ($AB_ENV, $ab_window s): exit $? at $(( $(date +%s) - started )) s" >> "$RES/steps.txt"
    ls -R "${REGRAPH_GPU_LOCK_DIR:-/tmp/regraph-gpu-locks}" >> "$RES/steps.txt" 2>&1  # device-<id>/ only with the device scope
    pack
  fi
fi
# One table over every size that ran (efficiency against the first).
AB_TAG="$AB_TAG" AB_ENV="$AB_ENV" python3 - "$RES" $(echo "$SIZES" | tr ',' ' ') <<'PY' >> "$RES/summary.md"
import json, os, sys
from pathlib import Path
from bench.probes.throughput import render_honest_refusals, render_time_table
runs = []
for n in sys.argv[2:]:
    path = Path(sys.argv[1]) / f"queue_{n}.json"
    if path.exists():
        runs += json.loads(path.read_text()).get("runs", [])
print("\n## The mixed queue at saturation\n")
print("\n".join(render_time_table(runs)) if runs else "no run finished")
for run in runs:
    print(f"- {run['replicas']} replicas: {run['verdicts']} verdicts, {run['lost']} lost, {run['retried']} retried, "
          f"wall {run['wall_s']} s, outcomes {json.dumps(run['outcomes'])}")
ab = [p for p in Path(sys.argv[1]).glob(f"queue_*_{os.environ['AB_TAG']}.json")]
for path in ab:
    abruns = json.loads(path.read_text()).get("runs", [])
    if abruns:
        print(f"\n## A/B: {path.stem}, with {os.environ['AB_ENV']}\n")
        print("\n".join(render_time_table(runs[:1] + abruns)))
        runs += [run | {"label": f"{path.stem} ({os.environ['AB_ENV']})"} for run in abruns]
print("\n" + "\n".join(render_honest_refusals(runs)) if runs else "")
PY
first=$(echo "$SIZES" | tr ',' '\n' | grep -v '^0$' | head -1)
for other in $(echo "$SIZES" | tr ',' ' ') ${AB_N:+${AB_N}_${AB_TAG}}; do
  [ "$other" = 0 ] || [ "$other" = "$first" ] && continue
  summary "\n### Copy-bound against compute-bound function candidates, $first against $other\n"
  python3 -m bench.probes.throughput_copies "$RES" "$first" "$other" >> "$RES/summary.md" 2>> "$RES/steps.txt"
done
pack
# 2. The probe.
if [ -z "${SKIP_PROBE:-}" ]; then
  if [ "$(left)" -lt 45 ]; then summary "\n## Probe: skipped ($(left) s left)"; else
    cap=$(( ($(left) - 25) / 2 ))
    timeout "$(left)" python3 -m bench.probes.throughput --probe --runtime "$RUNTIME" --ray 127.0.0.1:6381 \
      --replicas "${PROBE_REPLICAS:-$LARGEST}" $TASKS --probe-clients "${PROBE_CLIENTS:-16}" --max-seconds "$cap" --hard-stop \
      --out "$RES/probe.json" --md "$RES/probe.md" 2> "$RES/probe.log"
    summary "\n## First pass and second pass (exit $?, each pass cut at $cap s)\n"
    sed -n '/^Probe:/,$p' "$RES/probe.md" >> "$RES/summary.md" 2>/dev/null
  fi
fi
summary "\n$(( $(date +%s) - started )) s in all"
pack
cat "$RES/summary.md"
