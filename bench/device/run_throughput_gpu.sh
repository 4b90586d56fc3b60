#!/usr/bin/env bash
# One-call GPU throughput matrix on one lent GPU: the benchmark's mixed queue (bench.probes.throughput) under
# several executor configurations, one after the other, each for BENCH_SECONDS of queue, so that what
# limits the evaluations per hour shows up side by side on the same machine. Each configuration's
# table and JSON go to $RES/<name>.{md,json,log}; after each one, $OUT/throughput_results.tar.gz and
# $OUT/summary.md are rewritten (the device returns few files), so a call cut short keeps what ran.
# Carry: .whl as for run_executor_gpu.sh (a pycuda wheel built by an earlier call may lie in .whl and
# saves the build); RAY_WHEELS=.whlray for the configurations on the fleet.
# Knobs: CONFIGS (names below, space separated; default all), BENCH_SECONDS (60), DEADLINE_S (a
# configuration starts only if this many seconds since the start leave room for it: 540), SEED (0).
#   base      one executor, default settings, 4 clients, 1 correct candidate per task (as 2026-11-25)
#   wide      one executor, 12 compile workers, 16 clients, 1 per task
#   wide4     one executor, 12 compile workers, 16 clients, 4 per task
#   fleet4    the fleet (one replica) with wide4's settings
#   wideold   wide with prepare_next_when_busy (workers prepared for a next candidate under load too,
#             as before 2026-11-27), to compare with wide on the same machine
#   steady    one executor, wide's settings, 12 candidates of each of 12 tasks (6 function, 6 kernel):
#             the tasks' preparation amortised, as in a search that evaluates many candidates per task
#   profile   as steady over 8 function and 8 kernel tasks, 10 correct candidates each: the verdicts'
#             per-stage seconds (records in the JSON) show where the GPU lock's time goes
#   long      as profile with 30 correct candidates per task, for a run of minutes (BENCH_SECONDS=300):
#             the rate after the first minute is what a run of hours sustains
#   all       one executor, wide's settings, every task, 4 correct candidates each (+ 1 failing)
#   seq       one executor, one client, 6 candidates of each of 4+4 tasks: the lock's time per
#             evaluation without other evaluations competing for the CPU
#   hangcost  bench.probes.hang_cost on the gpu runtime (a function task's first call and warm-up hanging)
#   fleettests  the executor's GPU tests through a fleet of one replica (pytest -m gpu tests/gpu)
set -uo pipefail
START=$(date +%s)
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh
RES=${RES:-/tmp/throughput_results}; mkdir -p "$RES"
cp "$OUT/env.txt" "$RES/" 2>/dev/null
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60
SECONDS_EACH=${BENCH_SECONDS:-60}
DEADLINE=${DEADLINE_S:-540}
pack() {
  { echo "# Throughput matrix ($(date -u +%FT%TZ))"; echo; for f in "$RES"/*.md; do [ -f "$f" ] || continue
    echo "## $(basename "$f" .md)"; echo; cat "$f"; echo; done; } > "$OUT/summary.md"
  tar czf "$OUT/throughput_results.tar.gz" -C "$(dirname "$RES")" "$(basename "$RES")"
}
run_one() {  # name, then bench.probes.throughput's arguments
  local name=$1; shift
  local now=$(( $(date +%s) - START ))
  if (( now + SECONDS_EACH + 60 > DEADLINE )); then
    echo "skipped $name: $now s gone of $DEADLINE" | tee -a "$RES/skipped.txt"; return
  fi
  echo "== $name (at $now s): $*"
  timeout $(( SECONDS_EACH + 120 )) python3 -m bench.probes.throughput --runtime gpu --tasks regraph_data/tasks \
    --tasks regraph_data/kernel_tasks --hangs 3 --seed "${SEED:-0}" --max-seconds "$SECONDS_EACH" \
    --out "$RES/$name.json" --md "$RES/$name.md" "$@" 2> "$RES/$name.log"
  echo "rc $? after $(( $(date +%s) - START )) s" >> "$RES/$name.log"
  grep -E "^\| 1 \|" "$RES/$name.md" | head -3
  pack
}
WIDE='{"compile_workers": 12}'
for config in ${CONFIGS:-base wide wide4 fleet4}; do
  case $config in
    base) run_one base --single --clients 4 --per-task 1 ;;
    wide) run_one wide --single --settings "$WIDE" --clients 16 --per-task 1 ;;
    wide4) run_one wide4 --single --settings "$WIDE" --clients 16 --per-task 4 ;;
    fleet4)
      python3 -c "import ray" 2>/dev/null || { echo "no ray: fleet4 skipped" | tee -a "$RES/skipped.txt"; continue; }
      run_one fleet4 --replicas 1 --settings "$WIDE" --clients 16 --per-task 4 ;;
    wideold) run_one wideold --single --settings '{"compile_workers": 12, "prepare_next_when_busy": true}' \
      --clients 16 --per-task 1 ;;
    steady) run_one steady --single --settings "$WIDE" --clients 16 --per-task 12 --limit 6 ;;
    profile) run_one profile --single --settings "$WIDE" --clients 16 --per-task 10 --limit 8 ;;
    long) run_one long --single --settings "$WIDE" --clients 16 --per-task 30 --limit 8 ;;
    all) run_one all --single --settings "$WIDE" --clients 16 --per-task 4 ;;
    seq) run_one seq --single --settings "$WIDE" --clients 1 --per-task 6 --limit 4 ;;
    hangcost)
      timeout 240 python3 -m bench.probes.hang_cost --runtime gpu --runs 3 --out "$RES/hang_cost.json" \
        --md "$RES/hang_cost.md" > "$RES/hang_cost.log" 2>&1
      tail -12 "$RES/hang_cost.md"; pack ;;
    fleettests)
      python3 -c "import ray" 2>/dev/null || { echo "no ray: fleettests skipped" | tee -a "$RES/skipped.txt"; continue; }
      now=$(( $(date +%s) - START ))
      if (( now + ${TESTS_TIMEOUT:-150} + 40 > DEADLINE )); then echo "skipped fleettests at $now s" | tee -a "$RES/skipped.txt"; continue; fi
      ray start --head --port=6380 --include-dashboard=false --disable-usage-stats --temp-dir=/tmp/rayfleet > "$RES/fleet.log" 2>&1
      REGRAPH_EXECUTOR_RAY=127.0.0.1:6380 REGRAPH_EXECUTOR_PORT=8091 python3 -m executor.server >> "$RES/fleet.log" 2>&1 &
      FLEET_PID=$!
      for _ in $(seq 120); do curl -sf localhost:8091/readyz >/dev/null && break; sleep 1; done
      curl -s localhost:8091/v1/device > "$RES/device.json"
      REGRAPH_GPU_TESTS_EXECUTOR_URL=http://127.0.0.1:8091 timeout "${TESTS_TIMEOUT:-150}" \
        python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu tests/gpu > "$RES/gpu_tests.log" 2>&1
      tail -3 "$RES/gpu_tests.log"
      kill "$FLEET_PID"; wait "$FLEET_PID" 2>/dev/null; ray stop --force > /dev/null 2>&1
      pack ;;
    *) echo "unknown configuration $config" | tee -a "$RES/skipped.txt" ;;
  esac
done
pack
cat "$OUT/summary.md" | grep -E "^## |^\| 1 \|" | head -40
