#!/usr/bin/env bash
# One call on a machine of N GPUs (N >= 2; every GPU it has), at most ~10 minutes: a Ray head on this
# machine with one executor replica per GPU, then
#   1. the executor's GPU tests through the fleet's URL;
#   2. the throughput benchmark's mixed queue on fleets of 1, 2, ..., N replicas (evaluations per hour,
#      GPU-busy fraction per replica, scaling efficiency);
#   3. the replayed CUDAEval benchmark over the held-out split with --executors N on the fleet, and with
#      --executors 1 on one replica, in the same call (wall time, pass/fail verdicts compared);
#   4. the mixed queue on N replicas with one replica killed after KILL_AFTER verdicts (nothing lost or
#      duplicated: every candidate has one verdict, the lost ones retried on the others).
# Leave NVLink multicast off (NCCL is not used: the replicas share nothing on the device).
# Carry: as bench/device/run_fleet_gpu.sh (.whl, and Ray's wheels in RAY_WHEELS: make them with
# bench/device/strip_ray_wheel.sh, since the full wheel is over what a call carries).
# Writes to $OUT: env.txt, fleet.log, device.json, gpu_tests.log, scaling.{json,md,log},
# cudaeval_{1,N}/ (report.md, result.json), cudaeval_compare.md, kill.{json,md,log}.
# Knobs: SKIP_TESTS=1, TESTS_TIMEOUT (s, 150), BENCH_SECONDS (s of queue per fleet size, 60), PER_TASK (1),
# CLIENTS (4 per replica), CUDAEVAL_BUDGET (8), CUDAEVAL_LIMIT_S (s per run, 120), KILL_AFTER (40),
# SIZES (fleet sizes of the scaling table, default 1,2,...,N), KILL_SECONDS (BENCH_SECONDS).
# A dry run of the plumbing on a machine without a GPU: NO_GPU_ENV=1 GPUS=2 RUNTIME=none SKIP_TESTS=1 (Ray
# is then told it has GPUS GPUs, and the replicas compile only).
set -uo pipefail
if [ -z "${NO_GPU_ENV:-}" ]; then
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh
else
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
fi
RUNTIME=${RUNTIME:-gpu}
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60 HF_HUB_OFFLINE=1 REGRAPH_EXECUTOR_RUNTIME=$RUNTIME
N=${GPUS:-$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)}
SIZES=${SIZES:-$(seq -s, 1 "$N")}
echo "GPUs: $N; fleet sizes: $SIZES; runtime: $RUNTIME" | tee -a "$OUT/env.txt"
python3 -c "import ray; print('ray', ray.__version__)" | tee -a "$OUT/env.txt" || exit 1
ray start --head --port=6380 --num-gpus="$N" --include-dashboard=false --disable-usage-stats --temp-dir=/tmp/rayfleet > "$OUT/fleet.log" 2>&1 || { tail -30 "$OUT/fleet.log"; exit 1; }
FLEET_PID=
cleanup() { [ -n "$FLEET_PID" ] && kill "$FLEET_PID" 2>/dev/null; ray stop --force >/dev/null 2>&1; }
trap cleanup EXIT
serve_fleet() {  # $1: replicas, $2: port
  REGRAPH_EXECUTOR_RAY=127.0.0.1:6380 REGRAPH_EXECUTOR_FLEET_REPLICAS=$1 REGRAPH_EXECUTOR_PORT=$2 \
    python3 -m executor.server >> "$OUT/fleet.log" 2>&1 &
  FLEET_PID=$!
  for _ in $(seq 180); do curl -sf "localhost:$2/readyz" >/dev/null && return 0; sleep 1; done
  echo "the fleet did not get ready"; return 1
}
stop_fleet() { [ -n "$FLEET_PID" ] && kill "$FLEET_PID" && wait "$FLEET_PID" 2>/dev/null; FLEET_PID=; }
# 1. GPU tests through the fleet of N replicas.
if [ -z "${SKIP_TESTS:-}" ]; then
  serve_fleet "$N" 8091 && curl -s localhost:8091/v1/device | tee "$OUT/device.json"; echo
  REGRAPH_GPU_TESTS_EXECUTOR_URL=http://127.0.0.1:8091 timeout "${TESTS_TIMEOUT:-150}" \
    python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu tests/gpu > "$OUT/gpu_tests.log" 2>&1
  tail -5 "$OUT/gpu_tests.log"
  stop_fleet
fi
# 2. Scaling: the same queue on 1..N replicas.
nsizes=$(echo "$SIZES" | tr ',' '\n' | wc -l)
timeout $(( (${BENCH_SECONDS:-60} + 60) * nsizes )) python3 -m bench.throughput --runtime "$RUNTIME" --ray 127.0.0.1:6380 \
  --replicas "$SIZES" --tasks bench/tasks --tasks bench/kernel_tasks --per-task "${PER_TASK:-1}" --hangs 3 \
  --clients "${CLIENTS:-4}" --max-seconds "${BENCH_SECONDS:-60}" \
  --out "$OUT/scaling.json" --md "$OUT/scaling.md" 2> "$OUT/scaling.log"
cat "$OUT/scaling.md"
# 3. The replayed CUDAEval benchmark: N parallel tasks on N replicas against 1 on one replica.
for n in 1 "$N"; do
  serve_fleet "$n" 8091 || break
  start=$(date +%s)
  timeout $(( ${CUDAEVAL_LIMIT_S:-120} + 120 )) python3 -m regraph_cli bench cudaeval --executor-url http://127.0.0.1:8091 \
    --method regraph-mcgs --model teacher --tasks eval --budget "${CUDAEVAL_BUDGET:-8}" --executors "$n" \
    --time-limit "${CUDAEVAL_LIMIT_S:-120}" --out "$OUT/cudaeval_$n" > "$OUT/cudaeval_$n.log" 2>&1
  echo "cudaeval --executors $n: exit $?, $(( $(date +%s) - start )) s" | tee -a "$OUT/cudaeval_compare.md"
  stop_fleet
done
python3 - "$OUT/cudaeval_1/result.json" "$OUT/cudaeval_$N/result.json" <<'PY' | tee -a "$OUT/cudaeval_compare.md"
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
verdicts = [{(s["task_id"], s["sample"]): (s["compiled"], s["correct"]) for s in r.get("samples", [])} for r in runs]
common = verdicts[0].keys() & verdicts[1].keys()
same = sum(verdicts[0][k] == verdicts[1][k] for k in common)
print(f"samples in both runs: {len(common)}; identical pass/fail: {same}; differing: {sorted(k for k in common if verdicts[0][k] != verdicts[1][k])}")
PY
# 4. A replica killed mid-queue.
timeout $(( ${KILL_SECONDS:-${BENCH_SECONDS:-60}} + 90 )) python3 -m bench.throughput --runtime "$RUNTIME" --ray 127.0.0.1:6380 \
  --replicas "$N" --tasks bench/tasks --tasks bench/kernel_tasks --per-task 1 --hangs 0 \
  --clients "${CLIENTS:-4}" --max-seconds "${KILL_SECONDS:-${BENCH_SECONDS:-60}}" --kill-after "${KILL_AFTER:-40}" \
  --out "$OUT/kill.json" --md "$OUT/kill.md" 2> "$OUT/kill.log"
cat "$OUT/kill.md"
