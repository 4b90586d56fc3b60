#!/usr/bin/env bash
# Session 17, issue 29, one call of <= 540 s on one GPU: the `long` queue (bench.probes.throughput: 8
# function + 8 kernel tasks x 30 correct candidates, failing ones and 3 hangs; 12 compile workers, 16
# clients, seed 0) for a window of BENCH_SECONDS (90) each, on the same machine, in this order:
#   off   the working tree, default settings
#   on    the working tree with gpu_kernel_first (executor.gputurns) and timings_at_turn (the steady rate
#         after STEADY_AFTER s shows gpu_kernel_first alone: every task's baseline is timed by then)
#   base  the carried tree .base: main at 57d0025, before issue 33's timing changes (its own probe,
#         bench/throughput.py, same arguments; the same 16 tasks under bench/tasks, bench/kernel_tasks)
# then, while DEADLINE_S (520) leaves room, "on2" and "off2" (a second round, the other order).
# One table at the end (bench.probes.throughput --compare, recomputed from every run's records alike):
# evaluations/hour in the window and after STEADY_AFTER (30) s, lock held, function/kernel time under
# the evaluator's lock, function trials' lock wait, repeat CoV of the same candidate's timings.
# $OUT gets three files: env.txt, summary.md (the table and each run's first lines) and s17_ab.tar.gz
# (every run's JSON, markdown table and log).
# Carry: .whl (as for run_throughput_gpu.sh) and .base, made here before the call:
#   rm -rf .base && mkdir .base && git archive 57d0025 -- executor bench/__init__.py bench/throughput.py \
#     bench/executor_bench.py bench/tasks bench/kernel_tasks | tar -x -C .base
#   grep -qx '/.base/' .git/info/exclude || echo /.base/ >> .git/info/exclude
# Run: bash bench/device/run_s17_ab.sh   (knobs: ORDER="off on base on2 off2", BENCH_SECONDS, STEADY_AFTER,
# SEED, DEADLINE_S; ~20 s of set-up, then each run its window plus ~40-60 s of start and tail: three runs
# in ~470 s, and a run starts only if it ends by DEADLINE_S, else it is skipped and said so)
set -uo pipefail
START=$(date +%s)
ROOT=$PWD
# DRY_RUNTIME=none: a dry run of this script's logic without a GPU (candidates compiled, nothing run)
if [ -z "${DRY_RUNTIME:-}" ]; then
  # shellcheck source=bench/device/gpu_env.sh
  source bench/device/gpu_env.sh
else
  OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
fi
RES=${RES:-/tmp/s17_ab}; mkdir -p "$RES"
export RAY_USAGE_STATS_ENABLED=0 REGRAPH_EXECUTOR_RUN_TIMEOUT_S=60
WINDOW=${BENCH_SECONDS:-90}
STEADY=${STEADY_AFTER:-30}
DEADLINE=${DEADLINE_S:-520}
OFF='{"compile_workers": 12}'
ON='{"compile_workers": 12, "gpu_kernel_first": true, "timings_at_turn": true}'
QUEUE=(--runtime "${DRY_RUNTIME:-gpu}" --single --clients 16 --per-task 30 --limit 8 --hangs 3 --seed "${SEED:-0}"
  --max-seconds "$WINDOW" --steady-after "$STEADY")
RAN=()
pack() {
  {
    echo "# Session 17 A/B ($(date -u +%FT%TZ)), window ${WINDOW} s"; echo
    ( cd "$ROOT" && PYTHONPATH=/tmp/site:$ROOT python3 -m bench.probes.throughput --compare "${RAN[@]}" \
      --max-seconds "$WINDOW" --steady-after "$STEADY" --out "$RES/compare.json" 2>&1 )
    echo; for f in "$RES"/*.md; do [ -f "$f" ] || continue; echo "## $(basename "$f" .md)"; head -24 "$f"; echo; done
  } > "$OUT/summary.md"
  tar czf "$OUT/s17_ab.tar.gz" -C "$(dirname "$RES")" "$(basename "$RES")"
}
run() {  # name, tree (new or base), settings JSON
  local name=$1 tree=$2 settings=$3 now=$(( $(date +%s) - START ))
  if (( now + WINDOW + 70 > DEADLINE )); then
    echo "skipped $name: $now s gone of $DEADLINE" | tee -a "$RES/skipped.txt"; return
  fi
  echo "== $name ($tree) at $now s"
  if [ "$tree" = new ]; then
    ( cd "$ROOT" && PYTHONPATH=/tmp/site:$ROOT timeout $(( WINDOW + 90 )) python3 -m bench.probes.throughput \
      "${QUEUE[@]}" --tasks regraph_data/tasks --tasks regraph_data/kernel_tasks --settings "$settings" \
      --out "$RES/$name.json" --md "$RES/$name.md" > /dev/null 2> "$RES/$name.log" )
  else
    [ -d "$ROOT/.base/executor" ] || { echo "no .base tree: $name skipped" | tee -a "$RES/skipped.txt"; return; }
    ( cd "$ROOT/.base" && PYTHONPATH=/tmp/site:$ROOT/.base timeout $(( WINDOW + 90 )) python3 -m bench.throughput \
      "${QUEUE[@]}" --tasks bench/tasks --tasks bench/kernel_tasks --settings "$settings" \
      --out "$RES/$name.json" --md "$RES/$name.md" > /dev/null 2> "$RES/$name.log" )
  fi
  echo "rc $? after $(( $(date +%s) - START )) s" | tee -a "$RES/$name.log"
  RAN+=("$name=$RES/$name.json")
  pack
}
for name in ${ORDER:-off on base on2 off2}; do
  case $name in
    off|off2) run "$name" new "$OFF" ;;
    on|on2) run "$name" new "$ON" ;;
    base) run "$name" base "$OFF" ;;
    *) echo "unknown run $name" | tee -a "$RES/skipped.txt" ;;
  esac
done
pack
sed '/^## /q' "$OUT/summary.md" | grep -v '^## '
echo "$(( $(date +%s) - START )) s in all"
