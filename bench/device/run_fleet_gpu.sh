#!/usr/bin/env bash
# One-call GPU check of the executor fleet on one lent GPU, in at most ~9 minutes: a Ray head on this
# machine, the fleet (one replica) serving the executor's API, the executor's GPU tests through the
# fleet's URL, then the throughput benchmark's mixed queue over every benchmark task on the fleet.
# Carry: .whl as for run_executor_gpu.sh, plus Ray: ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl and
# its dependencies (msgpack, protobuf, requests, urllib3, charset-normalizer, idna, certifi, click,
# filelock, jsonschema, jsonschema-specifications, referencing, rpds-py, attrs, packaging, pyyaml) as
# cp312 wheels, in .whl or, since Ray's wheel alone is 79 MB, in an untracked directory named by
# RAY_WHEELS (e.g. RAY_WHEELS=raywheels; fetch them with
#   python3 -m pip download --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 -d raywheels 'ray==2.60.0').
# Writes to $OUT: env.txt, fleet.log, device.json, gpu_tests.log, throughput.{json,md,log}.
# Knobs: SKIP_TESTS=1, TESTS_TIMEOUT (s, 200), BENCH_SECONDS (s of queue, 240), PER_TASK (correct
# candidates per task, 1), HANGS (3), CLIENTS (callers per replica, 4), SINGLE=1 (also the same queue on
# one executor without Ray, for comparison: about BENCH_SECONDS more).
set -uo pipefail
# shellcheck source=bench/device/gpu_env.sh
source bench/device/gpu_env.sh
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60
python3 -c "import ray; print('ray', ray.__version__)" | tee -a "$OUT/env.txt" || exit 1
RAY_TMP=/tmp/rayfleet
ray start --head --port=6380 --include-dashboard=false --disable-usage-stats --temp-dir=$RAY_TMP > "$OUT/fleet.log" 2>&1 || { tail -30 "$OUT/fleet.log"; exit 1; }
cleanup() { [ -n "${FLEET_PID:-}" ] && kill "$FLEET_PID" 2>/dev/null; ray stop --force >/dev/null 2>&1; }
trap cleanup EXIT
if [ -z "${SKIP_TESTS:-}" ]; then
  REGRAPH_EXECUTOR_RAY=127.0.0.1:6380 REGRAPH_EXECUTOR_PORT=8091 python3 -m executor.server >> "$OUT/fleet.log" 2>&1 &
  FLEET_PID=$!
  for _ in $(seq 120); do
    curl -sf localhost:8091/readyz >/dev/null && break; sleep 1
  done
  curl -s localhost:8091/v1/device | tee "$OUT/device.json"; echo
  REGRAPH_GPU_TESTS_EXECUTOR_URL=http://127.0.0.1:8091 timeout "${TESTS_TIMEOUT:-200}" \
    python3 -m pytest --noconftest -o addopts="" -p no:cacheprovider -q -rA -m gpu tests/gpu > "$OUT/gpu_tests.log" 2>&1
  tail -25 "$OUT/gpu_tests.log"
  kill "$FLEET_PID"; wait "$FLEET_PID" 2>/dev/null; FLEET_PID=
fi
timeout $(( ${BENCH_SECONDS:-240} + 150 )) python3 -m bench.probes.throughput --runtime gpu --ray 127.0.0.1:6380 --replicas 1 \
  --tasks regraph_data/tasks --tasks regraph_data/kernel_tasks --per-task "${PER_TASK:-1}" --hangs "${HANGS:-3}" \
  --clients "${CLIENTS:-4}" --max-seconds "${BENCH_SECONDS:-240}" \
  --out "$OUT/throughput.json" --md "$OUT/throughput.md" 2> "$OUT/throughput.log"
tail -5 "$OUT/throughput.log"; cat "$OUT/throughput.md"
if [ -n "${SINGLE:-}" ]; then
  timeout $(( ${BENCH_SECONDS:-240} + 150 )) python3 -m bench.probes.throughput --runtime gpu --single \
    --tasks regraph_data/tasks --tasks regraph_data/kernel_tasks --per-task "${PER_TASK:-1}" --hangs "${HANGS:-3}" \
    --clients "${CLIENTS:-4}" --max-seconds "${BENCH_SECONDS:-240}" \
    --out "$OUT/throughput_single.json" --md "$OUT/throughput_single.md" 2> "$OUT/throughput_single.log"
  cat "$OUT/throughput_single.md"
fi
