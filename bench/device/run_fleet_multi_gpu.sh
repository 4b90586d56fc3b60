#!/usr/bin/env bash
# One call on a machine of N GPUs (N >= 2; every GPU it has), within DEADLINE_S seconds: a Ray head on
# this machine with one executor replica per GPU, then, most valuable first (a step that no longer fits
# in what is left of the deadline is skipped and says so):
#   1. the throughput benchmark's mixed queue on fleets of SIZES replicas (evaluations per hour,
#      GPU-busy fraction per replica, scaling efficiency);
#   2. the mixed queue on N replicas with one replica killed after KILL_AFTER verdicts (nothing lost or
#      duplicated: every candidate has one verdict, the lost ones retried on the others);
#   3. the replayed CUDAEval benchmark over the held-out split with --executors N on the fleet, and with
#      --executors 1 on one replica, in the same call (wall time, pass/fail verdicts compared);
#   4. the executor's GPU tests through the fleet's URL.
# Leave NVLink multicast off (NCCL is not used: the replicas share nothing on the device).
# Carry: .whl (bench/device/fetch_wheels.sh) and Ray's wheels in RAY_WHEELS (bench/device/strip_ray_wheel.sh).
# The device returns at most 8 files from $OUT, so every output is written under $RES and, after each
# step, packed again into $OUT/fleet_results.tar.gz, with the tables gathered in $OUT/summary.md: a call
# cut short still brings back every step it finished. $OUT also gets env.txt (and pycuda's wheel and
# build log when pycuda had to be built).
# Knobs: DEADLINE_S (s from the start, 400), SIZES (1,2,...,N), BENCH_SECONDS (s of queue per fleet size,
# 60), PER_TASK (1), CLIENTS (4 per replica), KILL_AFTER (40), KILL_SECONDS (BENCH_SECONDS),
# CUDAEVAL_BUDGET (8), CUDAEVAL_LIMIT_S (s per run, 120), TESTS_TIMEOUT (s, 150), SKIP_TESTS=1.
# A dry run of the plumbing on a machine without a GPU: NO_GPU_ENV=1 GPUS=2 RUNTIME=none SKIP_TESTS=1 (Ray
# is then told it has GPUS GPUs, and the replicas compile only).
set -uo pipefail
started=$(date +%s)
if [ -z "${NO_GPU_ENV:-}" ]; then
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh
else
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
fi
RES=${RES:-/tmp/fleet_results}; rm -rf "$RES"; mkdir -p "$RES"
RUNTIME=${RUNTIME:-gpu}
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60 HF_HUB_OFFLINE=1 REGRAPH_EXECUTOR_RUNTIME=$RUNTIME
N=${GPUS:-$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)}
SIZES=${SIZES:-$(seq -s, 1 "$N")}
BENCH=${BENCH_SECONDS:-60}; KILLS=${KILL_SECONDS:-$BENCH}; LIMIT=${CUDAEVAL_LIMIT_S:-120}
echo "GPUs: $N; fleet sizes: $SIZES; runtime: $RUNTIME; deadline ${DEADLINE_S:-400} s" | tee -a "$OUT/env.txt"
left() { echo $(( ${DEADLINE_S:-400} - ($(date +%s) - started) )); }
summary() { echo -e "$*" >> "$RES/summary.md"; }
pack() {  # after each step: the outputs so far, in the few files the device returns
  cp "$RES/summary.md" "$OUT/summary.md" 2>/dev/null
  tar czf "$OUT/fleet_results.tar.gz.part" -C "$RES" . && mv "$OUT/fleet_results.tar.gz.part" "$OUT/fleet_results.tar.gz"
}
fits() {  # $1: seconds the step needs; $2: its name
  if [ "$(left)" -lt "$1" ]; then summary "\n## $2\n\nskipped: $(left) s left of the deadline, $1 s needed"; pack; return 1; fi
}
summary "# Fleet on $N GPUs ($(date -u +%FT%TZ))\n\n\`\`\`\n$(cat "$OUT/env.txt")\n\`\`\`"
python3 -c "import ray; print('ray', ray.__version__)" | tee -a "$RES/env.txt" || { pack; exit 1; }
ray start --head --port=6380 --num-gpus="$N" --include-dashboard=false --disable-usage-stats --temp-dir=/tmp/rayfleet > "$RES/fleet.log" 2>&1 || { tail -30 "$RES/fleet.log"; pack; exit 1; }
FLEET_PID=
cleanup() { [ -n "$FLEET_PID" ] && kill "$FLEET_PID" 2>/dev/null; ray stop --force >/dev/null 2>&1; pack; }
trap cleanup EXIT
serve_fleet() {  # $1: replicas, $2: port
  REGRAPH_EXECUTOR_RAY=127.0.0.1:6380 REGRAPH_EXECUTOR_FLEET_REPLICAS=$1 REGRAPH_EXECUTOR_PORT=$2 \
    python3 -m executor.server >> "$RES/fleet.log" 2>&1 &
  FLEET_PID=$!
  for _ in $(seq 180); do curl -sf "localhost:$2/readyz" >/dev/null && return 0; sleep 1; done
  echo "the fleet did not get ready"; return 1
}
stop_fleet() { [ -n "$FLEET_PID" ] && kill "$FLEET_PID" && wait "$FLEET_PID" 2>/dev/null; FLEET_PID=; }
# 1. Scaling: the same queue on each fleet size.
nsizes=$(echo "$SIZES" | tr ',' '\n' | wc -l)
need=$(( (BENCH + 40) * nsizes ))
if fits "$need" "Scaling"; then
  timeout "$(( need < $(left) ? need : $(left) ))" python3 -m bench.probes.throughput --runtime "$RUNTIME" --ray 127.0.0.1:6380 \
    --replicas "$SIZES" --tasks regraph_data/tasks --tasks regraph_data/kernel_tasks --per-task "${PER_TASK:-1}" --hangs 3 \
    --clients "${CLIENTS:-4}" --max-seconds "$BENCH" --out "$RES/scaling.json" --md "$RES/scaling.md" 2> "$RES/scaling.log"
  summary "\n## Scaling (exit $?)\n"; cat "$RES/scaling.md" >> "$RES/summary.md" 2>/dev/null; pack
fi
# 2. A replica killed mid-queue.
need=$(( KILLS + 60 ))
if fits "$need" "One replica killed"; then
  timeout "$need" python3 -m bench.probes.throughput --runtime "$RUNTIME" --ray 127.0.0.1:6380 \
    --replicas "$N" --tasks regraph_data/tasks --tasks regraph_data/kernel_tasks --per-task 1 --hangs 0 \
    --clients "${CLIENTS:-4}" --max-seconds "$KILLS" --kill-after "${KILL_AFTER:-40}" \
    --out "$RES/kill.json" --md "$RES/kill.md" 2> "$RES/kill.log"
  summary "\n## One replica killed (exit $?)\n"; cat "$RES/kill.md" >> "$RES/summary.md" 2>/dev/null; pack
fi
# 3. The replayed CUDAEval benchmark: N parallel tasks on N replicas against 1 on one replica.
if fits $(( 2 * (LIMIT + 40) )) "CUDAEval, 1 against $N replicas"; then
  summary "\n## CUDAEval, 1 against $N replicas\n"
  for n in 1 "$N"; do
    serve_fleet "$n" 8091 || break
    start=$(date +%s)
    timeout $(( LIMIT + 30 )) python3 -m regraph_cli bench cudaeval --executor-url http://127.0.0.1:8091 \
      --method regraph-mcgs --model teacher --tasks eval --budget "${CUDAEVAL_BUDGET:-8}" --executors "$n" \
      --time-limit "$LIMIT" --out "$RES/cudaeval_$n" > "$RES/cudaeval_$n.log" 2>&1
    summary "- \`--executors $n\`: exit $?, $(( $(date +%s) - start )) s, $(grep -c 'sample settled' "$RES/cudaeval_$n.log") samples settled"
    stop_fleet
  done
  python3 - "$RES/cudaeval_1/result.json" "$RES/cudaeval_$N/result.json" <<'PY' >> "$RES/summary.md"
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
verdicts = [{(s["task_id"], s["sample"]): (s["compiled"], s["correct"]) for s in r.get("samples", [])} for r in runs]
common = verdicts[0].keys() & verdicts[1].keys()
same = sum(verdicts[0][k] == verdicts[1][k] for k in common)
print(f"- samples in both runs: {len(common)}; identical pass/fail: {same}; differing: {sorted(k for k in common if verdicts[0][k] != verdicts[1][k])}")
PY
  pack
fi
# 4. The GPU tests through the fleet of N replicas.
if [ -z "${SKIP_TESTS:-}" ] && fits $(( ${TESTS_TIMEOUT:-150} + 20 )) "GPU tests through the fleet"; then
  serve_fleet "$N" 8091 && curl -s localhost:8091/v1/device > "$RES/device.json"
  REGRAPH_GPU_TESTS_EXECUTOR_URL=http://127.0.0.1:8091 timeout "${TESTS_TIMEOUT:-150}" \
    python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu tests/gpu > "$RES/gpu_tests.log" 2>&1
  summary "\n## GPU tests through the fleet of $N (exit $?)\n\n\`\`\`\n$(grep -E '^(FAILED|ERROR)|passed|failed' "$RES/gpu_tests.log" | tail -8)\n\`\`\`"
  stop_fleet
fi
summary "\n$(( $(date +%s) - started )) s in all"
cat "$RES/summary.md"
